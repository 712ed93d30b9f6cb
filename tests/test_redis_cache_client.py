"""The Redis cache builds one ``redis.Redis`` per connection pool, not one per cache call, and increments a
counter in one atomic round trip.

Django's client made a new ``redis.Redis`` for every call; its constructor copies redis-py's table of response
callbacks, and a rater's cycle makes some forty cache calls: a tenth of the cycle's CPU
(``benchmarks/vote_cost.py --profile-cycle``). The shared client must stay correct under threads (ASGI runs
requests in threads of one process)."""

from __future__ import annotations

import threading
import uuid
from typing import Any

import pytest
import redis
from django.core.cache import caches

from arena.cache import FailoverRedisCache


@pytest.fixture
def redis_cache() -> FailoverRedisCache:
    cache = caches["default"]
    assert isinstance(cache, FailoverRedisCache), "the tests run with REDIS_URL (the cache is Redis)"
    return cache


def test_cache_calls_share_one_redis_client(redis_cache, monkeypatch):
    built = []
    original = redis.Redis.__init__

    def counting(self, *args, **kwargs):
        built.append(self)
        original(self, *args, **kwargs)

    monkeypatch.setattr(redis.Redis, "__init__", counting)
    key = f"shared-client-{uuid.uuid4().hex}"
    redis_cache.set(key, 1, timeout=30)
    redis_cache.get(key)
    redis_cache.incr(key)
    redis_cache.get_many([key, key + "-missing"])
    redis_cache.add(key + "-added", 1, timeout=30)
    assert redis_cache.get(key) == 2
    assert len(built) <= 1, f"{len(built)} redis.Redis built for six cache calls"
    assert redis_cache._cache.get_client() is redis_cache._cache.get_client(write=True)


def test_the_shared_client_counts_right_from_many_threads(redis_cache):
    key = f"shared-client-threads-{uuid.uuid4().hex}"
    redis_cache.set(key, 0, timeout=60)
    errors: list[BaseException] = []

    def work() -> None:
        try:
            for _ in range(50):
                redis_cache.incr(key)
                assert redis_cache.get_many([key])[key] >= 1
        except BaseException as exc:  # noqa: BLE001 - reported below, in the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert redis_cache.get(key) == 8 * 50


def _raw(redis_cache: FailoverRedisCache, key: str) -> tuple[bytes | None, int]:
    """The stored value and TTL (seconds; -1: no expiry, -2: no key) of a cache key, straight from Redis."""
    client: Any = redis_cache._cache.get_client(write=True)
    full = redis_cache.make_and_validate_key(key)
    return client.get(full), int(client.ttl(full))


def test_incr_adds_to_a_counter_and_keeps_its_expiry(redis_cache):
    key = f"incr-{uuid.uuid4().hex}"
    redis_cache.set(key, 5, timeout=120)
    assert redis_cache.incr(key) == 6
    assert redis_cache.incr(key, 10) == 16
    assert redis_cache.decr(key, 3) == 13
    assert redis_cache.get(key) == 13
    value, ttl = _raw(redis_cache, key)
    assert value == b"13" and 0 < ttl <= 120


def test_incr_of_a_missing_counter_raises_and_creates_nothing(redis_cache):
    """Django's contract (``ValueError``), and the rate limits' hygiene: an increment must never create a
    counter, or one that expired between a check and the increment would be stored with no expiry, for good."""
    key = f"incr-missing-{uuid.uuid4().hex}"
    with pytest.raises(ValueError, match="not found"):
        redis_cache.incr(key)
    assert _raw(redis_cache, key) == (None, -2)


def _commands_sent(monkeypatch) -> list[str]:
    """The names of the commands redis-py sends from now on (until the monkeypatch is undone)."""
    sent: list[str] = []
    original = redis.Redis.execute_command

    def recording(self, *args, **kwargs):
        sent.append(str(args[0]))
        return original(self, *args, **kwargs)

    monkeypatch.setattr(redis.Redis, "execute_command", recording)
    return sent


def test_incr_is_one_round_trip(redis_cache, monkeypatch):
    """The check and the increment run inside Redis as one script (atomic there): one command on the wire,
    where Django's client sent EXISTS and then INCRBY."""
    key = f"incr-trips-{uuid.uuid4().hex}"
    redis_cache.set(key, 1, timeout=60)
    redis_cache.incr(key)  # the script is loaded once per client
    sent = _commands_sent(monkeypatch)
    assert redis_cache.incr(key) == 3
    assert sent == ["EVALSHA"]


def test_rate_limit_counters_keep_their_window(redis_cache):
    """django-ratelimit's own sequence (``add`` with the window, then ``incr``) through the cache: the counter
    counts, and keeps the window's expiry."""
    key = f"rl-{uuid.uuid4().hex}"
    assert redis_cache.add(key, 1, 65) is True
    assert redis_cache.add(key, 1, 65) is False
    assert redis_cache.incr(key) == 2
    _, ttl = _raw(redis_cache, key)
    assert 0 < ttl <= 65


def test_delete_and_touch_if_value_act_only_for_the_holder_in_one_command(redis_cache, monkeypatch):
    """A lease's release and renewal (core.slots): compared with the holder's token and acted on inside Redis,
    one command on the wire, so no other holder can take the key between the comparison and the act."""
    key = f"lease-{uuid.uuid4().hex}"
    redis_cache.add(key, "mine", timeout=30)
    redis_cache.touch_if_value(key, "mine", 5)  # load the scripts once
    redis_cache.delete_if_value(key + "-other", "mine")
    sent = _commands_sent(monkeypatch)
    assert redis_cache.touch_if_value(key, "someone else", 300) is False
    assert redis_cache.delete_if_value(key, "someone else") is False
    assert redis_cache.get(key) == "mine" and 0 < _raw(redis_cache, key)[1] <= 5
    assert redis_cache.touch_if_value(key, "mine", 120) is True
    assert 60 < _raw(redis_cache, key)[1] <= 120
    assert redis_cache.delete_if_value(key, "mine") is True
    assert redis_cache.get(key) is None
    assert redis_cache.delete_if_value(key, "mine") is False  # nothing left to release
    assert [command for command in sent if command not in ("GET", "TTL")] == ["EVALSHA"] * 5


def test_delete_and_touch_if_value_on_the_local_stand_in(redis_cache, monkeypatch):
    """While Redis is unreachable the same compare-and-act runs on the process's stand-in."""
    monkeypatch.setattr(redis_cache, "_down_until", float("inf"))
    key = f"lease-local-{uuid.uuid4().hex}"
    assert redis_cache.add(key, "mine", timeout=30) is True
    assert redis_cache.delete_if_value(key, "someone else") is False
    assert redis_cache.touch_if_value(key, "mine", 60) is True
    assert redis_cache.delete_if_value(key, "mine") is True
    assert redis_cache.get(key) is None


def _connects_counted(monkeypatch) -> list[int]:
    """The TCP connections redis-py opens from now on (its ``Connection._connect``, the socket's connect)."""
    opened: list[int] = []
    original = redis.connection.Connection._connect

    def counting(self: Any) -> Any:
        opened.append(threading.get_ident())
        return original(self)

    monkeypatch.setattr(redis.connection.Connection, "_connect", counting)
    return opened


@pytest.mark.django_db(transaction=True)
def test_requests_served_in_contexts_of_their_own_reuse_the_process_connections(settings, monkeypatch):
    """core.asgi runs each sync request in a context of its own, and Django's cache handler keeps its caches
    per context: each request got a new cache instance. They must share the process's client, so twenty
    requests through the production router (two threads) open at most two connections to Redis, not one each
    (Django ticket #35651: a new pool, a TCP connect and a handshake a request)."""
    from django.core.wsgi import get_wsgi_application
    from django.http import HttpRequest, HttpResponse
    from django.urls import path

    from core.asgi import WSGIBridge
    from tests.test_asgi import _scope, _serve

    seen: list[Any] = []

    def counter(request: HttpRequest) -> HttpResponse:
        cache = caches["default"]
        assert isinstance(cache, FailoverRedisCache)
        seen.append((id(cache), cache._cache))
        cache.set("per-request-context", 1, timeout=30)
        return HttpResponse(str(cache.get("per-request-context")))

    settings.ROOT_URLCONF = type("Urls", (), {"urlpatterns": [path("count/", counter)]})
    caches["default"].get("warm")  # the process's connection exists before the count begins
    opened = _connects_counted(monkeypatch)
    app = WSGIBridge(get_wsgi_application(), threads=2)
    for _ in range(20):
        status, _, content = _serve(app, _scope("GET", "/count/"))
        assert (status, content) == (200, b"1")
    assert len({instance for instance, _ in seen}) > 1, "each request built its own cache instance"
    assert len({id(client) for _, client in seen}) == 1, "the instances share the process's client"
    assert len(opened) <= 2, f"{len(opened)} connections to Redis for 20 requests"


def _unreachable_location() -> str:
    """A Redis URL on a local port nothing listens on (unique to this call, so no other test shares its state)."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"redis://127.0.0.1:{port}/0"


def test_an_outage_and_the_stand_ins_counts_hold_for_the_process_not_for_one_request(monkeypatch, caplog):
    """Two requests' cache instances of one configuration: the first finds Redis unreachable, the second does
    not try it again within the retry pause (no second connect timeout), and a rate limit counted on the
    stand-in goes on from where the first request left it; the outage is logged once."""
    location = _unreachable_location()
    params = {"OPTIONS": {"socket_connect_timeout": 1, "socket_timeout": 1}}
    opened = _connects_counted(monkeypatch)
    caplog.set_level("WARNING", logger="arena.cache")
    first = FailoverRedisCache(location, params)
    assert first.add("rl:stand-in", 1, 60) is True and first.degraded
    second = FailoverRedisCache(location, params)
    assert second is not first and second.degraded
    assert second.add("rl:stand-in", 1, 60) is False  # the first request's counter, on the process's stand-in
    assert second.incr("rl:stand-in") == 2
    assert len(opened) == 1, "the second request tried Redis again inside the retry pause"
    assert caplog.text.count("Redis cache unreachable") == 1
    other = FailoverRedisCache(_unreachable_location(), params)  # another configuration: a state of its own
    assert not other.degraded and other._local is not first._local


def test_incr_windows_counts_every_key_in_one_command_and_each_keeps_its_window(redis_cache, monkeypatch):
    """The rate limits' counters (core.ratelimits): created at 1 with their window's expiry, incremented after,
    an existing counter keeping its own expiry; one script for all, on Redis and on the stand-in alike."""
    from django.core.cache.backends.locmem import LocMemCache

    from core.ratelimits import windows_incr

    first, second = f"rlw-{uuid.uuid4().hex}", f"rlw-{uuid.uuid4().hex}"
    redis_cache.set(second, 7, timeout=50)
    redis_cache.incr_windows([(f"rlw-load-{uuid.uuid4().hex}", 5)])  # the script is loaded once per server
    sent = _commands_sent(monkeypatch)
    assert redis_cache.incr_windows([(first, 65), (second, 3605)]) == [1, 8]
    assert sent == ["EVALSHA"]
    monkeypatch.undo()
    assert redis_cache.incr_windows([(first, 65)]) == [2]
    assert 0 < _raw(redis_cache, first)[1] <= 65 and 0 < _raw(redis_cache, second)[1] <= 50
    assert redis_cache.get(first) == 2  # a counter Django's cache reads as it reads its own

    monkeypatch.setattr(redis_cache, "_down_until", float("inf"))
    assert redis_cache.incr_windows([(first, 65), (first + "x", 65)]) == [1, 1]  # the stand-in's own counts
    assert redis_cache.incr_windows([(first, 65)]) == [2]
    monkeypatch.undo()

    local = LocMemCache(f"windows-{uuid.uuid4().hex}", {})
    assert windows_incr(local, [("a", 60), ("b", 60)]) == [1, 1]
    assert windows_incr(local, [("a", 60)]) == [2]


def test_any_key_is_stored_as_it_is_without_memcacheds_warnings(redis_cache):
    """Redis (and the stand-in) store any key: no ``CacheKeyWarning`` for keys memcached would refuse, and each
    such key round-trips, alone and in a ``get_many``."""
    import warnings

    from django.core.cache import CacheKeyWarning

    keys = [f"with space {uuid.uuid4().hex}", f"tab\t{uuid.uuid4().hex}", "long:" + "x" * 300]
    with warnings.catch_warnings():
        warnings.simplefilter("error", CacheKeyWarning)
        for i, key in enumerate(keys):
            redis_cache.set(key, i, timeout=30)
            assert redis_cache.get(key) == i
        assert redis_cache.get_many(keys) == {key: i for i, key in enumerate(keys)}
        redis_cache.delete_many(keys)
