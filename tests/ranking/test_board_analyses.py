"""One board analysis that fails on a campaign's votes costs that analysis only: the recompute stores every
board, the failed block carries a reason, the other analyses are there, and the page names what failed."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from battles.models import Campaign, Prompt
from ranking import board_analyses
from ranking.board_analyses import OVERALL_BOARD_ANALYSES, RAW_BOARD_ANALYSES
from ranking.services import leaderboards_recompute
from tests.conftest import Tenant, api_client

from .synth import votes_write

pytestmark = pytest.mark.django_db


def test_a_failing_analysis_costs_its_own_block_only(acme: Tenant, bob, alice_client: Client, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    votes_write(
        campaign=acme.campaign,
        pool=acme.pool,
        raters=[bob],
        prompts=list(Prompt.objects.filter(campaign=acme.campaign)),
        competitors=[acme.left, acme.right],
        strengths=(2.0, 1.0),
        n=40,
        seed=3,
    )
    Campaign.objects.filter(pk=acme.campaign.pk).update(
        ranking_min_votes=10, ranking_bootstrap_rounds=10, ranking_interval="sandwich", min_decision_ms=0
    )

    def broken(*args: object, **kwargs: object) -> dict[str, object]:
        raise FloatingPointError("planted")

    monkeypatch.setattr(board_analyses, "robustness_block", broken)
    snapshots = leaderboards_recompute(campaign_id=acme.campaign.pk)
    overall = next(s for s in snapshots if s.category == "" and s.view == "raw")
    assert overall.extra["robustness"]["failed"] is True
    assert "FloatingPointError" in overall.extra["robustness"]["reason"]
    for key in (*RAW_BOARD_ANALYSES, *OVERALL_BOARD_ANALYSES):
        if key != "robustness":
            assert not overall.extra[key].get("failed"), key
    assert any(row.get("score") is not None for row in overall.rows)
    api = api_client(acme.organization).get(reverse("leaderboard", args=[acme.campaign.pk])).json()
    assert api["extra"]["robustness"]["failed"] is True
    page = alice_client.get(reverse("ranking:leaderboard", args=[acme.campaign.pk])).content.decode()
    assert 'id="failed-analyses"' in page and "robustness (this analysis failed" in page
    assert 'id="robustness-heading"' not in page and 'id="planning-heading"' in page
