"""The campaign interval setting "auto" (issue 20.5): clustered votes (prompt effects, k reviewers per
item) get the bootstrap by prompt, and every snapshot records the choice and why; the page and the API
show it. Known truth: ``clustered_votes`` with its population strengths (``benchmarks/board_intervals.py``
runs the long version over three designs)."""

from __future__ import annotations

import numpy as np
import pytest

from battles.models import Campaign, Prompt
from ranking.compute import Method, board_compute
from ranking.estimators import BASE, SCALE, choose_interval, design_effect
from ranking.estimators.synthetic import clustered_votes, population_strengths
from ranking.models import LeaderboardSnapshot
from ranking.services import leaderboards_recompute
from tests.factories import PromptFactory

from .synth import votes_write
from .test_multiplicity import votes_for

STRENGTHS = np.linspace(0.0, 1.5, 10)


def test_design_effect_is_the_size_weighted_mean_cluster_size() -> None:
    assert design_effect(np.arange(50)) == (1.0, 50)
    assert design_effect(np.repeat(np.arange(10), 3)) == (3.0, 10)
    assert design_effect(np.array([0, 1, 1, 1])) == (2.5, 2)  # (1 + 9) / 4


def test_auto_resamples_prompts_only_when_they_repeat_enough() -> None:
    repeated = np.repeat(np.arange(12), 3)
    chosen = choose_interval("auto", repeated, plain="bootstrap")
    assert chosen.chosen == "cluster_bootstrap" and chosen.warning is None and "D = " in chosen.reason
    assert choose_interval("auto", np.arange(40), plain="bootstrap").chosen == "bootstrap"
    few = choose_interval("auto", np.repeat(np.arange(5), 4), plain="sandwich")
    assert few.chosen == "sandwich" and few.warning and "too narrow" in few.warning
    explicit = choose_interval("bootstrap", repeated, plain="bootstrap")
    assert explicit.chosen == "bootstrap" and explicit.warning and "'auto'" in explicit.warning
    assert choose_interval("cluster_bootstrap", np.arange(40), plain="bootstrap").warning is None


def _coverage(method: Method, boards: int) -> tuple[float, set[str]]:
    """Share of score intervals holding the true population score, k = 5 reviewers per item."""
    truth = population_strengths(STRENGTHS, design="item", effect_sd=1.5)
    covered, total, chosen = 0, 0, set()
    for seed in range(boards):
        sim = clustered_votes(
            np.random.default_rng(seed), STRENGTHS, clusters=600, size=5, design="item", effect_sd=1.5
        )
        board = board_compute(votes_for(sim.a, sim.b, sim.outcome, sim.cluster), np.arange(1, 11), {}, method)
        chosen.add(board.extra["interval_choice"]["chosen"])
        for row in board.rows:
            covered += int(row["lower"] <= SCALE * truth[row["competitor_id"] - 1] + BASE <= row["upper"])
            total += 1
    return covered / total, chosen


def test_auto_covers_when_k_reviewers_share_each_item() -> None:
    """600 items x 5 raters with a per-item effect: the plain bootstrap treats the 5 votes of an item as
    independent and covers too rarely; auto resamples prompts and covers about 95%."""
    plain, _ = _coverage(Method(min_votes=1, rounds=100, interval="bootstrap"), 15)
    auto, chosen = _coverage(Method(min_votes=1, rounds=100, interval="auto"), 15)
    print(f"coverage, 5 reviewers per item: plain bootstrap {plain:.3f}, auto {auto:.3f}")
    assert chosen == {"cluster_bootstrap"}
    assert 0.92 <= auto <= 0.99
    assert plain < 0.9


@pytest.mark.django_db
def test_the_snapshot_page_and_api_record_the_choice(acme, bob, alice_client) -> None:
    campaign = acme.campaign
    assert Campaign().ranking_interval == "auto" and campaign.ranking_interval == "auto"
    PromptFactory.create_batch(6, campaign=campaign)
    prompts = list(Prompt.objects.filter(campaign=campaign))
    assert len(prompts) >= 10
    votes_write(
        campaign=campaign,
        pool=acme.pool,
        raters=[bob],
        prompts=prompts,
        competitors=[acme.left, acme.right],
        strengths=(2.0, 1.0),
        n=240,
        seed=3,
    )
    Campaign.objects.filter(pk=campaign.pk).update(ranking_min_votes=10, ranking_bootstrap_rounds=20)
    leaderboards_recompute(campaign_id=campaign.pk)
    snapshot = LeaderboardSnapshot.objects.get(campaign=campaign, category="", view="raw")
    choice = snapshot.extra["interval_choice"]
    assert snapshot.method["interval"] == "auto"
    assert choice["setting"] == "auto" and choice["chosen"] == "cluster_bootstrap"
    assert choice["clusters"] == len(prompts) and choice["design_effect"] > 1.1
    assert all(r["interval_method"] == "cluster_bootstrap" for r in snapshot.rows if not r["hidden"])
    html = alice_client.get(f"/leaderboard/{campaign.pk}/").content.decode()
    assert "cluster_bootstrap 95% intervals" in html and 'id="interval-choice"' in html
    api = alice_client.get(f"/api/v1/campaigns/{campaign.pk}/leaderboard/").json()
    assert api["extra"]["interval_choice"]["chosen"] == "cluster_bootstrap"

    # A manager's explicit plain bootstrap on repeating prompts: kept, with a warning on the page.
    Campaign.objects.filter(pk=campaign.pk).update(ranking_interval="bootstrap")
    leaderboards_recompute(campaign_id=campaign.pk)
    html = alice_client.get(f"/leaderboard/{campaign.pk}/").content.decode()
    assert 'id="interval-warning"' in html and "may be too narrow" in html


@pytest.mark.django_db
def test_the_migration_moves_campaigns_on_the_old_default_to_auto(acme) -> None:
    """Campaigns on the plain bootstrap (the old default) move to auto; other settings are kept."""
    import importlib
    from types import SimpleNamespace

    from django.apps import apps
    from django.db import connection

    migration = importlib.import_module("battles.migrations.0024_ranking_interval_auto")
    campaign = acme.campaign
    Campaign.objects.filter(pk=campaign.pk).update(ranking_interval="bootstrap", ranking_style_interval="bootstrap")
    migration.plain_to_auto(apps, SimpleNamespace(connection=connection))
    campaign.refresh_from_db()
    assert campaign.ranking_interval == "auto" and campaign.ranking_style_interval == "bootstrap"
    Campaign.objects.filter(pk=campaign.pk).update(ranking_interval="sandwich")
    migration.plain_to_auto(apps, SimpleNamespace(connection=connection))
    campaign.refresh_from_db()
    assert campaign.ranking_interval == "sandwich"
