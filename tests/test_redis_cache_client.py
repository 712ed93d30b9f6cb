"""The Redis cache builds one ``redis.Redis`` per connection pool, not one per cache call.

Django's client made a new ``redis.Redis`` for every call; its constructor copies redis-py's table of response
callbacks, and a rater's cycle makes some forty cache calls: a tenth of the cycle's CPU
(``benchmarks/vote_cost.py --profile-cycle``). The shared client must stay correct under threads (ASGI runs
requests in threads of one process)."""

from __future__ import annotations

import threading
import uuid

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
