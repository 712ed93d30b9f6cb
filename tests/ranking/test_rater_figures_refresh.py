"""Stale-while-revalidate for the per-rater figures (the managers' dashboard, its rater-report API): a view
after new votes serves the latest figures computed, labelled with their age, and queues one refresh; the
refresh makes the next view current and exact; the recompute task warms them; with the broker down, or
nothing cached, the request computes them; the CSV is always exact.

The refresh task is captured, not sent (``queued``): each test runs it itself when it wants it run."""

from __future__ import annotations

import csv
import io
import logging
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.cache import cache
from django.db import connection
from django.test import Client
from django.urls import reverse
from kombu.exceptions import OperationalError as KombuOperationalError

from ranking import selectors, services, tasks
from ranking.selectors import log_cache
from ranking.selectors import raters as rater_selectors
from ranking.services import rater_figures as rater_figures_services
from tests.conftest import Tenant, api_client
from tests.factories import UserFactory

from .synth import vote_at

pytestmark = pytest.mark.django_db

NOW = datetime.now(UTC).replace(microsecond=0)
STALE_NOTE = 'id="rater-figures-stale"'


@pytest.fixture
def queued(acme: Tenant, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[int, int]]]:
    """The refresh tasks queued, as (campaign id, organisation id); none is run."""
    calls: list[tuple[int, int]] = []
    _forget(acme)
    monkeypatch.setattr(
        tasks.rater_figures_refresh_task,
        "delay",
        lambda campaign_id, *, organization_id, lock=None: calls.append((campaign_id, organization_id)),
    )
    yield calls
    _forget(acme)


def _forget(acme: Tenant) -> None:
    """The lock and the latest figures live in the shared cache (Redis in the suite), which outlives a test
    database: an earlier run's, for a campaign of the same id, must not count."""
    cache.delete(rater_figures_services._rater_refresh_key(acme.campaign.pk))
    cache.delete(log_cache._log_key(selectors.RATER_FIGURES, acme.campaign.pk, [], None))


def _vote(acme: Tenant, rater: User, minutes_ago: int) -> None:
    vote_at(acme, rater=rater, left=acme.left, right=acme.right, at=NOW - timedelta(minutes=minutes_ago))


def _battles_in_table(page: str, rater: User) -> int | None:
    """The rater's Battles cell in the dashboard's table, or None when the rater is not listed."""
    found = re.search(rf'<tr data-rater="{rater.pk}"><td>[^<]*</td><td class="num">(\d+)</td>', page)
    return int(found.group(1)) if found else None


def _direct(acme: Tenant) -> selectors.RaterFigures:
    """The per-rater figures computed from the log now, past every cache."""
    return rater_selectors._rater_figures_from_log(acme.campaign)


def test_a_vote_after_a_view_serves_the_previous_figures_labelled_and_queues_one_refresh(
    acme: Tenant, bob: User, alice_client: Client, queued: list[tuple[int, int]]
) -> None:
    url = reverse("ranking:campaign-dashboard", args=[acme.campaign.pk])
    _vote(acme, bob, 60)
    first = alice_client.get(url).content.decode()
    # Nothing cached: computed in the request, current, and no task.
    assert STALE_NOTE not in first and _battles_in_table(first, bob) == 1 and queued == []

    carol = UserFactory.create(email="carol@acme.test")
    _vote(acme, bob, 30)
    _vote(acme, carol, 20)
    # Two views of the grown log (concurrent managers): both get the previous figures, labelled; one task.
    pages = [alice_client.get(url).content.decode() for _ in range(2)]
    for page in pages:
        assert STALE_NOTE in page and 'id="rater-table-stale"' in page
        assert "2 votes ago, and are being refreshed" in page
        assert _battles_in_table(page, bob) == 1  # as of the first view
        assert _battles_in_table(page, carol) is None  # voted since: not listed yet
        assert '<span id="votes-count">3 votes</span>' in page  # the page's own counts are live
    assert queued == [(acme.campaign.pk, acme.organization.pk)]

    # The refresh (what the worker runs): the next view is current and exact, and queues nothing.
    assert tasks.rater_figures_refresh_task(acme.campaign.pk, organization_id=acme.organization.pk) == 3
    fresh = alice_client.get(url).content.decode()
    assert STALE_NOTE not in fresh
    assert _battles_in_table(fresh, bob) == 2 and _battles_in_table(fresh, carol) == 1
    figures, mark = selectors.rater_figures_cached(campaign=acme.campaign)
    assert figures is not None and figures.mark == mark and figures.value == _direct(acme)
    assert len(queued) == 1

    # The refresh released the lock: the next stale view queues again.
    _vote(acme, carol, 10)
    assert STALE_NOTE in alice_client.get(url).content.decode()
    assert len(queued) == 2


def test_the_api_says_how_old_the_figures_are(acme: Tenant, bob: User, queued: list[tuple[int, int]]) -> None:
    client = api_client(acme.organization)
    url = reverse("api-rater-reports", args=[acme.campaign.pk])
    _vote(acme, bob, 60)
    body = client.get(url).json()
    assert body["votes_behind"] == 0 and body["as_of_votes"] == 1 and body["refreshing"] is False
    assert body["as_of"].endswith("Z") or "+00:00" in body["as_of"]
    _vote(acme, bob, 30)
    stale = client.get(url).json()
    assert stale["votes_behind"] == 1 and stale["as_of_votes"] == 1 and stale["refreshing"] is True
    assert stale["as_of"] == body["as_of"] and stale["results"][0]["battles"] == 1
    assert len(queued) == 1
    services.rater_figures_refresh(campaign_id=acme.campaign.pk)
    fresh = client.get(url).json()
    assert fresh["votes_behind"] == 0 and fresh["as_of_votes"] == 2 and fresh["refreshing"] is False
    assert fresh["results"][0]["battles"] == 2


def test_the_csv_is_exact_even_when_the_page_would_be_stale(
    acme: Tenant, bob: User, alice_client: Client, queued: list[tuple[int, int]]
) -> None:
    _vote(acme, bob, 60)
    alice_client.get(reverse("ranking:campaign-dashboard", args=[acme.campaign.pk]))
    _vote(acme, bob, 30)
    response = alice_client.get(reverse("ranking:campaign-raters-csv", args=[acme.campaign.pk]))
    [row] = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert row["battles"] == "2" and queued == []  # computed in the request, nothing queued
    # ... and stored: the next view of the page is current without a refresh.
    page = alice_client.get(reverse("ranking:campaign-dashboard", args=[acme.campaign.pk])).content.decode()
    assert STALE_NOTE not in page and _battles_in_table(page, bob) == 2 and queued == []


def test_the_recompute_task_queues_the_refresh_of_figures_someone_looks_at(
    acme: Tenant, bob: User, alice_client: Client, queued: list[tuple[int, int]]
) -> None:
    _vote(acme, bob, 60)
    tasks.leaderboards_recompute_task(acme.campaign.pk, organization_id=acme.organization.pk)
    assert queued == []  # nobody has looked at the dashboard: nothing to keep warm
    alice_client.get(reverse("ranking:campaign-dashboard", args=[acme.campaign.pk]))
    _vote(acme, bob, 30)
    tasks.leaderboards_recompute_task(acme.campaign.pk, organization_id=acme.organization.pk)
    assert queued == [(acme.campaign.pk, acme.organization.pk)]
    services.rater_figures_refresh(campaign_id=acme.campaign.pk)
    page = alice_client.get(reverse("ranking:campaign-dashboard", args=[acme.campaign.pk])).content.decode()
    assert STALE_NOTE not in page and _battles_in_table(page, bob) == 2


def test_with_the_broker_down_the_request_computes_the_figures(
    acme: Tenant,
    bob: User,
    alice_client: Client,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    _forget(acme)

    def broker_down(*args: Any, **kwargs: Any) -> None:
        raise KombuOperationalError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")

    monkeypatch.setattr(tasks.rater_figures_refresh_task, "delay", broker_down)
    url = reverse("ranking:campaign-dashboard", args=[acme.campaign.pk])
    _vote(acme, bob, 60)
    alice_client.get(url)
    _vote(acme, bob, 30)
    with caplog.at_level(logging.ERROR, logger="ranking.services"):
        page = alice_client.get(url).content.decode()
    assert STALE_NOTE not in page and _battles_in_table(page, bob) == 2
    assert "could not be queued (broker down): computed in the request" in caplog.text
    assert cache.get(rater_figures_services._rater_refresh_key(acme.campaign.pk)) is None  # the next view tries again


def test_where_tasks_run_eagerly_the_view_gets_the_refreshed_figures(
    acme: Tenant, bob: User, alice_client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    _forget(acme)
    monkeypatch.setattr(
        tasks.rater_figures_refresh_task,
        "delay",
        lambda campaign_id, *, organization_id, lock=None: tasks.rater_figures_refresh_task(
            campaign_id, organization_id=organization_id, lock=lock
        ),
    )
    url = reverse("ranking:campaign-dashboard", args=[acme.campaign.pk])
    _vote(acme, bob, 60)
    alice_client.get(url)
    _vote(acme, bob, 30)
    page = alice_client.get(url).content.decode()
    assert STALE_NOTE not in page and _battles_in_table(page, bob) == 2


def test_latest_figures_of_another_log_are_never_served(
    acme: Tenant, bob: User, alice_client: Client, queued: list[tuple[int, int]]
) -> None:
    """A long-lived cache may outlive its database (a restore, a test database made afresh): latest figures
    whose last vote is not this log's, with its time, are not taken for an earlier state of it."""
    _vote(acme, bob, 60)
    mark = log_cache._log_mark(acme.campaign.pk)
    other_time = "2020-01-01T00:00:00+00:00"
    figures: selectors.RaterFigures = ({bob.pk: (99, 1.0, None, None)}, {}, {})
    entry = (figures, [1, mark[1], other_time], NOW.isoformat())
    cache.set(log_cache._log_key(selectors.RATER_FIGURES, acme.campaign.pk, [], None), entry, 60)
    _vote(acme, bob, 30)
    page = alice_client.get(reverse("ranking:campaign-dashboard", args=[acme.campaign.pk])).content.decode()
    assert STALE_NOTE not in page and _battles_in_table(page, bob) == 2 and queued == []


@pytest.mark.django_db(transaction=True)
def test_the_refresh_reads_the_mark_and_the_figures_from_one_snapshot(
    vote_log_purge: None, acme: Tenant, bob: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Outside a transaction (a worker, a request), the mark a figure is stored under and the figure are
    read in one REPEATABLE READ transaction on PostgreSQL, so a vote committed meanwhile is in neither."""
    _forget(acme)
    seen: list[str] = []
    # The log's read: packed on PostgreSQL, the SQL aggregates elsewhere.
    name = "_rater_log_packed" if connection.vendor == "postgresql" else "_rater_activity"
    real = getattr(rater_selectors, name)

    def read(*args: Any) -> Any:
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("SHOW transaction_isolation")
                seen.append(cursor.fetchone()[0])
        return real(*args)

    monkeypatch.setattr(rater_selectors, name, read)
    _vote(acme, bob, 60)
    assert services.rater_figures_refresh(campaign_id=acme.campaign.pk) == 1
    assert seen == (["repeatable read"] if connection.vendor == "postgresql" else [])
    figures, mark = selectors.rater_figures_cached(campaign=acme.campaign)
    assert figures is not None and figures.mark == mark and figures.value == _direct(acme)
    _forget(acme)


def test_a_refresh_that_outlived_its_lock_leaves_the_next_refreshs_lock(
    acme: Tenant, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The lock is released by the refresh it was taken for only: one that ran longer than the lock (which then
    expired, and a view queued another refresh under a new lock) must not free the new one, or a third refresh
    would be queued beside it."""
    _forget(acme)
    locks: list[str | None] = []
    monkeypatch.setattr(
        tasks.rater_figures_refresh_task,
        "delay",
        lambda campaign_id, *, organization_id, lock=None: locks.append(lock),
    )
    key = rater_figures_services._rater_refresh_key(acme.campaign.pk)
    assert services.rater_figures_refresh_schedule(campaign_id=acme.campaign.pk, organization_id=acme.organization.pk)
    assert not services.rater_figures_refresh_schedule(campaign_id=acme.campaign.pk)  # queued already
    [first] = locks
    assert first is not None and cache.get(key) == first
    cache.set(key, "the next refresh's lock", timeout=60)  # the first one's lock expired; a view queued another
    services.rater_figures_refresh(campaign_id=acme.campaign.pk, lock=first)
    assert cache.get(key) == "the next refresh's lock"
    cache.delete(key)
    # A refresh that finishes within its lock frees it, and the next stale view can queue again.
    assert services.rater_figures_refresh_schedule(campaign_id=acme.campaign.pk, organization_id=acme.organization.pk)
    services.rater_figures_refresh(campaign_id=acme.campaign.pk, lock=locks[-1])
    assert cache.get(key) is None
    _forget(acme)
