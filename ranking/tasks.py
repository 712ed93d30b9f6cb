"""Celery tasks: take ids, call one service."""

from __future__ import annotations

from celery import shared_task

from arena.celery import TransactionAwareTask

from . import services


@shared_task(base=TransactionAwareTask, acks_late=True)
def leaderboards_recompute_task(campaign_id: int) -> int:
    return len(services.leaderboards_recompute_pending(campaign_id=campaign_id))


@shared_task(base=TransactionAwareTask)
def leaderboards_recompute_open_task() -> int:
    return services.leaderboards_schedule_open_campaigns()
