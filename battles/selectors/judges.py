"""Judges: those a principal may see, a campaign's judge runs and a run's verdicts."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.db.models import QuerySet

from raters.authentication import ApiKeyPrincipal
from raters.selectors import organizations_viewable_by

from ..models import Campaign, Judge, JudgeRun, JudgeVerdict

# --- Judges -------------------------------------------------------------------------------------------


def judges_viewable_by(user: User | ApiKeyPrincipal) -> QuerySet[Judge]:
    """Judges of the organisations whose results the principal may read (as campaigns_viewable_by)."""
    return Judge.objects.filter(organization__in=organizations_viewable_by(user)).select_related("rubric", "endpoint")


def judge_viewable_by(*, user: User | ApiKeyPrincipal, judge_id: int) -> Judge | None:
    return judges_viewable_by(user).filter(pk=judge_id).first()


def judge_runs_for(*, campaign: Campaign) -> QuerySet[JudgeRun]:
    return JudgeRun.objects.filter(campaign=campaign).select_related("judge", "rubric")


def judge_run_for(*, campaign: Campaign, run_id: int) -> JudgeRun | None:
    return judge_runs_for(campaign=campaign).filter(pk=run_id).first()


def judge_verdicts_of(run: JudgeRun) -> QuerySet[JudgeVerdict]:
    """The run's verdicts (the judge votes' log), in the order they were appended."""
    return JudgeVerdict.objects.filter(run=run, campaign_id=run.campaign_id)
