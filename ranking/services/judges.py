"""Judges: boards of a judge's verdicts, calibration against the humans, golden-run checks."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from celery import shared_task
from django.db import transaction
from django.db.models import Max

from battles import services as battle_services
from battles.models import Campaign, Competitor, Judge, JudgeRun, JudgeVerdict
from core.errors import Invalid
from raters.tenancy import TenantTask

from .. import estimators as est
from .. import selectors
from ..compute import board_compute, calibration_compute, head_to_head_check
from ..models import JudgeBoard, JudgeCalibration
from .recompute import method_for


def judge_board_recompute(
    *, campaign_id: int, judge_id: int, kind: str = "battles", run_id: int | None = None
) -> JudgeBoard | None:
    """A new version of the judge's board: Bradley-Terry (the campaign's method, raw view) on the judge's
    counterbalanced verdicts only. Refusals are left out and counted; order disagreements are ties."""
    campaign = Campaign.objects.filter(pk=campaign_id).first()
    judge = Judge.objects.filter(pk=judge_id).select_related("rubric").first()
    if campaign is None or judge is None:
        return None
    found = selectors.judge_verdicts_for_board(campaign_id=campaign_id, judge_id=judge_id, kind=kind, run_id=run_id)
    competitors = list(
        Competitor.objects.filter(campaign=campaign, gold=False).select_related("endpoint").order_by("id")
    )
    competitor_ids = np.array([c.pk for c in competitors], dtype=np.int64)
    labels = {c.pk: f"{c.model_name} {c.version_label}" for c in competitors}
    method = method_for(campaign)
    board = board_compute(found.arrays, competitor_ids, labels, method, view="raw")
    with transaction.atomic():
        Judge.objects.select_for_update().filter(pk=judge.pk).first()  # orders concurrent recomputes
        version = (
            JudgeBoard.objects.filter(campaign=campaign, judge=judge, kind=kind).aggregate(v=Max("version"))["v"] or 0
        ) + 1
        return JudgeBoard.objects.create(
            organization_id=campaign.organization_id,
            campaign=campaign,
            judge=judge,
            rubric=judge.rubric,
            run_id=found.run_id,
            kind=kind,
            version=version,
            last_verdict_id=found.last_id,
            verdicts_total=found.total,
            verdicts_used=len(found.arrays),
            verdicts_refused=found.refused,
            verdicts_inconsistent=found.inconsistent,
            method={
                **method.as_dict(view="raw"),
                "source": f"judge {judge.name}: rubric {judge.rubric.name} v{judge.rubric.version} "
                f"({judge.rubric.content_hash[:12]}), counterbalanced verdicts only (no human vote)",
                "order_disagreement": "a pair whose two presentation orders disagree counts as a tie",
                "refusals": "left out (counted in verdicts_refused)",
            },
            rows=board.rows,
            pairwise=board.pairwise,
            pairwise_arrays=board.pairwise_arrays,
            extra=board.extra,
        )


@transaction.atomic
def judge_calibrate(*, campaign_id: int, judge_id: int, run_id: int | None = None) -> list[JudgeCalibration]:
    """The judge's agreement with the human votes on the battles both judged, overall and per category,
    with Cohen's kappa and the gate its interval supports (``estimators.GATE_RULE``), written as one new
    calibration version attached to the judge's rubric version. The human votes are exactly those the human
    board uses (``selectors.judge_calibration_pairs``); each row's ``extra`` accounts for them (used,
    refused, excluded per rule) and names the policy and the gate rule. Nothing is written when no battle
    has both a human vote and a verdict."""
    campaign = Campaign.objects.filter(pk=campaign_id).first()
    judge = Judge.objects.filter(pk=judge_id).first()
    if campaign is None or judge is None:
        return []
    found = selectors.judge_calibration_pairs(campaign_id=campaign_id, judge_id=judge_id)
    if not found.votes:
        return []
    Judge.objects.select_for_update().filter(pk=judge.pk).first()
    version = (
        JudgeCalibration.objects.filter(campaign=campaign, judge=judge).aggregate(v=Max("version"))["v"] or 0
    ) + 1
    rows = []
    for category in [""] + sorted(name for name in found.votes if name):
        chosen = [(h, j) for c, h, j in found.pairs if category in ("", c)]
        human = np.array([h for h, _ in chosen], dtype=np.int64)
        verdict = np.array([j for _, j in chosen], dtype=np.int64)
        result = calibration_compute(human, verdict)
        rows.append(
            JudgeCalibration(
                organization_id=campaign.organization_id,
                campaign=campaign,
                judge=judge,
                rubric_id=judge.rubric_id,
                run_id=run_id,
                version=version,
                category=category,
                refused=sum(found.refused.values()) if category == "" else found.refused.get(category, 0),
                extra={"human_votes": found.votes[category], "policy": found.policy, "gate_rule": est.GATE_RULE},
                **result,
            )
        )
    return JudgeCalibration.objects.bulk_create(rows)


def judge_run_settle(*, run_id: int) -> JudgeBoard | None:
    """After a run: the judge's board of that kind, and (for a battles run) its calibration."""
    run = JudgeRun.objects.filter(pk=run_id).first()
    if run is None:
        return None
    board = judge_board_recompute(campaign_id=run.campaign_id, judge_id=run.judge_id, kind=run.kind, run_id=run.pk)
    if run.kind == JudgeRun.Kind.BATTLES:
        judge_calibrate(campaign_id=run.campaign_id, judge_id=run.judge_id, run_id=run.pk)
    return board


@shared_task(base=TenantTask, acks_late=True, name="ranking.tasks.judge_run_settle_task")
def judge_run_settle_task(run_id: int, *, organization_id: int) -> int | None:
    """After a judge run: the judge's board (and calibration against the humans, for a battles run)."""
    board = judge_run_settle(run_id=run_id)
    return board.version if board is not None else None


def golden_check_validate(
    *,
    campaign_id: int,
    candidate_id: int,
    baseline_id: int,
    confidence: float,
    competitor_ids: Sequence[int] = (),
    judge: Judge | None = None,
) -> None:
    """The golden check's arguments, checked before any run exists or any model is called, so a typo is a
    usage error and never an hour of judging that ends in "does not beat": the confidence lies in
    (0.5, 1), and candidate and baseline are two different live competitors of the campaign that the run
    will have answer (among ``competitor_ids`` when those are named, else active) and ``judge`` may
    judge (not its own model, nor an excluded family)."""
    if not 0.5 < confidence < 1.0:
        raise Invalid(
            "The confidence must lie between 0.5 and 1 (e.g. 0.95).", field_errors={"confidence": "Not in (0.5, 1)."}
        )
    if candidate_id == baseline_id:
        raise Invalid("The candidate and the baseline must be two different competitors.")
    found = {
        c.pk: c
        for c in Competitor.objects.filter(campaign_id=campaign_id, pk__in=[candidate_id, baseline_id], gold=False)
    }
    for role, pk in (("candidate", candidate_id), ("baseline", baseline_id)):
        competitor = found.get(pk)
        if competitor is None or competitor.endpoint_id is None:
            raise Invalid(
                f"The {role} {pk} is not a served competitor of campaign {campaign_id}.",
                field_errors={role: "Not one of the campaign's served competitors."},
            )
        if competitor.retired:
            raise Invalid(f"The {role} {competitor} is retired.", field_errors={role: "Retired."})
        if competitor_ids and pk not in competitor_ids:
            raise Invalid(
                f"The {role} {pk} is not among the run's competitors.", field_errors={role: "Not in the run."}
            )
        if not competitor_ids and not competitor.active:
            raise Invalid(
                f"The {role} {competitor} is inactive: a golden run without named competitors uses the active ones.",
                field_errors={role: "Inactive."},
            )
        if judge is not None and not judge.may_judge(competitor):
            raise Invalid(
                f"The judge {judge.name} may not judge the {role} {competitor} (its own model, or a family it "
                "excludes): every pair with it would be skipped.",
                field_errors={role: "The judge's own model or an excluded family."},
            )


def golden_check(*, run: JudgeRun, candidate_id: int, baseline_id: int, confidence: float) -> dict[str, Any]:
    """Does ``candidate`` beat ``baseline`` on the golden run's head-to-head verdicts, at ``confidence``?"""
    if not 0.5 < confidence < 1.0:
        raise Invalid("The confidence must lie between 0.5 and 1 (e.g. 0.95).")
    wins = losses = ties = 0
    for left, right, choice in JudgeVerdict.objects.filter(run=run, refused=False).values_list(
        "left_id", "right_id", "choice"
    ):
        if {left, right} != {candidate_id, baseline_id}:
            continue
        if choice in ("tie", "both_bad"):
            ties += 1
        elif (choice == "left") == (left == candidate_id):
            wins += 1
        else:
            losses += 1
    return {
        "run_id": run.pk,
        "candidate_id": candidate_id,
        "baseline_id": baseline_id,
        **head_to_head_check(wins=wins, losses=losses, ties=ties, confidence=confidence),
    }


def golden_run_and_check(
    *, run_id: int, candidate_id: int | None = None, baseline_id: int | None = None, confidence: float = 0.95
) -> dict[str, Any]:
    """A golden run end to end (answers, verdicts, its board), then the candidate-against-baseline check
    when both are named (its arguments checked first: a bad one raises ``Invalid`` before any model is
    called). What the CI command and the Celery task run."""
    if candidate_id is not None and baseline_id is not None:
        queued = JudgeRun.objects.filter(pk=run_id).select_related("judge__endpoint").first()
        if queued is None:
            raise Invalid(f"No judge run {run_id}.")
        golden_check_validate(
            campaign_id=queued.campaign_id,
            candidate_id=candidate_id,
            baseline_id=baseline_id,
            confidence=confidence,
            competitor_ids=queued.competitor_ids,
            judge=queued.judge,
        )
    run = battle_services.judge_run_execute(run_id=run_id)
    if run is None:
        raise Invalid(f"No judge run {run_id}.")
    board = judge_board_recompute(campaign_id=run.campaign_id, judge_id=run.judge_id, kind=run.kind, run_id=run.pk)
    result: dict[str, Any] = {
        "run_id": run.pk,
        "status": run.status,
        "error": run.error,
        "stats": run.stats,
        "board_version": board.version if board is not None else None,
    }
    if candidate_id is not None and baseline_id is not None:
        result["check"] = golden_check(
            run=run, candidate_id=candidate_id, baseline_id=baseline_id, confidence=confidence
        )
    return result


@shared_task(base=TenantTask, acks_late=True, organization_slots="generation", name="ranking.tasks.golden_run_task")
def golden_run_task(
    run_id: int,
    *,
    organization_id: int,
    candidate_id: int | None = None,
    baseline_id: int | None = None,
    confidence: float = 0.95,
) -> dict[str, Any]:
    """An offline golden-set run end to end, with the candidate-against-baseline check (its ``beats``)."""
    return golden_run_and_check(
        run_id=run_id, candidate_id=candidate_id, baseline_id=baseline_id, confidence=confidence
    )
