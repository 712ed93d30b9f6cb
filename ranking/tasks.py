"""Celery tasks: take ids, call one service."""

from __future__ import annotations

from typing import Any

from celery import shared_task

from arena.celery import TransactionAwareTask
from raters.tenancy import TenantTask

from . import services


@shared_task(base=TenantTask, acks_late=True)
def leaderboards_recompute_task(campaign_id: int, *, organization_id: int) -> int:
    """Runs inside ``organization_id``'s scope (TenantTask, which is transaction-aware as well)."""
    return len(services.leaderboards_recompute_pending(campaign_id=campaign_id))


@shared_task(base=TransactionAwareTask)
def leaderboards_recompute_open_task() -> int:
    """Beat's safety net, across organisations: the service opens each campaign's own scope."""
    return services.leaderboards_schedule_open_campaigns()


@shared_task(base=TenantTask, acks_late=True)
def judge_run_settle_task(run_id: int, *, organization_id: int) -> int | None:
    """After a judge run: the judge's board (and calibration against the humans, for a battles run)."""
    board = services.judge_run_settle(run_id=run_id)
    return board.version if board is not None else None


@shared_task(base=TenantTask, acks_late=True)
def golden_run_task(
    run_id: int,
    *,
    organization_id: int,
    candidate_id: int | None = None,
    baseline_id: int | None = None,
    confidence: float = 0.95,
) -> dict[str, Any]:
    """An offline golden-set run end to end, with the candidate-against-baseline check (its ``beats``)."""
    return services.golden_run_and_check(
        run_id=run_id, candidate_id=candidate_id, baseline_id=baseline_id, confidence=confidence
    )


@shared_task(base=TenantTask, acks_late=True)
def attribute_run_task(run_id: int, *, organization_id: int) -> str:
    """Execute one attribute-board run (its claim makes a redelivery a no-op); returns its status."""
    return services.attribute_run_execute(run_id=run_id).status


@shared_task(base=TenantTask, acks_late=True)
def rater_flags_check_task(campaign_id: int, *, organization_id: int) -> int:
    """After a recompute: the campaign's quality checks, stored as flags (each a new row)."""
    return len(services.rater_flags_check(campaign_id=campaign_id))


@shared_task(base=TenantTask, acks_late=True)
def rater_figures_refresh_task(campaign_id: int, *, organization_id: int) -> int | None:
    """The per-rater figures for the log as it stands (queued by a view that served older ones, and after
    each recompute); returns the votes they stand on."""
    return services.rater_figures_refresh(campaign_id=campaign_id)
