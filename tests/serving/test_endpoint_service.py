"""An endpoint that served battles keeps its identity; moving it to another server is fine."""

from __future__ import annotations

import pytest
from django.urls import reverse

from raters.models import AuditEvent
from serving.services import EndpointInUse, endpoint_save
from tests.conftest import start_battle

pytestmark = [pytest.mark.django_db, pytest.mark.triton, pytest.mark.usefixtures("triton_server")]


def test_used_endpoint_cannot_change_model_but_can_move(acme, bob_client, alice, settings):
    settings.ARENA_MODEL_HOSTS = [*settings.ARENA_MODEL_HOSTS, "triton.internal:8001"]
    start_battle(bob_client, acme.campaign)
    endpoint = acme.left.endpoint
    endpoint.model_name = "stdlib-trigram"
    with pytest.raises(EndpointInUse, match="model_name"):
        endpoint_save(endpoint=endpoint, actor=alice, changed=["model_name"])
    endpoint.refresh_from_db()
    assert endpoint.model_name == "zen-bigram"
    endpoint.url = "triton.internal:8001"
    endpoint_save(endpoint=endpoint, actor=alice, changed=["url"])
    assert AuditEvent.objects.filter(action="endpoint.changed", object_id=str(endpoint.pk)).exists()


def test_admin_shows_identity_fields_read_only_once_used(acme, bob_client, alice_client):
    endpoint = acme.left.endpoint
    html = alice_client.get(reverse("admin:serving_modelendpoint_change", args=[endpoint.pk])).content.decode()
    assert 'name="model_name"' in html
    start_battle(bob_client, acme.campaign)
    html = alice_client.get(reverse("admin:serving_modelendpoint_change", args=[endpoint.pk])).content.decode()
    assert 'name="model_name"' not in html and 'name="url"' in html
