"""The battles app's subscriptions to Django's own signals. Connected in ``BattlesConfig.ready``."""

from __future__ import annotations

from typing import Any

from django.db.models.signals import post_delete, post_save

from core.cached import cached_fact_drop

from . import selectors, services
from .models import ExportJob, Participant


def on_export_job_deleted(sender: type[ExportJob], instance: ExportJob, using: str, **kwargs: Any) -> None:
    # post_delete, not a service: a campaign's or an organisation's jobs go by cascade, which calls
    # no code of ours but sends this signal for every row.
    services.export_job_deleted(job=instance, using=using)


def on_participant_changed(sender: type[Participant], instance: Participant, **kwargs: Any) -> None:
    # Whether an account is a study participant is kept in the shared cache (the study gate asks on every
    # request): a participation made or deleted, by a service or by cascade, drops it.
    cached_fact_drop(selectors.participant_key(instance.user_id))


def connect() -> None:
    post_delete.connect(on_export_job_deleted, sender=ExportJob, dispatch_uid="battles.export_job_deleted")
    post_save.connect(on_participant_changed, sender=Participant, dispatch_uid="battles.participant_saved")
    post_delete.connect(on_participant_changed, sender=Participant, dispatch_uid="battles.participant_deleted")
