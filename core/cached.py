"""Facts read on every request, kept in the shared cache (Redis) and dropped the moment their rows change.

A rater's cycle read the same few rows on each of its three requests (the user, their memberships, whether
they are a study participant, whether their organisation has webhooks): each an ORM statement of 1-2 ms of
Python. ``cached_fact`` answers them from one round trip to Redis instead, and ``cached_fact_drop`` (called
on every change of those rows: signals, and the few ``update()`` calls that bypass them) makes the next
read go to the database, in this process and every other.

Correct under races, not only in the common case. Each fact has a *version* key next to it, and an entry
is stored tagged with the version its reader saw *before* it read the database; a drop writes a new
version. A reader that loaded the old rows while a change committed stores an entry under a version that
is already stale, so nobody uses it. A drop happens at once and again when the transaction commits (a
reader between the two loads the rows as committed then, and the second drop retires what it stored).

Never from the in-process stand-in. While Redis is unreachable ``arena.cache.FailoverRedisCache`` answers
from a local cache that other processes cannot drop: every fact is then read from the database, and a drop
that could not reach Redis is made good when Redis is back, by a new *epoch* (``cached_epoch_renew``) that
retires every entry stored before it.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from typing import Any, TypeVar

from django.core.cache import cache
from django.db import transaction

T = TypeVar("T")

EPOCH_KEY = "arena:fact:epoch"
# An entry's and a version's life. Short enough to bound what no drop can reach (a Redis that restarts from
# its append-only file may have lost the last second's writes, drops included, and no process need notice the
# restart to renew the epoch), long enough that a rater's every request is answered from it.
TIMEOUT_S = 600


def _degraded() -> bool:
    return bool(getattr(cache, "degraded", False))


def _token() -> str:
    return secrets.token_hex(8)


def cached_fact(key: str, load: Callable[[], T], *, timeout_s: int = TIMEOUT_S, keep_none: bool = True) -> T:
    """``load()``'s value for ``key``, from the cache when an entry stored since the last drop is there.
    ``timeout_s``: how long an entry and its version live; ``keep_none``: False, a None is not stored (where
    a caller can name keys at will, as a session cookie does, a miss must not fill the cache)."""
    version_key = f"{key}:v"
    got = cache.get_many([EPOCH_KEY, version_key, key])
    if _degraded():  # this call was answered by the local stand-in (Redis is away): the database answers
        return load()
    epoch, version, entry = got.get(EPOCH_KEY), got.get(version_key), got.get(key)
    if epoch is not None and version is not None and entry is not None and entry[0] == (epoch, version):
        return entry[1]  # type: ignore[no-any-return]
    if epoch is None:
        cache.add(EPOCH_KEY, _token(), timeout=None)
        epoch = cache.get(EPOCH_KEY)
    if version is None:
        cache.add(version_key, _token(), timeout=timeout_s)
        version = cache.get(version_key)
    value = load()  # after the version was read: a change committed meanwhile has written a newer one
    if epoch is not None and version is not None and not _degraded() and (keep_none or value is not None):
        cache.set(key, ((epoch, version), value), timeout=timeout_s)
    return value


def _drop(keys: tuple[str, ...]) -> None:
    cache.set_many({f"{key}:v": _token() for key in keys}, timeout=TIMEOUT_S)


def cached_fact_drop(*keys: str) -> None:
    """The facts behind ``keys`` changed: now (for this transaction's own later reads) and on commit (for
    what other requests stored meanwhile from the rows as they were)."""
    if not keys:
        return
    _drop(keys)
    transaction.on_commit(lambda: _drop(keys))


def cached_epoch_renew(*_: Any) -> None:
    """Retire every entry (Redis is back after an outage in which drops may have gone to the stand-in)."""
    cache.set(EPOCH_KEY, _token(), timeout=None)
