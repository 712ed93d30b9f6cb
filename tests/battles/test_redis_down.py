"""Redis down: votes keep landing.

The attack (measured: 11 of 11 vote and next-battle requests answered 500 during a 4 s Redis restart):
django-ratelimit counts in the cache before the view runs, and the cache raised on the connection
error. Here a real Redis server, started by the test on its own port as the cache and the Celery
broker, is stopped while a rater works and started again: every request is answered, the rate limit
holds per process while Redis is away (and the log says so), and once Redis is back the recompute of
the votes cast meanwhile is scheduled (by beat's safety net, or the next vote)."""

from __future__ import annotations

import logging
import socket
import subprocess
import time
from collections.abc import Iterator

import pytest
import redis

from arena.cache import FailoverRedisCache
from battles.models import Vote
from tests.conftest import start_battle
from tests.factories import PASSWORD

pytestmark = pytest.mark.server


class RedisServer:
    def __init__(self) -> None:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = sock.getsockname()[1]
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.process = subprocess.Popen(
            ["redis-server", "--bind", "127.0.0.1", "--port", str(self.port), "--save", "", "--appendonly", "no"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        client = redis.Redis(port=self.port)
        for _ in range(100):
            try:
                if client.ping():
                    return
            except redis.ConnectionError:
                time.sleep(0.05)
        raise AssertionError("redis-server did not start")

    def stop(self) -> None:
        assert self.process is not None
        self.process.terminate()
        self.process.wait(timeout=10)
        self.process = None

    def queued(self) -> int:
        """Recomputes waiting on the broker (their own queue: core/queues.py)."""
        from core import queues

        return int(redis.Redis(port=self.port).llen(queues.RECOMPUTE))  # type: ignore[arg-type]  # sync client


@pytest.fixture
def own_redis(settings, monkeypatch) -> Iterator[RedisServer]:
    """A Redis of this test's own as the cache and the Celery broker (never the shared one)."""
    from arena.celery import app

    server = RedisServer()
    server.start()
    monkeypatch.setattr(FailoverRedisCache, "RETRY_S", 0.5)
    settings.CACHES = {
        "default": {
            "BACKEND": "arena.cache.FailoverRedisCache",
            "LOCATION": server.url,
            "OPTIONS": {"socket_connect_timeout": 1, "socket_timeout": 1},
        }
    }

    def use_broker(url: str | None) -> None:
        # kombu keeps one pool per broker URL for the process: drop the app's references only (closing
        # the suite's pool would break every later publish); this test's own pool is closed at the end.
        app._pool = None  # type: ignore[attr-defined]
        app.amqp._producer_pool = None  # type: ignore[attr-defined]
        app.conf.update(broker_write_url=url)  # publishing goes to the write URL (None: back to broker_url)

    use_broker(server.url)
    yield server
    own_pool = app._pool  # type: ignore[attr-defined]
    use_broker(None)
    if own_pool is not None:
        own_pool.force_close_all()
    if server.process is not None:
        server.stop()


@pytest.mark.triton
def test_votes_keep_landing_while_redis_restarts(
    vote_log_purge, triton_server, own_redis, acme, bob, bob_client, settings, caplog
):
    settings.RATELIMIT_ENABLE = True
    settings.ARENA_RANKING_DEBOUNCE_S = 30
    campaign = acme.campaign
    caplog.set_level(logging.WARNING)

    battle, _ = start_battle(bob_client, campaign)
    assert bob_client.post(f"/b/{battle.pk}/vote/", {"choice": "left"}).status_code == 302
    assert own_redis.queued() == 1  # the vote's recompute went to the broker

    own_redis.stop()
    # The rater goes on: next battle, vote, log in again, all answered.
    started = time.monotonic()
    battle, _ = start_battle(bob_client, campaign)
    assert bob_client.post(f"/b/{battle.pk}/vote/", {"choice": "right"}).status_code == 302
    assert Vote.objects.filter(campaign=campaign).count() == 2
    assert time.monotonic() - started < 10
    assert "Redis cache unreachable" in caplog.text
    # The recompute could not be queued (the broker is down too): said in the log, not raised.
    assert any(record.levelno >= logging.ERROR and "receiver" in record.getMessage() for record in caplog.records)
    from django.test import Client

    assert Client().post("/accounts/login/", {"login": bob.email, "password": PASSWORD}).status_code == 302

    # The limit still holds, per process: 3 next-battle requests an hour, the fourth is refused. (An hour, not a
    # minute: django-ratelimit's windows are fixed, so a window that ends between the third and the fourth
    # request, as one a minute long did once on a busy machine, would let the fourth through.)
    settings.ARENA_BATTLE_RATE = "3/h"
    answers = [bob_client.post(f"/c/{campaign.pk}/next/").status_code for _ in range(4)]
    assert answers[:3] == [302, 302, 302] and answers[3] == 429, answers

    own_redis.start()  # back, empty: the queued task of the first vote is gone with it
    time.sleep(0.6)  # past the failover's retry pause
    from ranking.services import leaderboards_schedule_open_campaigns

    assert leaderboards_schedule_open_campaigns() == 1  # what beat runs: both votes get their recompute
    assert own_redis.queued() == 1
    assert "Redis cache reachable again" in caplog.text
    # Rate limits count in Redis again.
    assert bob_client.post(f"/c/{campaign.pk}/next/").status_code == 302
    keys: list[bytes] = redis.Redis(port=own_redis.port).keys("*")  # type: ignore[assignment]  # sync client
    assert any(b"rl:" in key for key in keys)


def test_a_claimed_buffer_battle_is_answered_while_the_broker_is_down(
    own_redis, acme, bob, bob_client, django_capture_on_commit_callbacks, caplog
):
    """The claim asks a worker to refill the buffer; with the broker down that request used to raise when
    the transaction committed, and the rater's next battle answered 500. Now the rater gets the battle and
    the log says the refill was not queued (beat's maintenance asks again)."""
    from django.utils import timezone

    from battles.models import Battle, Campaign, Prompt

    Campaign.objects.filter(pk=acme.campaign.pk).update(buffer_size=2)
    ready = Battle.objects.create(
        organization=acme.organization,
        campaign=acme.campaign,
        prompt=Prompt.objects.filter(campaign=acme.campaign).earliest("pk"),
        left=acme.left,
        right=acme.right,
        status=Battle.Status.READY,
        ready_at=timezone.now(),
    )
    own_redis.stop()
    caplog.set_level(logging.ERROR)
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        response = bob_client.post(f"/c/{acme.campaign.pk}/next/")
    assert response.status_code == 302 and response["Location"] == f"/b/{ready.pk}/"
    assert Battle.objects.get(pk=ready.pk).rater == bob
    assert callbacks  # the refill was asked for, on commit
    assert "task battles.tasks.buffer_fill_task not queued: the broker is unreachable" in caplog.text
