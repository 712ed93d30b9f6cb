"""A webhook end to end: a manager's change commits, the first attempt goes through the real Redis broker
to a real Celery worker process, which signs and POSTs it to a real receiver; a failed attempt is retried
by the sweep (beat's task, run here by hand) through the same worker."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection
from django.utils import timezone

from battles.services import campaign_close
from raters import services
from raters.models import WebhookDelivery, WebhookEvent
from raters.tasks import webhook_deliveries_due_task
from tests.compose_workers import broker_purge

from .webhook_receiver import Receiver, receiver_running

pytestmark = pytest.mark.server

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def receiver(settings) -> Iterator[Receiver]:  # type: ignore[no-untyped-def]
    settings.ARENA_WEBHOOK_HOSTS = ["127.0.0.1"]
    with receiver_running() as running:
        yield running


def _worker_start() -> subprocess.Popen[str]:
    database = connection.settings_dict
    env = {
        **os.environ,
        "DATABASE_URL": f"postgres://{database['USER']}@{database['HOST']}:{database['PORT']}/{database['NAME']}",
        "REDIS_URL": str(settings.REDIS_URL),
        "DJANGO_SETTINGS_MODULE": "arena.settings.local",
        "ARENA_WEBHOOK_HOSTS": "127.0.0.1",
        "ARENA_WEBHOOK_RETRY_BASE_S": "1",
        "ARENA_WEBHOOK_TIMEOUT_S": "60",
    }
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "arena",
            "worker",
            "--pool=solo",
            "--queues=delivery",
            "--loglevel=INFO",
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _worker_stop(process: subprocess.Popen[str]) -> None:
    process.terminate()
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()


@pytest.fixture
def broker(transactional_db: None) -> None:
    if not settings.REDIS_URL:
        pytest.fail("the Celery worker test needs REDIS_URL (scripts/test sets it)")
    if connection.vendor != "postgresql":
        pytest.fail("the worker shares the test database: run on PostgreSQL (scripts/test)")
    broker_purge()  # nothing stale from earlier runs


@pytest.fixture
def worker(broker: None) -> Iterator[subprocess.Popen[str]]:
    process = _worker_start()
    yield process
    _worker_stop(process)


def _wait_for(condition: Callable[[], bool], worker: subprocess.Popen[str], what: str, seconds: float = 90) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return
        if worker.poll() is not None:
            pytest.fail("worker exited:\n" + (worker.stdout.read() if worker.stdout else ""))
        time.sleep(0.3)
    worker.terminate()
    pytest.fail(f"{what} not within {seconds} s; worker log:\n" + (worker.communicate()[0] or ""))


def test_a_committed_close_is_delivered_by_the_worker_and_a_failure_retried_by_the_sweep(worker, acme, alice, receiver):
    endpoint = services.webhook_endpoint_create(
        organization=acme.organization, url=receiver.url(), events=[WebhookEvent.CAMPAIGN_CLOSED], actor=alice
    )
    receiver.secret = endpoint.secret
    receiver.statuses = [503]  # the first attempt fails; the retry succeeds
    campaign_close(campaign=acme.campaign, actor=alice)  # commits: the first attempt is queued to Redis
    delivery = WebhookDelivery.objects.get(endpoint=endpoint)
    _wait_for(lambda: len(receiver.requests) == 1, worker, "the first attempt")
    failed = WebhookDelivery.objects.filter(pk=delivery.pk, status=WebhookDelivery.Status.FAILED)
    _wait_for(failed.exists, worker, "the failed attempt recorded")
    # Beat's sweep, once the retry is due (1 s base delay in the worker, +-20%).
    WebhookDelivery.objects.filter(pk=delivery.pk).update(next_attempt_at=timezone.now())
    assert webhook_deliveries_due_task() == 1
    succeeded = WebhookDelivery.objects.filter(pk=delivery.pk, status=WebhookDelivery.Status.SUCCEEDED)
    _wait_for(succeeded.exists, worker, "the retry")
    delivery.refresh_from_db()
    assert delivery.attempts == 2 and delivery.response_status == 200
    assert len(receiver.requests) == 2 and all(r.verified for r in receiver.requests), receiver.requests
    bodies = [json.loads(r.body) for r in receiver.requests]
    assert bodies[0] == bodies[1]  # the same event, byte for byte in content, with the same id
    assert bodies[0]["type"] == "campaign.closed" and bodies[0]["data"]["campaign_id"] == acme.campaign.pk
    assert [r.headers["X-Arena-Delivery"] for r in receiver.requests] == [str(delivery.pk)] * 2


def test_a_worker_killed_mid_send_leaves_the_delivery_to_the_sweep_after_its_lease(broker, acme, alice, receiver):
    endpoint = services.webhook_endpoint_create(
        organization=acme.organization, url=receiver.url(), events=[WebhookEvent.CAMPAIGN_CLOSED], actor=alice
    )
    receiver.secret = endpoint.secret
    receiver.delay_s = 30  # the receiver holds the first request while the worker is killed
    first = _worker_start()
    try:
        campaign_close(campaign=acme.campaign, actor=alice)
        _wait_for(lambda: len(receiver.requests) == 1, first, "the first attempt")
        first.kill()  # SIGKILL while it waits for the answer: nothing is recorded
        first.wait(timeout=20)
    finally:
        _worker_stop(first)
    delivery = WebhookDelivery.objects.get(endpoint=endpoint)
    # Claimed (one attempt) and leased: no other worker sends it before the lease has passed.
    assert delivery.status == WebhookDelivery.Status.PENDING and delivery.attempts == 1
    assert delivery.next_attempt_at is not None and delivery.next_attempt_at > timezone.now()
    assert webhook_deliveries_due_task() == 0
    receiver.delay_s = 0
    WebhookDelivery.objects.filter(pk=delivery.pk).update(next_attempt_at=timezone.now())  # the lease passed
    second = _worker_start()
    try:
        assert webhook_deliveries_due_task() == 1
        succeeded = WebhookDelivery.objects.filter(pk=delivery.pk, status=WebhookDelivery.Status.SUCCEEDED)
        _wait_for(succeeded.exists, second, "the send after the lease")
    finally:
        _worker_stop(second)
    delivery.refresh_from_db()
    assert delivery.attempts == 2 and len(receiver.requests) == 2
    assert len({json.loads(r.body)["id"] for r in receiver.requests}) == 1  # one event: the receiver dedupes
