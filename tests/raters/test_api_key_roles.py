"""A key never exceeds its maker: scopes read < write < owner, capped by the maker's role when the key is made
(console and service alike) and again at every use; webhooks (owner-only in the console) take an owner key.

The case that was reported: a plain manager minted a read-write key in the console and, through it, read,
re-pointed and created the owner-only webhooks and read their secrets."""

from __future__ import annotations

import json
import re

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from core.errors import Invalid, PermissionDenied
from raters import services
from raters.models import ApiKey, AuditAction, AuditEvent, Membership, Role, WebhookEndpoint, WebhookEvent
from tests.conftest import Tenant, login
from tests.factories import MembershipFactory, UserFactory

from .admin_forms import form_errors

pytestmark = pytest.mark.django_db

PUBLIC_URL = "https://93.184.216.34/hooks/arena"
EVIL_URL = "https://93.184.216.35/collect"
KEY = re.compile(r"arena_[0-9a-f]{8}_[A-Za-z0-9_-]+")


def _member(tenant: Tenant, role: str) -> User:
    user = UserFactory.create()
    MembershipFactory.create(user=user, organization=tenant.organization, role=role)
    return user


def _console_key(client: Client, tenant: Tenant, scope: str) -> tuple[int, str | None, str]:
    """Make a key on the console's add page as a person does; the status, the key shown once (if any)
    and the form's errors."""
    response = client.post(
        reverse("admin:raters_apikey_add"),
        {"organization": tenant.organization.pk, "name": f"{scope} key", "scope": scope, "rate_limit": ""},
        follow=True,
    )
    shown = KEY.search(" ".join(str(m) for m in response.context["messages"])) if response.context else None
    return response.status_code, shown.group(0) if shown else None, form_errors(response)


def _webhook_attempts(key: str, endpoint: WebhookEndpoint) -> list[int]:
    client = Client(HTTP_AUTHORIZATION=f"Api-Key {key}")

    def send(method: str, url: str, body: dict[str, object] | None = None) -> int:
        data = json.dumps(body) if body is not None else None
        return getattr(client, method)(url, data=data, content_type="application/json").status_code

    return [
        send("get", reverse("api-webhooks")),
        send("get", reverse("api-webhook", args=[endpoint.pk])),
        send("get", reverse("api-webhook-deliveries", args=[endpoint.pk])),
        send("post", reverse("api-webhooks"), {"url": EVIL_URL, "events": ["battle.rated"]}),
        send("patch", reverse("api-webhook", args=[endpoint.pk]), {"url": EVIL_URL}),
        send("post", reverse("api-webhook-ping", args=[endpoint.pk]), {}),
        send("delete", reverse("api-webhook", args=[endpoint.pk])),
    ]


@pytest.fixture
def webhook(acme: Tenant) -> WebhookEndpoint:
    return services.webhook_endpoint_create(
        organization=acme.organization, url=PUBLIC_URL, events=[WebhookEvent.BATTLE_RATED], actor=None
    )


def test_each_role_makes_keys_up_to_its_own_level(acme, alice):
    """The service's cap, role by role: owner up to owner, manager up to write, viewer read, rater none."""
    manager, viewer, rater = _member(acme, Role.MANAGER), _member(acme, Role.VIEWER), _member(acme, Role.RATER)
    outsider = UserFactory.create()
    allowed = {alice: ["read", "write", "owner"], manager: ["read", "write"], viewer: ["read"], rater: [], outsider: []}
    for user, scopes in allowed.items():
        assert services.api_key_scopes_for(organization=acme.organization, user=user) == scopes
        for scope in ("read", "write", "owner"):
            if scope in scopes:
                api_key, _ = services.api_key_create(organization=acme.organization, name="k", scope=scope, actor=user)
                assert api_key.scope == scope and api_key.created_by == user
            else:
                with pytest.raises(PermissionDenied) as refused:
                    services.api_key_create(organization=acme.organization, name="k", scope=scope, actor=user)
                assert "never exceeds its maker" in refused.value.message and "scope" in refused.value.field_errors
    assert not ApiKey.objects.filter(created_by__in=[rater, outsider]).exists()
    assert not ApiKey.objects.filter(created_by=manager, scope="owner").exists()
    with pytest.raises(Invalid):
        services.api_key_create(organization=acme.organization, name="k", scope="admin", actor=alice)


def test_a_manager_cannot_mint_an_owner_key_in_the_console(acme, alice):
    manager = _member(acme, Role.MANAGER)
    client = login(manager)
    page = client.get(reverse("admin:raters_apikey_add")).content.decode()
    assert 'value="write"' in page and 'value="owner"' not in page  # not offered
    status, key, errors = _console_key(client, acme, "owner")  # and refused when sent anyway
    assert status == 200 and key is None and "owner" in errors
    assert not ApiKey.objects.exists()
    status, key, _ = _console_key(client, acme, "write")
    assert key is not None and ApiKey.objects.get().scope == "write"
    # An owner is offered, and makes, an owner key.
    owner_page = login(alice).get(reverse("admin:raters_apikey_add")).content.decode()
    assert 'value="owner"' in owner_page
    _, owner_key, _ = _console_key(login(alice), acme, "owner")
    assert owner_key is not None and ApiKey.objects.filter(scope="owner", created_by=alice).count() == 1


def test_owning_one_organisation_does_not_lift_the_cap_in_another(acme, globex):
    """Offered 'owner' (they own Globex), a manager of Acme is still refused an owner key for Acme: the
    service checks the organisation chosen, and the console shows the refusal on the scope field."""
    user = _member(acme, Role.MANAGER)
    MembershipFactory.create(user=user, organization=globex.organization, role=Role.OWNER)
    status, key, errors = _console_key(login(user), acme, "owner")
    assert status == 200 and key is None and "never exceeds its maker" in errors
    assert not ApiKey.objects.filter(organization=acme.organization).exists()
    assert _console_key(login(user), globex, "owner")[1] is not None


def test_a_managers_console_key_cannot_touch_webhooks(acme, webhook):
    """The reported attack, end to end: a manager's key from the console gets 403 on every webhook
    operation (no URL, no delivery payload, no re-pointing); the same key still writes campaigns."""
    services.webhook_event_emit(organization_id=acme.organization.pk, event="battle.rated", payload={"n": 1})
    _, key, _ = _console_key(login(_member(acme, Role.MANAGER)), acme, "write")
    assert key is not None
    assert _webhook_attempts(key, webhook) == [403] * 7
    webhook.refresh_from_db()
    assert webhook.url == PUBLIC_URL and WebhookEndpoint.objects.count() == 1
    writer = Client(HTTP_AUTHORIZATION=f"Api-Key {key}")
    published = writer.post(reverse("api-publication", args=[acme.campaign.pk]), {}, content_type="application/json")
    assert published.status_code == 201, published.content


def test_an_owners_key_manages_webhooks(acme, alice, webhook):
    _, key = services.api_key_create(organization=acme.organization, name="ops", scope="owner", actor=alice)
    client = Client(HTTP_AUTHORIZATION=f"Api-Key {key}")
    assert [w["id"] for w in client.get(reverse("api-webhooks")).json()["results"]] == [webhook.pk]
    created = client.post(
        reverse("api-webhooks"), {"url": PUBLIC_URL, "events": ["campaign.closed"]}, content_type="application/json"
    )
    assert created.status_code == 201 and created.json()["secret"].startswith("whsec_")


def test_a_key_drops_with_its_makers_role(acme, alice, webhook):
    """Checked again at use: an owner's owner key acts as a write key once the owner is a manager, as a
    read key once a viewer, and is refused once they are a rater, have left or are deactivated."""
    owner = _member(acme, Role.OWNER)
    _, key = services.api_key_create(organization=acme.organization, name="ci", scope="owner", actor=owner)
    client = Client(HTTP_AUTHORIZATION=f"Api-Key {key}")
    publication = reverse("api-publication", args=[acme.campaign.pk])
    assert client.get(reverse("api-webhooks")).status_code == 200
    membership = Membership.objects.get(user=owner, organization=acme.organization)

    membership.role = Role.MANAGER
    membership.save()
    assert _webhook_attempts(key, webhook) == [403] * 7
    assert client.post(publication, {}, content_type="application/json").status_code == 201

    membership.role = Role.VIEWER
    membership.save()
    assert client.get(publication).status_code == 200
    refused = client.delete(publication)
    assert refused.status_code == 403, refused.content

    membership.role = Role.RATER
    membership.save()
    denied = client.get(publication)
    assert denied.status_code == 401 and "maker" in denied.json()["error"]["message"]

    membership.role = Role.OWNER
    membership.save()
    assert client.get(reverse("api-webhooks")).status_code == 200
    User.objects.filter(pk=owner.pk).update(is_active=False)
    assert client.get(publication).status_code == 401
    User.objects.filter(pk=owner.pk).update(is_active=True)
    membership.delete()
    assert client.get(publication).status_code == 401


def test_deleting_the_maker_revokes_their_keys(acme, alice):
    maker = _member(acme, Role.MANAGER)
    api_key, key = services.api_key_create(organization=acme.organization, name="ci", scope="write", actor=maker)
    other, _ = services.api_key_create(organization=acme.organization, name="ops", scope="owner", actor=alice)
    maker.delete()
    api_key.refresh_from_db()
    other.refresh_from_db()
    assert api_key.revoked_at is not None and other.revoked_at is None
    assert AuditEvent.objects.filter(action=AuditAction.API_KEY_REVOKED, object_id=str(api_key.pk)).exists()
    response = Client(HTTP_AUTHORIZATION=f"Api-Key {key}").get(reverse("api-publication", args=[acme.campaign.pk]))
    assert response.status_code == 401


def test_the_console_lists_what_each_key_acts_as(acme, alice):
    demoted = _member(acme, Role.OWNER)
    services.api_key_create(organization=acme.organization, name="ci", scope="owner", actor=demoted)
    Membership.objects.filter(user=demoted, organization=acme.organization).update(role=Role.MANAGER)
    page = login(alice).get(reverse("admin:raters_apikey_changelist")).content.decode()
    assert '<td class="field-scope">Owner: read, write and the organisation&#x27;s webhooks</td>' in page
    assert '<td class="field-acts_as">write</td>' in page


def test_the_key_list_reads_every_makers_role_in_its_own_query(acme, alice):
    """The "acts as" column needs each maker's role: read with the list, so the queries do not grow with keys."""
    client = login(alice)
    client.get(reverse("admin:raters_apikey_changelist"))  # warm the session and the caches
    url = reverse("admin:raters_apikey_changelist")
    services.api_key_create(organization=acme.organization, name="one", scope="read", actor=_member(acme, Role.VIEWER))
    with CaptureQueriesContext(connection) as one:
        assert client.get(url).status_code == 200
    makers = [_member(acme, role) for role in (Role.OWNER, Role.MANAGER, Role.VIEWER, Role.MANAGER)]
    for i, maker in enumerate(makers):
        services.api_key_create(organization=acme.organization, name=f"k{i}", scope="read", actor=maker)
    with CaptureQueriesContext(connection) as five:
        page = client.get(url).content.decode()
    assert page.count('<td class="field-acts_as">read</td>') == 5
    assert len(five.captured_queries) == len(one.captured_queries)
    # The user's rights are read once per request, not once per model the page's menu lists (was 125).
    assert len(one.captured_queries) <= 12
