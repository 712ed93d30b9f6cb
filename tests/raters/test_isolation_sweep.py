"""Isolation sweep generated from the URL configuration and the admin registry, so that a new route
cannot be forgotten: every page and API route, and every console page of every registered model,
asked for Acme's objects by

- charlie, who owns Globex (a fully privileged user of the wrong tenant): 404 or the console's
  "does not exist" redirect, never a page with Acme's data, never a change;
- an anonymous visitor: sent to log in (or 401/403/404), never data;
- bob, Acme's rater, on the managers' pages (leaderboards, API, console): refused;
- a read-only API key writing to any API route: refused, nothing changed.

A route with a URL parameter the sweep does not know fails the test: add how to fill it below."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from django.contrib import admin
from django.contrib.auth.models import User
from django.db import models
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver, resolve, reverse

from battles.exporting import VoteFilters
from battles.models import Battle, Experiment, ExportJob, Study, Variant, Vote
from battles.services import (
    ShadowAnswer,
    ShadowBattleInput,
    export_job_create,
    judge_run_create,
    judge_run_execute,
    participant_enter,
    shadow_battles_import,
)
from battles.tasks import export_job_run_task
from ranking.models import AttributeBoard, AttributeEntity, AttributeRun, LeaderboardSnapshot
from ranking.services import (
    attribute_run_execute,
    attribute_run_start,
    judge_run_settle,
    leaderboards_recompute,
    promotion_start,
)
from raters.models import AuditEvent, Invitation, WebhookEndpoint
from raters.services import api_key_create, invitation_create, webhook_endpoint_create, webhook_event_emit
from tests.battles.judge_world import judge_make
from tests.conftest import MODEL_SERVER_URL, Tenant, login, start_battle
from tests.ranking.attribute_world import board_with, ratio_judge, truths

pytestmark = [pytest.mark.django_db, pytest.mark.triton]  # one real battle gives every route an object

SKIPPED_NAMESPACES = {"admin"}  # swept model by model below, from the admin registry
SKIPPED_PREFIXES = ("accounts/",)  # allauth's own pages: not tenant data
# The home page lists only the visitor's own campaigns; the API's schema and its page describe the API
# (no tenant's data).
# Lists of the caller's own (campaigns, webhooks) and the API's public description.
PUBLIC_ROUTES = {
    "battles:campaigns",
    "api:campaigns",
    "api:experiments",
    "api:judges",
    "api-schema",
    "api-docs",
    "api-webhooks",
    "api-attribute-boards",
    "api-promotions",
    *("ranking:board-index", "api-public-board-index"),
}
# The public index of published boards is public by design: it lists only boards their organisation listed
# (tests/ranking/test_board_index.py), and none is published here, so it must name nothing of Acme's.
PUBLIC_INDEX_ROUTES = {"ranking:board-index", "api-public-board-index"}
# The read API's leaderboard and attribute-board routes are not namespaced (ranking/api_urls.py).
MANAGER_ROUTES_PREFIXES = (
    *("api:", "ranking:", "leaderboard", "api-attribute"),
    *("api-campaign", "api-promotion", "api-leaderboards"),
)
# Lists of what the caller may read: empty for a rater.
CALLERS_LISTS = ("api:campaigns", "api:experiments", "api:judges", "api-attribute-boards", "api-promotions")


@dataclass(frozen=True)
class Route:
    name: str  # namespaced
    params: tuple[str, ...]


def _routes(patterns: list[Any], namespace: str = "", prefix: str = "") -> Iterator[Route]:
    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            ns = pattern.namespace or ""
            route_prefix = prefix + str(pattern.pattern)
            if ns in SKIPPED_NAMESPACES or route_prefix.startswith(SKIPPED_PREFIXES):
                continue
            yield from _routes(pattern.url_patterns, f"{namespace}{ns}:" if ns else namespace, route_prefix)
        elif isinstance(pattern, URLPattern) and pattern.name:
            params = tuple(pattern.pattern.regex.groupindex)
            yield Route(namespace + pattern.name, params)


def all_routes() -> list[Route]:
    return list(_routes(get_resolver().url_patterns))


@dataclass
class World:
    acme: Tenant
    battle: Battle
    invitation: Invitation
    version: int
    webhook: WebhookEndpoint
    export_job: ExportJob
    experiment: Experiment
    shadow_battle_id: Any
    judge_id: int
    judge_run_id: int
    study: Study
    attribute_board: AttributeBoard
    attribute_run: AttributeRun
    promotion_id: int


def _value(world: World, route: Route, param: str) -> list[Any]:
    """The values to try for a URL parameter (every allowed format, for instance)."""
    values: dict[str, list[Any]] = {
        "campaign_id": [world.acme.campaign.pk],
        # The shadow-battle status route reads shadow battles only; every other route, the voted one.
        "battle_id": [world.shadow_battle_id if route.name == "api:shadow-battle" else world.battle.pk],
        "version": [world.version],
        "kind": ["jsonl", "csv"],
        "fmt": ["json", "csv"],
        "token": [world.invitation.token],
        "webhook_id": [world.webhook.pk],
        "job_id": [world.export_job.pk],
        "key": [world.experiment.key],
        "judge_id": [world.judge_id],
        # Judge runs (battles' API) and attribute-board runs (ranking's) both name their id run_id.
        "run_id": [world.attribute_run.pk if route.name.startswith("api-attribute") else world.judge_run_id],
        "study_id": [world.study.pk],
        # A published board is public by design (tests/ranking/test_published_boards.py); none is
        # published here, so its routes must answer 404 to everyone.
        "slug": ["not-a-published-board"],
        "board_id": [world.attribute_board.pk],
        "other_id": [world.attribute_run.pk],
        "promotion_id": [world.promotion_id],
    }
    if param not in values:
        pytest.fail(f"the isolation sweep does not know how to fill {param!r} of {route.name}: add it to _value")
    return values[param]


def _urls(world: World, route: Route) -> list[str]:
    urls = [{}]  # type: list[dict[str, Any]]
    for param in route.params:
        urls = [{**u, param: v} for u in urls for v in _value(world, route, param)]
    return [reverse(route.name, kwargs=kwargs) for kwargs in urls]


def _body(response: Any) -> bytes:
    return b"".join(response.streaming_content) if getattr(response, "streaming", False) else response.content


@pytest.fixture
def world(acme: Tenant, globex: Tenant, bob: User, bob_client: Client, settings: Any, tmp_path: Any) -> World:
    battle, _ = start_battle(bob_client, acme.campaign)
    assert bob_client.post(reverse("battles:vote", args=[battle.pk]), {"choice": "left"}).status_code == 302
    leaderboards_recompute(campaign_id=acme.campaign.pk)  # tests queue to a broker nobody serves
    snapshot = LeaderboardSnapshot.objects.filter(campaign=acme.campaign).order_by("-version").first()
    assert snapshot is not None
    invitation = invitation_create(pool=acme.pool, actor=acme.organization.memberships.first().user)  # type: ignore[union-attr]
    # A battle waiting for bob, so the battle routes are reached with an open one too.
    start_battle(bob_client, acme.campaign)
    webhook = webhook_endpoint_create(
        organization=acme.organization, url="https://93.184.216.34/hook", events=["battle.rated"], actor=None
    )
    webhook_event_emit(organization_id=acme.organization.pk, event="battle.rated", payload={"battle_id": 1})
    # A crowd study with a participant, so the console's study and participant pages are swept too.
    study = Study.objects.create(
        organization=acme.organization, campaign=acme.campaign, name="Acme wave", pool=acme.pool, completion_code="C1"
    )
    participant_enter(study=study, vendor_participant_id="5f1a2b3c4d5e6f7a8b9c0d1e")
    # A finished export, so its status and download routes are reached with a file behind them.
    settings.ARENA_EXPORT_ROOT = tmp_path / "exports"
    owner = acme.organization.memberships.first().user  # type: ignore[union-attr]
    job = export_job_create(
        campaign=acme.campaign, requested_by=owner, api_key=None, kind="votes", format="jsonl", texts=False,
        filters=VoteFilters(),
    )  # fmt: skip
    export_job_run_task(str(job.pk), organization_id=acme.organization.pk)
    experiment = Experiment.objects.create(organization=acme.organization, key="checkout-model", campaign=acme.campaign)
    promoted = Variant.objects.create(experiment=experiment, name="a", competitor=acme.left)
    baseline = Variant.objects.create(experiment=experiment, name="b", competitor=acme.right)
    promotion = promotion_start(experiment=experiment, variant=promoted, baseline=baseline, actor=None)
    answers = (
        ShadowAnswer(model="gateway-a", version="1", text="One.", output_tokens=2, finish_reason="stop", latency_s=0.1),
        ShadowAnswer(model="gateway-b", version="1", text="Two.", output_tokens=2, finish_reason="stop", latency_s=0.1),
    )
    [shadow] = shadow_battles_import(
        campaign=acme.campaign,
        items=[ShadowBattleInput(idempotency_key="sweep", prompt="Which?", category="advice", answers=answers)],
        actor=None,
    )
    # A judge with a finished run, its board and calibration, so the judges' routes have objects behind them.
    judge = judge_make(acme, url=MODEL_SERVER_URL)
    run = judge_run_create(judge=judge, campaign=acme.campaign, actor=None, start=False)
    judge_run_execute(run_id=run.pk)
    judge_run_settle(run_id=run.pk)
    # An attribute board with a finished run (the simulated ratio judge, served by the session's Triton).
    ratio = ratio_judge(acme.organization, url=acme.left.endpoint.url)  # type: ignore[union-attr]
    board = board_with(acme.organization, ratio, truths(5), name=f"{acme.campaign.name} attribute", top_k=2)
    attribute_run = attribute_run_execute(run_id=attribute_run_start(board=board, actor=None).pk)
    assert attribute_run.status == AttributeRun.Status.DONE, attribute_run.failure_reason
    # A stored rater flag (raised by a check) and a qualification outcome, for their console pages.
    from battles.models import Qualification
    from raters.services import rater_flag_raise

    rater_flag_raise(
        organization=acme.organization, rater=bob, kind="outlier", reason="sweep", campaign_id=acme.campaign.pk
    )
    Qualification.objects.create(
        organization=acme.organization, campaign=acme.campaign, rater=bob, status="passed",
        answered=2, correct=2, score=1.0, threshold=0.8, last_vote_id=0,
    )  # fmt: skip
    return World(
        acme,
        battle,
        invitation,
        snapshot.version,
        webhook,
        job,
        experiment,
        shadow.battle_id,
        judge.pk,
        run.pk,
        study,
        board,
        attribute_run,
        promotion.pk,
    )


def _state() -> tuple[int, ...]:
    return (
        Vote.objects.count(),
        Battle.objects.count(),
        AuditEvent.objects.count(),
        LeaderboardSnapshot.objects.count(),
        AttributeRun.objects.count(),
        AttributeEntity.objects.count(),
        AttributeBoard.objects.filter(public_slug__isnull=False).count(),
    )


def test_the_sweep_knows_every_route():
    names = {route.name for route in all_routes()}
    assert {"battles:campaign", "battles:vote", "api:votes", "ranking:leaderboard", "raters:invitation"} <= names


def test_an_outsider_gets_nothing_of_acme_from_any_route(world: World, charlie_client: Client):
    secret = world.acme.campaign.name.encode()
    before = _state()
    for route in all_routes():
        if route.name in PUBLIC_ROUTES:
            body = charlie_client.get(reverse(route.name)).content
            assert secret not in body, route.name
            continue
        for url in _urls(world, route):
            if route.name == "raters:invitation":
                # The link is the credential: whoever holds it sees what it is for and may join with a
                # POST (tested in test_invitations.py); charlie is never handed Acme's link, so here only
                # its page, which names no campaign.
                response = charlie_client.get(url)
                assert response.status_code == 200 and secret not in response.content, url
                continue
            for method in ("get", "post"):
                response = getattr(charlie_client, method)(url, {"choice": "left"} if method == "post" else None)
                assert response.status_code in (404, 405), (url, method, response.status_code)
                assert secret not in _body(response), (url, method)
    assert _state() == before


def test_an_anonymous_visitor_is_sent_to_log_in_and_sees_no_data(world: World):
    client = Client()
    secret = world.acme.campaign.name.encode()
    for route in all_routes():
        if route.name == "raters:invitation":
            continue  # the invitation page shows a logged-out invitee what they are invited to
        if route.name in ("api-schema", "api-docs", *PUBLIC_INDEX_ROUTES):
            # The API's description and the index of listed boards are public and name no tenant's data.
            assert secret not in _body(client.get(reverse(route.name)))
            continue
        for url in _urls(world, route) if route.params else [reverse(route.name)]:
            for method in ("get", "post"):
                response = getattr(client, method)(url)
                assert response.status_code in (302, 401, 403, 404, 405), (url, method, response.status_code)
                if response.status_code == 302:
                    assert reverse("account_login") in response["Location"], (url, method)
                assert secret not in _body(response), (url, method)


def test_a_rater_is_refused_every_managers_page(world: World, bob: User):
    client = login(bob)
    for route in all_routes():
        if not route.name.startswith(MANAGER_ROUTES_PREFIXES) or route.name in PUBLIC_INDEX_ROUTES:
            continue
        for url in _urls(world, route):
            response = client.get(url)
            if route.name in CALLERS_LISTS:  # what the caller may read: nothing, for a rater
                assert response.status_code == 200 and response.json()["results"] == [], url
                continue
            view = getattr(resolve(url).func, "cls", None)
            if view is not None and not hasattr(view, "get"):  # a write-only route: GET is not a method of it
                assert response.status_code == 405, url
                continue
            assert response.status_code == 404, url


def test_a_read_only_key_cannot_write_through_any_api_route(world: World, alice: User):
    _, key = api_key_create(organization=world.acme.organization, name="read", scope="read", actor=alice)
    client = Client(HTTP_AUTHORIZATION=f"Api-Key {key}")
    before = _state()
    api_routes = [route for route in all_routes() if route.name.startswith(("api:", "leaderboard", "api-attribute"))]
    assert api_routes
    for route in api_routes:
        for url in _urls(world, route):
            view = getattr(resolve(url).func, "cls", None)
            if view is None or hasattr(view, "get"):  # a write-only route (an import) has nothing to read
                assert client.get(url).status_code == 200, url  # the key reads its own organisation
            for method in ("post", "put", "patch", "delete"):
                response = getattr(client, method)(url, data="{}", content_type="application/json")
                if method == "post" and getattr(view, "read_key_may_post", False):
                    # A POST that reads (asking for an export): open to read keys, and it changes no data.
                    assert response.status_code == 202, (url, method, response.status_code)
                    continue
                assert response.status_code in (403, 405), (url, method, response.status_code)
    assert _state() == before


def _acme_object(model: type[models.Model], world: World) -> models.Model | None:
    organization = world.acme.organization
    if model._meta.label == "raters.Organization":
        return organization
    manager = model._default_manager
    for path in ("organization", "battle__organization"):
        try:
            found = manager.filter(**{path: organization}).order_by("pk").first()
        except Exception:  # the model has no such path
            continue
        return found
    return None


def test_the_console_shows_an_outsider_nothing_of_acme_for_any_registered_model(world: World, charlie_client: Client):
    before = _state()
    swept = 0
    for model in admin.site._registry:
        obj = _acme_object(model, world)
        info = (model._meta.app_label, model._meta.model_name)
        changelist = charlie_client.get(reverse(f"admin:{info[0]}_{info[1]}_changelist"))
        assert changelist.status_code in (200, 302, 403), (model, changelist.status_code)
        if obj is None:
            continue
        swept += 1
        assert f"/{obj.pk}/change/".encode() not in changelist.content, model
        for view in ("change", "delete", "history"):
            url = reverse(f"admin:{info[0]}_{info[1]}_{view}", args=[obj.pk])
            for method in ("get", "post"):
                response = getattr(charlie_client, method)(url, {"post": "yes"} if method == "post" else None)
                assert response.status_code in (302, 403, 404), (url, method, response.status_code)
                if response.status_code == 302:
                    assert "change" not in response["Location"] or str(obj.pk) not in response["Location"], url
                assert str(world.acme.campaign.name).encode() not in response.content, (url, method)
    assert swept >= 8
    assert _state()[:2] == before[:2]


# --- Coverage of the URL configuration itself, and the console for anonymous visitors and raters ------

# Patterns the sweeps above do not request, each with why it needs no sweep. Any other pattern the
# URL configuration gains is swept (named, outside the skipped prefixes) or fails the test below.
UNSWEPT_PATTERNS = {
    "api/schema/": "a redirect to the schema (api-schema, swept)",
    "api/docs/": "a redirect to the docs page (api-docs, swept)",
    "api/(?P<path>[\\s\\S]*)": "the API's 404 for any other path: answers no data to anyone",
}


def _every_pattern(patterns: list[Any], prefix: str = "", namespace: str = "") -> Iterator[tuple[str, str, str]]:
    """(full pattern, namespaced name or '', the top-level prefix) of every leaf of the URL configuration."""
    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            ns = pattern.namespace or ""
            yield from _every_pattern(
                pattern.url_patterns, prefix + str(pattern.pattern), f"{namespace}{ns}:" if ns else namespace
            )
        else:
            yield prefix + str(pattern.pattern), (namespace + pattern.name) if pattern.name else "", prefix


def test_every_pattern_of_the_url_configuration_is_swept_or_explained():
    swept = {route.name for route in all_routes()}
    registered = {f"admin:{m._meta.app_label}_{m._meta.model_name}_" for m in admin.site._registry}
    unexplained = []
    for full, name, _ in _every_pattern(get_resolver().url_patterns):
        full = full.lstrip("^").rstrip("$")
        if full.startswith(SKIPPED_PREFIXES):
            continue  # allauth's pages: logging in and out, no tenant data
        if full.startswith("admin/") and not name:
            # Django's own unnamed console patterns: <object_id>/ redirects to the change page (swept),
            # the catch-all answers 404 or sends to log in.
            assert full.endswith("<path:object_id>/") or full == "admin/(?P<url>.*)", full
            continue
        if name.startswith("admin:"):
            # The console: each registered model's pages are swept from the registry (below and above);
            # the site's own pages (index, login, logout, password, app lists, jsi18n) are swept below.
            if not (any(name.startswith(prefix) for prefix in registered) or name in CONSOLE_SITE_PAGES):
                unexplained.append(f"{full} ({name})")
            continue
        if name in swept or full in UNSWEPT_PATTERNS:
            continue
        unexplained.append(f"{full} ({name or 'unnamed'})")
    assert not unexplained, f"routes no sweep requests: add them to a sweep or explain them: {unexplained}"


CONSOLE_SITE_PAGES = {
    "admin:index", "admin:login", "admin:logout", "admin:password_change", "admin:password_change_done",
    "admin:autocomplete", "admin:jsi18n", "admin:view_on_site", "admin:app_list",
}  # fmt: skip


def _console_urls(world: World) -> list[str]:
    urls = [reverse("admin:index")]
    for model in admin.site._registry:
        info = (model._meta.app_label, model._meta.model_name)
        urls += [reverse(f"admin:{info[0]}_{info[1]}_changelist"), reverse(f"admin:{info[0]}_{info[1]}_add")]
        obj = _acme_object(model, world)
        if obj is not None:
            urls += [
                reverse(f"admin:{info[0]}_{info[1]}_{view}", args=[obj.pk]) for view in ("change", "delete", "history")
            ]
        urls.append(reverse("admin:app_list", args=[info[0]]))
    return sorted(set(urls))


def test_the_console_refuses_anonymous_visitors_and_raters_on_every_page(world: World, bob: User):
    """Every console page of every registered model (list, add, change, delete, history, the app
    lists), GET and POST: an anonymous visitor is sent to log in, Acme's rater bob is turned away (sent
    to his campaigns); neither sees Acme's data, nothing changes."""
    secret = world.acme.campaign.name.encode()
    before = _state()
    rater = login(bob)
    urls = _console_urls(world)
    assert len(urls) > 30
    for url in urls:
        for who, client in (("anonymous", Client()), ("rater", rater)):
            for method in ("get", "post"):
                response = getattr(client, method)(url, {"post": "yes"} if method == "post" else None)
                assert response.status_code in (302, 403, 404), (who, url, method, response.status_code)
                if response.status_code == 302:
                    location = response["Location"]
                    if location.startswith(reverse("admin:login")):  # the console's login page sends on
                        location = client.get(location)["Location"]
                    expected = reverse("account_login") if who == "anonymous" else reverse("battles:campaigns")
                    assert location.startswith(expected), (who, url, method, location)
                assert secret not in response.content, (who, url, method)
    assert _state() == before


def test_a_rater_cannot_write_through_any_managers_route(world: World, bob: User):
    """The managers' routes (API, leaderboards) written to by Acme's rater with his session: refused
    (404, 403 or 405), nothing changed."""
    client = login(bob)
    before = _state()
    for route in all_routes():
        if not route.name.startswith(MANAGER_ROUTES_PREFIXES) or route.name in PUBLIC_INDEX_ROUTES:
            continue
        for url in _urls(world, route) if route.params else [reverse(route.name)]:
            for method in ("post", "put", "patch", "delete"):
                response = getattr(client, method)(url, data="{}", content_type="application/json")
                assert response.status_code in (401, 403, 404, 405), (url, method, response.status_code)
    assert _state() == before
