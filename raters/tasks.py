"""Celery tasks: take ids, call one service."""

from __future__ import annotations

from celery import shared_task

from arena.celery import TransactionAwareTask

from . import services
from .tenancy import TenantTask


@shared_task(base=TenantTask, acks_late=True)
def webhook_deliver_task(delivery_id: int, *, organization_id: int) -> str:
    """One attempt at one webhook delivery; a delivery that is not due (already sent, claimed by
    another worker) is left alone."""
    delivery = services.webhook_deliver(delivery_id=delivery_id)
    return delivery.status if delivery is not None else "not due"


@shared_task(base=TransactionAwareTask)
def webhook_deliveries_due_task() -> int:
    """Beat's sweep, across organisations: retries whose time has come, first attempts whose task was lost."""
    return services.webhook_deliveries_due()


@shared_task(base=TransactionAwareTask)
def webhook_deliveries_purge_task() -> int:
    """Beat: finished deliveries past the retention period are deleted (the delivery log's retention)."""
    return services.webhook_deliveries_purge()
