"""The Celery application of the project, configured from Django's settings (``CELERY_*``); tasks are
found in each app's ``tasks`` module. Their base, ``TransactionAwareTask``, is ``core.tasks``'s."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "arena.settings.local")

app = Celery("arena")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
