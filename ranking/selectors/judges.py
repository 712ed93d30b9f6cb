"""Judges: their verdicts as the estimators' arrays, their boards and calibrations."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from django.db.models import Max

from battles.models import Campaign, Judge, JudgeRun, JudgeVerdict, Rubric, Vote

from .. import estimators as est
from ..models import JudgeBoard, JudgeCalibration
from ..policy import STYLE_FEATURES, VoteArrays


@dataclass(frozen=True)
class JudgeVerdictRows:
    """The verdicts a judge board ranks: ``ids`` of the JudgeVerdict rows used, and the counts left out."""

    arrays: VoteArrays
    total: int
    refused: int
    inconsistent: int
    last_id: int
    run_id: int | None


def judge_verdicts_for_board(
    *, campaign_id: int, judge_id: int, kind: str, run_id: int | None = None
) -> JudgeVerdictRows:
    """A battles board: the newest verdict of the judge per battle, across its runs (a rerun replaces
    its earlier verdict rather than counting twice). A golden board: the verdicts of one golden run
    (the newest, unless ``run_id`` names one): each golden run has its own answers."""
    verdicts = JudgeVerdict.objects.filter(campaign_id=campaign_id, judge_id=judge_id)
    if kind == JudgeRun.Kind.GOLDEN:
        if run_id is None:
            run_id = (
                JudgeRun.objects.filter(campaign_id=campaign_id, judge_id=judge_id, kind=JudgeRun.Kind.GOLDEN)
                .order_by("-created_at", "-id")
                .values_list("pk", flat=True)
                .first()
            )
        verdicts = verdicts.filter(run_id=run_id, battle__isnull=True)
    else:
        verdicts = verdicts.filter(battle__isnull=False)
        if run_id is None:
            run_id = (
                JudgeRun.objects.filter(campaign_id=campaign_id, judge_id=judge_id, kind=JudgeRun.Kind.BATTLES)
                .order_by("-created_at", "-id")
                .values_list("pk", flat=True)
                .first()
            )
    newest: dict[Any, tuple[Any, ...]] = {}
    for row in verdicts.order_by("id").values_list(
        "id", "battle_id", "prompt_id", "left_id", "right_id", "choice", "refused", "consistent", "category"
    ):
        key = row[1] if row[1] is not None else (row[2], row[3], row[4])
        newest[key] = row
    rows = sorted(newest.values(), key=lambda r: r[0])
    used = [r for r in rows if not r[6]]
    n = len(used)
    categories = tuple(sorted({r[8] for r in used}))
    code = {name: i for i, name in enumerate(categories)}
    prompts = {p: i for i, p in enumerate(sorted({r[2] for r in used}))}
    outcome = {"left": est.LEFT_WINS, "right": est.RIGHT_WINS, "tie": est.TIE, "both_bad": est.BOTH_BAD}
    zeros = np.zeros((n, len(STYLE_FEATURES)), dtype=np.float64)
    arrays = VoteArrays(
        vote_id=np.array([r[0] for r in used], dtype=np.int64),
        left=np.array([r[3] for r in used], dtype=np.int64),
        right=np.array([r[4] for r in used], dtype=np.int64),
        outcome=np.array([outcome[r[5]] for r in used], dtype=np.int64),
        decision_ms=np.zeros(n, dtype=np.int64),
        rater=np.zeros(n, dtype=np.int64),  # one "rater": the judge
        prompt=np.array([prompts[r[2]] for r in used], dtype=np.int64),
        category=np.array([code[r[8]] for r in used], dtype=np.int64),
        categories=categories,
        identity=np.zeros(n, dtype=bool),
        style_left=zeros,
        style_right=zeros.copy(),
    )
    return JudgeVerdictRows(
        arrays=arrays,
        total=len(rows),
        refused=len(rows) - n,
        inconsistent=sum(1 for r in used if not r[7]),
        last_id=max((r[0] for r in rows), default=0),
        run_id=run_id,
    )


def judge_calibration_pairs(*, campaign_id: int, judge_id: int) -> tuple[list[tuple[str, int, int]], dict[str, int]]:
    """(category, human code, judge code) for every battle with a human vote (gold battles aside) and a
    counterbalanced verdict of the judge (its newest per battle); and per category the refusals."""
    from ..compute import CHOICE_CODES

    code = {name: i for i, name in enumerate(CHOICE_CODES)}
    human = dict(Vote.objects.filter(campaign_id=campaign_id).exclude(source="gold").values_list("battle_id", "choice"))
    newest: dict[Any, tuple[Any, ...]] = {}
    for row in (
        JudgeVerdict.objects.filter(campaign_id=campaign_id, judge_id=judge_id, battle_id__in=list(human))
        .order_by("id")
        .values_list("battle_id", "choice", "refused", "category")
    ):
        newest[row[0]] = row
    pairs: list[tuple[str, int, int]] = []
    refused: dict[str, int] = {}
    for battle_id, choice, was_refused, category in newest.values():
        if was_refused:
            refused[category] = refused.get(category, 0) + 1
            continue
        pairs.append((category, code[human[battle_id]], code[choice]))
    return pairs, refused


def judge_board_latest(*, campaign: Campaign, judge: Judge, kind: str = "battles") -> JudgeBoard | None:
    return JudgeBoard.objects.filter(campaign=campaign, judge=judge, kind=kind).order_by("-version").first()


def judge_calibration_latest(*, campaign: Campaign, judge: Judge) -> list[JudgeCalibration]:
    """The newest calibration's rows (overall first, then per category)."""
    newest = JudgeCalibration.objects.filter(campaign=campaign, judge=judge).aggregate(v=Max("version"))["v"]
    if newest is None:
        return []
    return list(JudgeCalibration.objects.filter(campaign=campaign, judge=judge, version=newest).order_by("category"))


def judge_calibrations_of_rubric(*, rubric: Rubric) -> list[JudgeCalibration]:
    """Every calibration measured under one rubric version (its judges, every campaign), newest first."""
    return list(
        JudgeCalibration.objects.filter(rubric=rubric)
        .select_related("judge", "campaign")
        .order_by("-created_at", "category")
    )


def judge_of_campaign(*, campaign: Campaign, judge_id: int) -> Judge | None:
    """A judge of the campaign's organisation (the caller already may read the campaign)."""
    return Judge.objects.filter(pk=judge_id, organization_id=campaign.organization_id).select_related("rubric").first()
