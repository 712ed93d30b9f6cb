"""The recompute path end to end with a real Celery worker process and the real Redis broker:
a vote is committed, the debounced task goes through Redis, the worker writes the snapshots."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection
from django.urls import reverse

from battles.models import Prompt
from ranking.models import LeaderboardSnapshot
from tests.conftest import start_battle

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def worker(vote_log_purge):  # type: ignore[no-untyped-def]
    if not settings.REDIS_URL:
        pytest.fail("the Celery worker test needs REDIS_URL (scripts/test sets it)")
    from arena.celery import app

    app.control.purge()  # nothing stale from earlier runs
    database = connection.settings_dict
    env = {
        **os.environ,
        "DATABASE_URL": f"postgres://{database['USER']}@{database['HOST']}:{database['PORT']}/{database['NAME']}",
        "REDIS_URL": settings.REDIS_URL,
        "DJANGO_SETTINGS_MODULE": "arena.settings.local",
    }
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "arena",
            "worker",
            "--pool=solo",
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
    yield process
    process.terminate()
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()


@pytest.mark.triton
def test_vote_triggers_recompute_in_a_real_worker(worker, acme, bob_client, settings, triton_server):
    if connection.vendor != "postgresql":
        pytest.fail("the worker shares the test database: run on PostgreSQL (scripts/test)")
    settings.ARENA_RANKING_DEBOUNCE_S = 1
    assert Prompt.objects.filter(campaign=acme.campaign).exists()
    battle, _ = start_battle(bob_client, acme.campaign)
    assert bob_client.post(reverse("battles:vote", args=[battle.pk]), {"choice": "left"}).status_code == 302
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if LeaderboardSnapshot.objects.filter(campaign=acme.campaign).exists():
            break
        if worker.poll() is not None:
            pytest.fail("worker exited:\n" + (worker.stdout.read() if worker.stdout else ""))
        time.sleep(0.5)
    else:
        worker.terminate()
        pytest.fail("no snapshot within 90 s; worker log:\n" + (worker.communicate()[0] or ""))
    snapshot = LeaderboardSnapshot.objects.get(campaign=acme.campaign, category="", view="raw")
    assert snapshot.votes_total == 1 and snapshot.last_vote_id == battle.vote.pk
    assert {(s.category, s.view) for s in LeaderboardSnapshot.objects.filter(campaign=acme.campaign)} >= {
        ("", "raw"),
        ("", "style"),
    }
