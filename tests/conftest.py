"""The shared world of the suite: a real Triton server for the session, and three people.

alice owns and manages Acme; bob rates for Acme; charlie belongs to Globex, another tenant, and must
never see anything of Acme's (healthchecks' alice/bob/charlie)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.test import Client
from hypothesis import settings as hypothesis_settings

from battles.models import Campaign, Competitor
from raters.models import Organization, RaterPool, Role
from raters.tenancy import scopes_disabled
from serving.models import ModelEndpoint
from serving.triton.server import TritonServer

from .factories import (
    CampaignFactory,
    CompetitorFactory,
    MembershipFactory,
    ModelEndpointFactory,
    OrganizationFactory,
    PromptFactory,
    RaterPoolFactory,
    UserFactory,
)

# CI runs the property tests on a fixed sequence of examples (a failure there is reproducible, not a
# roll of the dice), with no per-example deadline (a loaded 2-core machine is slow, not wrong).
hypothesis_settings.register_profile("ci", derandomize=True, deadline=None, print_blob=True)
hypothesis_settings.register_profile("dev", deadline=None)
hypothesis_settings.load_profile("ci" if os.environ.get("CI") else "dev")

TEST_MODEL_REPOSITORY = Path(__file__).parent / "serving" / "model_repository"


@pytest.fixture(autouse=True)
def tenant_scopes(request: pytest.FixtureRequest) -> Iterator[None]:
    """Test bodies and fixtures arrange and inspect rows of several organisations at once, so they run
    with scopes disabled (as pretix's suite does); the code under test opens its own scope at its edge
    (a request, a task, a command), which re-enables enforcement inside it. A test marked
    ``tenant_scoped`` runs with no scope at all, as production code outside an edge would."""
    if request.node.get_closest_marker("tenant_scoped"):
        yield
        return
    with scopes_disabled():
        yield


@pytest.fixture(scope="session")
def triton_server() -> Iterator[TritonServer]:
    """One real Triton server (the nvidia-pytriton binary) for the whole session, with the shipped
    models and the test-only ones (delays, broken output, failures)."""
    server = TritonServer(model_repositories=[Path(settings.ARENA_MODEL_REPOSITORY), TEST_MODEL_REPOSITORY])
    server.start()
    try:
        yield server
    finally:
        server.stop()


@dataclass
class Tenant:
    organization: Organization
    pool: RaterPool
    campaign: Campaign
    left: Competitor
    right: Competitor


def make_tenant(*, owner: User, rater: User, triton: TritonServer, name: str, prompts: int = 8,
                models: tuple[str, str] = ("zen-bigram", "stdlib-trigram")) -> Tenant:
    organization = OrganizationFactory.create(name=name, slug=name.lower())
    MembershipFactory.create(user=owner, organization=organization, role=Role.OWNER)
    if rater != owner:
        MembershipFactory.create(user=rater, organization=organization, role=Role.RATER)
    pool = RaterPoolFactory.create(organization=organization, name=f"{name} staff")
    pool.members.add(rater)
    campaign = CampaignFactory.create(organization=organization, name=f"{name} chat", slug=f"{name.lower()}-chat")
    campaign.rater_pools.add(pool)
    competitors = []
    for model in models:
        endpoint = ModelEndpointFactory.create(organization=organization, name=f"{name}-{model}",
                                               url=triton.grpc_url, model_name=model)
        competitors.append(CompetitorFactory.create(campaign=campaign, endpoint=endpoint, version_label="2026-11"))
    for _ in range(prompts):
        PromptFactory.create(campaign=campaign)
    return Tenant(organization, pool, campaign, competitors[0], competitors[1])


@pytest.fixture
def alice(db: None) -> User:
    return UserFactory.create(email="alice@acme.test")


@pytest.fixture
def bob(db: None) -> User:
    return UserFactory.create(email="bob@acme.test")


@pytest.fixture
def charlie(db: None) -> User:
    return UserFactory.create(email="charlie@globex.test")


@pytest.fixture
def acme(alice: User, bob: User, triton_server: TritonServer) -> Tenant:
    return make_tenant(owner=alice, rater=bob, triton=triton_server, name="Acme")


@pytest.fixture
def globex(charlie: User, triton_server: TritonServer) -> Tenant:
    """charlie owns Globex and also rates in it: a fully privileged user, of the wrong tenant."""
    return make_tenant(owner=charlie, rater=charlie, triton=triton_server, name="Globex")


def login(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def bob_client(bob: User) -> Client:
    return login(bob)


@pytest.fixture
def alice_client(alice: User) -> Client:
    return login(alice)


@pytest.fixture
def charlie_client(charlie: User) -> Client:
    return login(charlie)


def endpoint_for(tenant: Tenant, *, model: str, url: str, timeout_s: float = 20.0,
                 protocol: str = ModelEndpoint.Protocol.GRPC) -> ModelEndpoint:
    return ModelEndpointFactory.create(organization=tenant.organization, model_name=model, url=url,
                                       timeout_s=timeout_s, protocol=protocol)


def start_battle(client: Client, campaign: Campaign):  # type: ignore[no-untyped-def]
    """Ask for the next battle as a rater does and open it (which stamps 'shown')."""
    from battles.models import Battle

    response = client.post(f"/c/{campaign.pk}/next/")
    assert response.status_code == 302, response.content.decode()[:2000]
    page = client.get(response["Location"])
    assert page.status_code == 200
    battle_id = response["Location"].rstrip("/").split("/")[-1]
    with scopes_disabled():
        return Battle.objects.get(pk=battle_id), page


@pytest.fixture
def vote_log_purge(transactional_db: None) -> Iterator[None]:
    """For tests that commit: empty the append-only vote log at teardown, before Django flushes the
    database. Only a superuser session can do it, by turning triggers off for itself (replica role);
    the application's own connections never can."""
    yield
    from django.db import connection

    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SET session_replication_role = replica")
            cursor.execute("DELETE FROM battles_vote")
            cursor.execute("SET session_replication_role = DEFAULT")
        else:
            import importlib

            migration = importlib.import_module("battles.migrations.0002_vote_log_append_only")
            for statement in migration.SQLITE_BACKWARD:
                cursor.execute(statement)
            cursor.execute("DELETE FROM battles_vote")
            for statement in migration.SQLITE_FORWARD:
                cursor.execute(statement)
