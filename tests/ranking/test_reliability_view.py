"""The reliability-weighted leaderboard view: computed beside raw and style from the same votes, with
per-rater reliabilities; withheld when reliability is not identified; on the page and in the API."""

from __future__ import annotations

import pytest
from django.urls import reverse

from battles.models import Prompt
from ranking.models import LeaderboardSnapshot
from ranking.services import leaderboards_recompute
from tests.factories import CompetitorFactory, ModelEndpointFactory, UserFactory

from .synth import votes_write
from .test_recompute import STRENGTHS

pytestmark = pytest.mark.django_db


def test_reliability_view_down_weights_an_adversary(acme, bob, alice_client, charlie_client):  # type: ignore[no-untyped-def]
    campaign = acme.campaign
    competitors = [acme.left, acme.right]
    for k in range(2):
        endpoint = ModelEndpointFactory(organization=acme.organization, name=f"extra-{k}")
        competitors.append(CompetitorFactory.create(campaign=campaign, endpoint=endpoint, version_label="1"))
    prompts = list(Prompt.objects.filter(campaign=campaign))
    honest = [bob] + [UserFactory.create() for _ in range(4)]
    evil = UserFactory.create()
    votes_write(
        campaign=campaign,
        pool=acme.pool,
        raters=honest,
        prompts=prompts,
        competitors=competitors,
        strengths=STRENGTHS,
        n=500,
        seed=1,
    )
    # One rater votes as if the order were reversed (the weakest strongest).
    votes_write(
        campaign=campaign,
        pool=acme.pool,
        raters=[evil],
        prompts=prompts,
        competitors=competitors,
        strengths=tuple(1 / s for s in STRENGTHS),
        n=100,
        seed=2,
    )
    leaderboards_recompute(campaign_id=campaign.pk)
    snap = LeaderboardSnapshot.objects.get(campaign=campaign, category="", view="reliability")
    raw = LeaderboardSnapshot.objects.get(campaign=campaign, category="", view="raw")
    assert "reliability_withheld" not in snap.extra
    assert snap.method["estimator"].startswith("reliability-weighted Bradley-Terry")
    assert snap.method["interval"] == "rater_bootstrap" and snap.method["rounds"] == raw.method["rounds"]
    assert snap.extra["bootstrap_rounds"] == raw.method["rounds"] and snap.extra["bootstrap_rounds_not_converged"] == 0
    assert "Beta(2, 1)" in snap.method["reliability"]["prior"]
    assert snap.votes_used == raw.votes_used == 600 and snap.policy == raw.policy
    raters = {r["rater_id"]: r for r in snap.extra["raters"]}
    assert set(raters) == {u.pk for u in honest + [evil]}
    assert snap.extra["raters"][0]["rater_id"] == evil.pk  # least reliable first
    assert raters[evil.pk]["eta"] < 0.6 and raters[evil.pk]["upper"] < 0.75
    assert all(raters[u.pk]["eta"] > 0.85 and raters[u.pk]["lower"] <= raters[u.pk]["eta"] for u in honest)
    # The adversary's votes count for (almost) nothing, the honest raters' nearly in full.
    assert raters[evil.pk]["weight"] < 0.2 and all(raters[u.pk]["weight"] > 0.7 for u in honest)
    assert raters[evil.pk]["votes"] == 100 and all(r["estimated"] for r in raters.values())
    shown = [r for r in snap.rows if not r["hidden"]]
    assert [r["competitor_id"] for r in shown] == [c.pk for c in competitors]  # strongest first
    assert all(r["lower"] <= r["score"] <= r["upper"] and r["interval_method"] == "rater_bootstrap" for r in shown)
    assert shown[0]["rank_best"] == 1
    # The adversary shrinks the raw gaps; the reliability view undoes it.
    raw_gap = max(r["score"] for r in raw.rows if not r["hidden"]) - min(
        r["score"] for r in raw.rows if not r["hidden"]
    )
    assert shown[0]["score"] - shown[-1]["score"] > raw_gap
    # Every category gets the view too (this log has one).
    categories = LeaderboardSnapshot.objects.filter(campaign=campaign, view="reliability").values_list(
        "category", flat=True
    )
    assert sorted(categories) == sorted(
        LeaderboardSnapshot.objects.filter(campaign=campaign, view="raw").values_list("category", flat=True)
    )

    api = alice_client.get(reverse("leaderboard", args=[campaign.pk]) + "?view=reliability")
    assert api.status_code == 200
    body = api.json()
    assert body["view"] == "reliability" and body["extra"]["raters"][0]["rater_id"] == evil.pk
    chosen = body["extra"]["reliability_interval"]["chosen"]  # a small board: the bootstrap, named
    assert chosen == body["method"]["interval"] == body["rows"][0]["interval_method"] == "rater_bootstrap"
    assert alice_client.get(reverse("leaderboard", args=[campaign.pk]) + "?view=nonsense").status_code == 400
    assert charlie_client.get(reverse("leaderboard", args=[campaign.pk]) + "?view=reliability").status_code == 404

    page = alice_client.get(f"/leaderboard/{campaign.pk}/?view=reliability").content.decode()
    assert "Reliability-weighted" in page and "Rater reliability" in page
    assert f'data-rater="{evil.pk}"' in page and "Weight" in page
    assert "view=reliability" in alice_client.get(f"/leaderboard/{campaign.pk}/").content.decode()  # the switcher


def test_reliability_view_is_withheld_with_one_rater(acme, bob, alice_client):  # type: ignore[no-untyped-def]
    campaign = acme.campaign
    prompts = list(Prompt.objects.filter(campaign=campaign))
    votes_write(
        campaign=campaign,
        pool=acme.pool,
        raters=[bob],
        prompts=prompts,
        competitors=[acme.left, acme.right],
        strengths=(2.0, 1.0),
        n=80,
        seed=3,
    )
    leaderboards_recompute(campaign_id=campaign.pk)
    snap = LeaderboardSnapshot.objects.get(campaign=campaign, category="", view="reliability")
    assert "comparing raters on the same pairs" in snap.extra["reliability_withheld"]
    assert all(r["hidden"] for r in snap.rows) and snap.pairwise == {}
    assert snap.extra["raters"] == [
        {
            "rater_id": bob.pk,
            "eta": 1.0,
            "weight": 1.0,
            "lower": None,
            "upper": None,
            "votes": 80,
            "shared_votes": 0,
            "estimated": False,
        }
    ]
    raw = LeaderboardSnapshot.objects.get(campaign=campaign, category="", view="raw")
    assert any(not r["hidden"] for r in raw.rows)  # the raw view is unaffected
    page = alice_client.get(f"/leaderboard/{campaign.pk}/?view=reliability").content.decode()
    assert "The reliability-weighted view is withheld" in page
