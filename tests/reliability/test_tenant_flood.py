"""One tenant must never slow another: an organisation floods its slow webhook receiver while another
organisation's leaderboard is recomputed and its own webhook sent, with the Celery workers exactly as
docker/compose.yaml runs them (one per queue: tests/compose_workers.py) on the real Redis broker.

Before the queues were split, deliveries and recomputes shared the default queue: 60 pings to a slow
receiver delayed another organisation's board from 6.5 s to 94.5 s (issue 21)."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection

from ranking.models import LeaderboardSnapshot
from ranking.services import leaderboards_schedule
from raters import services
from raters.models import WebhookDelivery, WebhookEvent
from raters.tenancy import scopes_disabled
from tests.compose_workers import broker_purge, worker_argv, worker_environment

from ..raters.webhook_receiver import Receiver, receiver_running

pytestmark = [pytest.mark.server, pytest.mark.reliability]

ROOT = Path(__file__).resolve().parents[2]
DEBOUNCE_S = 2
SLOW_S = 4.0
FLOOD = 40


@pytest.fixture
def compose_workers(transactional_db: None, settings) -> Iterator[list[subprocess.Popen[str]]]:  # type: ignore[no-untyped-def]
    if not settings.REDIS_URL or connection.vendor != "postgresql":
        pytest.fail("the workers share the test database and the broker: run with PostgreSQL and Redis (scripts/test)")
    broker_purge()  # nothing stale from earlier runs
    database = connection.settings_dict
    env = {
        **os.environ,
        "DATABASE_URL": f"postgres://{database['USER']}@{database['HOST']}:{database['PORT']}/{database['NAME']}",
        "REDIS_URL": str(settings.REDIS_URL),
        "DJANGO_SETTINGS_MODULE": "arena.settings.local",
        "ARENA_WEBHOOK_HOSTS": "127.0.0.1",
        "ARENA_WEBHOOK_TIMEOUT_S": "30",
        "ARENA_RANKING_DEBOUNCE_S": str(DEBOUNCE_S),
    }
    settings.ARENA_RANKING_DEBOUNCE_S = DEBOUNCE_S  # the countdown is set where the vote is taken
    # The compose defaults, smaller for a 2-core machine: one recompute process, four delivery threads
    # (each organisation may hold two of them: ARENA_WEBHOOK_ORG_CONCURRENCY's default).
    variables = {"WORKER_CONCURRENCY": "1", "DELIVERY_CONCURRENCY": "4"}
    processes = [
        subprocess.Popen(
            worker_argv(service, variables, hostname=f"flood-{service}-{time.time_ns()}@%h"),
            cwd=ROOT,
            env={**env, **worker_environment(service, variables)},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for service in ("worker", "delivery")  # the two this test needs; generator and exporter idle here
    ]
    yield processes
    for process in processes:  # the flood's senders would finish their drains first on a warm shutdown
        process.kill()
        process.wait(timeout=20)


def _wait_for(condition: Callable[[], bool], workers: list[subprocess.Popen[str]], what: str, seconds: float) -> float:
    started = time.monotonic()
    while time.monotonic() - started < seconds:
        if condition():
            return time.monotonic() - started
        for worker in workers:
            if worker.poll() is not None:
                pytest.fail("a worker exited:\n" + (worker.stdout.read() if worker.stdout else ""))
        time.sleep(0.1)
    for worker in workers:
        worker.terminate()
    logs = "\n---\n".join(worker.communicate()[0] or "" for worker in workers)
    pytest.fail(f"{what} not within {seconds} s; worker logs:\n{logs}")


@pytest.fixture
def two_receivers(settings) -> Iterator[tuple[Receiver, Receiver]]:  # type: ignore[no-untyped-def]
    settings.ARENA_WEBHOOK_HOSTS = ["127.0.0.1"]
    with receiver_running() as slow, receiver_running() as fast:
        slow.delay_s = SLOW_S
        yield slow, fast


def test_one_tenant_flooding_its_slow_webhook_stalls_neither_anothers_board_nor_its_webhooks(
    compose_workers, acme, globex, two_receivers
):
    slow, fast = two_receivers
    flooding = services.webhook_endpoint_create(
        organization=acme.organization, url=slow.url(), events=[WebhookEvent.CAMPAIGN_CLOSED], actor=None
    )
    slow.secret = flooding.secret
    for _ in range(FLOOD):  # each commits and queues its delivery
        services.webhook_ping(endpoint=flooding, actor=None)
    # acme's deliveries have reached the slow receiver: the delivery worker is busy with the flood.
    _wait_for(lambda: len(slow.requests) >= 2, compose_workers, "the flood reaching its receiver", 60)

    with scopes_disabled():
        other = services.webhook_endpoint_create(
            organization=globex.organization, url=fast.url(), events=[WebhookEvent.CAMPAIGN_CLOSED], actor=None
        )
        fast.secret = other.secret
        asked = time.monotonic()
        services.webhook_ping(endpoint=other, actor=None)
        assert leaderboards_schedule(campaign_id=globex.campaign.pk)  # as a vote does: debounced
        boards = LeaderboardSnapshot.objects.filter(campaign=globex.campaign)
        board_s = _wait_for(boards.exists, compose_workers, "the other organisation's board", DEBOUNCE_S + 10)
        webhook_s = _wait_for(lambda: len(fast.requests) == 1, compose_workers, "its webhook", 10)
    print(f"other tenant under the flood: board {board_s:.1f} s (debounce {DEBOUNCE_S} s), webhook {webhook_s:.1f} s")
    assert time.monotonic() - asked < DEBOUNCE_S + 10 + 10
    assert fast.requests[0].verified
    # The flood holds at most its organisation's slots, and is still being sent, not dropped.
    assert slow.most_in_flight <= settings.ARENA_WEBHOOK_ORG_CONCURRENCY
    assert len(slow.requests) < FLOOD
    with scopes_disabled():
        open_ = WebhookDelivery.objects.filter(
            organization=acme.organization, status__in=[WebhookDelivery.Status.PENDING, WebhookDelivery.Status.FAILED]
        )
        assert open_.count() > 0
