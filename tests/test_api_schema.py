"""Every endpoint of the REST API against its own OpenAPI schema, with schemathesis (property-based).

For each operation in the generated schema, schemathesis draws requests that fit the schema and requests
that break it (wrong types, missing fields, out-of-range values), and sends them through the real Django
stack (WSGI, middleware, tenant scope, authentication) with a read-only key and with a read-write key of
the campaign's organisation. Every response must be no 5xx, have a status and a content type the schema
declares for that operation, and a body that fits the declared schema; a request that breaks the schema
must be refused with a 4xx. Path parameters naming a campaign are pointed at a real campaign with votes
and a leaderboard, so the draws reach the code behind the tenant check, not only its 404.

The examples are derandomised in CI (tests/conftest.py's hypothesis profile); ARENA_SCHEMATHESIS_EXAMPLES
sets how many are drawn per operation and mode (8 by default: over a hundred operations, two key scopes,
within the suite's time; a deeper local run sets more)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from django.core.cache import cache
from django.core.signals import request_finished, request_started
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from drf_spectacular.generators import SchemaGenerator
from hypothesis import HealthCheck, settings
from pytest_django import DjangoDbBlocker
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    response_schema_conformance,
    status_code_conformance,
)

from raters.services import webhook_endpoint_create, webhook_event_emit
from tests.conftest import api_client
from tests.module_world import module_world

EXAMPLES = int(os.environ.get("ARENA_SCHEMATHESIS_EXAMPLES", "8"))
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    negative_data_rejection,
]


def _text_body(ctx: Any, value: Any) -> bytes:
    """Bodies that are files in a text format (the prompt import's JSON lines) go on the wire as UTF-8;
    schemathesis has no serializer of its own for these media types (CSV goes as text/plain does)."""
    return value if isinstance(value, bytes) else str(value).encode("utf-8", "surrogatepass")


schemathesis.serializer("application/x-ndjson", "application/jsonl")(_text_body)


def _document() -> dict[str, Any]:
    generated = SchemaGenerator().get_schema(request=None, public=True)
    return dict(generated)


schema = schemathesis.openapi.from_dict(_document())
schema.app = get_wsgi_application()
schema.config.generation.update(max_examples=EXAMPLES)
# A body over ARENA_API_MAX_BODY_BYTES is refused with 413 before it is parsed: a refusal like a 400 (a draw
# that breaks a maxLength can be that large).
_rejection = schema.config.checks.negative_data_rejection
_rejection.expected_statuses = [*_rejection.expected_statuses, "413"]


@pytest.fixture
def wsgi_in_test_transaction() -> Iterator[None]:
    """The WSGI handler closes the database connection after each request (``close_old_connections``),
    which would end the test's transaction; Django's test client unhooks it the same way."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        yield
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)


def _api_world_build() -> dict[str, Any]:
    """Acme with 40 votes in two categories and its leaderboards, a webhook with a delivery, a judge run
    with verdicts, and keys of the three scopes (the base world's alice, bob, charlie, Acme and Globex)."""
    from battles.models import Prompt
    from battles.services import judge_run_create, judge_run_execute
    from ranking.services import leaderboards_recompute
    from tests.battles.judge_world import battle_plant, judge_make
    from tests.conftest import MODEL_SERVER_URL, make_tenant
    from tests.factories import UserFactory
    from tests.ranking.synth import votes_write

    alice = UserFactory.create(email="alice@acme.test")
    bob = UserFactory.create(email="bob@acme.test")
    charlie = UserFactory.create(email="charlie@globex.test")
    acme = make_tenant(owner=alice, rater=bob, model_server_url=MODEL_SERVER_URL, name="Acme")
    make_tenant(owner=charlie, rater=charlie, model_server_url=MODEL_SERVER_URL, name="Globex")
    votes_write(
        campaign=acme.campaign,
        pool=acme.pool,
        raters=[bob],
        prompts=list(Prompt.objects.filter(campaign=acme.campaign)),
        competitors=[acme.left, acme.right],
        strengths=(2.0, 1.0),
        n=40,
        categories=("coding", "writing"),
    )
    leaderboards_recompute(campaign_id=acme.campaign.pk)
    webhook = webhook_endpoint_create(
        organization=acme.organization, url="https://93.184.216.34/hook", events=["battle.rated"], actor=None
    )
    webhook_event_emit(organization_id=acme.organization.pk, event="battle.rated", payload={"n": 1})
    # A judge run with verdicts (refusals: nothing answers at the base world's discard port).
    for i in range(2):
        battle_plant(acme, left=acme.left, right=acme.right, better="left", index=i)
    judge = judge_make(acme, url=MODEL_SERVER_URL)
    judge_run = judge_run_create(judge=judge, campaign=acme.campaign, actor=None, start=False)
    judge_run_execute(run_id=judge_run.pk)
    return {
        "campaign_id": acme.campaign.pk,
        "webhook_id": webhook.pk,
        "run_id": judge_run.pk,
        "read": api_client(acme.organization, scope="read", rate_limit="100000/m").api_key_header,
        "write": api_client(acme.organization, scope="write", rate_limit="100000/m").api_key_header,
        "owner": api_client(acme.organization, scope="owner", rate_limit="100000/m").api_key_header,
    }


@pytest.fixture(scope="module")
def api_world_rows(django_db_setup: None, django_db_blocker: DjangoDbBlocker) -> Iterator[dict[str, Any]]:
    """The world, built once for the module (tests/module_world.py): the tests only read it, and each
    test's own writes (the drawn POSTs, PATCHes and DELETEs) are rolled back after it, so every test
    starts from the same rows. The tests get ids and key headers only."""
    yield from module_world(django_db_blocker, _api_world_build)


@pytest.fixture
def api_world(api_world_rows: dict[str, Any], db: None, wsgi_in_test_transaction: None) -> dict[str, Any]:
    cache.clear()  # throttle counters of earlier tests
    return dict(api_world_rows)


def _aim(case: schemathesis.Case, world: dict[str, Any]) -> None:
    # A random id is nearly always another organisation's or nobody's: a 404 that tests little.
    # Only a well-formed id is replaced: a malformed one is a negative draw, to be refused as drawn.
    for name in ("campaign_id", "webhook_id"):
        drawn = (case.path_parameters or {}).get(name)
        if isinstance(drawn, int) or (isinstance(drawn, str) and drawn.isdigit()):
            case.path_parameters[name] = world[name]
    drawn = (case.path_parameters or {}).get("run_id")
    if "/judge-runs/" in case.path and (isinstance(drawn, int) or (isinstance(drawn, str) and drawn.isdigit())):
        case.path_parameters["run_id"] = world["run_id"]


def _sent_blank(value: Any) -> bool:
    """Whether the view reads this drawn query value as not given: "" and {} are sent as "limit=", []
    not at all, and a list as the parameter repeated, of which Django reads the last (["5", ""] is
    "limit=5&limit=", read as "limit="; [""] is "limit=")."""
    if isinstance(value, list) and value:
        return _sent_blank(value[-1])
    return value in ("", {}, [])


@pytest.mark.django_db
@pytest.mark.parametrize("scope", ["read", "write"])
@schema.parametrize()
@settings(suppress_health_check=list(HealthCheck), deadline=None)
def test_every_endpoint_keeps_to_its_schema(case: schemathesis.Case, api_world: dict[str, Any], scope: str) -> None:
    _aim(case, api_world)
    checks = CHECKS
    if any(_sent_blank(value) for value in (case.query or {}).values()):
        # An empty query parameter means "not given" (the web form's convention, read so by DRF and
        # django-filter alike), so a draw that only blanks one is not a violation to be refused.
        checks = [check for check in CHECKS if check is not negative_data_rejection]
    # Webhooks take an owner key (a read or write key gets the documented 403 on each): the write run
    # sends the owner key there, so their success paths are drawn too.
    if scope == "write" and case.path.startswith("/api/v1/webhooks/"):
        scope = "owner"
    case.call_and_validate(headers={"Authorization": api_world[scope]}, checks=checks)
