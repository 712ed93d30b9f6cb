"""Published boards: a manager publishes a campaign's leaderboard at a random address; anyone can read
it there (HTML and JSON) without logging in; it never shows a rater, and prompts only when asked."""

from __future__ import annotations

import pytest
from django.test import Client

from battles.models import Competitor, Prompt
from ranking.models import BoardPublication
from ranking.services import board_publish, board_unpublish, leaderboards_recompute
from raters.models import AuditAction, AuditEvent
from tests.factories import CompetitorFactory, ModelEndpointFactory

from .synth import votes_write

pytestmark = pytest.mark.django_db


@pytest.fixture
def published(acme, alice, bob):  # type: ignore[no-untyped-def]
    """Acme's campaign with three competitors (one retired, one named with markup), votes, a snapshot,
    and its board published."""
    campaign = acme.campaign
    script = CompetitorFactory.create(
        campaign=campaign,
        endpoint=ModelEndpointFactory(organization=acme.organization, name="<script>alert(1)</script>"),
        version_label="x",
    )
    competitors = [acme.left, acme.right, script]
    prompts = list(Prompt.objects.filter(campaign=campaign))
    votes_write(
        campaign=campaign,
        pool=acme.pool,
        raters=[bob],
        prompts=prompts,
        competitors=competitors,
        strengths=(2.0, 1.0, 0.5),
        n=120,
        seed=3,
    )
    campaign.ranking_min_votes = 10
    campaign.ranking_bootstrap_rounds = 20
    campaign.min_decision_ms = 0
    campaign.save()
    Competitor.objects.filter(pk=acme.right.pk).update(active=False)
    leaderboards_recompute(campaign_id=campaign.pk)
    publication, created = board_publish(campaign=campaign, actor=alice)
    assert created
    return campaign, publication, prompts


def test_publish_is_audited_and_unguessable(published, alice):
    campaign, publication, _ = published
    assert len(publication.slug) >= 16 and campaign.slug not in publication.slug
    event = AuditEvent.objects.get(action=AuditAction.BOARD_PUBLISHED)
    assert event.actor == alice and event.data["slug"] == publication.slug and event.data["new"] is True
    again, created = board_publish(campaign=campaign, actor=alice, show_prompts=True)
    assert not created and again.slug == publication.slug and again.show_prompts
    assert board_unpublish(campaign=campaign, actor=alice)
    assert AuditEvent.objects.filter(action=AuditAction.BOARD_UNPUBLISHED, data__slug=publication.slug).count() == 1
    assert not BoardPublication.objects.filter(campaign=campaign).exists()
    assert board_unpublish(campaign=campaign, actor=alice) is False
    fresh, _ = board_publish(campaign=campaign, actor=alice)
    assert fresh.slug != publication.slug


def test_public_page_anonymous(published, bob):
    """The visitor has no tenant scope (the request edge opens an empty one): the selector opens the
    board's organisation explicitly."""
    campaign, publication, prompts = published
    response = Client().get(f"/boards/{publication.slug}/")
    assert response.status_code == 200
    html = response.content.decode()
    assert campaign.name in html and "Method: Bradley-Terry" in html and "Last updated" in html
    # Every competitor, the retired one marked as such.
    retired_row = html.split(f'data-competitor="{campaign.competitors.get(active=False).pk}"')[1].split("</tr>")[0]
    assert "retired" in retired_row
    assert html.count("<tr data-competitor=") == 3
    # The competitor named with markup is escaped, never executed.
    assert "<script>alert(1)</script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "Content-Security-Policy" in response
    # No rater, no prompt text.
    assert bob.email not in html and f"rater {bob.pk}" not in html
    for prompt in prompts:
        assert prompt.text not in html


def test_public_page_shows_prompts_only_when_published_with_them(published, alice):
    campaign, publication, prompts = published
    board_publish(campaign=campaign, actor=alice, show_prompts=True)
    html = Client().get(f"/boards/{publication.slug}/").content.decode()
    assert prompts[0].text in html or prompts[0].text.replace("'", "&#x27;") in html


def test_unpublished_or_unknown_is_404(published, alice):
    campaign, publication, _ = published
    assert Client().get("/boards/nope-nope-nope/").status_code == 404
    board_unpublish(campaign=campaign, actor=alice)
    assert Client().get(f"/boards/{publication.slug}/").status_code == 404


def test_publication_api(published, acme, globex, alice, bob, charlie, alice_client, bob_client, charlie_client):
    from django.urls import reverse

    from raters.services import api_key_create

    campaign, publication, _ = published
    url = reverse("api-publication", args=[campaign.pk])
    _, write = api_key_create(organization=acme.organization, name="w", scope="write", actor=alice)
    _, read = api_key_create(organization=acme.organization, name="r", scope="read", actor=alice)
    writer, reader = Client(HTTP_AUTHORIZATION=f"Api-Key {write}"), Client(HTTP_AUTHORIZATION=f"Api-Key {read}")
    assert reader.get(url).json()["slug"] == publication.slug
    assert reader.post(url, {}, content_type="application/json").status_code == 403
    assert reader.delete(url).status_code == 403
    assert bob_client.post(url, {}, content_type="application/json").status_code == 404  # a rater
    assert charlie_client.post(url, {}, content_type="application/json").status_code == 404
    _, theirs = api_key_create(organization=globex.organization, name="t", scope="write", actor=charlie)
    assert Client(HTTP_AUTHORIZATION=f"Api-Key {theirs}").delete(url).status_code == 404
    changed = writer.post(url, {"show_prompts": True}, content_type="application/json")
    assert changed.status_code == 200 and changed.json()["slug"] == publication.slug and changed.json()["show_prompts"]
    assert writer.delete(url).status_code == 204
    assert (
        AuditEvent.objects.filter(action=AuditAction.BOARD_UNPUBLISHED, actor=None)
        .get()
        .data["via"]
        .startswith("api key ")
    )
    assert Client().get(f"/api/v1/public/boards/{publication.slug}/").status_code == 404
    assert writer.delete(url).status_code == 404 and reader.get(url).status_code == 404
    created = writer.post(url, {}, content_type="application/json")
    assert created.status_code == 201 and created.json()["slug"] != publication.slug
    assert created.json()["url"] == f"/boards/{created.json()['slug']}/"
    # An owner in a browser session may too; the audit row names her.
    assert alice_client.post(url, {"show_prompts": True}, content_type="application/json").status_code == 200
    assert AuditEvent.objects.filter(action=AuditAction.BOARD_PUBLISHED, actor=alice, data__via="api").exists()
    assert alice_client.post(url, {"show_prompts": "maybe"}, content_type="application/json").status_code == 400


def test_public_json(published, bob, alice):
    campaign, publication, prompts = published
    response = Client().get(f"/api/v1/public/boards/{publication.slug}/")
    assert response.status_code == 200
    body = response.json()
    assert body["campaign"] == campaign.name and body["snapshot"]["version"] == 1 and body["prompts"] is None
    assert len(body["rows"]) == 3 and sum(r["retired"] for r in body["rows"]) == 1
    assert body["snapshot"]["flagged_raters"] == 0 and "flagged_raters" not in body["snapshot"]["policy"]
    text = response.content.decode()
    # The only "rater" keys are the policy's cap, the exclusion count and the count of flagged raters.
    keys: set[str] = set()

    def walk(value: object) -> None:
        if isinstance(value, dict):
            keys.update(value)
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    walk(body)
    assert {k for k in keys if "rater" in k} == {"rater_vote_cap", "over_rater_cap", "flagged_rater", "flagged_raters"}
    assert bob.email not in text and all(p.text not in text for p in prompts)
    board_publish(campaign=campaign, actor=alice, show_prompts=True)
    shown = Client().get(f"/api/v1/public/boards/{publication.slug}/").json()["prompts"]
    assert shown["count"] == len(prompts) and {p["text"] for p in shown["results"]} == {p.text for p in prompts}
    assert Client().get("/api/v1/public/boards/unknown/").status_code == 404


def test_public_json_is_throttled_per_ip(published, settings):
    _, publication, _ = published
    from django.core.cache import cache

    cache.clear()
    settings.ARENA_PUBLIC_RATE = "2/m"
    url = f"/api/v1/public/boards/{publication.slug}/"
    assert [Client().get(url).status_code for _ in range(3)] == [200, 200, 429]
    assert Client(REMOTE_ADDR="10.0.0.9").get(url).status_code == 200
    assert Client().get(url).json()["error"]["code"] == "throttled"


def test_console_publishes_and_unpublishes(published, alice, alice_client):
    campaign, publication, _ = published
    board_unpublish(campaign=campaign, actor=alice)
    response = alice_client.post("/admin/ranking/boardpublication/add/", {"campaign": campaign.pk, "show_prompts": ""})
    assert response.status_code == 302, response.content.decode()[:2000]
    fresh = BoardPublication.objects.get(campaign=campaign)
    assert AuditEvent.objects.filter(action=AuditAction.BOARD_PUBLISHED, data__slug=fresh.slug, actor=alice).exists()
    page = alice_client.get(f"/admin/ranking/boardpublication/{fresh.pk}/change/").content.decode()
    assert f"/boards/{fresh.slug}/" in page
    changed = alice_client.post(f"/admin/ranking/boardpublication/{fresh.pk}/change/", {"show_prompts": "on"})
    assert changed.status_code == 302
    fresh.refresh_from_db()
    assert fresh.show_prompts and BoardPublication.objects.get(campaign=campaign).slug == fresh.slug
    deleted = alice_client.post(f"/admin/ranking/boardpublication/{fresh.pk}/delete/", {"post": "yes"})
    assert deleted.status_code == 302 and not BoardPublication.objects.filter(campaign=campaign).exists()
    assert AuditEvent.objects.filter(action=AuditAction.BOARD_UNPUBLISHED, data__slug=fresh.slug, actor=alice).exists()


def test_console_refuses_another_organisations_campaign(published, globex, alice, charlie_client):
    campaign, publication, _ = published
    board_unpublish(campaign=campaign, actor=alice)
    response = charlie_client.post("/admin/ranking/boardpublication/add/", {"campaign": campaign.pk})
    assert response.status_code == 200 and "Select a valid choice" in response.content.decode()
    assert not BoardPublication.objects.exists()
    board_publish(campaign=campaign, actor=alice)
    fresh = BoardPublication.objects.get()
    assert charlie_client.get(f"/admin/ranking/boardpublication/{fresh.pk}/change/").status_code in (302, 404)
    charlie_client.post(f"/admin/ranking/boardpublication/{fresh.pk}/delete/", {"post": "yes"})
    assert BoardPublication.objects.filter(pk=fresh.pk).exists()
