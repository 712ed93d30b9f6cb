"""Per-organisation slots: at most ``limit`` pieces of one kind of work of one organisation at a time,
across every worker of the deployment (the shared cache, Redis in production, holds the slots).

Each slot is a cache key taken with an atomic ``add`` and a lease (its timeout): a worker killed while it
holds one frees it when the lease ends, never later. The work that finds every slot taken does not wait
(a worker thread must never block on one tenant): its caller says what happens to it instead
(``raters.services.webhooks``: the slot holders of that organisation send it).

``lease_release`` frees any such lease by its holder only (the slots', and the per-rater figures' refresh
lock's)."""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from django.core.cache import cache

logger = logging.getLogger(__name__)


@contextmanager
def organization_slot(
    kind: str, organization_id: int, *, limit: int, lease_s: float, renew: bool = False
) -> Iterator[bool]:
    """Take one of the organisation's ``limit`` slots for ``kind`` for at most ``lease_s`` seconds; yields
    whether one was free. Released when the block ends (only the slot this call took: a lease that ran
    out and was taken by another worker is left to that worker).

    ``renew``: for work that may outlast any fixed lease (a judge run of many pairs), a thread of the holder
    extends the lease every third of it while the block runs, so the lease can stay short: a worker killed
    with the slot frees it ``lease_s`` later, however long its work would have taken."""
    token = uuid.uuid4().hex
    taken = ""
    for index in range(max(1, limit)):
        key = f"arena:slot:{kind}:{organization_id}:{index}"
        if cache.add(key, token, timeout=lease_s):
            taken = key
            break
    stop = threading.Event()
    renewer = None
    if taken and renew:
        renewer = threading.Thread(target=_renew, args=(taken, token, lease_s, stop), daemon=True)
        renewer.start()
    try:
        yield bool(taken)
    finally:
        stop.set()
        if renewer is not None:
            renewer.join(timeout=5)
        if taken:
            lease_release(taken, token)


def lease_release(key: str, token: str) -> None:
    """Free a lease (a cache key taken with ``cache.add(key, token, timeout)``) if its holder, the one who
    stored ``token``, still has it. On the platform's Redis cache (``arena.cache``) the token is compared and
    the key deleted in one step inside Redis: a holder whose lease ran out cannot delete the lease another
    worker took in the moment between a read and a delete. Another cache backend (one process: the demo's
    local memory) compares, then deletes."""
    delete_if_value = getattr(cache, "delete_if_value", None)
    if delete_if_value is not None:
        delete_if_value(key, token)
    elif cache.get(key) == token:
        cache.delete(key)


def _renew(key: str, token: str, lease_s: float, stop: threading.Event) -> None:
    touch_if_value = getattr(cache, "touch_if_value", None)
    while not stop.wait(lease_s / 3):
        try:
            if touch_if_value is not None:
                renewed = bool(touch_if_value(key, token, lease_s))  # compared and renewed in one step
            else:
                renewed = cache.get(key) == token and bool(cache.touch(key, timeout=lease_s))
            if not renewed:
                return  # the lease ran out and another holder has the slot: never take it back
        except Exception:  # noqa: BLE001  # the cache briefly unreachable: the next tick tries again
            logger.warning("slot %s: its lease could not be renewed", key, exc_info=True)
