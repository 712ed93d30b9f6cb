"""Celery tasks: take ids, call one service."""

from __future__ import annotations

from celery import shared_task

from raters.tenancy import TenantTask

from . import services


# Not acknowledged late: a generation redelivered after its worker died would find the battle voided as
# stale, or recorded, and do nothing (the service checks), but it would hold a generation worker.
@shared_task(base=TenantTask, acks_late=False)
def battle_generate_live_task(battle_id: str, *, organization_id: int) -> str:
    """A live battle's two streams (``generation`` queue), inside ``organization_id``'s scope."""
    battle = services.battle_generate_live(battle_id=battle_id)
    return battle.status if battle is not None else "missing"
