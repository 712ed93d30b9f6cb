import functools
import os
from typing import TYPE_CHECKING, Any

from celery import Celery, Task
from django.db import transaction

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "arena.settings.local")


if TYPE_CHECKING:
    _TaskBase = Task[Any, Any]  # celery-types' Task is generic; celery's own class is not subscriptable
else:
    _TaskBase = Task


class TransactionAwareTask(_TaskBase):
    """A task queued from inside a transaction is sent when that transaction commits, not before
    (pretix's ``TransactionAwareTask``): a worker never starts on rows it cannot see yet, and a
    rolled-back change queues nothing. Outside a transaction it is sent at once.

    The base of every task of the platform (``@shared_task(base=TransactionAwareTask)``), so callers
    just call ``.delay()`` / ``.apply_async()`` and never write ``on_commit`` themselves."""

    def apply_async(self, *args: Any, **kwargs: Any) -> Any:
        if transaction.get_connection().in_atomic_block:
            transaction.on_commit(functools.partial(super().apply_async, *args, **kwargs))
            return None
        return super().apply_async(*args, **kwargs)


app = Celery("arena")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
