"""Rate limits on next-battle and vote per account and per network address (the client behind the
trusted proxies): each key holds on its own, the answer is a clear 429, and nothing is lost by it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.core.cache import cache
from django.test import Client
from django.urls import resolve, reverse

from battles.models import Battle, Vote
from tests.battles.test_gold import _configure, _rater, _shadow
from tests.conftest import Tenant, login

pytestmark = [pytest.mark.django_db]


@pytest.fixture
def limits(settings) -> Iterator[object]:  # type: ignore[no-untyped-def]
    cache.clear()
    settings.RATELIMIT_ENABLE = True
    yield settings
    cache.clear()


def _next(client: Client, tenant: Tenant, address: str, forwarded: str | None = None):  # type: ignore[no-untyped-def]
    if forwarded is None:
        return client.post(reverse("battles:next", args=[tenant.campaign.pk]), REMOTE_ADDR=address)
    return client.post(
        reverse("battles:next", args=[tenant.campaign.pk]), REMOTE_ADDR=address, HTTP_X_FORWARDED_FOR=forwarded
    )


def test_next_battle_is_limited_per_address_across_accounts(acme: Tenant, bob, limits) -> None:  # type: ignore[no-untyped-def]
    limits.ARENA_BATTLE_RATE = "100/h"
    limits.ARENA_BATTLE_IP_RATE = "3/h"  # an hour-long window: the test cannot straddle a reset
    _shadow(acme, 10)
    _configure(acme)
    accounts = [login(bob)] + [login(_rater(acme, f"sock{i}@acme.test")) for i in range(3)]
    codes = [_next(client, acme, "203.0.113.7").status_code for client in accounts]
    # Three accounts from one address get their battle; the fourth, a new account, does not.
    assert codes == [302, 302, 302, 429]
    # Another address is counted on its own.
    assert _next(accounts[3], acme, "198.51.100.2").status_code == 302


def test_next_battle_is_limited_per_account_across_addresses(acme: Tenant, bob, limits) -> None:  # type: ignore[no-untyped-def]
    limits.ARENA_BATTLE_RATE = "3/h"
    limits.ARENA_BATTLE_IP_RATE = "100/h"
    _shadow(acme, 10)
    _configure(acme)
    client = login(bob)
    codes = [_next(client, acme, f"203.0.113.{i}").status_code for i in range(1, 5)]
    assert codes == [302, 302, 302, 429]  # a new address does not reset one account's budget


def test_the_address_is_the_client_behind_the_trusted_proxies(acme: Tenant, bob, limits) -> None:  # type: ignore[no-untyped-def]
    limits.ARENA_TRUSTED_PROXIES = ["10.0.0.1"]
    limits.ARENA_BATTLE_RATE = "100/h"
    limits.ARENA_BATTLE_IP_RATE = "2/h"
    _shadow(acme, 10)
    _configure(acme)
    clients = [login(bob)] + [login(_rater(acme, f"p{i}@acme.test")) for i in range(3)]

    def through_proxy(client: Client, forwarded: str) -> int:
        # Every request reaches the app from the proxy's address; the client's is what the proxy appended.
        return _next(client, acme, "10.0.0.1", forwarded).status_code

    # Two clients behind the one proxy are two addresses; an entry the client wrote itself (on the left)
    # does not make it a new one.
    assert through_proxy(clients[0], "203.0.113.7") == 302
    assert through_proxy(clients[1], "1.2.3.4, 203.0.113.7") == 302
    assert through_proxy(clients[2], "5.6.7.8, 203.0.113.7") == 429
    assert through_proxy(clients[3], "198.51.100.9") == 302


def test_a_vote_refused_at_the_limit_loses_nothing(acme: Tenant, bob, limits) -> None:  # type: ignore[no-untyped-def]
    limits.ARENA_VOTE_RATE = "100/h"
    limits.ARENA_VOTE_IP_RATE = "2/h"
    _shadow(acme, 10)
    _configure(acme)
    client = login(bob)
    vote_url = ""
    for _ in range(2):
        location = _next(client, acme, "203.0.113.7")["Location"]
        client.get(location, REMOTE_ADDR="203.0.113.7")
        battle_id = resolve(location).kwargs["battle_id"]
        vote_url = reverse("battles:vote", args=[battle_id])
        if Battle.objects.get(pk=battle_id).status == Battle.Status.READY:
            assert client.post(vote_url, {"choice": "left"}, REMOTE_ADDR="203.0.113.7").status_code == 302
    location = _next(client, acme, "203.0.113.7")["Location"]
    client.get(location, REMOTE_ADDR="203.0.113.7")
    battle_id = resolve(location).kwargs["battle_id"]
    vote_url = reverse("battles:vote", args=[battle_id])
    refused = client.post(vote_url, {"choice": "right"}, REMOTE_ADDR="203.0.113.7")
    assert refused.status_code == 429 and refused["Retry-After"] == "60"
    page = refused.content.decode()
    assert "nothing is lost" in page and "send it again" in page
    # The battle is still open and no vote was stored; the same vote goes through once the limit allows.
    assert Battle.objects.get(pk=battle_id).status == Battle.Status.READY
    assert not Vote.objects.filter(battle_id=battle_id).exists()
    cache.clear()
    assert client.post(vote_url, {"choice": "right"}, REMOTE_ADDR="203.0.113.7").status_code == 302
    assert Vote.objects.get(battle_id=battle_id).choice == "right"


def test_a_typed_prompt_refused_at_the_limit_is_kept(acme: Tenant, bob, limits) -> None:  # type: ignore[no-untyped-def]
    limits.ARENA_BATTLE_IP_RATE = "1/h"
    _configure(acme, allow_rater_prompts=True)
    client = login(bob)
    _next(client, acme, "203.0.113.7")
    refused = client.post(
        reverse("battles:next", args=[acme.campaign.pk]), {"prompt": "How do tides work?"}, REMOTE_ADDR="203.0.113.7"
    )
    assert refused.status_code == 429
    assert client.session[f"arena.prompt_draft.{acme.campaign.pk}"] == "How do tides work?"


def test_an_empty_address_rate_is_no_limit(acme: Tenant, bob, limits) -> None:  # type: ignore[no-untyped-def]
    limits.ARENA_BATTLE_RATE = "100/h"
    limits.ARENA_BATTLE_IP_RATE = ""
    _shadow(acme, 10)
    _configure(acme)
    accounts = [login(bob)] + [login(_rater(acme, f"n{i}@acme.test")) for i in range(4)]
    assert {_next(client, acme, "203.0.113.7").status_code for client in accounts} == {302}


def test_address_rates_are_validated(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from arena.settings.env import ImproperEnvironment, env_rate

    monkeypatch.setenv("X_RATE", "120 per minute")
    with pytest.raises(ImproperEnvironment, match="X_RATE"):
        env_rate("X_RATE", "30/m")
    monkeypatch.setenv("X_RATE", "10/5m")
    assert env_rate("X_RATE", "30/m") == "10/5m"
    monkeypatch.setenv("X_RATE", "")
    assert env_rate("X_RATE", "30/m") == ""


def test_a_requests_limits_are_counted_in_one_round_trip_on_django_ratelimits_own_counters(  # type: ignore[no-untyped-def]
    acme: Tenant, bob, limits, monkeypatch
) -> None:
    """core.ratelimits: the account's and the address's limits of a next-battle request reach Redis as one
    script (no add-then-incr a limit), and they are django-ratelimit's counters: its ``get_usage`` reads 1 on
    each, and each lives for its window."""
    import redis
    from django.core.cache import caches
    from django.test import RequestFactory
    from django_ratelimit.core import get_usage

    from arena.cache import FailoverRedisCache

    redis_cache = caches["default"]
    assert isinstance(redis_cache, FailoverRedisCache), "the tests run with REDIS_URL (the cache is Redis)"
    limits.ARENA_BATTLE_RATE = "100/h"
    limits.ARENA_BATTLE_IP_RATE = "50/h"
    _shadow(acme, 10)
    _configure(acme)
    client = login(bob)
    redis_cache.incr_windows([(f"rl-load-{bob.pk}", 5)])  # the script is loaded once per server
    sent: list[tuple[Any, ...]] = []
    original = redis.Redis.execute_command

    def recording(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        sent.append(args)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(redis.Redis, "execute_command", recording)
    assert _next(client, acme, "198.51.100.7").status_code == 302
    monkeypatch.undo()
    counted = [args for args in sent if any(b"rl:" in str(arg).encode() for arg in args)]
    assert [str(args[0]) for args in counted] == ["EVALSHA"], counted  # one command, both limits
    assert int(counted[0][2]) == 2  # its two keys

    request = RequestFactory().post("/", REMOTE_ADDR="198.51.100.7")
    request.user = bob
    for group, key, rate in (("battles.views.battle_next", "user", "100/h"), ("battles.next.ip", "ip", "50/h")):
        usage = get_usage(request, group=group, key=key, rate=rate, increment=False)
        assert usage is not None and usage["count"] == 1, (group, usage)
    client_ = redis_cache._cache.get_client(write=True)
    for full in counted[0][3:5]:
        assert 0 < int(client_.ttl(full)) <= 3600 + 5  # the window and django-ratelimit's 5 s beyond it


def test_while_redis_is_away_the_limits_still_count_on_the_process_stand_in(  # type: ignore[no-untyped-def]
    acme: Tenant, bob, limits, monkeypatch
) -> None:
    limits.ARENA_BATTLE_RATE = "100/h"
    limits.ARENA_BATTLE_IP_RATE = "2/h"
    _shadow(acme, 10)
    _configure(acme)
    from django.core.cache import caches

    monkeypatch.setattr(caches["default"], "_down_until", float("inf"))  # Redis unreachable: the stand-in answers
    clients = [login(bob)] + [login(_rater(acme, f"away{i}@acme.test")) for i in range(2)]
    assert [_next(c, acme, "203.0.113.77").status_code for c in clients] == [302, 302, 429]
