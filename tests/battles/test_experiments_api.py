"""A/B experiments over the REST API: list, read with exposure counts, sticky assignment."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from battles.models import Experiment, Exposure, Variant
from raters.services import api_key_revoke
from tests.conftest import Tenant, api_client

pytestmark = [pytest.mark.django_db]


def _experiment(tenant: Tenant, key: str = "checkout-copy", **kwargs: Any) -> Experiment:
    experiment = Experiment.objects.create(
        organization=tenant.organization, key=key, campaign=tenant.campaign, **kwargs
    )
    Variant.objects.create(experiment=experiment, name="control", weight=1, competitor=tenant.left)
    Variant.objects.create(experiment=experiment, name="treatment", weight=1)
    return experiment


def assign(client: Client, key: str, unit_id: Any) -> Any:
    return client.post(
        reverse("api:experiment-assign", args=[key]),
        data=json.dumps({"unit_id": unit_id}),
        content_type="application/json",
    )


def error(response: Any) -> dict[str, Any]:
    payload = response.json()
    assert set(payload) == {"error"}, payload
    return payload["error"]  # type: ignore[no-any-return]


def test_assignment_is_sticky_and_counted(acme):
    _experiment(acme)
    writer = api_client(acme.organization, scope="write")
    first = assign(writer, "checkout-copy", "user-1")
    assert first.status_code == 200, first.content
    data = first.json()
    assert data["experiment"] == "checkout-copy" and data["unit_id"] == "user-1" and data["exposures"] == 1
    again = assign(writer, "checkout-copy", "user-1").json()
    assert again["variant"] == data["variant"] and again["exposures"] == 2
    if data["variant"] == "control":
        assert data["competitor"] == {"id": acme.left.pk, "model": acme.left.model_name, "version": "2026-11"}
    else:
        assert data["competitor"] is None
    variants = {assign(writer, "checkout-copy", f"u{i}").json()["variant"] for i in range(40)}
    assert variants == {"control", "treatment"}
    assert Exposure.objects.count() == 41


def test_the_read_shows_units_and_exposures_per_variant(acme):
    experiment = _experiment(acme)
    writer = api_client(acme.organization, scope="write")
    for i in range(30):
        assign(writer, "checkout-copy", f"u{i % 10}")
    reader = api_client(acme.organization, scope="read")
    response = reader.get(reverse("api:experiment", args=["checkout-copy"]))
    assert response.status_code == 200
    data = response.json()
    assert data["key"] == "checkout-copy" and data["campaign"] == acme.campaign.pk and data["organization"] == "acme"
    assert [v["name"] for v in data["variants"]] == ["control", "treatment"]
    assert sum(v["units"] for v in data["variants"]) == 10 and sum(v["exposures"] for v in data["variants"]) == 30
    assert sum(Exposure.objects.filter(experiment=experiment).values_list("count", flat=True)) == 30


def test_the_list_is_the_organisations_own_paginated_and_filtered(acme, globex):
    _experiment(acme)
    _experiment(acme, key="inactive-one", active=False)
    _experiment(globex, key="globex-secret")
    reader = api_client(acme.organization, scope="read")
    listing = reader.get(reverse("api:experiments"))
    assert listing.status_code == 200
    keys = [item["key"] for item in listing.json()["results"]]
    assert sorted(keys) == ["checkout-copy", "inactive-one"]
    active = reader.get(reverse("api:experiments"), {"active": "true"}).json()["results"]
    assert [item["key"] for item in active] == ["checkout-copy"]
    page = reader.get(reverse("api:experiments"), {"limit": 1}).json()
    assert len(page["results"]) == 1 and page["next"]


def test_outsiders_get_404_read_keys_403_revoked_keys_401(acme, globex, alice, charlie_client):
    _experiment(acme)
    outsider = api_client(globex.organization, scope="write")
    for client in (outsider, charlie_client):
        assert assign(client, "checkout-copy", "u1").status_code == 404
        assert client.get(reverse("api:experiment", args=["checkout-copy"])).status_code == 404
    reader = api_client(acme.organization, scope="read")
    refused = assign(reader, "checkout-copy", "u1")
    assert refused.status_code == 403 and error(refused)["code"] == "permission_denied"
    writer = api_client(acme.organization, scope="write")
    api_key_revoke(api_key=writer.api_key, actor=alice)  # type: ignore[attr-defined]
    assert assign(writer, "checkout-copy", "u1").status_code == 401
    assert not Exposure.objects.exists()


def test_bad_input_unknown_and_inactive_experiments(acme, alice_client):
    _experiment(acme, key="paused", active=False)
    _experiment(acme)
    missing = alice_client.post(
        reverse("api:experiment-assign", args=["checkout-copy"]), data="{}", content_type="application/json"
    )
    assert missing.status_code == 400 and set(error(missing)["fields"]) == {"unit_id"}
    assert assign(alice_client, "checkout-copy", "x" * 201).status_code == 400
    malformed = alice_client.post(
        reverse("api:experiment-assign", args=["checkout-copy"]), data="{", content_type="application/json"
    )
    assert malformed.status_code == 400 and error(malformed)["code"] == "parse_error"
    assert assign(alice_client, "no-such-key", "u1").status_code == 404
    paused = assign(alice_client, "paused", "u1")
    assert paused.status_code == 409 and error(paused)["code"] == "conflict"
    assert assign(alice_client, "checkout-copy", "u1").status_code == 200  # an owner's session may assign


def test_shadow_battles_name_the_experiment_and_its_variants(acme):
    experiment = _experiment(acme)
    Variant.objects.filter(experiment=experiment, name="treatment").update(competitor=acme.right)
    writer = api_client(acme.organization, scope="write")
    answer = {"text": "An answer.", "output_tokens": 3, "finish_reason": "stop", "latency_s": 0.4}
    response = writer.post(
        reverse("api:shadow-battles", args=[acme.campaign.pk]),
        data=json.dumps(
            {
                "idempotency_key": "exp-1",
                "prompt": "Which plan should I choose?",
                "experiment": "checkout-copy",
                "answers": [{**answer, "variant": "control"}, {**answer, "variant": "treatment", "text": "Other."}],
            }
        ),
        content_type="application/json",
    )
    assert response.status_code == 201, response.content
    state = writer.get(reverse("api:shadow-battle", args=[acme.campaign.pk, response.json()["id"]])).json()
    assert state["experiment"] == "checkout-copy"
    unknown = writer.post(
        reverse("api:shadow-battles", args=[acme.campaign.pk]),
        data=json.dumps(
            {
                "idempotency_key": "exp-2",
                "prompt": "Which plan should I choose?",
                "experiment": "checkout-copy",
                "answers": [{**answer, "variant": "control"}, {**answer, "variant": "nope"}],
            }
        ),
        content_type="application/json",
    )
    assert unknown.status_code == 400 and set(error(unknown)["fields"]) == {"answers.1.variant"}


def test_an_organization_parameter_that_is_no_slug_is_refused_not_a_server_error(acme):
    _experiment(acme)
    reader = api_client(acme.organization, scope="read")
    url = reverse("api:experiment", args=["checkout-copy"])
    for bad in ("ac\x00me", "acme; drop", "é"):
        response = reader.get(url, {"organization": bad})
        assert response.status_code == 400, (bad, response.content)
        assert "slug" in error(response)["message"]
    assert reader.get(url, {"organization": "acme"}).status_code == 200
    assert reader.get(url, {"organization": ""}).status_code == 200  # empty: not given
