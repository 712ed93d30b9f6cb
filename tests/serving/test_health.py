"""Endpoint health: a periodic readiness check takes a competitor whose model is not ready out of new
battles, records each outage (so its exposure in the campaign can be told), and lets it back in by
itself at the first ready answer. Managers see the state in the console."""

from __future__ import annotations

import random
import socket
import threading
import time
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta

import pytest
from django.db import IntegrityError, connection, transaction
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from arena.celery import app as celery_app
from battles import selectors
from battles.models import Battle, Campaign, Competitor
from raters.tenancy import ScopeError, organization_scope, scopes_disabled
from serving import services
from serving.models import EndpointOutage, Health, ModelEndpoint
from serving.selectors import endpoint_health_line, periods_overlap_s
from serving.tasks import endpoints_health_check_open_task
from serving.triton.server import TritonServer
from tests.conftest import MODEL_SERVER_URL, Tenant, endpoint_for, endpoint_of
from tests.factories import CompetitorFactory
from tests.ranking.test_celery_worker import worker  # noqa: F401  (the real worker fixture)

pytestmark = pytest.mark.django_db

T0 = datetime.fromisoformat("2026-11-02T09:00:00+00:00")
FAIL = "zen-bigram at grpc://127.0.0.1:9: server unreachable"


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


def record(endpoint: ModelEndpoint, minutes: float, detail: str = "") -> str:
    return services.endpoint_health_record(endpoint=endpoint, detail=detail, now=at(minutes))


def fresh(endpoint: ModelEndpoint) -> ModelEndpoint:
    return ModelEndpoint.objects.get(pk=endpoint.pk)


# --- Transitions, hysteresis, outage records ------------------------------------------------------


def test_one_failed_check_does_not_pull_a_model_the_second_in_a_row_does(acme: Tenant) -> None:
    endpoint = endpoint_of(acme.left)
    assert endpoint.health == Health.UNKNOWN
    assert record(endpoint, 0, FAIL) == ""
    stored = fresh(endpoint)
    assert (stored.health, stored.health_failures, stored.health_detail) == (Health.UNKNOWN, 1, FAIL)
    assert not EndpointOutage.objects.exists()
    assert record(endpoint, 1, FAIL) == "down"
    stored = fresh(endpoint)
    assert (stored.health, stored.health_since, stored.health_checked_at) == (Health.DOWN, at(1), at(1))
    outage = EndpointOutage.objects.get()
    assert (outage.endpoint_id, outage.organization_id) == (endpoint.pk, acme.organization.pk)
    assert (outage.first_failed_at, outage.started_at, outage.ended_at, outage.reason) == (at(0), at(1), None, FAIL)
    # Still failing: the same outage, no new one.
    assert record(endpoint, 2, FAIL) == ""
    assert EndpointOutage.objects.count() == 1 and fresh(endpoint).health_since == at(1)


def test_a_ready_answer_ends_the_outage_once_and_a_new_failure_run_opens_another(acme: Tenant) -> None:
    endpoint = endpoint_of(acme.left)
    record(endpoint, 0, FAIL)
    record(endpoint, 1, FAIL)
    assert record(endpoint, 5) == "ready"
    assert record(endpoint, 6) == ""  # idempotent
    outage = EndpointOutage.objects.get()
    assert outage.ended_at == at(5)
    stored = fresh(endpoint)
    assert (stored.health, stored.health_since, stored.health_failures, stored.health_detail) == (
        Health.READY,
        at(5),
        0,
        "",
    )
    record(endpoint, 10, FAIL)
    record(endpoint, 11, FAIL)
    assert list(EndpointOutage.objects.order_by("started_at").values_list("started_at", "ended_at")) == [
        (at(1), at(5)),
        (at(11), None),
    ]


def test_a_ready_answer_between_failures_starts_the_count_again(acme: Tenant) -> None:
    endpoint = endpoint_of(acme.left)
    for minute, detail in [(0, FAIL), (1, ""), (2, FAIL), (3, ""), (4, FAIL)]:
        assert record(endpoint, minute, detail) in ("", "ready")
    stored = fresh(endpoint)
    assert stored.health == Health.READY and stored.health_failures == 1
    assert not EndpointOutage.objects.exists()


@pytest.mark.parametrize("down_after", [1, 3])
def test_the_hysteresis_is_a_setting(acme: Tenant, settings, down_after: int) -> None:  # type: ignore[no-untyped-def]
    settings.ARENA_HEALTH_DOWN_AFTER = down_after
    endpoint = endpoint_of(acme.left)
    changes = [record(endpoint, minute, FAIL) for minute in range(down_after)]
    assert changes == [""] * (down_after - 1) + ["down"]


def test_an_answer_older_than_the_last_one_recorded_is_ignored(acme: Tenant) -> None:
    endpoint = endpoint_of(acme.left)
    record(endpoint, 5)
    assert record(endpoint, 4, FAIL) == ""
    stored = fresh(endpoint)
    assert (stored.health, stored.health_failures, stored.health_checked_at) == (Health.READY, 0, at(5))


def test_the_database_allows_one_open_outage_per_endpoint(acme: Tenant) -> None:
    endpoint = endpoint_of(acme.left)
    EndpointOutage.objects.create(
        organization=acme.organization, endpoint=endpoint, started_at=at(0), first_failed_at=at(0), reason="x"
    )
    with pytest.raises(IntegrityError), transaction.atomic():
        EndpointOutage.objects.create(
            organization=acme.organization, endpoint=endpoint, started_at=at(1), first_failed_at=at(1), reason="y"
        )


@pytest.mark.django_db(transaction=True)
def test_two_checkers_recording_at_once_open_one_outage(acme: Tenant, settings) -> None:  # type: ignore[no-untyped-def]
    if connection.vendor != "postgresql":
        pytest.skip("row locks need PostgreSQL")
    settings.ARENA_HEALTH_DOWN_AFTER = 1
    endpoint = endpoint_of(acme.left)
    barrier = threading.Barrier(4)
    changes: list[str] = []

    def checker(minute: int) -> None:
        try:
            with scopes_disabled():
                barrier.wait()
                changes.append(services.endpoint_health_record(endpoint=fresh(endpoint), detail=FAIL, now=at(minute)))
        finally:
            connection.close()

    threads = [threading.Thread(target=checker, args=(0,)) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(changes) == ["", "", "", "down"]
    assert EndpointOutage.objects.count() == 1


# --- Skipping in new battles ----------------------------------------------------------------------


def _third(acme: Tenant) -> Competitor:
    endpoint = endpoint_for(acme, model="docs-markdown", url=MODEL_SERVER_URL)
    return CompetitorFactory.create(campaign=acme.campaign, endpoint=endpoint, version_label="2026-11")


def _pairs(campaign: Campaign, n: int = 60) -> set[int]:
    rng = random.Random(7)
    seen: set[int] = set()
    for _ in range(n):
        pair = selectors.pair_pick(campaign=campaign, rng=rng)
        assert pair is not None
        seen.update(c.pk for c in pair)
    return seen


@pytest.mark.parametrize("sampling", [Campaign.Sampling.UNIFORM, Campaign.Sampling.ACTIVE])
def test_a_competitor_whose_endpoint_is_down_gets_no_new_battles_and_returns_when_ready(
    acme: Tenant, sampling: str
) -> None:
    Campaign.objects.filter(pk=acme.campaign.pk).update(sampling=sampling)
    acme.campaign.refresh_from_db()
    third = _third(acme)
    assert _pairs(acme.campaign) == {acme.left.pk, acme.right.pk, third.pk}
    record(endpoint_of(third), 0, FAIL)
    assert third.pk in _pairs(acme.campaign)  # one failed check: still in
    record(endpoint_of(third), 1, FAIL)
    assert [c.pk for c in selectors.competitors_available(campaign=acme.campaign).order_by("id")] == [
        acme.left.pk,
        acme.right.pk,
    ]
    assert _pairs(acme.campaign) == {acme.left.pk, acme.right.pk}
    record(endpoint_of(third), 2)
    assert _pairs(acme.campaign) == {acme.left.pk, acme.right.pk, third.pk}


def test_never_checked_counts_as_available_and_inactive_stays_out(acme: Tenant) -> None:
    third = _third(acme)
    Competitor.objects.filter(pk=acme.left.pk).update(active=False)
    assert [c.pk for c in selectors.competitors_available(campaign=acme.campaign).order_by("id")] == [
        acme.right.pk,
        third.pk,
    ]


def test_fewer_than_two_healthy_competitors_is_nothing_to_rate_right_now(acme: Tenant, bob_client: Client) -> None:
    record(endpoint_of(acme.left), 0, FAIL)
    record(endpoint_of(acme.left), 1, FAIL)
    assert selectors.pair_pick(campaign=acme.campaign, rng=random.Random(1)) is None
    response = bob_client.post(reverse("battles:next", args=[acme.campaign.pk]))
    assert response.status_code == 409  # the rater pages' "No battle for now", not an error page
    page = response.content.decode()
    assert "No battle for now" in page and "Not enough models of this campaign are available" in page
    assert not Battle.objects.exists()


def test_a_battle_generated_before_the_outage_stays_valid(acme: Tenant, bob) -> None:  # type: ignore[no-untyped-def]
    battle = Battle.objects.create(
        organization=acme.organization,
        campaign=acme.campaign,
        rater=bob,
        pool=acme.pool,
        prompt=acme.campaign.prompts.order_by("id")[0],
        left=acme.left,
        right=acme.right,
        status=Battle.Status.READY,
    )
    record(endpoint_of(acme.left), 0, FAIL)
    record(endpoint_of(acme.left), 1, FAIL)
    assert selectors.battle_pending_for_rater(campaign=acme.campaign, user=bob) == battle
    battle.refresh_from_db()
    assert battle.status == Battle.Status.READY


# --- Exposure accounting --------------------------------------------------------------------------


def _outage(endpoint: ModelEndpoint, start: float, end: float | None) -> None:
    EndpointOutage.objects.create(
        organization=endpoint.organization,
        endpoint=endpoint,
        started_at=at(start),
        first_failed_at=at(start),
        ended_at=None if end is None else at(end),
        reason=FAIL,
    )


def test_periods_overlap_counts_the_union_inside_the_window() -> None:
    window = (at(0), at(60))
    assert periods_overlap_s([], window) == 0
    assert periods_overlap_s([(at(-10), at(5))], window) == 5 * 60
    assert periods_overlap_s([(at(10), at(20)), (at(15), at(25)), (at(50), at(90))], window) == (15 + 10) * 60
    assert periods_overlap_s([(at(-20), at(-10)), (at(70), at(80))], window) == 0


def test_exposure_is_the_outages_overlap_with_the_campaigns_open_period(acme: Tenant) -> None:
    Campaign.objects.filter(pk=acme.campaign.pk).update(opened_at=at(0))
    Competitor.objects.filter(campaign=acme.campaign).update(created_at=at(-30))
    acme.campaign.refresh_from_db()
    endpoint = endpoint_of(acme.left)
    _outage(endpoint, -20, -15)  # before the campaign opened: not counted
    _outage(endpoint, -10, 5)  # 5 min inside
    _outage(endpoint, 20, 32)  # 12 min
    _outage(endpoint, 50, None)  # still down: 10 min up to now
    exposure = selectors.competitor_exposure(campaign=acme.campaign, now=at(60))
    left = exposure[acme.left.pk]
    assert (left.outages, left.unavailable_s, left.unavailable_min, left.down_since) == (3, 27 * 60, 27, at(50))
    right = exposure[acme.right.pk]
    assert (right.outages, right.unavailable_s, right.down_since) == (0, 0, None)

    # A competitor added later counts from its creation; a closed campaign up to its closing.
    late = CompetitorFactory.create(campaign=acme.campaign, endpoint=endpoint, version_label="late")
    Competitor.objects.filter(pk=late.pk).update(created_at=at(25))
    Campaign.objects.filter(pk=acme.campaign.pk).update(status=Campaign.Status.CLOSED, closed_at=at(40))
    acme.campaign.refresh_from_db()
    exposure = selectors.competitor_exposure(campaign=acme.campaign, now=at(60))
    assert (exposure[acme.left.pk].outages, exposure[acme.left.pk].unavailable_s) == (2, 17 * 60)
    assert (exposure[late.pk].outages, exposure[late.pk].unavailable_s) == (1, 7 * 60)


def test_a_draft_campaign_has_no_exposure(acme: Tenant) -> None:
    Campaign.objects.filter(pk=acme.campaign.pk).update(status=Campaign.Status.DRAFT, opened_at=None)
    acme.campaign.refresh_from_db()
    _outage(endpoint_of(acme.left), -10, None)
    assert selectors.competitor_exposure(campaign=acme.campaign)[acme.left.pk].unavailable_s == 0


# --- The console ---------------------------------------------------------------------------------


def test_managers_see_the_state_on_the_campaign_and_endpoint_pages(acme: Tenant, alice_client: Client) -> None:
    now = timezone.now()
    Campaign.objects.filter(pk=acme.campaign.pk).update(opened_at=now - timedelta(hours=1))
    Competitor.objects.filter(campaign=acme.campaign).update(created_at=now - timedelta(hours=2))
    endpoint = endpoint_of(acme.left)
    services.endpoint_health_record(endpoint=endpoint, detail=FAIL, now=now - timedelta(minutes=13))
    services.endpoint_health_record(endpoint=endpoint, detail=FAIL, now=now - timedelta(minutes=12))
    services.endpoint_health_record(endpoint=endpoint_of(acme.right), detail="", now=now - timedelta(minutes=1))

    page = alice_client.get(reverse("admin:battles_campaign_change", args=[acme.campaign.pk]))
    assert page.status_code == 200
    html = page.content.decode()
    assert "Health; skipped while down" in html and "Skipped while down (this campaign)" in html
    assert "Down since" in html and "(12 min)" in html and "server unreachable" in html
    assert "12 min in 1 outage" in html
    assert "Ready since" in html and "never" in html

    listing = alice_client.get(reverse("admin:serving_modelendpoint_changelist")).content.decode()
    assert "Down since" in listing and "server unreachable" in listing and "Ready since" in listing
    change = alice_client.get(reverse("admin:serving_modelendpoint_change", args=[endpoint.pk])).content.decode()
    assert "Outages (no new battles while down)" in change and "server unreachable" in change


def test_the_health_line_says_a_failed_check_before_the_endpoint_goes_down(acme: Tenant) -> None:
    endpoint = endpoint_of(acme.left)
    assert endpoint_health_line(endpoint) == "Unknown (not checked yet)"
    record(endpoint, 0)
    record(endpoint, 3, FAIL)
    line = endpoint_health_line(fresh(endpoint), now=at(10))
    assert line == f"Ready since 2026-11-02 09:00 UTC (10 min); 1 failed check in a row: {FAIL}"


def test_a_manager_can_check_now_from_the_endpoint_list(acme: Tenant, alice_client: Client, settings) -> None:  # type: ignore[no-untyped-def]
    settings.ARENA_HEALTH_DOWN_AFTER = 1
    response = alice_client.post(
        reverse("admin:serving_modelendpoint_changelist"),
        {"action": "check_health", "_selected_action": [endpoint_of(acme.left).pk]},
        follow=True,
    )
    assert response.status_code == 200
    assert "server unreachable" in response.content.decode()
    assert fresh(endpoint_of(acme.left)).health == Health.DOWN
    assert fresh(endpoint_of(acme.right)).health == Health.UNKNOWN  # not selected, not checked


# --- Tenancy -------------------------------------------------------------------------------------


@pytest.mark.tenant_scoped
def test_outages_are_tenant_scoped(acme: Tenant, globex: Tenant) -> None:
    with scopes_disabled():
        _outage(endpoint_of(acme.left), 0, None)
    with pytest.raises(ScopeError):
        EndpointOutage.objects.count()
    with organization_scope(globex.organization.pk):
        assert not EndpointOutage.objects.exists()
    with organization_scope(acme.organization.pk):
        assert EndpointOutage.objects.count() == 1


# --- The periodic task ----------------------------------------------------------------------------


@pytest.fixture
def beat_tick(django_capture_on_commit_callbacks) -> Iterator[Callable[[], int]]:  # type: ignore[no-untyped-def]
    """One tick of beat's health check, its per-organisation tasks run in-process when the test's
    transaction would have committed (the task base is transaction-aware)."""
    previous = celery_app.conf.task_always_eager
    celery_app.conf.task_always_eager = True

    def tick() -> int:
        with django_capture_on_commit_callbacks(execute=True):
            queued = endpoints_health_check_open_task()
        return int(queued)

    try:
        yield tick
    finally:
        celery_app.conf.task_always_eager = previous


@pytest.mark.tenant_scoped
def test_the_beat_task_fans_out_to_every_organisations_open_campaigns(
    acme: Tenant, globex: Tenant, beat_tick: Callable[[], int]
) -> None:
    """No scope open, as in beat: the lister reads across tenants, each organisation's round runs in its
    own scope. Nothing listens at the tenants' endpoints (MODEL_SERVER_URL): two rounds take them down."""
    with scopes_disabled():
        Campaign.objects.filter(pk=globex.campaign.pk).update(status=Campaign.Status.DRAFT)
        draft_only = endpoint_of(globex.left).pk
        # Globex's endpoint also serves an open campaign of Globex's (only the right one is active there).
        other = Campaign.objects.create(organization=globex.organization, name="other", slug="other")
        Campaign.objects.filter(pk=other.pk).update(status=Campaign.Status.OPEN)
        CompetitorFactory.create(campaign=other, endpoint=endpoint_of(globex.right), version_label="a")
        CompetitorFactory.create(campaign=other, endpoint=endpoint_of(globex.left), version_label="b", active=False)
    assert beat_tick() == 2
    assert beat_tick() == 2
    with scopes_disabled():
        health = dict(ModelEndpoint.objects.values_list("pk", "health"))
        assert health[endpoint_of(acme.left).pk] == health[endpoint_of(acme.right).pk] == Health.DOWN
        assert health[endpoint_of(globex.right).pk] == Health.DOWN
        assert health[draft_only] == Health.UNKNOWN  # in a draft campaign and inactive elsewhere: not watched
        assert EndpointOutage.objects.count() == 3


def test_nothing_is_queued_without_open_campaigns(acme: Tenant) -> None:
    Campaign.objects.filter(pk=acme.campaign.pk).update(status=Campaign.Status.CLOSED)
    assert services.endpoints_health_schedule() == 0


def test_the_beat_schedule_has_the_health_check(settings) -> None:  # type: ignore[no-untyped-def]
    entry = settings.CELERY_BEAT_SCHEDULE["endpoints-health-check"]
    assert entry["task"] == "serving.tasks.endpoints_health_check_open_task"
    assert entry["schedule"] == float(settings.ARENA_HEALTH_INTERVAL_S)


@pytest.fixture
def silent_servers() -> Iterator[list[str]]:
    """Addresses that accept connections and never answer: a hung host, to the checker."""
    sockets = []
    for _ in range(4):
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        sockets.append(listener)
    try:
        yield [f"127.0.0.1:{s.getsockname()[1]}" for s in sockets]
    finally:
        for listener in sockets:
            listener.close()


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_hung_hosts_are_checked_at_once_each_within_the_short_timeout(
    acme: Tenant, silent_servers: list[str], settings, protocol: str
) -> None:  # type: ignore[no-untyped-def]
    settings.ARENA_HEALTH_TIMEOUT_S = 1
    endpoints = [endpoint_for(acme, model="zen-bigram", url=url, protocol=protocol) for url in silent_servers]
    started = time.monotonic()
    services.endpoints_health_check(endpoints=endpoints)
    elapsed = time.monotonic() - started
    assert elapsed < 3.0, elapsed  # one after the other would take 4 s or more (timeout 1 s each)
    for endpoint in endpoints:
        assert "no answer within 1 s" in fresh(endpoint).health_detail


def test_the_outbound_address_rule_applies(acme: Tenant, settings) -> None:  # type: ignore[no-untyped-def]
    settings.ARENA_MODEL_HOSTS = []  # loopback is then refused
    services.endpoints_health_check(endpoints=[endpoint_of(acme.left)])
    assert "address refused" in fresh(endpoint_of(acme.left)).health_detail


@pytest.mark.triton
@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_against_triton_served_is_ready_unknown_model_and_unreachable_are_down(
    acme: Tenant, triton_server: TritonServer, protocol: str
) -> None:
    url = triton_server.grpc_url if protocol == "grpc" else triton_server.http_url
    served = endpoint_for(acme, model="zen-bigram", url=url, protocol=protocol)
    not_served = endpoint_for(acme, model="no-such-model", url=url, protocol=protocol)
    unreachable = endpoint_for(acme, model="zen-bigram", url=MODEL_SERVER_URL, protocol=protocol)
    for _ in range(2):
        services.endpoints_health_check(endpoints=[served, not_served, unreachable])
    assert fresh(served).health == Health.READY and fresh(served).health_detail == ""
    assert fresh(not_served).health == Health.DOWN
    assert "not" in fresh(not_served).health_detail  # "model not served" / "not ready"
    assert fresh(unreachable).health == Health.DOWN
    assert fresh(unreachable).health_detail.endswith("server unreachable")
    assert set(EndpointOutage.objects.values_list("endpoint_id", flat=True)) == {not_served.pk, unreachable.pk}


@pytest.mark.triton
def test_against_triton_a_competitor_comes_back_by_itself_when_its_model_is_ready(
    acme: Tenant, triton_server: TritonServer, beat_tick: Callable[[], int]
) -> None:
    """acme's endpoints point at the session's Triton (the `triton` marker); one is moved to an address
    where nothing listens, goes down after two ticks, and is back at the first tick after it is fixed."""
    endpoint = endpoint_of(acme.left)
    ModelEndpoint.objects.filter(pk=endpoint.pk).update(url=MODEL_SERVER_URL)
    beat_tick()
    beat_tick()
    assert fresh(endpoint).health == Health.DOWN and fresh(endpoint_of(acme.right)).health == Health.READY
    assert selectors.pair_pick(campaign=acme.campaign, rng=random.Random(1)) is None
    ModelEndpoint.objects.filter(pk=endpoint.pk).update(url=triton_server.grpc_url)
    beat_tick()
    assert fresh(endpoint).health == Health.READY
    assert EndpointOutage.objects.get(endpoint=endpoint).ended_at is not None
    assert selectors.pair_pick(campaign=acme.campaign, rng=random.Random(1)) is not None


def test_the_leaderboard_notes_how_long_a_competitor_was_unavailable(acme: Tenant, bob, alice_client: Client) -> None:  # type: ignore[no-untyped-def]
    from ranking.services import leaderboards_recompute

    now = timezone.now()
    Campaign.objects.filter(pk=acme.campaign.pk).update(opened_at=now - timedelta(hours=1))
    Competitor.objects.filter(campaign=acme.campaign).update(created_at=now - timedelta(hours=2))
    EndpointOutage.objects.create(
        organization=acme.organization,
        endpoint=endpoint_of(acme.left),
        started_at=now - timedelta(minutes=30),
        first_failed_at=now - timedelta(minutes=30),
        ended_at=now - timedelta(minutes=18),
        reason=FAIL,
    )
    leaderboards_recompute(campaign_id=acme.campaign.pk)
    html = alice_client.get(reverse("ranking:leaderboard", args=[acme.campaign.pk])).content.decode()
    assert f"{acme.left} for 12 min in 1 outage." in " ".join(html.split())
    assert f"{acme.right} for" not in html


def test_an_endpoint_deleted_while_it_was_checked_is_no_error(acme: Tenant) -> None:
    endpoint = endpoint_for(acme, model="zen-bigram", url=MODEL_SERVER_URL)
    ModelEndpoint.objects.filter(pk=endpoint.pk).delete()
    assert services.endpoint_health_record(endpoint=endpoint, detail=FAIL) == ""
    assert not EndpointOutage.objects.exists()


@pytest.mark.server
def test_a_real_worker_runs_the_beat_tick_and_the_rounds_through_redis(worker, acme: Tenant, globex: Tenant) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    """As beat sends it: the tick goes through Redis, the worker lists the organisations and queues each
    its round (keyword organization_id, JSON, an expiry), and the rounds record their checks."""
    if connection.vendor != "postgresql":
        pytest.fail("the worker shares the test database: run on PostgreSQL (scripts/test)")
    endpoints_health_check_open_task.delay()
    ids = [endpoint_of(t).pk for t in (acme.left, acme.right, globex.left, globex.right)]
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if ModelEndpoint.objects.filter(pk__in=ids, health_failures__gte=1).count() == len(ids):
            break
        if worker.poll() is not None:
            pytest.fail("worker exited:\n" + (worker.stdout.read() if worker.stdout else ""))
        time.sleep(0.5)
    else:
        pytest.fail("the rounds did not run")
    # The worker is allowed loopback (the suite's Triton ports), where nothing listens at port 9.
    assert "server unreachable" in ModelEndpoint.objects.get(pk=ids[0]).health_detail


def test_a_managers_save_does_not_write_back_a_stale_health_state(acme: Tenant) -> None:
    stale = fresh(endpoint_of(acme.left))  # as the console's form loaded it
    record(endpoint_of(acme.left), 0, FAIL)
    record(endpoint_of(acme.left), 1, FAIL)
    stale.timeout_s = 30.0
    services.endpoint_save(endpoint=stale, actor=None, changed=["timeout_s"])
    stored = fresh(endpoint_of(acme.left))
    assert (stored.timeout_s, stored.health, stored.health_failures) == (30.0, Health.DOWN, 2)
    assert record(endpoint_of(acme.left), 2) == "ready"
    assert EndpointOutage.objects.get().ended_at == at(2)
