"""Celery tasks: take ids, call one service."""

from __future__ import annotations

from celery import shared_task

from core.tasks import TransactionAwareTask
from raters.tenancy import TenantTask

from . import services


@shared_task(base=TenantTask, acks_late=False)
def endpoints_health_check_task(*, organization_id: int) -> int:
    """One organisation's readiness round, inside its scope (TenantTask). Not acknowledged late: a round
    lost with its worker is replaced by the next tick, not redelivered after it."""
    return len(services.endpoints_health_check_watched())


@shared_task(base=TransactionAwareTask)
def endpoints_health_check_open_task() -> int:
    """Beat's tick, across organisations: the service lists the organisations with watched endpoints
    and queues each its own round."""
    return services.endpoints_health_schedule()
