"""Per-organisation slots: at most ``limit`` pieces of one kind of work of one organisation at a time,
across every worker of the deployment (the shared cache, Redis in production, holds the slots).

Each slot is a cache key taken with an atomic ``add`` and a lease (its timeout): a worker killed while it
holds one frees it when the lease ends, never later. The work that finds every slot taken does not wait
(a worker thread must never block on one tenant): its caller says what happens to it instead
(``raters.services.webhooks``: the slot holders of that organisation send it)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from django.core.cache import cache


@contextmanager
def organization_slot(kind: str, organization_id: int, *, limit: int, lease_s: float) -> Iterator[bool]:
    """Take one of the organisation's ``limit`` slots for ``kind`` for at most ``lease_s`` seconds; yields
    whether one was free. Released when the block ends (only the slot this call took: a lease that ran
    out and was taken by another worker is left to that worker)."""
    token = uuid.uuid4().hex
    taken = ""
    for index in range(max(1, limit)):
        key = f"arena:slot:{kind}:{organization_id}:{index}"
        if cache.add(key, token, timeout=lease_s):
            taken = key
            break
    try:
        yield bool(taken)
    finally:
        if taken and cache.get(taken) == token:
            cache.delete(taken)
