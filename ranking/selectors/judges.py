"""Judges: their verdicts as the estimators' arrays, their boards and calibrations."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from django.db.models import Max

from battles.models import Campaign, Judge, JudgeRun, JudgeVerdict, Rubric, Vote

from .. import estimators as est
from ..compute import CHOICE_CODES
from ..models import JudgeBoard, JudgeCalibration
from ..policy import STYLE_FEATURES, VoteArrays
from .arrays import exclusion_policy_for, vote_arrays


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


@dataclass(frozen=True)
class CalibrationPairs:
    """What a calibration compares: per battle the human vote and the judge's verdict, for exactly the human
    votes the campaign's human board uses, and the account of the human votes left out.

    ``pairs``: (category, human code, judge code) of each battle with a kept human vote and a verdict of
    the judge (codes of ``compute.CHOICE_CODES``). ``refused``: per category, battles with a kept human vote
    the judge refused. ``votes``: per category ("" for all) the human votes on battles the judge has a
    verdict for (``human_votes``), those the board's exclusion policy leaves out (``excluded``, per rule and
    ``total``, counted as the board counts them) and those compared (``used``): human_votes = used +
    refused + excluded total. ``policy``: the exclusion policy applied, as the snapshots store it."""

    pairs: list[tuple[str, int, int]]
    refused: dict[str, int]
    votes: dict[str, dict[str, Any]]
    policy: dict[str, Any]


def judge_calibration_pairs(*, campaign_id: int, judge_id: int) -> CalibrationPairs:
    """The judge's newest verdict per battle against the human vote on that battle, for the human votes the
    human board uses: read as the board reads them (``vote_arrays``: never gold) and kept by the campaign's
    exclusion policy in force (``exclusion_policy_for``: flagged raters, too-fast votes, identity leaks, the
    prompt and rater caps), exactly as ``leaderboards_recompute`` keeps them."""
    campaign = Campaign.objects.get(pk=campaign_id)
    newest: dict[Any, tuple[Any, ...]] = {}
    for row in (
        JudgeVerdict.objects.filter(campaign_id=campaign_id, judge_id=judge_id, battle__isnull=False)
        .order_by("id")
        .values_list("battle_id", "choice", "refused", "category")
    ):
        newest[row[0]] = row
    votes = vote_arrays(campaign_id=campaign_id)
    policy = exclusion_policy_for(campaign)
    # The rules run over the whole log, as the board runs them (a cap counts every earlier vote).
    rules = policy.rules(votes)
    battle_of = dict(
        Vote.objects.filter(campaign_id=campaign_id, battle_id__in=list(newest)).values_list("id", "battle_id")
    )
    judged = np.isin(votes.vote_id, np.fromiter(battle_of, dtype=np.int64, count=len(battle_of)))
    code = {name: i for i, name in enumerate(CHOICE_CODES)}
    pairs: list[tuple[str, int, int]] = []
    refused: dict[str, int] = {}
    tally: dict[str, dict[str, Any]] = {}

    def count(category: str, outcome: str, hits: list[str]) -> None:
        for name in {"", category}:  # overall, and the category's own (a blank category is counted once)
            entry = tally.setdefault(
                name, {"human_votes": 0, "used": 0, "refused": 0, "excluded": dict.fromkeys([*rules, "total"], 0)}
            )
            entry["human_votes"] += 1
            if outcome == "excluded":
                entry["excluded"]["total"] += 1
                for rule in hits:
                    entry["excluded"][rule] += 1
            else:
                entry[outcome] += 1

    for i in np.flatnonzero(judged).tolist():
        _, choice, was_refused, category = newest[battle_of[int(votes.vote_id[i])]]
        hits = [name for name, mask in rules.items() if mask[i]]
        if hits:
            count(category, "excluded", hits)
        elif was_refused:
            refused[category] = refused.get(category, 0) + 1
            count(category, "refused", hits)
        else:
            pairs.append((category, int(votes.outcome[i]), code[choice]))
            count(category, "used", hits)
    return CalibrationPairs(pairs=pairs, refused=refused, votes=tally, policy=policy.as_dict())


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
