"""The sample-size planner as the API and the dashboard read it: a uniform-design plan for a margin or a power,
with the campaign's own figures (competitors, tie rate, tie rule) as defaults, and the newest board's
planning block (battles to separate rank 1 from rank 2)."""

from __future__ import annotations

from typing import Any

from battles.models import Campaign

from ..board_planning import plan_for
from ..models import LeaderboardSnapshot


def campaign_plan(
    *,
    campaign: Campaign,
    margin: float,
    power: float = 0.8,
    confidence: float | None = None,
    tie_rate: float | None = None,
    competitors: int | None = None,
) -> dict[str, Any]:
    """``plan``: battles for the margin (Elo points) under uniform pair sampling; None with ``reason`` where
    there are fewer than two competitors. Defaults: the competitors shown on the newest overall raw board
    (else the campaign's active ones), its tie rate (else 0), the campaign's tie rule and confidence.
    ``sources`` says where each default came from. Raises ValueError for values out of range."""
    snapshot = (
        LeaderboardSnapshot.objects.filter(campaign=campaign, category="", view=LeaderboardSnapshot.View.RAW)
        .order_by("-version")
        .only("version", "rows", "extra", "method")
        .first()
    )
    board = (snapshot.extra or {}).get("planning") if snapshot is not None else None
    sources: dict[str, str] = {}
    if competitors is None:
        shown = [row for row in snapshot.rows if not row.get("hidden", True)] if snapshot is not None else []
        if snapshot is not None and len(shown) >= 2:
            competitors, sources["competitors"] = len(shown), f"shown on board version {snapshot.version}"
        else:
            competitors = campaign.competitors.filter(gold=False, active=True).count()
            sources["competitors"] = "the campaign's active competitors"
    else:
        sources["competitors"] = "given"
    if tie_rate is None:
        if board is not None and board.get("tie_rate") is not None:
            tie_rate, sources["tie_rate"] = float(board["tie_rate"]), f"board version {snapshot.version}"  # type: ignore[union-attr]
        else:
            tie_rate, sources["tie_rate"] = 0.0, "no board yet: no ties assumed"
    else:
        sources["tie_rate"] = "given"
    ties = "davidson" if campaign.ranking_ties == "davidson" else "half"
    confidence = 0.95 if confidence is None else confidence
    out: dict[str, Any] = {
        "campaign_id": campaign.pk,
        "sources": sources,
        "board": board,
        "board_version": snapshot.version if snapshot is not None else None,
    }
    if competitors < 2:
        return {**out, "plan": None, "reason": "fewer than two competitors: no pair to plan for"}
    if tie_rate >= 1.0:  # the board's own rate (a given one is below 1): decisive votes are what a plan counts
        return {**out, "plan": None, "reason": "every vote on the board so far is a tie: give a tie_rate to plan with"}
    plan = plan_for(
        competitors=competitors, margin=margin, tie_rate=tie_rate, ties=ties, confidence=confidence, power=power
    )
    return {**out, "plan": plan, "reason": ""}
