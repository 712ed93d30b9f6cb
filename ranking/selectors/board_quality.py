"""Comparisons of stored boards (``board_quality.rows_comparison``): which snapshot or judge board a side names,
and the comparisons the board page shows. Read from stored rows only: never a refit."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from battles.models import Campaign, Judge, JudgeRun

from ..board_quality import rows_comparison
from ..models import JudgeBoard, LeaderboardSnapshot

# The page compares at most this many judges' boards with the human board (newest judges first).
PAGE_JUDGES = 5


@dataclass(frozen=True)
class BoardSide:
    """One stored board, as a comparison names it."""

    kind: str  # "human" or "judge"
    name: str
    version: int
    created_at: datetime
    category: str
    view: str
    rows: list[dict[str, Any]]
    confidence: float
    judge_id: int | None = None

    def describe(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "name": self.name,
            "category": self.category,
            "view": self.view,
            "version": self.version,
            "created_at": self.created_at,
            "judge_id": self.judge_id,
        }


def _confidence(method: dict[str, Any]) -> float:
    value = method.get("confidence", 0.95)
    return float(value) if isinstance(value, (int, float)) else 0.95


def _snapshot_side(snapshot: LeaderboardSnapshot) -> BoardSide:
    where = snapshot.category or "overall"
    return BoardSide(
        kind="human",
        name=f"the human board ({where}, {snapshot.view}, v{snapshot.version})",
        version=snapshot.version,
        created_at=snapshot.created_at,
        category=snapshot.category,
        view=snapshot.view,
        rows=list(snapshot.rows),
        confidence=_confidence(snapshot.method),
    )


def _judge_side(board: JudgeBoard, judge: Judge) -> BoardSide:
    return BoardSide(
        kind="judge",
        name=f"judge {judge.name}'s board (v{board.version})",
        version=board.version,
        created_at=board.created_at,
        category="",
        view="raw",
        rows=list(board.rows),
        confidence=_confidence(board.method),
        judge_id=judge.pk,
    )


def board_side(
    *,
    campaign: Campaign,
    category: str = "",
    view: str = "raw",
    judge_id: int | None = None,
    version: int | None = None,
    before: datetime | None = None,
) -> BoardSide | None:
    """The human snapshot of (category, view), or the judge's board (battles kind) when ``judge_id`` is given: a
    given version, else the newest created before ``before``, else the newest. None when there is none (a judge
    of another organisation is none)."""
    if judge_id is not None:
        judge = Judge.objects.filter(pk=judge_id, organization_id=campaign.organization_id).first()
        if judge is None:
            return None
        boards = JudgeBoard.objects.filter(campaign=campaign, judge=judge, kind=JudgeRun.Kind.BATTLES)
        if version is not None:
            boards = boards.filter(version=version)
        if before is not None:
            boards = boards.filter(created_at__lt=before)
        board = boards.only("version", "created_at", "rows", "method").order_by("-version").first()
        return None if board is None else _judge_side(board, judge)
    snapshots = LeaderboardSnapshot.objects.filter(campaign=campaign, category=category, view=view)
    if version is not None:
        snapshots = snapshots.filter(version=version)
    if before is not None:
        snapshots = snapshots.filter(created_at__lt=before)
    snapshot = (
        snapshots.only("version", "created_at", "rows", "method", "category", "view", "campaign_id")
        .order_by("-version")
        .first()
    )
    return None if snapshot is None else _snapshot_side(snapshot)


def boards_compared(*, reference: BoardSide, candidate: BoardSide) -> dict[str, Any]:
    """The candidate against the reference (at the reference's confidence), with both sides described."""
    return {
        "reference": reference.describe(),
        "candidate": candidate.describe(),
        "comparison": rows_comparison(
            reference.rows, candidate.rows, names=(reference.name, candidate.name), confidence=reference.confidence
        ),
    }


def board_comparisons_for_page(*, campaign: Campaign, snapshot: LeaderboardSnapshot) -> list[dict[str, Any]]:
    """What the board page shows under its quality section: a category board against the overall board of the
    same view, and each judge's newest board (up to ``PAGE_JUDGES``) against the human overall raw board."""
    out = []
    if snapshot.category:
        overall = board_side(campaign=campaign, view=snapshot.view)
        if overall is not None:
            out.append(boards_compared(reference=overall, candidate=_snapshot_side(snapshot)))
    human = board_side(campaign=campaign)
    if human is not None:
        judge_ids = (
            JudgeBoard.objects.filter(campaign=campaign, kind=JudgeRun.Kind.BATTLES)
            .order_by("-judge_id")
            .values_list("judge_id", flat=True)
            .distinct()[:PAGE_JUDGES]
        )
        for judge_id in judge_ids:
            side = board_side(campaign=campaign, judge_id=judge_id)
            if side is not None:
                out.append(boards_compared(reference=human, candidate=side))
    return out
