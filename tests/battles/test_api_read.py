"""The read API for campaigns, competitors, categories and prompts: scoped to the principal, cursor pages,
filters, and another organisation's campaign a 404 on every endpoint."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from battles.models import Campaign, Prompt
from battles.services import gold_competitors
from raters.models import ApiKey, Role
from raters.services import api_key_revoke
from tests.conftest import api_client, login
from tests.factories import MembershipFactory, PromptFactory, UserFactory
from tests.ranking.synth import vote_at, votes_write

pytestmark = pytest.mark.django_db


def campaign_urls(campaign: Campaign) -> list[str]:
    return [
        reverse("api:campaign", args=[campaign.pk]),
        reverse("api:competitors", args=[campaign.pk]),
        reverse("api:categories", args=[campaign.pk]),
        reverse("api:prompts", args=[campaign.pk]),
    ]


def walk(client: Client, url: str) -> list[dict]:  # type: ignore[type-arg]
    """Every row of a cursor-paginated list, following ``next``."""
    rows: list[dict] = []  # type: ignore[type-arg]
    pages = 0
    while url:
        response = client.get(url)
        assert response.status_code == 200, response.content
        body = response.json()
        rows += body["results"]
        url = body["next"]
        pages += 1
        assert pages < 100
    return rows


def test_a_manager_lists_their_campaigns_with_parameters_and_counts(acme, globex, alice_client, bob):
    votes_write(
        campaign=acme.campaign,
        pool=acme.pool,
        raters=[bob],
        prompts=list(acme.campaign.prompts.all()),
        competitors=[acme.left, acme.right],
        strengths=[1.0, 1.0],
        n=3,
    )
    response = alice_client.get(reverse("api:campaigns"))
    assert response.status_code == 200
    body = response.json()
    assert [c["id"] for c in body["results"]] == [acme.campaign.pk]
    campaign = body["results"][0]
    assert campaign["organization"] == "acme" and campaign["slug"] == "acme-chat"
    assert campaign["params"] == acme.campaign.sampling_params()
    assert campaign["counts"] == {"competitors": 2, "prompts": 8, "votes": 3, "gold_votes": 0}
    # A gold battle's vote: counted apart; its two pseudo-competitors are no competitors, counted or listed.
    gold_left, gold_right = gold_competitors(campaign=acme.campaign)
    vote_at(acme, rater=bob, left=gold_left, right=gold_right, at=timezone.now(), gold_expected="left")
    campaign = alice_client.get(reverse("api:campaigns")).json()["results"][0]
    assert campaign["counts"] == {"competitors": 2, "prompts": 8, "votes": 4, "gold_votes": 1}
    listed = alice_client.get(reverse("api:competitors", args=[acme.campaign.pk])).json()["results"]
    assert len(listed) == campaign["counts"]["competitors"]
    assert campaign["caps"]["session_cap"] == acme.campaign.session_cap
    detail = alice_client.get(reverse("api:campaign", args=[acme.campaign.pk]))
    assert detail.status_code == 200 and detail.json() == campaign


def test_a_key_reads_its_organisations_campaigns_only(acme, globex):
    client = api_client(acme.organization, scope="read")
    assert [c["id"] for c in client.get(reverse("api:campaigns")).json()["results"]] == [acme.campaign.pk]
    for url in campaign_urls(acme.campaign):
        assert client.get(url).status_code == 200, url


def test_campaigns_filter_by_status(acme, alice_client):
    Campaign.objects.filter(pk=acme.campaign.pk).update(status=Campaign.Status.OPEN)
    assert len(alice_client.get(reverse("api:campaigns") + "?status=open").json()["results"]) == 1
    assert alice_client.get(reverse("api:campaigns") + "?status=draft").json()["results"] == []
    refused = alice_client.get(reverse("api:campaigns") + "?status=sleeping")
    assert refused.status_code == 400 and refused.json()["error"]["code"] == "invalid"


@pytest.mark.parametrize("index", range(4))
def test_another_organisations_campaign_is_not_found(acme, globex, charlie_client, index):
    url = campaign_urls(acme.campaign)[index]
    for client in (charlie_client, api_client(globex.organization, scope="write")):
        response = client.get(url)
        assert response.status_code == 404, url
        assert response.json()["error"]["code"] == "not_found"


def test_a_rater_reads_no_campaign_but_a_viewer_does(acme, bob_client):
    assert bob_client.get(reverse("api:campaigns")).json()["results"] == []
    for url in campaign_urls(acme.campaign):
        assert bob_client.get(url).status_code == 404, url
    viewer = UserFactory.create(email="vera@acme.test")
    MembershipFactory.create(user=viewer, organization=acme.organization, role=Role.VIEWER)
    client = login(viewer)
    for url in campaign_urls(acme.campaign):
        assert client.get(url).status_code == 200, url


def test_a_revoked_key_and_no_credentials_are_refused(acme):
    client = api_client(acme.organization, scope="read")
    api_key_revoke(api_key=ApiKey.objects.get(pk=client.api_key.pk), actor=None)  # type: ignore[attr-defined]
    response = client.get(reverse("api:prompts", args=[acme.campaign.pk]))
    assert response.status_code == 401 and response.json()["error"]["code"] == "authentication_failed"
    assert Client().get(reverse("api:campaigns")).status_code == 401


def test_competitors_name_model_and_version(acme, alice_client):
    acme.right.active = False
    acme.right.save()
    rows = alice_client.get(reverse("api:competitors", args=[acme.campaign.pk])).json()["results"]
    assert {(r["id"], r["model"], r["version"], r["active"]) for r in rows} == {
        (acme.left.pk, acme.left.endpoint.name, "2026-11", True),
        (acme.right.pk, acme.right.endpoint.name, "2026-11", False),
    }
    active = alice_client.get(reverse("api:competitors", args=[acme.campaign.pk]) + "?active=true").json()
    assert [r["id"] for r in active["results"]] == [acme.left.pk]


def test_categories_count_prompts_and_votes(acme, alice_client, bob):
    PromptFactory.create(campaign=acme.campaign, category="math", active=False)
    votes_write(
        campaign=acme.campaign,
        pool=acme.pool,
        raters=[bob],
        prompts=list(acme.campaign.prompts.all()),
        competitors=[acme.left, acme.right],
        strengths=[1.0, 1.0],
        n=5,
        categories=["coding", "coding", "math", "coding", "coding"],
    )
    body = alice_client.get(reverse("api:categories", args=[acme.campaign.pk])).json()
    assert body["campaign"] == acme.campaign.pk
    counts = {row["category"]: row for row in body["results"]}
    assert list(counts) == ["coding", "math", "writing", "knowledge", "reasoning", "advice", "other"]
    assert counts["knowledge"] == {"category": "knowledge", "prompts": 8, "active_prompts": 8, "votes": 0}
    assert counts["math"] == {"category": "math", "prompts": 1, "active_prompts": 0, "votes": 1}
    assert counts["coding"]["votes"] == 4 and counts["coding"]["prompts"] == 0


def test_prompts_come_in_cursor_pages_newest_first(acme, alice_client):
    for _ in range(5):
        PromptFactory.create(campaign=acme.campaign)
    expected = list(Prompt.objects.filter(campaign=acme.campaign).order_by("-id").values_list("id", flat=True))
    assert len(expected) == 13
    rows = walk(alice_client, reverse("api:prompts", args=[acme.campaign.pk]) + "?limit=4")
    assert [r["id"] for r in rows] == expected
    first = rows[0]
    prompt = Prompt.objects.get(pk=first["id"])
    assert first["text"] == prompt.text and first["text_hash"] == prompt.text_hash
    assert set(first) == {
        "id",
        "text",
        "text_hash",
        "category",
        "language",
        "source",
        "external_id",
        "active",
        "created_at",
    }


def test_a_page_larger_than_the_maximum_is_refused_not_silently_shortened(acme, alice_client):
    url = reverse("api:prompts", args=[acme.campaign.pk])
    assert len(alice_client.get(url + "?limit=500").json()["results"]) == 8
    response = alice_client.get(url + "?limit=100000")
    assert response.status_code == 400 and list(response.json()["error"]["fields"]) == ["limit"]


def test_prompts_filter(acme, alice_client):
    url = reverse("api:prompts", args=[acme.campaign.pk])
    coding = PromptFactory.create(campaign=acme.campaign, category="coding", language="de", external_id="c-1")
    typed = PromptFactory.create(campaign=acme.campaign, source=Prompt.Source.RATER, active=False)
    old = PromptFactory.create(campaign=acme.campaign)
    Prompt.objects.filter(pk=old.pk).update(created_at=timezone.now() - timedelta(days=10))

    def ids(query: str) -> set[int]:
        response = alice_client.get(url + query)
        assert response.status_code == 200, response.content
        return {r["id"] for r in response.json()["results"]}

    assert ids("?category=coding") == {coding.pk}
    assert ids("?language=de") == {coding.pk}
    assert ids("?external_id=c-1") == {coding.pk}
    assert ids("?source=rater") == {typed.pk}
    assert ids("?active=false") == {typed.pk}
    assert old.pk in ids("?active=true")
    week_ago = (timezone.now() - timedelta(days=7)).isoformat().replace("+00:00", "Z")
    assert ids(f"?created_before={week_ago}") == {old.pk}
    assert old.pk not in ids(f"?created_after={week_ago}") and coding.pk in ids(f"?created_after={week_ago}")
    refused = alice_client.get(url + "?category=poetry")
    assert refused.status_code == 400 and "category" in refused.json()["error"]["fields"]
    assert alice_client.get(url + "?created_after=yesterday").status_code == 400


def test_a_limit_that_is_not_a_whole_number_is_refused(acme, alice_client):
    for limit in ("abc", "0", "-3", "null", "5&limit=", "&limit=7"):  # the last two: given twice
        response = alice_client.get(reverse("api:prompts", args=[acme.campaign.pk]) + f"?limit={limit}")
        assert response.status_code == 400, limit
        assert list(response.json()["error"]["fields"]) == ["limit"]


def test_date_bounds_with_any_iso_offset_or_at_the_calendars_ends(acme, alice_client):
    url = reverse("api:prompts", args=[acme.campaign.pk])
    every = set(Prompt.objects.filter(campaign=acme.campaign).values_list("id", flat=True))

    def ids(query: str) -> set[int]:
        response = alice_client.get(url + query)
        assert response.status_code == 200, response.content
        return {r["id"] for r in response.json()["results"]}

    # PostgreSQL takes offsets up to 15:59; ISO 8601 up to 23:59.
    assert ids("?created_after=0388-12-10T03:31:39%2B23:38") == every
    assert ids("?created_before=5000-06-22T19:29:40-18:43") == every
    assert ids("?created_after=0001-01-01T00:00:00%2B05:00") == every
    assert ids("?created_before=0001-01-01T00:00:00%2B05:00") == set()
    assert ids("?created_before=9999-12-31T23:59:59-05:00") == every
    assert ids("?created_after=9999-12-31T23:59:59-05:00") == set()
