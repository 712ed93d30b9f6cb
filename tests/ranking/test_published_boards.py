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
