"""A killed worker does not freeze the leaderboards.

The attack (measured: 298 s stale with a 5 s debounce and 60 s beat): a worker is killed with SIGKILL
while it holds the delayed recompute task, or in the middle of the recompute. Its task stays
unacknowledged in Redis and, before the fix, the "pending" mark kept later votes and beat's safety net
from scheduling another one for debounce + 300 s. Here real Celery worker and beat processes run
against the real Redis broker and the test database (as the application's own role, which the
recompute needs no more than), a worker is killed at each of those two moments, a fresh worker is
started, and a snapshot including the last vote must appear within debounce + 30 s of the kill."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from django.conf import settings
from django.core.cache import cache

from battles.models import Vote
from ranking.models import LeaderboardSnapshot
from tests.compose_workers import broker_purge
from tests.conftest import start_battle
from tests.db_roles import app_role_url

pytestmark = pytest.mark.server

ROOT = Path(__file__).resolve().parents[2]
# The marks' lease (production: 10 s): a killed worker's mark is gone this long after it stopped renewing it
# (every third of it). A renewal late by more than two seconds would let beat queue a second recompute while
# the slow one computes: harmless here (it waits behind the slow worker's, which computes nothing).
LEASE_S = 3
# Beat's safety net ticks every 2 s (production: 15): it is what takes over once a killed worker's mark
# has expired, so the test waits for a tick after the lease rather than for a long interval.
SCHEDULE_S = 2


class Process:
    """A child process whose output lines are collected as they come."""

    def __init__(self, args: list[str], env: dict[str, str]) -> None:
        self.popen = subprocess.Popen(
            args, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.log: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.popen.stdout is not None
        for line in self.popen.stdout:
            self.lines.put(line)

    def wait_for(self, text: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=0.2)
            except queue.Empty:
                if self.popen.poll() is not None:
                    break
                continue
            self.log.append(line)
            if text in line:
                return
        pytest.fail(f"{text!r} not seen within {timeout} s; output:\n{''.join(self.log)[-4000:]}")

    def kill(self) -> None:
        os.kill(self.popen.pid, signal.SIGKILL)
        self.popen.wait(timeout=10)

    def stop(self) -> None:
        if self.popen.poll() is None:
            self.popen.terminate()
            try:
                self.popen.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()


@pytest.fixture
def celery_env(vote_log_purge, tmp_path) -> Iterator[dict[str, str]]:  # type: ignore[no-untyped-def]
    if not settings.REDIS_URL:
        pytest.fail("the worker tests need REDIS_URL (scripts/test sets it)")
    broker_purge()
    broker = redis.Redis.from_url(settings.REDIS_URL)
    env = {
        **os.environ,
        "DATABASE_URL": app_role_url(),
        "REDIS_URL": settings.REDIS_URL,
        "DJANGO_SETTINGS_MODULE": "arena.settings.local",
        "ARENA_RANKING_LEASE_S": str(LEASE_S),
        "ARENA_RANKING_SCHEDULE_S": str(SCHEDULE_S),
        "PYTHONUNBUFFERED": "1",
    }
    yield env
    broker_purge()
    # A killed worker's unacknowledged task would be delivered again to some later worker, after the
    # visibility timeout; it belongs to this test's database only.
    broker.delete("unacked", "unacked_index", "unacked_mutex")


# The compose file's recompute worker's queues (docker/compose.yaml, service worker).
WORKER_ARGS = [
    *("-Q", "recompute,celery", "--pool=solo", "--loglevel=INFO"),
    *("--without-gossip", "--without-mingle", "--without-heartbeat"),
]


def _worker(env: dict[str, str], *, slow: bool = False) -> Process:
    if slow:
        process = Process([sys.executable, "-m", "tests.ranking.slow_worker", *WORKER_ARGS], env)
    else:
        process = Process([sys.executable, "-m", "celery", "-A", "arena", "worker", *WORKER_ARGS], env)
    process.wait_for("ready.", timeout=90)
    return process


def _fresh_snapshot_within(
    campaign_id: int, vote: Vote, since: float, limit_s: float, processes: list[Process]
) -> float:
    while time.monotonic() - since < limit_s:
        if LeaderboardSnapshot.objects.filter(
            campaign_id=campaign_id, category="", view="raw", last_vote_id__gte=vote.pk
        ).exists():
            return time.monotonic() - since
        time.sleep(0.25)
    logs = "\n".join("".join(p.log)[-3000:] for p in processes)
    pytest.fail(f"no snapshot with vote {vote.pk} within {limit_s} s of the kill; logs:\n{logs}")


def _vote(client, campaign) -> Vote:  # type: ignore[no-untyped-def]
    battle, _ = start_battle(client, campaign)
    assert client.post(f"/b/{battle.pk}/vote/", {"choice": "left"}).status_code == 302
    return Vote.objects.get(battle=battle)


@pytest.mark.triton
def test_a_killed_worker_does_not_freeze_the_leaderboards(
    celery_env, triton_server, acme, bob_client, settings, tmp_path
):
    campaign = acme.campaign
    # The test's process casts the votes, so it sets the pending mark (debounce + lease): with the workers'
    # and beat's lease, as one deployment's processes share their settings.
    settings.ARENA_RANKING_LEASE_S = LEASE_S
    for key in (f"ranking:recompute-pending:{campaign.pk}", f"ranking:recompute-running:{campaign.pk}"):
        cache.delete(key)
    beat = Process(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "arena",
            "beat",
            "--loglevel=INFO",
            "--schedule",
            str(tmp_path / "beat-schedule"),
        ],
        celery_env,
    )
    started: list[Process] = [beat]
    try:
        # 1. Killed while holding the delayed task (the vote's debounce has not run out yet: the kill follows
        # the worker's "received" line within a fraction of a second).
        settings.ARENA_RANKING_DEBOUNCE_S = debounce = 6
        first = _worker(celery_env)
        started.append(first)
        vote = _vote(bob_client, campaign)
        first.wait_for("ranking.tasks.leaderboards_recompute_task", timeout=30)  # "... received"
        first.kill()
        killed = time.monotonic()
        assert not LeaderboardSnapshot.objects.filter(campaign=campaign).exists()
        second = _worker(celery_env)
        started.append(second)
        # The restarted worker re-armed the recompute for the time it was due (before its "ready."), so
        # it does not wait for the killed worker's mark to expire and beat's next tick.
        assert "1 due recompute(s) re-armed" in "".join(second.log), "".join(second.log)[-3000:]
        took = _fresh_snapshot_within(campaign.pk, vote, killed, debounce + 30, started)
        print(f"killed holding the task: fresh snapshot {took:.1f} s after the kill")
        # Told to stop (it takes no new task from then on), it shuts down while the slow worker boots; it is
        # gone before the vote whose recompute the slow one must take.
        second.popen.terminate()

        # 2. Killed in the middle of the recompute.
        settings.ARENA_RANKING_DEBOUNCE_S = debounce = 1
        slow = _worker(celery_env, slow=True)
        started.append(slow)
        second.stop()
        vote = _vote(bob_client, campaign)
        slow.wait_for("recompute started", timeout=30)
        slow.kill()
        killed = time.monotonic()
        assert not LeaderboardSnapshot.objects.filter(campaign=campaign, last_vote_id__gte=vote.pk).exists()
        third = _worker(celery_env)
        started.append(third)
        took = _fresh_snapshot_within(campaign.pk, vote, killed, debounce + 30, started)
        print(f"killed mid-recompute: fresh snapshot {took:.1f} s after the kill")
        snapshot = LeaderboardSnapshot.objects.filter(campaign=campaign, category="", view="raw").latest("version")
        assert snapshot.votes_total == Vote.objects.filter(campaign=campaign).count() == 2
    finally:
        for process in reversed(started):
            process.stop()
