"""The battles app's subscriptions to Django's own signals. Connected in ``BattlesConfig.ready``."""

from __future__ import annotations

from typing import Any

from django.db.models.signals import post_delete

from . import services
from .models import ExportJob


def on_export_job_deleted(sender: type[ExportJob], instance: ExportJob, using: str, **kwargs: Any) -> None:
    # post_delete, not a service: a campaign's or an organisation's jobs go by cascade, which calls
    # no code of ours but sends this signal for every row.
    services.export_job_deleted(job=instance, using=using)


def connect() -> None:
    post_delete.connect(on_export_job_deleted, sender=ExportJob, dispatch_uid="battles.export_job_deleted")
