"""The base of every Celery task of the platform.

It lives at the bottom (``core``) so that every app's tasks can use it without importing the project
package (``arena``), which stands above all the apps: ``arena.celery`` creates and configures the
Celery application itself."""

import functools
import logging
from typing import TYPE_CHECKING, Any

from celery import Task
from django.core.cache import cache
from django.db import transaction
from kombu.exceptions import OperationalError as KombuOperationalError
from redis.exceptions import RedisError

logger = logging.getLogger(__name__)

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

    def delay_or_log(self, *args: Any, **kwargs: Any) -> None:
        """``delay`` for work that is a courtesy rather than the caller's business (a buffer refill, a
        nudge that beat's safety net repeats): sent when the transaction commits, like ``delay``, but a
        broker that cannot be reached is logged, never raised, so the request that asked still answers."""
        transaction.on_commit(lambda: self._send_or_log(args, kwargs))  # at once outside a transaction

    def _send_or_log(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
        """Send now (the caller is on commit already); a broker that cannot be reached is logged: False."""
        try:
            super().apply_async(args, kwargs)
        except (KombuOperationalError, RedisError, OSError) as exc:
            logger.error("task %s not queued: the broker is unreachable (%s)", self.name, exc)
            return False
        return True

    def delay_once_or_log(self, mark: str, mark_s: int, *args: Any, **kwargs: Any) -> None:
        """``delay_or_log``, but only where no task sent under the same ``mark`` is still waiting to begin:
        for work that takes in everything asked of it so far when it runs (a buffer's refill counts the
        buffer then), so that the requests made while one waits ride along with it instead of queueing
        one each. The mark is set when the transaction commits, for ``mark_s`` seconds at most (a task
        lost with its worker is asked for again after that); the task clears it as it begins
        (``mark_clear``), so a request after that asks anew. A broker that cannot be reached is logged and
        clears the mark, so the next request tries again."""

        def send() -> None:
            if not cache.add(mark, 1, timeout=mark_s):
                return  # one asked for and not begun yet: this request rides along
            if not self._send_or_log(args, kwargs):
                cache.delete(mark)

        transaction.on_commit(send)  # at once outside a transaction


def mark_clear(mark: str) -> None:
    """What a task sent by ``delay_once_or_log`` calls as it begins: the requests after this one ask anew."""
    cache.delete(mark)
