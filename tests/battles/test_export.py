"""The vote log export: every event field, as JSON lines and CSV, for managers and viewers."""

from __future__ import annotations

import csv
import io
import json

import pytest
from django.urls import reverse

from battles.apis import CSV_COLUMNS
from raters.models import Role
from tests.conftest import login, start_battle
from tests.factories import MembershipFactory, UserFactory

pytestmark = [pytest.mark.django_db, pytest.mark.triton, pytest.mark.usefixtures("triton_server")]


@pytest.fixture
def voted(acme, bob_client):  # type: ignore[no-untyped-def]
    ids = []
    for choice in ("left", "both_bad"):
        battle, _ = start_battle(bob_client, acme.campaign)
        bob_client.post(reverse("battles:vote", args=[battle.pk]), {"choice": choice})
        ids.append(str(battle.pk))
    return ids


def _body(response) -> str:  # type: ignore[no-untyped-def]
    return b"".join(response.streaming_content).decode()


def test_jsonl_export_has_every_event(acme, voted, alice_client):
    response = alice_client.get(reverse("api:votes", args=[acme.campaign.pk, "jsonl"]))
    assert response.status_code == 200 and response.streaming
    events = [json.loads(line) for line in _body(response).splitlines()]
    assert [e["battle_id"] for e in events] == voted
    assert [e["vote"] for e in events] == ["left", "both_bad"]
    event = events[0]
    assert set(event) >= {
        "battle_id",
        "timestamp",
        "rater_id",
        "pool_id",
        "prompt",
        "left",
        "right",
        "params",
        "vote",
        "decision_ms",
        "identity",
    }
    assert set(event["left"]) >= {"model", "version", "output_tokens", "finish_reason", "latency_s", "style"}
    assert set(event["prompt"]) >= {"id", "hash", "category", "language"}


def test_csv_export_matches_jsonl(acme, voted, alice_client):
    rows = list(
        csv.DictReader(io.StringIO(_body(alice_client.get(reverse("api:votes", args=[acme.campaign.pk, "csv"])))))
    )
    assert list(rows[0]) == list(CSV_COLUMNS)
    assert [r["vote"] for r in rows] == ["left", "both_bad"]
    assert json.loads(rows[0]["left_style"])["tokens"] > 0


def test_viewer_may_export_but_rater_may_not(acme, voted, bob_client):
    viewer = UserFactory.create()
    MembershipFactory(user=viewer, organization=acme.organization, role=Role.VIEWER)
    assert login(viewer).get(reverse("api:votes", args=[acme.campaign.pk, "jsonl"])).status_code == 200
    assert bob_client.get(reverse("api:votes", args=[acme.campaign.pk, "jsonl"])).status_code == 404


def test_csv_cells_cannot_become_spreadsheet_formulas(acme, alice_client, bob_client):
    from battles.models import Campaign

    Campaign.objects.filter(pk=acme.campaign.pk).update(system_prompt='=HYPERLINK("http://evil.test","x")')
    battle, _ = start_battle(bob_client, acme.campaign)
    bob_client.post(reverse("battles:vote", args=[battle.pk]), {"choice": "tie"})
    rows = list(
        csv.DictReader(io.StringIO(_body(alice_client.get(reverse("api:votes", args=[acme.campaign.pk, "csv"])))))
    )
    assert rows[0]["system_prompt"] == '\'=HYPERLINK("http://evil.test","x")'
    jsonl = _body(alice_client.get(reverse("api:votes", args=[acme.campaign.pk, "jsonl"])))
    assert json.loads(jsonl)["params"]["system_prompt"].startswith("=HYPERLINK")  # JSON keeps the exact text
