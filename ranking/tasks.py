"""Celery tasks: take ids, call one service."""

from __future__ import annotations

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
def rater_flags_check_task(campaign_id: int, *, organization_id: int) -> int:
    """After a recompute: the campaign's quality checks, stored as flags (each a new row)."""
    return len(services.rater_flags_check(campaign_id=campaign_id))
