"""Celery tasks: take ids, call one service. Each task lives beside the service it runs
(``raters/services/webhooks.py``) under the name it always had here (``raters.tasks.<function>``);
this module is their face, the one Celery's autodiscovery imports."""

from __future__ import annotations

from .services.webhooks import webhook_deliver_task, webhook_deliveries_due_task, webhook_deliveries_purge_task

__all__ = ["webhook_deliver_task", "webhook_deliveries_due_task", "webhook_deliveries_purge_task"]
