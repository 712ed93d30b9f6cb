"""Celery tasks: take ids, call one service. Generation has its own queue (``generation``, see
CELERY_TASK_ROUTES): model calls take seconds and must not queue behind, or ahead of, leaderboards."""

from __future__ import annotations

from celery import shared_task

from arena.celery import TransactionAwareTask
from raters.tenancy import TenantTask

from . import services


@shared_task(base=TenantTask, acks_late=True)
def battle_generate_task(battle_id: str, *, organization_id: int) -> str:
    battle = services.battle_generate_queued(battle_id=battle_id)
    return battle.status if battle is not None else "missing"


@shared_task(base=TenantTask, acks_late=True)
def buffer_fill_task(campaign_id: int, *, organization_id: int) -> int:
    return len(services.buffer_fill(campaign_id=campaign_id))


@shared_task(base=TenantTask, acks_late=True)
def buffer_maintain_task(campaign_id: int, *, organization_id: int) -> int:
    return services.buffer_maintain(campaign_id=campaign_id)


@shared_task(base=TransactionAwareTask)
def buffer_maintain_open_task() -> int:
    """Beat's safety net, across organisations: each open campaign's buffer is checked in its own
    organisation's scope (the service lists them unscoped on purpose)."""
    return services.buffer_maintain_schedule_open_campaigns()


@shared_task(base=TenantTask, acks_late=True)
def battle_generate_live_task(battle_id: str, *, organization_id: int) -> str:
    """A live battle's two streams, published to its live channel (battles/live.py) as they arrive;
    exactly once, like ``battle_generate_task`` (a redelivery finds the generation started)."""
    battle = services.battle_generate_live(battle_id=battle_id)
    return battle.status if battle is not None else "missing"


# Exports run on the default queue (no route in CELERY_TASK_ROUTES): reads of the log, beside the
# leaderboards, never behind model calls.
@shared_task(base=TenantTask, acks_late=True)
def export_job_run_task(job_id: str, *, organization_id: int) -> str:
    job = services.export_job_run(job_id=job_id)
    return job.status if job is not None else "missing"


@shared_task(base=TransactionAwareTask)
def export_jobs_purge_task() -> int:
    """Beat: files of exports past the retention period are deleted, their jobs marked expired."""
    return services.export_jobs_purge()


@shared_task(base=TransactionAwareTask)
def participants_time_out_task() -> int:
    """Beat's sweep of crowd-study participants whose time ran out: each ended (and their open battle
    voided) in its organisation's scope; the service lists them unscoped on purpose."""
    return services.participants_time_out_due()


@shared_task(base=TenantTask, acks_late=True)
def judge_run_task(run_id: int, *, organization_id: int) -> str:
    """A judge run (its calls take seconds each): resumable, so a redelivery only finishes what is left."""
    run = services.judge_run_execute(run_id=run_id)
    return run.status if run is not None else "missing"
