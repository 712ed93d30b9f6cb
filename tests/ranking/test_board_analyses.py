"""One board analysis that fails on a campaign's votes costs that analysis only: the recompute stores every
board, the failed block carries a reason, the other analyses are there, and the page names what failed."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from ranking import board_analyses
from ranking.board_analyses import OVERALL_BOARD_ANALYSES, RAW_BOARD_ANALYSES
from ranking.services import leaderboards_recompute
from tests.conftest import Tenant, api_client

from .synth import left_leads

pytestmark = pytest.mark.django_db


def test_a_failing_analysis_costs_its_own_block_only(acme: Tenant, bob, alice_client: Client, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    left_leads(acme, bob, n=40, seed=3, min_votes=10)

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
