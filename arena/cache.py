"""A Redis cache that keeps the platform answering while Redis is down.

The cache holds nothing that must survive: rate-limit counters (django-ratelimit, allauth's login
throttle), the recompute marks, and copies of rows read on every request (core.cached, which never
reads them from the local stand-in, and whose entries a new epoch retires when Redis is back).
Django's ``RedisCache`` raises on a connection error, and django-ratelimit counts before the view
runs, so a Redis restart turned every vote and next-battle request into a 500. Here a connection
error (or timeout) switches to an in-process cache for ``RETRY_S`` seconds, with a warning in the
log; limits then hold per process instead of per deployment, which is the honest degradation: votes
keep landing, a script still cannot flood one process. The first successful call after the outage
is logged too, and Redis is in charge again.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from django.core.cache.backends.locmem import LocMemCache
from django.core.cache.backends.redis import RedisCache, RedisCacheClient
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from core.cached import EPOCH_KEY
from core.ratelimits import windows_incr

logger = logging.getLogger(__name__)

_UNREACHABLE = (RedisConnectionError, RedisTimeoutError, ConnectionError, TimeoutError)


class SharedClientRedisCacheClient(RedisCacheClient):
    """Django's Redis cache client, with one ``redis.Redis`` per connection pool instead of one per operation.

    Django builds a new ``redis.Redis`` for every cache call (``get_client``), and redis-py's constructor copies
    its whole table of response callbacks into a case-insensitive dict: hundreds of entries, about 0.1-0.2 ms of
    CPU each time. A rater's cycle makes some forty cache calls (the session's and the principal's facts, the
    rate limits, the recompute's mark), so the constructor alone was a tenth of the cycle's CPU
    (``benchmarks/vote_cost.py --profile-cycle``). A ``redis.Redis`` holds no connection of its own: it takes one
    from its pool for each command, and is safe to share between threads, as the pool is; so one per pool is
    what redis-py expects.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._clients: dict[int, Any] = {}
        self._clients_lock = threading.Lock()
        self._scripts: dict[tuple[int, str], Any] = {}  # (client, source) -> its registered Lua script

    def get_client(self, key: Any = None, *, write: bool = False) -> Any:
        pool = self._get_connection_pool(write)  # type: ignore[attr-defined]  # Django's own, not in its stubs
        client = self._clients.get(id(pool))
        if client is None:
            with self._clients_lock:
                client = self._clients.get(id(pool))
                if client is None:
                    client = self._clients[id(pool)] = self._client(connection_pool=pool)  # type: ignore[attr-defined]
        return client

    def incr(self, key: Any, delta: int) -> int:
        """Add ``delta`` to an existing counter in one atomic round trip; ``ValueError`` when there is none.

        Django's client asks ``EXISTS`` and then sends ``INCRBY``: two round trips, and a counter that expires
        between them is created again by ``INCRBY`` with no expiry at all. django-ratelimit counts with ``add``
        then ``incr`` under a key that names its window, so such a key is never read again and never freed:
        Redis keeps it for good, one for each time the race is lost. Here one Lua script checks and adds inside
        Redis (a script runs atomically), so the counter keeps its expiry or is not there; and a rater's cycle,
        which makes four rate-limit increments, saves four round trips."""
        value = self._run(_INCR_EXISTING, key, delta)
        if value is None:
            raise ValueError(f"Key '{key}' not found.")
        return int(value)

    def incr_windows(self, keys: Sequence[Any], seconds: Sequence[int]) -> list[int]:
        """Count one more in each of ``keys``, in one atomic round trip: a counter that is not there is created
        at 1 with its expiry (``seconds``, the same place in the list), an existing one incremented, keeping
        its own. The rate limits of a request counted at once (core.ratelimits)."""
        return [int(count) for count in self._run_keys(_INCR_WINDOWS, keys, *seconds)]

    def delete_if_value(self, key: Any, value: Any) -> bool:
        """Delete ``key`` only while it holds ``value`` (compared inside Redis: no other holder can take the key
        between the comparison and the deletion)."""
        return bool(self._run(_DELETE_IF_VALUE, key, self._serializer.dumps(value)))  # type: ignore[attr-defined]

    def touch_if_value(self, key: Any, value: Any, timeout: float) -> bool:
        """Give ``key`` a new expiry of ``timeout`` seconds only while it holds ``value`` (compared inside Redis)."""
        milliseconds = max(1, int(timeout * 1000))
        return bool(self._run(_TOUCH_IF_VALUE, key, self._serializer.dumps(value), milliseconds))  # type: ignore[attr-defined]

    def _run(self, source: str, key: Any, *args: Any) -> Any:
        return self._run_keys(source, [key], *args)

    def _run_keys(self, source: str, keys: Sequence[Any], *args: Any) -> Any:
        client = self.get_client(keys[0], write=True)
        script = self._scripts.get((id(client), source))
        if script is None:
            script = self._scripts[(id(client), source)] = client.register_script(source)
        return script(keys=list(keys), args=list(args), client=client)


# A lease released or renewed only by its holder (the token it stored), compared inside Redis.
_DELETE_IF_VALUE = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0"
_TOUCH_IF_VALUE = (
    "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end return 0"
)
# Each key counted once more; one created by this INCR (1) gets its window's expiry at once, inside the script.
_INCR_WINDOWS = """
local counts = {}
for i, key in ipairs(KEYS) do
  local count = redis.call('INCR', key)
  if count == 1 then redis.call('EXPIRE', key, ARGV[i]) end
  counts[i] = count
end
return counts
"""
# INCRBY only where the key exists (nil otherwise): a counter is never created without its expiry.
_INCR_EXISTING = (
    "if redis.call('EXISTS', KEYS[1]) == 1 then return redis.call('INCRBY', KEYS[1], ARGV[1]) end return false"
)


@dataclass
class _ProcessCache:
    """What this process keeps of one configured cache, whichever request asked for it first: Django's Redis
    client (with its connection pool), the local stand-in, and whether Redis is down."""

    client: SharedClientRedisCacheClient
    local: LocMemCache
    state: threading.Lock = field(default_factory=threading.Lock)
    local_lock: threading.Lock = field(default_factory=threading.Lock)
    down_until: float = 0.0
    down: bool = False


_PROCESS_CACHES: dict[tuple[str, str], _ProcessCache] = {}
_PROCESS_CACHES_LOCK = threading.Lock()


class FailoverRedisCache(RedisCache):
    """Django's Redis cache with a local stand-in while Redis is unreachable, and one client, connection pool,
    stand-in and outage state a process for each configured cache.

    Django's cache handler keeps a cache instance per asgiref ``Local``, which follows the *context*, not the
    thread, and every request served through ``core.asgi`` (or Django's ASGI handler) runs in a context of its
    own. So each request built a new cache: a new connection pool, a new TCP connection to Redis with its
    handshake at the request's first cache call, closed again when the instance was collected (Django ticket
    #35651); the load benchmark's profile of the web workers found a tenth of their samples there. It also
    made the stand-in and the outage state last one request: while Redis was down every request tried it
    again (and waited for the connect timeout), and a rate limit counted on the stand-in started from zero on
    each request. Here each instance is a thin view of the process's ``_ProcessCache`` for its location and
    options: connections are reused across requests, and the outage, its pause and the stand-in's counts
    hold for the whole process, as they were meant to."""

    # Seconds the local cache answers after a failure before Redis is tried again (a down Redis costs
    # each request nothing then; a Redis that drops packets would cost a connect timeout each time).
    RETRY_S = 5.0

    def __init__(self, server: str, params: dict[str, Any]) -> None:
        super().__init__(server, params)
        servers: list[str] = self._servers  # type: ignore[attr-defined]  # Django's, not in its stubs
        options: dict[str, Any] = self._options  # type: ignore[attr-defined]
        key = (repr(servers), repr(sorted(options.items())))
        process = _PROCESS_CACHES.get(key)
        if process is None:
            with _PROCESS_CACHES_LOCK:
                process = _PROCESS_CACHES.get(key)
                if process is None:
                    name = "arena-failover-" + hashlib.sha256(repr(key).encode()).hexdigest()[:16]
                    process = _PROCESS_CACHES[key] = _ProcessCache(
                        client=SharedClientRedisCacheClient(servers, **options),
                        local=LocMemCache(name, {"OPTIONS": {"MAX_ENTRIES": 100_000}}),
                    )
        self._process = process
        self._local = process.local
        self._state = process.state
        self._local_lock = process.local_lock

    @cached_property
    def _cache(self) -> SharedClientRedisCacheClient:  # Django's builds a client for each instance
        return self._process.client

    @property
    def _down(self) -> bool:
        return self._process.down

    @_down.setter
    def _down(self, value: bool) -> None:
        self._process.down = value

    @property
    def _down_until(self) -> float:
        return self._process.down_until

    @_down_until.setter
    def _down_until(self, value: float) -> None:
        self._process.down_until = value

    @property
    def degraded(self) -> bool:
        """True while the local cache stands in for Redis."""
        return self._down

    def validate_key(self, key: str) -> None:
        """No check. Django's base warns of keys that memcached could not store (longer than 250 characters,
        with spaces or control characters: ``CacheKeyWarning``), by walking every character of every key on
        every call, half a dozen keys a request; Redis, and the local stand-in, store any key as it is."""

    def _call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        """Django's cache operation ``name`` on Redis, or on the local stand-in while Redis is unreachable."""
        return self._call_with(
            lambda: getattr(super(FailoverRedisCache, self), name)(*args, **kwargs),
            lambda: getattr(self._local, name)(*args, **kwargs),
        )

    def _call_with(self, on_redis: Callable[[], Any], on_local: Callable[[], Any]) -> Any:
        if time.monotonic() >= self._down_until:
            try:
                if self._down:
                    # Back after an outage, in which this process's drops of core.cached's facts went to the
                    # local cache: before anything is read from Redis again, a new epoch retires them all.
                    super().set(EPOCH_KEY, uuid.uuid4().hex, timeout=None)
                result = on_redis()
            except _UNREACHABLE as exc:
                with self._state:
                    self._down_until = time.monotonic() + self.RETRY_S
                    first = not self._down
                    self._down = True
                if first:
                    logger.warning(
                        "Redis cache unreachable (%s: %s): rate limits and marks are local to this "
                        "process until it is back",
                        type(exc).__name__,
                        exc,
                    )
            else:
                if self._down:
                    with self._state:
                        was_down, self._down = self._down, False
                    if was_down:
                        logger.warning("Redis cache reachable again: rate limits are shared again")
                return result
        return on_local()

    def add(self, *args: Any, **kwargs: Any) -> Any:
        return self._call("add", *args, **kwargs)

    def get(self, *args: Any, **kwargs: Any) -> Any:
        return self._call("get", *args, **kwargs)

    def set(self, *args: Any, **kwargs: Any) -> Any:
        return self._call("set", *args, **kwargs)

    def touch(self, *args: Any, **kwargs: Any) -> Any:
        return self._call("touch", *args, **kwargs)

    def delete(self, *args: Any, **kwargs: Any) -> Any:
        return self._call("delete", *args, **kwargs)

    def get_many(self, *args: Any, **kwargs: Any) -> Any:
        return self._call("get_many", *args, **kwargs)

    def has_key(self, *args: Any, **kwargs: Any) -> Any:
        return self._call("has_key", *args, **kwargs)

    def incr(self, *args: Any, **kwargs: Any) -> Any:
        return self._call("incr", *args, **kwargs)

    def set_many(self, *args: Any, **kwargs: Any) -> Any:
        return self._call("set_many", *args, **kwargs)

    def delete_many(self, *args: Any, **kwargs: Any) -> Any:
        return self._call("delete_many", *args, **kwargs)

    def clear(self) -> Any:
        return self._call("clear")

    def delete_if_value(self, key: Any, value: Any, version: int | None = None) -> bool:
        """Delete ``key`` only while it holds ``value``, atomically: what a lease's holder releases with (one who
        compared and then deleted could delete the lease another holder took in between)."""
        return bool(
            self._call_with(
                lambda: self._shared.delete_if_value(self.make_and_validate_key(key, version=version), value),
                lambda: self._local_if_value(key, version, value, lambda: self._local.delete(key, version=version)),
            )
        )

    def touch_if_value(self, key: Any, value: Any, timeout: float, version: int | None = None) -> bool:
        """Renew ``key``'s expiry only while it holds ``value``, atomically."""
        return bool(
            self._call_with(
                lambda: self._shared.touch_if_value(self.make_and_validate_key(key, version=version), value, timeout),
                lambda: self._local_if_value(
                    key, version, value, lambda: self._local.touch(key, timeout=timeout, version=version)
                ),
            )
        )

    def incr_windows(self, counters: Sequence[tuple[Any, int]]) -> list[int]:
        """Count one more in each counter ``(key, seconds)``: created at 1 with that expiry where it is not there,
        else incremented, keeping its expiry; the counts after. One round trip to Redis for them all; on the
        stand-in, core.ratelimits' add-or-increment under one lock."""
        if not counters:
            return []

        def on_local() -> list[int]:
            with self._local_lock:
                return windows_incr(self._local, counters)

        return list(
            self._call_with(
                lambda: self._shared.incr_windows(
                    [self.make_and_validate_key(key) for key, _ in counters], [int(seconds) for _, seconds in counters]
                ),
                on_local,
            )
        )

    @property
    def _shared(self) -> SharedClientRedisCacheClient:
        """Django's client of this cache: the process's, which ``__init__`` found or made."""
        return self._process.client

    def _local_if_value(self, key: Any, version: int | None, value: Any, act: Callable[[], Any]) -> bool:
        """The stand-in's compare-and-act: the comparison and the act under one lock (one process, threads)."""
        with self._local_lock:
            if self._local.get(key, version=version) != value:
                return False
            return bool(act())
