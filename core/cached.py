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

Within one request each fact is read once. ``CachedFactsMiddleware`` opens a memo for the request: a fact read
(or fetched ``along`` with another in the same round trip) is kept there and answered from it for the rest of
the request, and dropped from it by ``cached_fact_drop`` like the shared entry. A rater's request reads its
session, then in one round trip its user with every fact keyed by that user (``raters.hooks.user_fact_keys``:
the organisations, the study participation), not one round trip each. A request sees its facts as they were
when it first read them, as it would with the database rows it read then; the values are read-only.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, TypeVar

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from django.core.cache import cache
from django.db import transaction

T = TypeVar("T")

EPOCH_KEY = "arena:fact:epoch"
# An entry's and a version's life. Short enough to bound what no drop can reach (a Redis that restarts from
# its append-only file may have lost the last second's writes, drops included, and no process need notice the
# restart to renew the epoch), long enough that a rater's every request is answered from it.
TIMEOUT_S = 600


# The request's memo: key -> value, or None outside a request (every read then goes to the cache).
_memo: ContextVar[dict[str, Any] | None] = ContextVar("arena_cached_facts", default=None)


@contextmanager
def cached_facts_kept() -> Iterator[None]:
    """Within this block (one request) each fact is read from the cache once (see the module's notes)."""
    token = _memo.set({})
    try:
        yield
    finally:
        _memo.reset(token)


class CachedFactsMiddleware:
    """Opens ``cached_facts_kept`` around the request; place it before the session middleware. Sync and async
    (the memo is a context variable, which ``sync_to_async`` threads share)."""

    sync_capable = True
    async_capable = True

    def __init__(self, get_response: Callable[[Any], Any]) -> None:
        self.get_response = get_response
        self.is_async = iscoroutinefunction(get_response)
        if self.is_async:
            markcoroutinefunction(self)

    def __call__(self, request: Any) -> Any:
        if self.is_async:
            return self.__acall__(request)
        with cached_facts_kept():
            return self.get_response(request)

    async def __acall__(self, request: Any) -> Any:
        with cached_facts_kept():
            return await self.get_response(request)


def _degraded() -> bool:
    return bool(getattr(cache, "degraded", False))


def _token() -> str:
    return secrets.token_hex(8)


def cached_fact(
    key: str,
    load: Callable[[], T],
    *,
    timeout_s: int = TIMEOUT_S,
    keep_none: bool = True,
    along: Iterable[str] = (),
) -> T:
    """``load()``'s value for ``key``, from the cache when an entry stored since the last drop is there.
    ``timeout_s``: how long an entry and its version live; ``keep_none``: False, a None is not stored (where
    a caller can name keys at will, as a session cookie does, a miss must not fill the cache); ``along``: the
    keys of facts this request will read next, fetched in the same round trip and kept in the request's memo
    where their entries are current (outside a request they are not fetched)."""
    memo = _memo.get()
    if memo is not None and key in memo:
        return memo[key]  # type: ignore[no-any-return]
    version_key = f"{key}:v"
    others = [other for other in along if other not in memo and other != key] if memo is not None else []
    got = cache.get_many([EPOCH_KEY, version_key, key, *(name for other in others for name in (f"{other}:v", other))])
    if _degraded():  # this call was answered by the local stand-in (Redis is away): the database answers
        return load()
    epoch, version, entry = got.get(EPOCH_KEY), got.get(version_key), got.get(key)
    if memo is not None and epoch is not None:
        for other in others:
            other_version, other_entry = got.get(f"{other}:v"), got.get(other)
            if other_version is not None and other_entry is not None and other_entry[0] == (epoch, other_version):
                memo[other] = other_entry[1]
    if epoch is not None and version is not None and entry is not None and entry[0] == (epoch, version):
        if memo is not None:
            memo[key] = entry[1]
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
    if memo is not None:
        memo[key] = value
    return value


def _drop(keys: tuple[str, ...]) -> None:
    cache.set_many({f"{key}:v": _token() for key in keys}, timeout=TIMEOUT_S)


def cached_fact_drop(*keys: str) -> None:
    """The facts behind ``keys`` changed: now (for this transaction's own later reads) and on commit (for
    what other requests stored meanwhile from the rows as they were)."""
    if not keys:
        return
    memo = _memo.get()
    if memo is not None:
        for key in keys:
            memo.pop(key, None)
    _drop(keys)
    transaction.on_commit(lambda: _drop(keys))


def cached_epoch_renew(*_: Any) -> None:
    """Retire every entry (Redis is back after an outage in which drops may have gone to the stand-in)."""
    memo = _memo.get()
    if memo is not None:
        memo.clear()
    cache.set(EPOCH_KEY, _token(), timeout=None)
