"""Tenancy is enforced by the ORM: an unscoped query of a tenant-owned model raises, and each edge (a
request, an API key, a task, a command) opens the scope of exactly the organisations it may touch."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.apps import apps
from django.conf import settings
from django.contrib.auth.models import User
from django.db import models
from django.http import StreamingHttpResponse
from django.urls import reverse

from battles.demo import demo_seed
from battles.models import Battle, Campaign, Generation, Vote
from ranking.models import LeaderboardSnapshot
from ranking.tasks import leaderboards_recompute_open_task, leaderboards_recompute_task
from raters.models import ApiKey, Membership, Organization, RaterPool
from raters.services import api_key_create
from raters.tenancy import (
    ScopeError,
    TenantManager,
    TenantTask,
    UnscopedQuerySet,
    organization_scope,
    principal_organization_ids,
    scopes_disabled,
)
from serving.models import ModelEndpoint
from serving.tasks import endpoints_health_check_open_task, endpoints_health_check_task
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

# The tenant itself; and the vote log's narrow copy (ranking.LogVote, LogPrompt), written by a database trigger
# and read by the recompute through SQL for one campaign id (ranking/selectors/arrays.py), never through the ORM
# by a request: everything else that is ours is tenant-owned.
UNSCOPED = {"raters.Organization", "ranking.LogVote", "ranking.LogPrompt"}


def _tenant_models() -> list[type[models.Model]]:
    found = []
    for config in apps.get_app_configs():
        if config.name not in ("raters", "battles", "serving", "ranking"):
            continue
        for model in config.get_models():
            label = f"{model._meta.app_label}.{model.__name__}"
            if label not in UNSCOPED and not model._meta.auto_created:
                found.append(model)
    return found


def test_every_tenant_model_is_scoped():
    tenant_models = _tenant_models()
    assert {m.__name__ for m in tenant_models} >= {
        "Membership",
        "RaterPool",
        "Invitation",
        "AuditEvent",
        "RaterFlag",
        "ApiKey",
        "ModelEndpoint",
        "Campaign",
        "Competitor",
        "Prompt",
        "Battle",
        "Generation",
        "Vote",
        "LeaderboardSnapshot",
        "EndpointOutage",
    }
    for model in tenant_models:
        assert isinstance(model._default_manager, TenantManager), model


@pytest.mark.tenant_scoped
@pytest.mark.parametrize(
    "query",
    [
        lambda m: list(m.objects.all()),
        lambda m: m.objects.filter(pk=1).exists(),
        lambda m: m.objects.count(),
        lambda m: m.objects.get(pk=1),
        lambda m: m.objects.first(),
        lambda m: m.objects.values_list("pk"),
        lambda m: m.objects.filter(pk=1).update(pk=1),
    ],
)
def test_an_unscoped_query_raises(query):
    for model in _tenant_models():
        with pytest.raises(ScopeError):
            query(model)


@pytest.mark.tenant_scoped
def test_an_unscoped_all_may_be_declared_but_not_evaluated():
    queryset = Campaign.objects.all()  # a form may declare this at import time
    assert isinstance(queryset, UnscopedQuerySet)
    with pytest.raises(ScopeError):
        list(queryset)
    with pytest.raises(ScopeError):
        queryset.filter(pk=1)


@pytest.mark.tenant_scoped
def test_a_scope_shows_its_organisations_only(acme, globex):
    with organization_scope(acme.organization.pk):
        assert list(Campaign.objects.values_list("pk", flat=True)) == [acme.campaign.pk]
        assert not RaterPool.objects.filter(pk=globex.pool.pk).exists()
        assert set(Membership.objects.values_list("organization_id", flat=True)) == {acme.organization.pk}
    with organization_scope([acme.organization.pk, globex.organization.pk]):
        assert Campaign.objects.count() == 2
    with scopes_disabled():
        assert Campaign.objects.count() == 2


@pytest.mark.tenant_scoped
@pytest.mark.triton
@pytest.mark.usefixtures("triton_server")
def test_a_generation_is_scoped_through_its_battle(acme, globex, bob_client):
    from tests.conftest import start_battle

    battle, _ = start_battle(bob_client, acme.campaign)
    with organization_scope(globex.organization.pk):
        assert not Generation.objects.filter(battle_id=battle.pk).exists()
        assert not Battle.objects.filter(pk=battle.pk).exists()
    with organization_scope(acme.organization.pk):
        assert Generation.objects.filter(battle_id=battle.pk).count() == 2


def test_principal_scopes(acme, globex, alice, bob, charlie):
    assert principal_organization_ids(bob) == [acme.organization.pk]
    assert principal_organization_ids(charlie) == [globex.organization.pk]
    stranger = UserFactory()
    assert principal_organization_ids(stranger) == []
    root = User.objects.create_superuser(username="root", email="root@example.test", password="x")
    assert principal_organization_ids(root) is None
    bob.is_active = False
    assert principal_organization_ids(bob) == []
    from django.contrib.auth.models import AnonymousUser

    assert principal_organization_ids(AnonymousUser()) == []


@pytest.mark.tenant_scoped
def test_requests_run_in_the_principals_scope(acme, globex, bob_client, charlie_client):
    """Through the middleware: no test-side scope is open, and the pages still work for members."""
    page = bob_client.get(reverse("battles:campaigns"))
    assert page.status_code == 200 and acme.campaign.name in page.content.decode()
    assert globex.campaign.name not in page.content.decode()
    assert charlie_client.get(reverse("battles:campaign", args=[acme.campaign.pk])).status_code == 404


@pytest.mark.tenant_scoped
@pytest.mark.triton
@pytest.mark.usefixtures("triton_server")
def test_an_api_key_request_is_scoped_to_the_keys_organisation_also_while_streaming(
    acme, globex, alice, charlie, bob_client
):
    from django.test import Client

    from tests.conftest import start_battle

    battle, _ = start_battle(bob_client, acme.campaign)
    bob_client.post(reverse("battles:vote", args=[battle.pk]), {"choice": "left"})
    with scopes_disabled():
        _, key = api_key_create(organization=acme.organization, name="warehouse", scope="read", actor=alice)
        _, foreign = api_key_create(organization=globex.organization, name="theirs", scope="read", actor=charlie)
    client = Client(HTTP_AUTHORIZATION=f"Api-Key {key}")
    url = reverse("api:votes", kwargs={"campaign_id": acme.campaign.pk, "kind": "jsonl"})
    response = client.get(url)
    assert response.status_code == 200
    assert isinstance(response, StreamingHttpResponse)
    lines = b"".join(response.streaming_content).decode().splitlines()  # evaluated after the view returned
    assert len(lines) == 1 and str(battle.pk) in lines[0]
    assert Client(HTTP_AUTHORIZATION=f"Api-Key {foreign}").get(url).status_code == 404
    assert Client(HTTP_AUTHORIZATION="Api-Key arena_nope_nope").get(url).status_code in (401, 403)
    with scopes_disabled():
        assert ApiKey.objects.get(organization=acme.organization).last_used_at is not None


@pytest.mark.tenant_scoped
def test_a_tenant_task_needs_its_organisation_and_runs_in_its_scope(acme):
    assert isinstance(leaderboards_recompute_task._get_current_object(), TenantTask)  # type: ignore[attr-defined]
    with pytest.raises(TypeError, match="organization_id"):
        leaderboards_recompute_task(acme.campaign.pk, organization_id=None)
    # Called as a worker calls it: no scope open around it.
    assert leaderboards_recompute_task(acme.campaign.pk, organization_id=acme.organization.pk) >= 1
    with scopes_disabled():
        assert LeaderboardSnapshot.objects.filter(campaign=acme.campaign).exists()


@pytest.mark.tenant_scoped
def test_a_tenant_task_of_another_organisation_finds_nothing(acme, globex):
    assert leaderboards_recompute_task(acme.campaign.pk, organization_id=globex.organization.pk) == 0
    with scopes_disabled():
        assert not LeaderboardSnapshot.objects.filter(campaign=acme.campaign).exists()


@pytest.mark.tenant_scoped
@pytest.mark.triton
@pytest.mark.usefixtures("triton_server")
def test_beat_safety_net_runs_without_a_scope(acme, bob_client):
    from tests.conftest import start_battle

    battle, _ = start_battle(bob_client, acme.campaign)
    bob_client.post(reverse("battles:vote", args=[battle.pk]), {"choice": "tie"})
    leaderboards_recompute_open_task()  # no ScopeError: it lists across tenants on purpose


@pytest.mark.tenant_scoped
def test_health_check_lister_runs_without_a_scope_and_its_rounds_are_tenant_tasks(acme, globex):
    assert isinstance(endpoints_health_check_task._get_current_object(), TenantTask)  # type: ignore[attr-defined]
    assert endpoints_health_check_open_task() == 2  # no ScopeError: it lists across tenants on purpose
    # A round of one organisation sees only its own endpoints (nothing listens there: one failed check).
    assert endpoints_health_check_task(organization_id=globex.organization.pk) == 2
    with scopes_disabled():
        failures = {e.organization_id: e.health_failures for e in ModelEndpoint.objects.all()}
    assert failures[globex.organization.pk] >= 1 and failures[acme.organization.pk] == 0


@pytest.mark.tenant_scoped
def test_demo_seed_opens_its_own_scope():
    world = demo_seed(triton_grpc_url="127.0.0.1:1", model_repository=Path(settings.ARENA_MODEL_REPOSITORY))
    with organization_scope(world.organization.pk):
        assert Campaign.objects.filter(pk=world.campaign.pk).exists()
    assert Organization.objects.filter(slug="demo-lab").exists()  # the tenant itself is not scoped


def test_votes_stay_append_only_through_the_scoped_manager(acme):
    with pytest.raises(Exception, match="append-only"):
        Vote.objects.filter(organization=acme.organization).update(decision_ms=0)


# Tasks that work across organisations by design, each with a test above showing it runs unscoped.
CROSS_TENANT_TASKS = {
    "ranking.tasks.leaderboards_recompute_open_task",
    "battles.tasks.buffer_maintain_open_task",  # tests/battles/test_buffer.py runs it without a scope
    "battles.tasks.export_jobs_purge_task",  # tests/battles/test_export.py runs it without a scope
    "serving.tasks.endpoints_health_check_open_task",
    "raters.tasks.webhook_deliveries_due_task",  # tests/raters/test_webhooks.py runs it without a scope
    "battles.tasks.participants_time_out_task",  # tests/battles/test_study.py runs it without a scope
    "raters.tasks.webhook_deliveries_purge_task",  # tests/raters/test_webhook_retention.py: without a scope
    "ranking.tasks.promotions_check_task",  # tests/ranking/test_promotions.py runs it without a scope
}


def test_every_task_opens_a_tenant_scope_or_is_a_declared_cross_tenant_task():
    from arena.celery import app

    app.loader.import_default_modules()
    ours = {
        name: task
        for name, task in app.tasks.items()
        if name.split(".")[0] in ("raters", "battles", "serving", "ranking")
    }
    assert "ranking.tasks.leaderboards_recompute_task" in ours
    for name, task in ours.items():
        assert isinstance(task, TenantTask) or name in CROSS_TENANT_TASKS, (
            f"{name}: make it a TenantTask (organization_id=) or declare and test it as cross-tenant"
        )
