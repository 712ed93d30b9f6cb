"""The board's planning block (``extra.planning`` of the overall raw snapshot) and the planner the API and the
dashboard ask: how many battles a margin or a power needs (``ranking.estimators.planning``). Pure numpy.

On a board: how many more battles, spread evenly over every pair of the shown competitors (what uniform
sampling does), spread like the battles so far, or all on the pair itself (the best case active sampling
approaches), give the test of
"rank 1 and rank 2 differ" ``POWER`` when their true gap is the board's estimate of it."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from . import estimators as est
from .compute import Method, dense_index
from .policy import VoteArrays

POWER = 0.8
# Each bisection step solves a k x k system: beyond this many shown competitors the block says so instead.
MAX_COMPETITORS = 400
# Only decisive votes tell two competitors apart: a board whose every fitted vote is a tie has no rate to plan by.
ALL_TIES_REASON = (
    "every fitted vote so far is a tie: no decisive vote to plan from (the rate of ties is unknown below 1)"
)


def board_tie_rate(votes: VoteArrays, method: Method) -> float | None:
    """Share of the fitted votes that are ties (both-bad counted as ties when the campaign counts them so,
    and left out when it drops them); None without votes."""
    counts = votes.count if votes.count is not None else np.ones(len(votes), dtype=np.int64)
    both_bad = votes.outcome == est.BOTH_BAD
    fitted = counts.sum() - (counts[both_bad].sum() if method.both_bad == "drop" else 0)
    if fitted <= 0:
        return None
    ties = counts[votes.outcome == est.TIE].sum() + (counts[both_bad].sum() if method.both_bad == "tie" else 0)
    return float(ties / fitted)


def planning_compute(
    votes: VoteArrays,
    competitor_ids: NDArray[np.int64],
    rows: list[dict[str, Any]],
    extra: dict[str, Any],
    method: Method,
) -> dict[str, Any]:
    """The block for one board: ``votes`` the board's (grouped) votes, ``rows`` and ``extra`` the board
    computed from them. A reason instead of numbers when they cannot be said."""
    shown = [row for row in rows if not row.get("hidden", True) and row.get("score") is not None]
    block: dict[str, Any] = {"power": POWER, "alpha": round(1.0 - method.confidence, 6)}
    davidson = "tie_parameter" in extra
    block["ties"] = "davidson" if davidson else "half"
    tie_rate = (
        float(extra["tie_parameter"]["tie_probability_at_equal_strength"])
        if davidson
        else board_tie_rate(votes, method)
    )
    block["tie_rate"] = None if tie_rate is None else round(tie_rate, 4)
    if len(shown) < 2 or tie_rate is None:
        return {**block, "reason": "fewer than two competitors are shown: no race to separate"}
    if tie_rate >= 1.0:
        return {**block, "reason": ALL_TIES_REASON}
    if len(shown) > MAX_COMPETITORS:
        return {**block, "reason": f"more than {MAX_COMPETITORS} shown competitors: not planned on every recompute"}
    first, second = shown[0], shown[1]
    block["first"], block["second"] = first["competitor_id"], second["competitor_id"]
    block["first_label"], block["second_label"] = first.get("label", ""), second.get("label", "")
    if first.get("component") != second.get("component"):
        return {**block, "reason": "rank 1 and rank 2 were never compared, even indirectly: their gap is unknown"}
    ids = np.array([row["competitor_id"] for row in shown], dtype=np.int64)
    order = np.argsort(ids)
    ids = ids[order]
    theta = np.array([row["score"] for row in shown], dtype=np.float64)[order] / est.SCALE
    keep = np.isin(votes.left, ids) & np.isin(votes.right, ids)
    if method.both_bad == "drop":
        keep &= votes.outcome != est.BOTH_BAD
    kept = votes.subset(keep)
    a, b = dense_index(kept, ids)
    k = ids.shape[0]
    weights = kept.count if kept.count is not None else None
    counts = np.bincount(a * k + b, weights=weights, minlength=k * k).reshape(k, k).astype(np.float64)
    i, j = int(np.searchsorted(ids, block["first"])), int(np.searchsorted(ids, block["second"]))
    block["computed_from"] = (
        f"raw view, all categories: {int(counts.sum())} fitted votes among the {k} shown competitors "
        "(votes with a hidden competitor left out)"
    )
    uniform = np.triu(np.ones((k, k)), 1)
    pair = np.zeros((k, k))
    pair[i, j] = 1.0
    ties: est.planning.TieRule = "davidson" if davidson else "half"
    # The campaign's design: evenly over every pair (uniform sampling), like the pairs so far (the sampling
    # policy as it has run), or all on the pair (the best case active sampling approaches).
    for name, future in (("uniform", uniform), ("as_so_far", counts), ("pair_only", pair)):
        plan = est.planning.separation_plan(
            counts, theta, i, j, future=future, tie_rate=tie_rate, ties=ties, power=POWER, alpha=block["alpha"]
        )
        block["gap"], block["se"], block["power_now"] = plan.gap, plan.se, plan.power_now
        block[name] = {"additional": plan.additional, **({"reason": plan.reason} if plan.reason else {})}
    return block


def plan_for(
    *,
    competitors: int,
    margin: float,
    tie_rate: float,
    ties: str,
    confidence: float,
    power: float,
) -> dict[str, Any]:
    """The uniform-design plan as plain data (the API's and the dashboard's form)."""
    plan = est.planning.plan_uniform(
        competitors=competitors,
        margin=margin,
        tie_rate=tie_rate,
        ties="davidson" if ties == "davidson" else "half",
        confidence=confidence,
        power=power,
    )
    return {
        "competitors": plan.competitors,
        "margin": plan.margin,
        "tie_rate": round(plan.tie_rate, 4),
        "ties": plan.ties,
        "confidence": plan.confidence,
        "power": plan.power,
        "alpha": round(plan.alpha, 6),
        "information_per_vote": round(plan.information_per_vote, 6),
        "battles_for_margin": plan.battles_for_margin,
        "battles_for_power": plan.battles_for_power,
        "battles_per_pair_for_margin": round(plan.battles_per_pair_for_margin, 1),
        "battles_per_pair_for_power": round(plan.battles_per_pair_for_power, 1),
    }
