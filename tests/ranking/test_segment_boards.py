"""Rater-segment boards through the platform: raters' attributes in the database, votes in the log where two
segments rank the models in opposite orders, one recompute, then the snapshot, the API and the page."""

from __future__ import annotations

import pytest
from django.urls import reverse

from battles.models import Campaign, Prompt
from ranking.models import LeaderboardSnapshot
from ranking.services import leaderboards_recompute
from raters.models import Role
from raters.services import rater_attribute_set
from tests.factories import CompetitorFactory, MembershipFactory, ModelEndpointFactory, UserFactory

from .synth import votes_write

pytestmark = pytest.mark.django_db


def test_two_segments_ranking_models_in_opposite_orders_reach_the_api_and_the_page(acme, alice, alice_client):
    campaign = acme.campaign
    third = CompetitorFactory.create(
        campaign=campaign,
        endpoint=ModelEndpointFactory(organization=acme.organization, name="third"),
        version_label="1",
    )
    competitors = [acme.left, acme.right, third]
    prompts = list(Prompt.objects.filter(campaign=campaign))
    groups = {"en": (3.0, 1.0, 1.0), "fr<i>": (1.0, 1.0, 3.0)}  # a value with markup: escaped on the page
    for seed, (value, strengths) in enumerate(groups.items()):
        raters = [UserFactory.create() for _ in range(6)]
        for rater in raters:
            MembershipFactory.create(user=rater, organization=acme.organization, role=Role.RATER)
            rater_attribute_set(organization=acme.organization, rater=rater, key="language", value=value, actor=alice)
        votes_write(
            campaign=campaign,
            pool=acme.pool,
            raters=raters,
            prompts=prompts,
            competitors=competitors,
            strengths=strengths,
            n=300,
            seed=seed,
            tie_rate=0.0,
        )
    Campaign.objects.filter(pk=campaign.pk).update(ranking_min_votes=30, ranking_bootstrap_rounds=10, min_decision_ms=0)
    leaderboards_recompute(campaign_id=campaign.pk)

    raw = LeaderboardSnapshot.objects.get(campaign=campaign, category="", view="raw")
    block = raw.extra["segments"]
    assert block["computed_from"]["votes"] == 600 and block["reason"] is None
    (language,) = block["keys"]
    assert language["key"] == "language" and language["raters"] == 12 and language["votes_without_value"] == 0
    tops = {s["value"]: s["rows"][0]["competitor_id"] for s in language["segments"]}
    assert tops == {"en": acme.left.pk, "fr<i>": third.pk}
    assert language["heterogeneity"]["p_value"] < 0.01
    # Only the overall raw board carries the block.
    assert (
        not LeaderboardSnapshot.objects.filter(campaign=campaign)
        .exclude(pk=raw.pk)
        .filter(extra__has_key="segments")
        .exists()
    )

    api = alice_client.get(reverse("leaderboard", args=[campaign.pk])).json()
    assert api["extra"]["segments"]["keys"][0]["segments"] == language["segments"]

    html = alice_client.get(reverse("ranking:leaderboard", args=[campaign.pk])).content.decode()
    assert "Rater segments" in html and "By language" in html
    assert "language: fr&lt;i&gt;" in html and "fr<i>" not in html
    assert "the segments differ" in html
