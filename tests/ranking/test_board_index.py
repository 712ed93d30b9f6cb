"""The public index of published boards: only boards published *and listed* (of any organisation) appear,
never an unlisted or unpublished one; the content hashes are stable, recomputable from the public JSON, and
change when an entity changes."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from battles.models import Competitor
from ranking import services
from ranking.models import LeaderboardSnapshot
from ranking.selectors import board_index, content_hash
from tests.conftest import Tenant
from tests.factories import CampaignFactory

from .attribute_world import board_with, ratio_judge

pytestmark = pytest.mark.django_db

METHOD = {
    "estimator": "Bradley-Terry",
    "interval": "bootstrap",
    "confidence": 0.95,
    "confidence_pct": 95,
    "rounds": 100,
    "seed": 0,
    "both_bad": "tie",
    "ties": "half a win each side",
    "anchor": "geometric mean of strengths at 1000",
    "min_votes": 30,
    "boundary": "not hashed: the public JSON does not show it",
}


def snapshot_for(tenant: Tenant) -> None:
    rows = [
        {
            "competitor_id": c.pk,
            "label": "",
            "hidden": False,
            "component": 0,
            "score": s,
            "lower": s - 9,
            "upper": s + 9,
            "votes": 40,
            "wins": w,
            "ties": 0,
            "both_bad": 0,
        }
        for c, s, w in ((tenant.left, 1040.0, 25), (tenant.right, 960.0, 15))
    ]
    LeaderboardSnapshot.objects.create(
        organization=tenant.organization,
        campaign=tenant.campaign,
        category="",
        view="raw",
        version=1,
        method=METHOD,
        policy={"min_decision_ms": 0, "exclude_identity_leaks": True, "prompt_hash_cap": None, "rater_vote_cap": None},
        excluded=dict.fromkeys(
            ("too_fast", "identity_leak", "over_prompt_cap", "over_rater_cap", "flagged_rater", "total"), 0
        ),
        rows=rows,
    )


def index() -> dict[str, Any]:
    response = Client().get(reverse("api-public-board-index"))
    assert response.status_code == 200 and response["Content-Type"] == "application/json"
    return response.json()  # type: ignore[no-any-return]


def test_only_published_and_listed_boards_appear(acme: Tenant, globex: Tenant, alice: Any, charlie: Any) -> None:
    snapshot_for(acme)
    listed, _ = services.board_publish(campaign=acme.campaign, actor=alice, listed=True)
    # Globex's board is listed too: a listed board is public by its organisation's choice, whoever asks.
    other, _ = services.board_publish(campaign=globex.campaign, actor=charlie, listed=True)
    unlisted_campaign = CampaignFactory.create(organization=acme.organization, name="Secret arena", slug="secret")
    unlisted, _ = services.board_publish(campaign=unlisted_campaign, actor=alice)
    gone_campaign = CampaignFactory.create(organization=acme.organization, name="Withdrawn arena", slug="gone")
    gone, _ = services.board_publish(campaign=gone_campaign, actor=alice, listed=True)
    services.board_unpublish(campaign=gone_campaign, actor=alice)
    judge = ratio_judge(acme.organization)
    shown_board = board_with(acme.organization, judge, np.array([0.0, 1.0, 2.0]), name="Public formality")
    hidden_board = board_with(acme.organization, judge, np.array([0.0, 1.0, 2.0]), name="Private formality")
    shown_slug, _ = services.attribute_board_publish(board=shown_board, actor=None, listed=True)
    hidden_slug, _ = services.attribute_board_publish(board=hidden_board, actor=None)

    body = index()
    names = {(b["kind"], b["name"]) for b in body["boards"]}
    assert names == {
        ("leaderboard", acme.campaign.name),
        ("leaderboard", globex.campaign.name),
        ("attribute", "Public formality"),
    }
    # No trace of the unlisted or withdrawn ones: not their names, not their secret addresses.
    for response in (Client().get(reverse("api-public-board-index")), Client().get(reverse("ranking:board-index"))):
        text = response.content.decode()
        assert listed.slug in text and other.slug in text and shown_slug in text
        for secret in (unlisted.slug, gone.slug, hidden_slug, "Secret arena", "Withdrawn arena", "Private formality"):
            assert secret not in text
    # Publishing again without listing takes a board off the index (its address stays).
    services.board_publish(campaign=acme.campaign, actor=alice)
    assert acme.campaign.name not in {b["name"] for b in index()["boards"]}
    assert Client().get(reverse("ranking:board-public", args=[listed.slug])).status_code == 200


def test_the_hashes_are_stable_recomputable_and_change_with_an_entity(acme: Tenant, alice: Any, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    # The index's cache set aside (entries at most INDEX_CACHE_S old: the next test): the hashes as computed.
    monkeypatch.setattr(board_index, "INDEX_CACHE_S", 0)
    snapshot_for(acme)
    publication, _ = services.board_publish(campaign=acme.campaign, actor=alice, listed=True)
    first = index()["boards"][0]
    assert first["version"] == 1 and first["entities"] == 2
    assert index()["boards"][0] == first  # stable: the same board, the same hashes

    # An outsider recomputes both hashes from the public board's JSON, by the recipe the index states.
    public = Client().get(first["api_url"]).json()
    entities = sorted(
        ({"competitor_id": r["competitor_id"], "model": r["model"], "version": r["version"]} for r in public["rows"]),
        key=lambda e: e["competitor_id"],
    )
    attributes = {
        "campaign": public["campaign"],
        "categories": public["categories"],
        "method": public["snapshot"]["method"],
    }
    assert content_hash(entities) == first["entities_hash"]
    assert content_hash(attributes) == first["attributes_hash"]

    # A competitor's version relabelled under the board: the entities hash changes, the attributes do not.
    Competitor.objects.filter(pk=acme.left.pk).update(version_label="2026-12-silently")
    after = index()["boards"][0]
    assert after["entities_hash"] != first["entities_hash"]
    assert after["attributes_hash"] == first["attributes_hash"]
    assert publication.slug in after["url"]


def test_the_publication_apis_set_and_report_listing(acme: Tenant, alice: Any) -> None:
    client = Client()
    client.force_login(alice)
    url = reverse("api-publication", args=[acme.campaign.pk])
    created = client.post(url, {"listed": True}, content_type="application/json")
    assert created.status_code == 201 and created.json()["listed"] is True
    assert [b["name"] for b in index()["boards"]] == [acme.campaign.name]
    assert client.post(url, {"listed": "yes"}, content_type="application/json").status_code == 400
    assert client.post(url, {}, content_type="application/json").json()["listed"] is False
    assert index()["boards"] == []


def test_an_attribute_board_is_listed_through_its_publication_api(acme: Tenant, alice: Any) -> None:
    client = Client()
    client.force_login(alice)
    board = board_with(acme.organization, ratio_judge(acme.organization), np.array([0.0, 1.0]), name="Listed formality")
    url = reverse("api-attribute-board-publication", args=[board.pk])
    assert client.post(url, {"listed": True}, content_type="application/json").json()["listed"] is True
    [entry] = index()["boards"]
    assert entry["kind"] == "attribute" and entry["entities"] == 2 and entry["version"] is None
    texts = [{"position": e.position, "label": e.label, "text": e.text} for e in board.entities.order_by("position")]
    assert entry["entities_hash"] == content_hash(texts)
    assert client.delete(url).status_code == 204 and index()["boards"] == []


def test_the_index_is_served_from_the_cache_until_the_listed_boards_change(acme: Tenant, alice: Any) -> None:
    """Public and unthrottled, so built once and shared: a second request reads only which boards are listed;
    unlisting one changes that at once, so it is never served from the cache after."""
    snapshot_for(acme)
    listed, _ = services.board_publish(campaign=acme.campaign, actor=alice, listed=True)
    url = reverse("api-public-board-index")
    assert listed.slug in Client().get(url).content.decode()
    with CaptureQueriesContext(connection) as again:
        assert listed.slug in Client().get(url).content.decode()
    assert len(again.captured_queries) <= 3  # the two lists of listed boards (and nothing per board)
    services.board_publish(campaign=acme.campaign, actor=alice)  # published again, not listed
    assert listed.slug not in Client().get(url).content.decode()
    assert acme.campaign.name not in Client().get(reverse("ranking:board-index")).content.decode()
