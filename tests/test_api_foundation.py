"""The REST API's common rules: one error body, the schema and its page, key scopes, a rate per key, a body limit."""

from __future__ import annotations

import json

import pytest
import yaml
from django.core.cache import cache
from django.test import Client, override_settings
from django.urls import reverse
from django.utils import timezone
from rest_framework.response import Response
from rest_framework.test import APIRequestFactory, force_authenticate
from rest_framework.views import APIView

from raters.authentication import ApiKeyPrincipal
from raters.models import ApiKey
from raters.services import api_key_revoke
from raters.tenancy import scopes_disabled

from .conftest import api_client

pytestmark = pytest.mark.django_db


def _error(response) -> dict:  # type: ignore[no-untyped-def]
    body = json.loads(response.content)
    assert set(body) == {"error"}, body
    assert set(body["error"]) == {"code", "message", "fields"}, body
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]
    return body["error"]  # type: ignore[no-any-return]


def test_the_schema_is_served_valid_openapi_3(alice_client: Client) -> None:
    response = Client().get(reverse("api-schema"))
    assert response.status_code == 200
    schema = yaml.safe_load(response.content)
    assert schema["openapi"].startswith("3.")
    assert schema["components"]["securitySchemes"]["ApiKey"] == {
        "type": "apiKey",
        "in": "header",
        "name": "Authorization",
        "description": schema["components"]["securitySchemes"]["ApiKey"]["description"],
    }
    # Every operation documents the one error body for the refusals it can give.
    for path, operations in schema["paths"].items():
        assert path.startswith("/api/v1/"), path
        for method, operation in operations.items():
            for status in ("401", "403", "404", "429"):
                content = operation["responses"][status]["content"]["application/json"]["schema"]
                assert content == {"$ref": "#/components/schemas/Error"}, (path, method, status)
    assert Client().get("/api/schema/").status_code == 302


def test_the_schema_passes_openapi_validation() -> None:
    from django.core.management import call_command

    # drf-spectacular validates the generated document against the OpenAPI 3 JSON schema.
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", "/dev/null")


def test_the_docs_page_runs_under_the_content_security_policy() -> None:
    response = Client().get(reverse("api-docs"))
    assert response.status_code == 200
    html = response.content.decode()
    assert "swagger-ui" in html and "<script>" not in html  # set-up comes as a script file
    assert "script-src 'self'" in response["Content-Security-Policy"]
    script = Client().get(reverse("api-docs") + "?script=")
    assert script.status_code == 200 and reverse("api-schema") in script.content.decode()


def test_an_unknown_api_path_answers_in_the_error_body() -> None:
    response = Client().get("/api/v1/no-such-thing/")
    assert response.status_code == 404 and response["Content-Type"] == "application/json"
    assert _error(response)["code"] == "not_found"


def test_without_credentials_and_with_a_revoked_key(acme, alice) -> None:  # type: ignore[no-untyped-def]
    url = reverse("leaderboard", args=[acme.campaign.pk])
    missing = Client().get(url)
    assert missing.status_code == 401 and _error(missing)["code"] == "not_authenticated"
    client = api_client(acme.organization)
    with scopes_disabled():
        api_key_revoke(api_key=client.api_key, actor=alice)
    revoked = client.get(url)
    assert revoked.status_code == 401 and revoked["WWW-Authenticate"] == "Api-Key"
    assert _error(revoked)["code"] == "authentication_failed"


def test_another_organisations_campaign_is_404_in_the_error_body(acme, globex) -> None:  # type: ignore[no-untyped-def]
    response = api_client(globex.organization).get(reverse("leaderboard", args=[acme.campaign.pk]))
    assert response.status_code == 404 and _error(response)["code"] == "not_found"


class _Write(APIView):
    def post(self, request):  # type: ignore[no-untyped-def]
        return Response({"ok": True}, status=201)


@pytest.mark.parametrize(("scope", "status"), [("read", 403), ("write", 201)])
def test_a_read_key_cannot_write(acme, scope: str, status: int) -> None:  # type: ignore[no-untyped-def]
    with scopes_disabled():
        api_key = ApiKey.objects.create(
            organization=acme.organization, name=scope, prefix=scope, hashed_key=scope * 8, scope=scope
        )
    request = APIRequestFactory().post("/api/v1/x/", {}, format="json")
    force_authenticate(request, user=ApiKeyPrincipal(api_key))
    response = _Write.as_view()(request)
    response.render()
    assert response.status_code == status
    if status == 403:
        error = _error(response)
        assert error["code"] == "permission_denied" and "read-only" in error["message"]


def test_validation_errors_name_each_field_nested() -> None:
    from rest_framework import serializers

    class Answer(serializers.Serializer):  # type: ignore[type-arg]
        text = serializers.CharField()

    class Body(serializers.Serializer):  # type: ignore[type-arg]
        answers = Answer(many=True)
        count = serializers.IntegerField()

    class _View(APIView):
        permission_classes = ()

        def post(self, request):  # type: ignore[no-untyped-def]
            Body(data=request.data).is_valid(raise_exception=True)
            return Response({})

    request = APIRequestFactory().post("/api/v1/x/", {"answers": [{"text": "ok"}, {}], "count": "x"}, format="json")
    response = _View.as_view()(request)
    response.render()
    error = _error(response)
    assert response.status_code == 400 and error["code"] == "invalid"
    assert set(error["fields"]) == {"answers.1.text", "count"}
    malformed = APIRequestFactory().post("/api/v1/x/", b"{not json", content_type="application/json")
    response = _View.as_view()(malformed)
    response.render()
    assert response.status_code == 400 and _error(response)["code"] == "parse_error"


def test_each_key_has_its_own_rate(acme) -> None:  # type: ignore[no-untyped-def]
    cache.clear()
    url = reverse("leaderboard", args=[acme.campaign.pk])
    slow = api_client(acme.organization, rate_limit="2/m")
    other = api_client(acme.organization, rate_limit="2/m")
    assert [slow.get(url).status_code for _ in range(2)] == [404, 404]  # allowed (no snapshot yet)
    limited = slow.get(url)
    assert limited.status_code == 429 and int(limited["Retry-After"]) > 0
    assert _error(limited)["code"] == "throttled"
    assert other.get(url).status_code == 404  # another key's budget is its own


@override_settings(ARENA_API_KEY_RATE="")
def test_keys_record_when_they_were_last_used(acme) -> None:  # type: ignore[no-untyped-def]
    client = api_client(acme.organization)
    client.get(reverse("leaderboard", args=[acme.campaign.pk]))
    with scopes_disabled():
        used = ApiKey.objects.get(pk=client.api_key.pk).last_used_at
    assert used is not None and (timezone.now() - used).total_seconds() < 60


@override_settings(ARENA_API_MAX_BODY_BYTES=2048)
def test_an_oversized_body_is_refused_before_it_is_read(acme) -> None:  # type: ignore[no-untyped-def]
    client = api_client(acme.organization, scope="write")
    response = client.post(reverse("leaderboard", args=[acme.campaign.pk]), "x" * 4096, content_type="application/json")
    assert response.status_code == 413 and _error(response)["code"] == "payload_too_large"


def test_a_malformed_rate_is_refused_in_the_console() -> None:
    from django.core.exceptions import ValidationError

    from raters.models import rate_limit_validate

    for good in ("", "600/m", "5/s", "100000/d"):
        rate_limit_validate(good)
    for bad in ("600", "0/m", "10/minute", "-1/s", "1/m; drop"):
        with pytest.raises(ValidationError):
            rate_limit_validate(bad)


def test_every_page_limit_in_the_schema_is_the_range_the_code_enforces(acme, client):
    """The schema once allowed ``?limit=0`` on the plain views' pages (an integer, no bounds) while the code
    refused it: every ``limit`` parameter now says 1 to 500, and 0 and 501 are a 400 that says so."""
    schema = yaml.safe_load(client.get(reverse("api-schema")).content)
    limits = {
        f"{method.upper()} {path}": parameter["schema"]
        for path, methods in schema["paths"].items()
        for method, operation in methods.items()
        for parameter in operation.get("parameters", [])
        if parameter["name"] == "limit" and parameter["in"] == "query"
    }
    assert len(limits) > 15
    loose = {name: s for name, s in limits.items() if (s.get("minimum"), s.get("maximum")) != (1, 500)}
    assert not loose, loose
    key = api_client(acme.organization)
    for url in (
        reverse("api:campaigns"),
        reverse("api:exports", args=[acme.campaign.pk]),
        reverse("api-rater-reports", args=[acme.campaign.pk]),
    ):
        for limit in ("0", "501", "-1"):
            response = key.get(url, {"limit": limit})
            assert response.status_code == 400, (url, limit, response.content)
            assert set(_error(response)["fields"]) == {"limit"}, response.content
        assert key.get(url, {"limit": "1"}).status_code == 200


def test_the_schema_states_the_bounds_the_code_enforces(client):
    """Schema-valid requests the code refused (schemathesis' positive-data check): a competitor id of 0,
    an organisation that is no slug, a shadow prompt of 8,999 characters, a multipart import without its
    file. Each bound is now in the schema, so a client generated from it cannot send what is refused."""
    schema = yaml.safe_load(client.get(reverse("api-schema")).content)

    def parameter(path: str, name: str) -> dict:  # type: ignore[type-arg]
        operation = schema["paths"][path]["get"]
        return next(p["schema"] for p in operation["parameters"] if p["name"] == name)

    for path in (
        "/api/v1/campaigns/{campaign_id}/votes.{kind}",
        "/api/v1/campaigns/{campaign_id}/preference-pairs.jsonl",
        "/api/v1/campaigns/{campaign_id}/preference-pairs/audit",
    ):
        assert parameter(path, "competitor")["minimum"] == 1, path
    assert parameter("/api/v1/experiments/{key}/", "organization")["pattern"] == "^[-a-zA-Z0-9_]{1,50}$"
    shadow = schema["components"]["schemas"]["ShadowBattleInputRequest"]["properties"]["prompt"]
    assert shadow["maxLength"] == 8000
    imported = schema["paths"]["/api/v1/campaigns/{campaign_id}/prompts/import"]["post"]["requestBody"]["content"]
    assert imported["multipart/form-data"]["schema"]["required"] == ["file"]
