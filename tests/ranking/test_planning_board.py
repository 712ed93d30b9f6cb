"""The planner in the product: the board's ``extra.planning`` block (rank 1 against rank 2), the plan API, the
leaderboard page's section and the dashboard's form, on one small recomputed campaign."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from battles.models import Campaign, Prompt, Vote
from ranking.estimators.planning import plan_uniform
from ranking.models import LeaderboardSnapshot
from ranking.services import leaderboards_recompute
from tests.conftest import Tenant, api_client
from tests.factories import CompetitorFactory, ModelEndpointFactory

from .synth import votes_write

pytestmark = pytest.mark.django_db


@pytest.fixture
def planned(acme: Tenant, bob: User) -> tuple[Campaign, LeaderboardSnapshot]:
    """Three competitors, the first two close (strengths 1.3 and 1.0), 300 votes with 20% ties."""
    campaign = acme.campaign
    third = CompetitorFactory.create(
        campaign=campaign,
        endpoint=ModelEndpointFactory(organization=acme.organization, name="third"),
        version_label="1",
    )
    votes_write(
        campaign=campaign,
        pool=acme.pool,
        raters=[bob],
        prompts=list(Prompt.objects.filter(campaign=campaign)),
        competitors=[acme.left, acme.right, third],
        strengths=(1.3, 1.0, 0.4),
        n=300,
        seed=3,
        tie_rate=0.2,
        categories=("coding",),
    )
    Campaign.objects.filter(pk=campaign.pk).update(
        ranking_min_votes=30, ranking_bootstrap_rounds=10, ranking_interval="sandwich", min_decision_ms=0
    )
    leaderboards_recompute(campaign_id=campaign.pk)
    return campaign, LeaderboardSnapshot.objects.get(campaign=campaign, category="", view="raw")


def test_the_overall_raw_board_carries_the_plan_for_rank_1_against_rank_2(planned) -> None:  # type: ignore[no-untyped-def]
    campaign, snapshot = planned
    block = snapshot.extra["planning"]
    shown = [row for row in snapshot.rows if not row["hidden"]]
    assert (block["first"], block["second"]) == (shown[0]["competitor_id"], shown[1]["competitor_id"])
    assert block["gap"] == pytest.approx(shown[0]["score"] - shown[1]["score"], abs=0.02)
    votes = Vote.objects.filter(battle__campaign=campaign)
    assert block["tie_rate"] == pytest.approx(
        votes.filter(choice__in=["tie", "both_bad"]).count() / votes.count(), abs=1e-4
    )
    assert block["ties"] == "half" and block["power"] == 0.8 and block["alpha"] == 0.05
    assert "300 fitted votes among the 3 shown competitors" in block["computed_from"]
    # Battles on the pair itself need fewer than battles spread over the three pairs.
    assert 0 < block["pair_only"]["additional"] < block["uniform"]["additional"]
    # Spread like the battles so far (evenly, as votes_write draws pairs): close to the uniform plan.
    assert block["as_so_far"]["additional"] == pytest.approx(block["uniform"]["additional"], rel=0.2)
    assert block["power_now"] < 0.8
    # Only the overall raw board carries it.
    others = LeaderboardSnapshot.objects.filter(campaign=campaign).exclude(pk=snapshot.pk)
    assert others.exists() and not any("planning" in s.extra for s in others)


def test_plan_api_gives_the_uniform_plan_with_the_boards_defaults(planned, acme: Tenant, globex: Tenant) -> None:  # type: ignore[no-untyped-def]
    campaign, snapshot = planned
    client = api_client(acme.organization)
    url = reverse("api-campaign-plan", args=[campaign.pk])
    body = client.get(url, {"margin": "30", "power": "0.9"}).json()
    expected = plan_uniform(competitors=3, margin=30.0, tie_rate=snapshot.extra["planning"]["tie_rate"], power=0.9)
    assert body["plan"]["battles_for_margin"] == expected.battles_for_margin
    assert body["plan"]["battles_for_power"] == expected.battles_for_power
    assert body["sources"]["competitors"] == f"shown on board version {snapshot.version}"
    assert body["board"]["uniform"]["additional"] == snapshot.extra["planning"]["uniform"]["additional"]
    # Given values win over the board's, and Davidson-free ties of 0 match the textbook plan.
    given = client.get(url, {"margin": 30, "competitors": 8, "tie_rate": 0}).json()["plan"]
    assert given["battles_for_margin"] == plan_uniform(competitors=8, margin=30.0).battles_for_margin
    assert client.get(url, {"margin": -1}).status_code == 400
    assert client.get(url).status_code == 400  # the margin is required
    assert api_client(globex.organization).get(url, {"margin": 30}).status_code == 404
    # The leaderboard API passes the block through.
    board = client.get(reverse("leaderboard", args=[campaign.pk])).json()
    assert board["extra"]["planning"]["first"] == snapshot.extra["planning"]["first"]


def test_leaderboard_page_and_dashboard_show_the_plan(planned, alice_client: Client) -> None:  # type: ignore[no-untyped-def]
    campaign, snapshot = planned
    block = snapshot.extra["planning"]
    html = alice_client.get(reverse("ranking:leaderboard", args=[campaign.pk])).content.decode()
    assert "Battles to separate rank 1 from rank 2" in html
    assert f"<strong>{block['uniform']['additional']}</strong> more battles" in html
    dashboard = reverse("ranking:campaign-dashboard", args=[campaign.pk])
    page = alice_client.get(dashboard).content.decode()
    assert 'id="planner-form"' in page and 'id="planner-margin"' not in page
    page = alice_client.get(dashboard, {"margin": 30}).content.decode()
    expected = plan_uniform(competitors=3, margin=30.0, tie_rate=block["tie_rate"])
    assert f'<strong id="planner-margin">{expected.battles_for_margin}</strong>' in page
    assert f'<strong id="planner-power">{expected.battles_for_power}</strong>' in page
    assert f"{block['uniform']['additional']} more battles spread evenly" in page
    refused = alice_client.get(dashboard, {"margin": "many"}).content.decode()
    assert 'id="planner-margin"' not in refused and "errorlist" in refused


@pytest.mark.parametrize("ties", ["half", "davidson"])
def test_a_campaign_of_ties_only_gets_its_boards_and_a_reason_instead_of_a_plan(
    acme: Tenant, bob: User, alice_client: Client, ties: str
) -> None:
    """Every vote a tie (a tie rate of 1): the recompute still writes the boards (the planner used to raise and
    take the whole recompute with it; under Davidson's rule the pair-frequency refit's singular information and
    the tie parameter's infinite upper bound did too), the board's block says why there is no plan, and the plan
    API asked with the board's defaults gives that reason (a given tie rate still plans)."""
    campaign = acme.campaign
    Campaign.objects.filter(pk=campaign.pk).update(ranking_ties=ties)
    votes_write(
        campaign=campaign,
        pool=acme.pool,
        raters=[bob],
        prompts=list(Prompt.objects.filter(campaign=campaign)),
        competitors=[acme.left, acme.right],
        strengths=(1.0, 1.0),
        n=60,
        tie_rate=1.0,
    )
    Campaign.objects.filter(pk=campaign.pk).update(ranking_min_votes=10, ranking_bootstrap_rounds=10, min_decision_ms=0)
    leaderboards_recompute(campaign_id=campaign.pk)
    block = LeaderboardSnapshot.objects.get(campaign=campaign, category="", view="raw").extra["planning"]
    assert block["tie_rate"] == 1.0 and "every fitted vote so far is a tie" in block["reason"]
    assert "uniform" not in block
    page = alice_client.get(reverse("ranking:leaderboard", args=[campaign.pk])).content.decode()
    assert "Not planned: every fitted vote so far is a tie" in page
    if ties == "davidson":
        snapshot = LeaderboardSnapshot.objects.get(campaign=campaign, category="", view="raw")
        assert snapshot.extra["tie_parameter"]["upper"] is None and "unbounded: no decisive vote yet" in page
        assert snapshot.extra["pair_frequency"]["available"]
    url = reverse("api-campaign-plan", args=[campaign.pk])
    body = api_client(acme.organization).get(url, {"margin": 30}).json()
    assert body["plan"] is None and "every vote on the board so far is a tie" in body["reason"]
    given = api_client(acme.organization).get(url, {"margin": "30", "tie_rate": "0.5"}).json()
    assert (
        given["plan"]["battles_for_margin"]
        == plan_uniform(
            competitors=2, margin=30.0, tie_rate=0.5, ties="davidson" if ties == "davidson" else "half"
        ).battles_for_margin
    )
