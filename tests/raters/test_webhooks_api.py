"""The webhooks API: owners only, as in the console: an owner key of the organisation or an owner's session
(read and write keys get 403, managers' sessions 404); another organisation's webhooks are 404; the secret
only in the creation response."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml
from django.test import Client
from django.urls import reverse

from raters import services
from raters.models import AuditAction, AuditEvent, WebhookDelivery, WebhookEndpoint, WebhookEvent
from tests.conftest import Tenant, api_client, login

pytestmark = pytest.mark.django_db

PUBLIC_URL = "https://93.184.216.34/hooks/arena"  # a public literal address: no DNS needed


def _error(response) -> dict:  # type: ignore[no-untyped-def]
    body = json.loads(response.content)
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message", "fields"}, body
    return body["error"]  # type: ignore[no-any-return]


def _post(client: Client, url: str, data: dict[str, Any]) -> Any:
    return client.post(url, data=json.dumps(data), content_type="application/json")


def _patch(client: Client, url: str, data: dict[str, Any]) -> Any:
    return client.patch(url, data=json.dumps(data), content_type="application/json")


def _webhook(tenant: Tenant, events: list[str] | None = None) -> WebhookEndpoint:
    return services.webhook_endpoint_create(
        organization=tenant.organization, url=PUBLIC_URL, events=events or [WebhookEvent.BATTLE_RATED], actor=None
    )


@pytest.fixture
def owner_of_two(alice, acme, globex) -> Client:  # type: ignore[no-untyped-def]
    from raters.models import Role
    from tests.factories import MembershipFactory

    MembershipFactory.create(user=alice, organization=globex.organization, role=Role.OWNER)
    return login(alice)


def test_an_owner_key_creates_a_webhook_and_sees_the_secret_once(acme, settings):
    settings.ARENA_WEBHOOK_HOSTS = []
    client = api_client(acme.organization, scope="owner")
    response = _post(
        client, reverse("api-webhooks"), {"url": PUBLIC_URL, "events": ["battle.rated", "leaderboard.updated"]}
    )
    assert response.status_code == 201, response.content
    body = json.loads(response.content)
    endpoint = WebhookEndpoint.objects.get()
    assert body["secret"] == endpoint.secret and body["organization"] == "acme"
    assert body["events"] == ["battle.rated", "leaderboard.updated"] and body["active"] is True
    assert endpoint.organization == acme.organization and endpoint.created_by is None
    assert AuditEvent.objects.filter(action=AuditAction.WEBHOOK_CREATED, object_id=str(endpoint.pk)).exists()
    # Never again: not in the list, not in the detail.
    listing = client.get(reverse("api-webhooks"))
    detail = client.get(reverse("api-webhook", args=[endpoint.pk]))
    assert listing.status_code == detail.status_code == 200
    assert endpoint.secret not in listing.content.decode() and endpoint.secret not in detail.content.decode()
    assert [w["id"] for w in json.loads(listing.content)["results"]] == [endpoint.pk]


def test_an_internal_url_is_refused_with_a_clear_message(acme, settings):
    settings.ARENA_WEBHOOK_HOSTS = []
    client = api_client(acme.organization, scope="owner")
    for url, words in (
        ("https://127.0.0.1/hook", "internal address"),
        ("https://169.254.169.254/latest/meta-data/", "internal address"),
        ("http://93.184.216.34/hook", "https://"),
    ):
        response = _post(client, reverse("api-webhooks"), {"url": url, "events": ["battle.rated"]})
        assert response.status_code == 400, (url, response.content)
        error = _error(response)
        assert error["code"] == "invalid" and words in error["fields"]["url"][0], error
    bad_event = _post(client, reverse("api-webhooks"), {"url": PUBLIC_URL, "events": ["vote.cast"]})
    assert bad_event.status_code == 400 and "events.0" in _error(bad_event)["fields"]
    assert not WebhookEndpoint.objects.exists()


def test_read_and_write_keys_reach_no_webhook(acme):
    """Webhooks are owner-only (their URLs, secrets and delivery payloads): a read or write key, whoever
    made it, gets 403 on every operation, reading included, and changes nothing."""
    endpoint = _webhook(acme)
    services.webhook_event_emit(organization_id=acme.organization.pk, event="battle.rated", payload={"n": 1})
    for scope in ("read", "write"):
        client = api_client(acme.organization, scope=scope)
        for response in (
            client.get(reverse("api-webhooks")),
            client.get(reverse("api-webhook", args=[endpoint.pk])),
            client.get(reverse("api-webhook-deliveries", args=[endpoint.pk])),
            _post(client, reverse("api-webhooks"), {"url": PUBLIC_URL, "events": ["battle.rated"]}),
            _patch(client, reverse("api-webhook", args=[endpoint.pk]), {"url": "https://93.184.216.35/evil"}),
            client.delete(reverse("api-webhook", args=[endpoint.pk])),
            _post(client, reverse("api-webhook-ping", args=[endpoint.pk]), {}),
        ):
            assert response.status_code == 403, (scope, response.content)
            assert _error(response)["code"] == "permission_denied"
            assert PUBLIC_URL not in response.content.decode()
    endpoint.refresh_from_db()
    assert endpoint.url == PUBLIC_URL and endpoint.active
    assert WebhookEndpoint.objects.count() == 1
    assert not WebhookDelivery.objects.filter(event=WebhookEvent.PING).exists()


def test_another_organisations_webhook_is_404_everywhere(acme, globex, charlie_client):
    endpoint = _webhook(acme)
    services.webhook_event_emit(organization_id=acme.organization.pk, event="battle.rated", payload={"n": 1})
    for client in (api_client(globex.organization, scope="owner"), charlie_client):
        for response in (
            client.get(reverse("api-webhook", args=[endpoint.pk])),
            client.get(reverse("api-webhook-deliveries", args=[endpoint.pk])),
            _patch(client, reverse("api-webhook", args=[endpoint.pk]), {"active": False}),
            client.delete(reverse("api-webhook", args=[endpoint.pk])),
            _post(client, reverse("api-webhook-ping", args=[endpoint.pk]), {}),
        ):
            assert response.status_code == 404, response.content
            assert _error(response)["code"] == "not_found"
            assert PUBLIC_URL not in response.content.decode()
        listing = client.get(reverse("api-webhooks"))
        assert listing.status_code == 200 and json.loads(listing.content)["results"] == []
        # Naming Acme on create does not reach it either.
        response = _post(
            client, reverse("api-webhooks"), {"url": PUBLIC_URL, "events": ["battle.rated"], "organization": "acme"}
        )
        assert response.status_code == 404
    endpoint.refresh_from_db()
    assert endpoint.active and WebhookEndpoint.objects.filter(organization=acme.organization).count() == 1
    assert WebhookDelivery.objects.filter(endpoint=endpoint, event=WebhookEvent.PING).count() == 0


def test_owners_manage_webhooks_with_their_session_and_managers_raters_cannot(acme, alice_client, bob_client):
    from raters.models import Role
    from tests.factories import MembershipFactory, UserFactory

    response = _post(alice_client, reverse("api-webhooks"), {"url": PUBLIC_URL, "events": ["campaign.closed"]})
    assert response.status_code == 201
    endpoint = WebhookEndpoint.objects.get()
    assert endpoint.created_by is not None and endpoint.created_by.email == "alice@acme.test"
    manager = UserFactory.create()
    MembershipFactory.create(user=manager, organization=acme.organization, role=Role.MANAGER)
    for client in (login(manager), bob_client):
        assert client.get(reverse("api-webhook", args=[endpoint.pk])).status_code == 404
        assert json.loads(client.get(reverse("api-webhooks")).content)["results"] == []
        refused = _post(client, reverse("api-webhooks"), {"url": PUBLIC_URL, "events": ["campaign.closed"]})
        assert refused.status_code == 403 and _error(refused)["code"] == "permission_denied"
    assert WebhookEndpoint.objects.count() == 1


def test_an_owner_of_two_names_the_organisation(owner_of_two, globex):
    response = _post(owner_of_two, reverse("api-webhooks"), {"url": PUBLIC_URL, "events": ["battle.rated"]})
    assert response.status_code == 400 and "organization" in _error(response)["fields"]
    response = _post(
        owner_of_two, reverse("api-webhooks"), {"url": PUBLIC_URL, "events": ["battle.rated"], "organization": "globex"}
    )
    assert response.status_code == 201
    assert WebhookEndpoint.objects.get().organization == globex.organization


def test_patch_changes_disables_and_re_enables(acme):
    endpoint = _webhook(acme)
    client = api_client(acme.organization, scope="owner")
    url = reverse("api-webhook", args=[endpoint.pk])
    response = _patch(client, url, {"events": ["campaign.closed", "leaderboard.updated"], "description": "boards"})
    assert response.status_code == 200
    assert json.loads(response.content)["events"] == ["campaign.closed", "leaderboard.updated"]
    assert json.loads(_patch(client, url, {"active": False}).content)["active"] is False
    endpoint.refresh_from_db()
    assert not endpoint.active and endpoint.disabled_at is not None
    WebhookEndpoint.objects.filter(pk=endpoint.pk).update(consecutive_failures=12)
    body = json.loads(_patch(client, url, {"active": True}).content)
    assert body["active"] is True and body["consecutive_failures"] == 0 and body["disabled_at"] is None
    actions = list(
        AuditEvent.objects.filter(object_type=endpoint._meta.label_lower, object_id=str(endpoint.pk))
        .order_by("created_at")
        .values_list("action", flat=True)
    )
    assert actions == [
        AuditAction.WEBHOOK_CREATED,
        AuditAction.WEBHOOK_CHANGED,
        AuditAction.WEBHOOK_DISABLED,
        AuditAction.WEBHOOK_ENABLED,
    ]
    refused = _patch(client, url, {"url": "https://10.0.0.1/"})
    assert refused.status_code == 400 and "internal address" in _error(refused)["fields"]["url"][0]
    endpoint.refresh_from_db()
    assert endpoint.url == PUBLIC_URL


def test_delete_removes_the_webhook_and_its_log(acme):
    endpoint = _webhook(acme)
    services.webhook_event_emit(organization_id=acme.organization.pk, event="battle.rated", payload={})
    client = api_client(acme.organization, scope="owner")
    assert client.delete(reverse("api-webhook", args=[endpoint.pk])).status_code == 204
    assert not WebhookEndpoint.objects.exists() and not WebhookDelivery.objects.exists()
    assert AuditEvent.objects.filter(action=AuditAction.WEBHOOK_DELETED, object_id=str(endpoint.pk)).exists()
    assert client.get(reverse("api-webhook", args=[endpoint.pk])).status_code == 404


def test_ping_queues_a_test_event_and_a_disabled_webhook_is_a_conflict(acme):
    endpoint = _webhook(acme)
    client = api_client(acme.organization, scope="owner")
    response = _post(client, reverse("api-webhook-ping", args=[endpoint.pk]), {})
    assert response.status_code == 202
    body = json.loads(response.content)
    assert body["event"] == "ping" and body["status"] == "pending" and body["webhook"] == endpoint.pk
    assert WebhookDelivery.objects.get(pk=body["id"]).endpoint == endpoint
    services.webhook_endpoint_update(endpoint=endpoint, active=False, actor=None)
    refused = _post(client, reverse("api-webhook-ping", args=[endpoint.pk]), {})
    assert refused.status_code == 409 and _error(refused)["code"] == "conflict"


def test_deliveries_are_paged_newest_first_and_filtered(acme, globex):
    endpoint = _webhook(acme, events=[WebhookEvent.BATTLE_RATED, WebhookEvent.CAMPAIGN_CLOSED])
    other = _webhook(globex)
    for n in range(5):
        services.webhook_event_emit(organization_id=acme.organization.pk, event="battle.rated", payload={"n": n})
    services.webhook_event_emit(organization_id=acme.organization.pk, event="campaign.closed", payload={})
    services.webhook_event_emit(organization_id=globex.organization.pk, event="battle.rated", payload={})
    WebhookDelivery.objects.filter(endpoint=endpoint, payload__n=0).update(status=WebhookDelivery.Status.GAVE_UP)
    client = api_client(acme.organization, scope="owner")
    url = reverse("api-webhook-deliveries", args=[endpoint.pk])
    first = json.loads(client.get(url, {"limit": 4}).content)
    assert len(first["results"]) == 4 and first["next"]
    second = json.loads(client.get(first["next"]).content)
    ids = [d["id"] for d in first["results"] + second["results"]]
    assert ids == sorted(ids, reverse=True) and len(ids) == 6
    assert first["results"][0]["event"] == "campaign.closed"
    assert {d["webhook"] for d in first["results"] + second["results"]} == {endpoint.pk}
    closed = json.loads(client.get(url, {"event": "campaign.closed"}).content)["results"]
    assert [d["event"] for d in closed] == ["campaign.closed"]
    gave_up = json.loads(client.get(url, {"status": "gave_up"}).content)["results"]
    assert [d["payload"] for d in gave_up] == [{"n": 0}]
    bad = client.get(url, {"status": "exploded"})
    assert bad.status_code == 400 and _error(bad)["code"] == "invalid"
    # Globex's key sees Globex's deliveries only.
    globex_client = api_client(globex.organization, scope="owner")
    theirs = json.loads(globex_client.get(reverse("api-webhook-deliveries", args=[other.pk])).content)["results"]
    assert len(theirs) == 1 and theirs[0]["webhook"] == other.pk


def test_the_webhook_operations_are_documented(acme):
    schema = yaml.safe_load(Client().get(reverse("api-schema")).content)
    operations = {
        operation["operationId"]: operation
        for path, methods in schema["paths"].items()
        if path.startswith("/api/v1/webhooks/")
        for operation in methods.values()
    }
    assert set(operations) == {
        "webhooks_list",
        "webhooks_create",
        "webhooks_retrieve",
        "webhooks_update",
        "webhooks_destroy",
        "webhooks_deliveries_list",
        "webhooks_ping",
    }
    for operation in operations.values():
        assert operation["tags"] == ["webhooks"] and operation["summary"]
    created = operations["webhooks_create"]["responses"]["201"]["content"]["application/json"]
    assert "secret" in schema["components"]["schemas"][created["schema"]["$ref"].rsplit("/", 1)[1]]["properties"]
    parameters = {p["name"] for p in operations["webhooks_deliveries_list"]["parameters"]}
    assert {"status", "event", "cursor", "limit"} <= parameters
    assert "409" in operations["webhooks_ping"]["responses"]
