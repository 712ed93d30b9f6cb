"""Leaderboard API v1: latest, one version and history of a campaign's snapshots (typed rows, open
interval sides, method, policy and exclusion counts), and the pairwise table."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from ranking.models import LeaderboardSnapshot
from ranking.selectors import snapshot_pairwise_stored
from ranking.services import leaderboards_recompute
from raters.services import api_key_create

from .test_recompute import board  # noqa: F401  (the fixture)

pytestmark = pytest.mark.django_db


def key_client(organization, actor, scope="read"):  # type: ignore[no-untyped-def]
    _, key = api_key_create(organization=organization, name=f"k-{scope}", scope=scope, actor=actor)
    return Client(HTTP_AUTHORIZATION=f"Api-Key {key}")


def test_latest_rows_are_typed(board, acme, alice, alice_client):  # noqa: F811
    campaign, competitors, rare = board
    leaderboards_recompute(campaign_id=campaign.pk)
    response = key_client(acme.organization, alice).get(reverse("leaderboard", args=[campaign.pk]))
    assert response.status_code == 200 and response["Content-Type"] == "application/json"
    body = response.json()
    assert body["campaign"] == campaign.pk and body["version"] == 1 and body["view"] == "raw"
    assert body["votes_total"] == 605 and body["method"]["estimator"] == "Bradley-Terry"
    assert set(body["excluded"]) >= {"too_fast", "identity_leak", "over_prompt_cap", "flagged_rater", "total"}
    assert body["policy"]["flagged_raters"] == [] and "pairwise" not in body
    rows = {r["competitor_id"]: r for r in body["rows"]}
    assert set(rows) == {c.pk for c in competitors} | {rare.pk}
    top = body["rows"][0]
    assert top["competitor_id"] == competitors[0].pk and top["rank_best"] == 1
    assert top["model"] == competitors[0].endpoint.name and top["version"] == competitors[0].version_label
    assert top["retired"] is False and top["hidden"] is False
    assert top["lower"] < top["score"] < top["upper"] and not top["lower_open"] and not top["upper_open"]
    for row in body["rows"]:
        assert row["losses"] == row["votes"] - row["wins"] - row["ties"] - row["both_bad"] >= 0
    hidden = rows[rare.pk]
    assert hidden["hidden"] and hidden["score"] is None and hidden["rank_best"] is None and hidden["votes"] == 5
    # Live Elo next to each rating: its spread over 100 random orders of the same votes.
    assert body["extra"]["elo_order"]["permutations"] == 100 and body["extra"]["elo_order"]["votes"] == 605
    for elo in body["extra"]["elo"]:
        assert elo["order_min"] <= elo["rating"] or elo["rating"] <= elo["order_max"]
        assert elo["order_min"] <= elo["order_max"] and elo["order_sd"] >= 0
    # The stored matrices only when asked for (they grow with the square of the competitors).
    full = alice_client.get(reverse("leaderboard", args=[campaign.pk]) + "?include=pairwise").json()
    assert full["pairwise"]["competitor_ids"] and full["rows"] == body["rows"]
    assert alice_client.get(reverse("leaderboard", args=[campaign.pk]) + "?include=everything").status_code == 400


def test_latest_follows_new_versions_and_categories(board, alice_client):  # noqa: F811
    campaign, _, _ = board
    url = reverse("leaderboard", args=[campaign.pk])
    assert alice_client.get(url).status_code == 404  # nothing computed yet
    leaderboards_recompute(campaign_id=campaign.pk)
    assert alice_client.get(url).json()["version"] == 1
    leaderboards_recompute(campaign_id=campaign.pk)
    assert alice_client.get(url).json()["version"] == 2  # the cache is keyed by snapshot: never stale
    coding = alice_client.get(url + "?category=coding&view=style").json()
    assert coding["category"] == "coding" and coding["view"] == "style" and coding["votes_total"] < 605
    assert alice_client.get(url + "?view=sideways").status_code == 400


def test_version_and_history(board, acme, alice):  # noqa: F811
    campaign, _, _ = board
    for _ in range(3):
        leaderboards_recompute(campaign_id=campaign.pk)
    reader = key_client(acme.organization, alice)
    assert reader.get(reverse("leaderboard-version", args=[campaign.pk, 2])).json()["version"] == 2
    assert reader.get(reverse("leaderboard-version", args=[campaign.pk, 9])).status_code == 404
    history = reverse("leaderboard-history", args=[campaign.pk])
    page = reader.get(history + "?limit=2").json()
    assert [r["version"] for r in page["results"]] == [3, 2]
    assert page["results"][0]["votes_total"] == 605 and "total" in page["results"][0]["excluded"]
    rest = reader.get(page["next"]).json()
    assert [r["version"] for r in rest["results"]] == [1] and rest["next"] is None
    coding = reader.get(history + "?category=coding").json()["results"]
    assert len(coding) == 3 and LeaderboardSnapshot.objects.filter(category="coding").count() == 9  # 3 views


def test_outsiders_get_404(board, acme, globex, alice, charlie, charlie_client):  # noqa: F811
    campaign, _, _ = board
    leaderboards_recompute(campaign_id=campaign.pk)
    outsider = key_client(globex.organization, charlie)
    for url in (
        reverse("leaderboard", args=[campaign.pk]),
        reverse("leaderboard-version", args=[campaign.pk, 1]),
        reverse("leaderboard-history", args=[campaign.pk]),
        reverse("api-pairwise", args=[campaign.pk]),
        reverse("api-statistics", args=[campaign.pk]),
    ):
        assert outsider.get(url).status_code == 404, url
        assert charlie_client.get(url).status_code == 404, url
        assert Client().get(url).status_code in (401, 403), url
        assert key_client(acme.organization, alice).get(url).status_code == 200, url


def test_pairwise_matches_the_snapshot(board, acme, alice):  # noqa: F811
    campaign, competitors, rare = board
    leaderboards_recompute(campaign_id=campaign.pk)
    snapshot = LeaderboardSnapshot.objects.get(campaign=campaign, category="", view="raw")
    body = key_client(acme.organization, alice).get(reverse("api-pairwise", args=[campaign.pk])).json()
    assert body["version"] == 1 and body["votes_used"] == snapshot.votes_used == 605
    pairs = {(p["competitor_id"], p["opponent_id"]): p for p in body["pairs"]}
    # Every vote is one battle of one pair, seen from both sides.
    assert sum(p["battles"] for p in body["pairs"]) == 2 * 605
    stored = snapshot_pairwise_stored(snapshot=snapshot)
    at = {cid: k for k, cid in enumerate(stored["competitor_ids"])}
    for (ci, cj), pair in pairs.items():
        assert pair["battles"] == pair["wins"] + pair["ties"] + pair["both_bad"] + pair["losses"]
        assert pairs[(cj, ci)]["wins"] == pair["losses"]
        if ci in at and cj in at:
            assert pair["battles"] == stored["n"][at[ci]][at[cj]]
            assert pair["win_rate"] == stored["win_rate"][at[ci]][at[cj]]
            assert pair["wilson_lower"] == stored["lower"][at[ci]][at[cj]]
            assert pair["p_holm"] == stored["p_holm"][at[ci]][at[cj]]
    # The rare competitor is hidden: its pairs are counted, without a Holm-adjusted p.
    assert pairs[(rare.pk, competitors[0].pk)]["battles"] == 5 and pairs[(rare.pk, competitors[0].pk)]["p_holm"] is None
    assert {c["competitor_id"] for c in body["competitors"] if c["hidden"]} == {rare.pk}


ODD_VALUES = [
    "",
    "x" * 40,
    "\u00e9\u0000",
    "1e309",
    "-1",
    "0",
    "501",
    "2026-13-45T99:00:00Z",
    "7541-07-21T20:51:43+18:21",  # an offset Python accepts and PostgreSQL does not
    "0001-01-01T00:00:00+05:00",  # before the first representable UTC time
    "%00",
    "null",
    "9" * 30,
]


def test_odd_query_values_never_fail_the_server(board, acme, alice):  # noqa: F811
    """Every parameter of every ranking endpoint with odd values: a 2xx or a shaped 4xx, never a 5xx."""
    campaign, _, _ = board
    leaderboards_recompute(campaign_id=campaign.pk)
    from ranking.services import board_publish

    slug = board_publish(campaign=campaign, actor=alice)[0].slug
    reader = key_client(acme.organization, alice)
    endpoints = {
        reverse("leaderboard", args=[campaign.pk]): ("category", "view", "include"),
        reverse("leaderboard-version", args=[campaign.pk, 1]): ("category", "view", "include"),
        reverse("leaderboard-history", args=[campaign.pk]): (
            "category",
            "view",
            "limit",
            "cursor",
            "created_after",
            "created_before",
        ),
        reverse("api-pairwise", args=[campaign.pk]): ("category", "view"),
        reverse("api-statistics", args=[campaign.pk]): ("since", "until"),
        reverse("api-public-board", args=[slug]): ("category", "view", "prompts_offset"),
        reverse("api-leaderboards-compare", args=[campaign.pk]): tuple(
            f"{side}_{name}" for side in "ab" for name in ("category", "view", "judge", "version", "before")
        ),
        reverse("api-public-board-index"): ("category",),
    }
    for url, params in endpoints.items():
        for param in params:
            for value in ODD_VALUES:
                response = reader.get(url, {param: value})
                assert response.status_code < 500, (url, param, value)
                if response.status_code >= 400:
                    assert set(response.json()["error"]) >= {"code", "message"}, (url, param, value)
