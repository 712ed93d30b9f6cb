"""The shared world of the suite: three people, two tenants, and a real Triton server for the tests
that generate answers.

alice owns and manages Acme; bob rates for Acme; charlie belongs to Globex, another tenant, and must
never see anything of Acme's (healthchecks' alice/bob/charlie).

The base world needs no model server: the tenants' endpoints point at MODEL_SERVER_URL, where nothing
listens. A test that generates answers requests `triton_server` (which starts one real Triton for the
session) and carries the `triton` marker; then the tenants' endpoints point at that server. The
marker is enforced at collection, so `pytest -m "not triton"` never starts Triton.

The real small LLMs (opt-in, serving/llm_model_repository/) get a Triton of their own,
`llm_triton_server`, for tests marked both `triton` and `real_llm`; see that fixture for when a missing
install fails and when it skips."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.test import Client
from django.urls import resolve, reverse
from hypothesis import settings as hypothesis_settings

from battles.models import Campaign, Competitor, Prompt
from raters.models import ApiKey, Organization, RaterPool, Role
from raters.tenancy import organization_scope, scopes_disabled
from serving.analysis import prompt_asks_identity
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
from .fast_flush import delete_flush

# CI runs the property tests on a fixed sequence of examples (a failure there is reproducible, not a
# roll of the dice), with no per-example deadline (a loaded 2-core machine is slow, not wrong).
hypothesis_settings.register_profile("ci", derandomize=True, deadline=None, print_blob=True)
hypothesis_settings.register_profile("dev", deadline=None)
hypothesis_settings.load_profile("ci" if os.environ.get("CI") else "dev")

TEST_MODEL_REPOSITORY = Path(__file__).parent / "serving" / "model_repository"
# Where the base world's endpoints point: nothing listens on the discard port, so a test that
# generates answers without the Triton server fails at once (a voided battle), not after a timeout.
MODEL_SERVER_URL = "127.0.0.1:9"
TRITON_FIXTURE = "triton_server"
LLM_TRITON_FIXTURE = "llm_triton_server"
# Fixtures that start a web server: a test using one is marked `server` or `browser` (checked at collection).
SERVER_FIXTURES = {"live_server", "asgi_live_server"}
# The real models and the prompt format their endpoints need (the client applies the template).
REAL_LLM_MODELS = {"smollm2-135m-instruct": "chatml", "gemma3-270m": "raw"}


# The order tests start in, heaviest first, so that pytest-xdist's scheduler (scripts/test's system tier
# runs `--dist loadgroup`: the longest jobs first, then the rest as workers free up) does not leave one
# worker on a minute-long fault test while the other idles at the end. Stable: within a weight, the
# collection order (and so each module's tests together, for module-scoped fixtures) is kept.
WEIGHTS = (("reliability", 4), ("server", 3), ("browser", 2), ("real_llm", 2), ("triton", 1))


def _weight(item: pytest.Item) -> int:
    return max((weight for marker, weight in WEIGHTS if item.get_closest_marker(marker) is not None), default=0)


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects anything: every collected test is checked
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    unmarked = [
        item.nodeid
        for item in items
        if TRITON_FIXTURE in getattr(item, "fixturenames", ()) and item.get_closest_marker("triton") is None
    ]
    unmarked_llm = [
        item.nodeid
        for item in items
        if LLM_TRITON_FIXTURE in getattr(item, "fixturenames", ())
        and (item.get_closest_marker("triton") is None or item.get_closest_marker("real_llm") is None)
    ]
    if unmarked_llm:
        raise pytest.UsageError(
            f"these tests use the real-LLM Triton server (fixture {LLM_TRITON_FIXTURE!r}) but lack the `triton` "
            "and `real_llm` markers, so a deselecting `-m` would still start it:\n  " + "\n  ".join(unmarked_llm)
        )
    # The tiers of scripts/test select by marker: a test that serves pages to a browser or to itself over
    # a socket (a web server in a thread) belongs to the system tier, never to the fast one.
    unmarked_server = [
        item.nodeid
        for item in items
        if SERVER_FIXTURES & set(getattr(item, "fixturenames", ()))
        and item.get_closest_marker("server") is None
        and item.get_closest_marker("browser") is None
    ]
    unmarked_browser = [
        item.nodeid
        for item in items
        if "chromium" in getattr(item, "fixturenames", ()) and item.get_closest_marker("browser") is None
    ]
    if unmarked_browser:
        raise pytest.UsageError(
            "these tests drive Chromium (fixture 'chromium') but lack the `browser` marker:\n  "
            + "\n  ".join(unmarked_browser)
        )
    if unmarked_server:
        raise pytest.UsageError(
            f"these tests start a web server (fixtures {sorted(SERVER_FIXTURES)}) but lack the `server` or `browser` "
            "marker, so the fast tier would run them:\n  " + "\n  ".join(unmarked_server)
        )
    if unmarked:
        raise pytest.UsageError(
            f"these tests use the Triton server (fixture {TRITON_FIXTURE!r}) but lack the `triton` marker, "
            'so `-m "not triton"` would start Triton; add @pytest.mark.triton (or pytestmark):\n  '
            + "\n  ".join(unmarked)
        )
    items.sort(key=_weight, reverse=True)


@pytest.fixture(scope="session", autouse=True)
def flush_by_delete() -> Iterator[None]:
    """After each transactional test (``transactional_db``, ``live_server``) Django flushes the database:
    here by DELETE instead of TRUNCATE (tests/fast_flush.py says why that empties the same tables, and how
    much sooner: 0.3-2 s a test on the 2-core machine)."""
    with delete_flush():
        yield


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
    """One real Triton server (the nvidia-pytriton binary, from the Triton environment) for the whole
    session, with the shipped models, the GPU contracts' stand-ins, the demo's judge and the test-only ones (delays,
    broken output, failures).
    Only for tests marked `triton`."""
    server = TritonServer(
        model_repositories=[
            Path(settings.ARENA_MODEL_REPOSITORY),
            Path(settings.ARENA_STANDIN_REPOSITORY),
            Path(settings.ARENA_JUDGE_REPOSITORY),
            TEST_MODEL_REPOSITORY,
        ],
        environment=settings.ARENA_TRITON_ENV,
    )
    server.start()
    try:
        yield server
    finally:
        server.stop()


def real_models_requested() -> bool:
    """ARENA_REAL_MODELS, as scripts/bootstrap reads it (CI sets it: .ci/run)."""
    return os.environ.get("ARENA_REAL_MODELS", "").strip().lower() in ("1", "true", "yes", "on")


def real_models_missing() -> str | None:
    """Why the Triton environment cannot serve the real models (None when it can): asks its
    interpreter, as the models will (`arena_llm.py check`)."""
    python = Path(settings.ARENA_TRITON_ENV) / "bin" / "python"
    script = Path(settings.ARENA_LLM_MODEL_REPOSITORY) / "arena_llm.py"
    if not python.exists():
        return f"no Triton environment at {settings.ARENA_TRITON_ENV}"
    check = subprocess.run([str(python), "-I", str(script), "check"], capture_output=True, text=True, timeout=120)
    return None if check.returncode == 0 else check.stderr.strip() or f"arena_llm.py check exited {check.returncode}"


@pytest.fixture(scope="session")
def llm_triton_server() -> Iterator[TritonServer]:
    """A real Triton server with the real small LLMs (serving/llm_model_repository/) for the session,
    apart from `triton_server` (whose suite must not need them). Only for tests marked `triton` and
    `real_llm`.

    When the models are not installed in the Triton environment the tests *fail* with the reason if
    real models were asked for (ARENA_REAL_MODELS=1, as CI sets it: the install is then broken), and
    are skipped with the reason otherwise (a plain `scripts/test` on a machine that never opted in).
    `-m "not real_llm"` deselects them."""
    missing = real_models_missing()
    if missing is not None:
        message = f"the real LLMs are not installed: {missing}"
        if real_models_requested():
            pytest.fail(message, pytrace=False)
        pytest.skip(message + " (opt in: ARENA_REAL_MODELS=1 scripts/test)")
    server = TritonServer(
        model_repositories=[Path(settings.ARENA_LLM_MODEL_REPOSITORY)],
        environment=settings.ARENA_TRITON_ENV,
        startup_timeout_s=120.0,
    )
    server.start()
    try:
        yield server
    finally:
        server.stop()


def make_real_llm_tenant(*, owner: User, rater: User, server: TritonServer, name: str, prompts: int = 4) -> Tenant:
    """A tenant whose campaign pits the two real LLMs against each other (for tests marked `triton`
    and `real_llm`, with `llm_triton_server`). The endpoints speak the vllm contract with their
    prompt format where ModelEndpoint has those fields (branch `contracts`)."""
    tenant = make_tenant(
        owner=owner,
        rater=rater,
        model_server_url=server.grpc_url,
        name=name,
        prompts=prompts,
        models=tuple(REAL_LLM_MODELS),  # type: ignore[arg-type]
    )
    field_names = {f.name for f in ModelEndpoint._meta.get_fields()}
    for competitor in (tenant.left, tenant.right):
        endpoint = endpoint_of(competitor)
        endpoint.timeout_s = 60.0
        if {"contract", "prompt_format"} <= field_names:
            endpoint.contract = "vllm"  # type: ignore[attr-defined]
            endpoint.prompt_format = REAL_LLM_MODELS[endpoint.model_name]  # type: ignore[attr-defined]
        endpoint.save()
    return tenant


@pytest.fixture
def model_server_url(request: pytest.FixtureRequest) -> str:
    """The address the tenants' endpoints use: the session's Triton server (gRPC) for a test that
    uses it or is marked `triton`, else MODEL_SERVER_URL."""
    if TRITON_FIXTURE in request.fixturenames or request.node.get_closest_marker("triton") is not None:
        server: TritonServer = request.getfixturevalue(TRITON_FIXTURE)
        return server.grpc_url
    return MODEL_SERVER_URL


def endpoint_of(competitor: Competitor) -> ModelEndpoint:
    """The competitor's endpoint, for a test that knows it has one."""
    assert competitor.endpoint is not None
    return competitor.endpoint


@dataclass
class Tenant:
    organization: Organization
    pool: RaterPool
    campaign: Campaign
    left: Competitor
    right: Competitor


def make_tenant(
    *,
    owner: User,
    rater: User,
    model_server_url: str,
    name: str,
    prompts: int = 8,
    models: tuple[str, str] = ("zen-bigram", "stdlib-trigram"),
) -> Tenant:
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
        endpoint = ModelEndpointFactory.create(
            organization=organization, name=f"{name}-{model}", url=model_server_url, model_name=model
        )
        competitors.append(CompetitorFactory.create(campaign=campaign, endpoint=endpoint, version_label="2026-11"))
    # One INSERT for the prompts (what Prompt.save would add, asks_identity, set here as bulk imports do).
    batch = PromptFactory.build_batch(prompts, campaign=campaign)
    for prompt in batch:
        prompt.asks_identity = prompt_asks_identity(prompt.text)
    Prompt.objects.bulk_create(batch)
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
def acme(alice: User, bob: User, model_server_url: str) -> Tenant:
    return make_tenant(owner=alice, rater=bob, model_server_url=model_server_url, name="Acme")


@pytest.fixture
def globex(charlie: User, model_server_url: str) -> Tenant:
    """charlie owns Globex and also rates in it: a fully privileged user, of the wrong tenant."""
    return make_tenant(owner=charlie, rater=charlie, model_server_url=model_server_url, name="Globex")


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


class KeyClient(Client):
    """A test client that presents an API key (``api_client``)."""

    api_key: ApiKey
    api_key_header: str


def api_client(
    organization: Organization, *, scope: str = "read", rate_limit: str = "", name: str = "test key"
) -> KeyClient:
    """A client that sends an organisation's API key (``scope`` read or write) with every request; the
    key's record is on ``client.api_key``, the header's value on ``client.api_key_header``."""
    from raters.services import api_key_create

    with scopes_disabled():
        api_key, key = api_key_create(
            organization=organization, name=name, scope=scope, rate_limit=rate_limit, actor=None
        )
    client = KeyClient(HTTP_AUTHORIZATION=f"Api-Key {key}")
    client.api_key = api_key
    client.api_key_header = f"Api-Key {key}"
    return client


def endpoint_for(
    tenant: Tenant, *, model: str, url: str, timeout_s: float = 20.0, protocol: str = ModelEndpoint.Protocol.GRPC
) -> ModelEndpoint:
    return ModelEndpointFactory.create(
        organization=tenant.organization, model_name=model, url=url, timeout_s=timeout_s, protocol=protocol
    )


def generation_worker_run() -> int:
    """Do what the generation queue's workers do with the battles queued so far: run the task's body
    (``battles.services.battle_generate_queued``) for each, here, in the test's transaction (a worker
    process could not see the test's uncommitted rows; tests/battles/test_generation_worker.py runs the
    real worker process). Returns how many battles it generated."""
    from battles import services
    from battles.models import Battle

    with scopes_disabled():
        queued = list(
            Battle.objects.filter(status=Battle.Status.GENERATING, generation_started_at__isnull=True)
            .order_by("created_at")
            .values_list("pk", "organization_id")
        )
    for battle_id, organization_id in queued:
        with organization_scope(organization_id):
            services.battle_generate_queued(battle_id=str(battle_id))
    return len(queued)


def start_battle(client: Client, campaign: Campaign):  # type: ignore[no-untyped-def]
    """Ask for the next battle as a rater does, let the generation worker prepare it, and open it
    (which stamps 'shown')."""
    from battles.models import Battle

    response = client.post(reverse("battles:next", args=[campaign.pk]))
    assert response.status_code == 302, response.content.decode()[:2000]
    generation_worker_run()
    battle_id = resolve(response["Location"]).kwargs["battle_id"]
    # Where a real worker runs beside the test (a live server's), it may have taken the battle first: wait
    # for its generation to end, or the page would be the "preparing" one and nothing would be shown.
    deadline = time.monotonic() + 60
    with scopes_disabled():
        generating = Battle.objects.filter(pk=battle_id, status=Battle.Status.GENERATING)
        while generating.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
    page = client.get(response["Location"])
    assert page.status_code == 200
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
