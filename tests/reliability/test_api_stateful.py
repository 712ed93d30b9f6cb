"""Stateful fuzzing of the REST API (schemathesis' state machine), in addition to tests/test_api_schema.py's
stateless run: sequences of calls where a later call takes its ids from an earlier answer, following
OpenAPI links: a webhook created, then read, changed, pinged, its deliveries listed, deleted; an export
asked for, then its status and its file; a shadow battle pushed, then read; a board published, then
read publicly and withdrawn. The links are added to the generated schema here (drf-spectacular writes
none), beside those schemathesis infers itself.

Every response is checked as in the stateless run (no 5xx, a declared status and content type, a body
that fits its schema), with a write key of the campaign's organisation; the run must have followed links
to a 2xx answer, or it tested nothing more than the stateless run."""

from __future__ import annotations

import os
from collections import Counter
from typing import Any

import pytest
import schemathesis
from django.core.wsgi import get_wsgi_application
from drf_spectacular.generators import SchemaGenerator
from hypothesis import HealthCheck
from hypothesis import settings as hypothesis_settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.test_api_schema import api_world, api_world_rows, wsgi_in_test_transaction  # noqa: F401  # the stateless run's world

pytestmark = [pytest.mark.django_db, pytest.mark.reliability]

SCENARIOS = int(os.environ.get("ARENA_SCHEMATHESIS_SCENARIOS", "10"))

# operationId of a call that creates -> (its status, {operationId of a call reading it: {parameter: where}}).
LINKS: dict[str, tuple[str, dict[str, dict[str, str]]]] = {
    "webhooks_create": ("201", {op: {"webhook_id": "$response.body#/id"} for op in (
        "webhooks_retrieve", "webhooks_update", "webhooks_destroy", "webhooks_deliveries_list", "webhooks_ping")}),
    "exports_create": ("202", {op: {"campaign_id": "$request.path.campaign_id", "job_id": "$response.body#/id"}
                               for op in ("exports_retrieve", "exports_download")}),
    "shadow_battle_create": ("201", {"shadow_battle_read": {"campaign_id": "$request.path.campaign_id",
                                                            "battle_id": "$response.body#/id"}}),
    "campaign_publication_publish": ("201", {"public_board_read": {"slug": "$response.body#/slug"},
                                             "campaign_publication_read": {"campaign_id": "$request.path.campaign_id"},
                                             "campaign_publication_unpublish": {
                                                 "campaign_id": "$request.path.campaign_id"}}),
}  # fmt: skip


def linked_document() -> dict[str, Any]:
    document = dict(SchemaGenerator().get_schema(request=None, public=True))
    operations = {op["operationId"]: op for ops in document["paths"].values() for op in ops.values()}
    for source, (status, targets) in LINKS.items():
        response = operations[source]["responses"][status]
        response["links"] = {
            f"To_{target}": {"operationId": target, "parameters": parameters} for target, parameters in targets.items()
        }
        assert all(target in operations for target in targets), targets
    return document


schema = schemathesis.openapi.from_dict(linked_document())
schema.app = get_wsgi_application()
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]


def test_the_api_keeps_to_its_schema_across_linked_calls(api_world: dict[str, Any], settings: Any) -> None:  # noqa: F811
    settings.ARENA_WEBHOOK_HOSTS = ["*"]  # drawn webhook URLs are never fetched here (no worker); let them be created
    world = api_world
    followed: Counter[str] = Counter()

    class Machine(schema.as_state_machine()):  # type: ignore[misc]
        def before_call(self, case: schemathesis.Case) -> None:
            drawn = (case.path_parameters or {}).get("campaign_id")
            if isinstance(drawn, int) or (isinstance(drawn, str) and drawn.isdigit()):
                case.path_parameters["campaign_id"] = world["campaign_id"]  # a random id is another tenant's 404

        def get_call_kwargs(self, case: schemathesis.Case) -> dict[str, Any]:
            # Webhooks are owner-only: an owner key there (a write key gets 403), a write key elsewhere.
            scope = "owner" if case.path.startswith("/api/v1/webhooks/") else "write"
            return {"headers": {"Authorization": world[scope]}}

        def step(self, input: Any) -> Any:
            output = super().step(input)
            if input.transition is not None and 200 <= output.response.status_code < 300:
                followed[output.case.operation.label] += 1
            return output

        def validate_response(self, response: Any, case: schemathesis.Case, additional_checks: Any = None,
                              **kwargs: Any) -> None:  # fmt: skip
            case.validate_response(response, checks=CHECKS, transport_kwargs=kwargs)

    Machine.run(
        settings=hypothesis_settings(
            max_examples=SCENARIOS,
            stateful_step_count=6,
            deadline=None,
            suppress_health_check=list(HealthCheck),
        )
    )
    print(f"linked calls answered 2xx: {dict(followed)}")
    assert followed, "no linked call reached a 2xx answer: the stateful run tested nothing the stateless one does not"
