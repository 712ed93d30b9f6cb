"""The robustness audit on a board: the block a raw snapshot stores (ids of the votes to drop), and one
thin pass through the recompute, the API and the page."""

from __future__ import annotations

import numpy as np
import pytest
from django.urls import reverse

from battles.models import Campaign, Prompt
from ranking.board_robustness import robustness_block
from ranking.compute import Method
from ranking.estimators import LEFT_WINS, RIGHT_WINS, TIE
from ranking.models import LeaderboardSnapshot
from ranking.policy import ExclusionPolicy, VoteArrays, vote_log_from_arrays
from ranking.services import leaderboards_recompute

from .synth import votes_write


def vote_arrays(left: list[int], right: list[int], outcome: list[int]) -> VoteArrays:
    m = len(left)
    z = np.zeros(m, dtype=np.int64)
    return VoteArrays(
        vote_id=np.arange(1, m + 1, dtype=np.int64) * 7,
        left=np.asarray(left, dtype=np.int64),
        right=np.asarray(right, dtype=np.int64),
        outcome=np.asarray(outcome, dtype=np.int64),
        decision_ms=z + 5000,
        rater=z,
        prompt=z,
        category=z,
        categories=("",),
        identity=np.zeros(m, dtype=bool),
        style_left=np.zeros((m, 0)),
        style_right=np.zeros((m, 0)),
    )


def two_model_log(per_vote_max: int = 1_000_000):  # type: ignore[no-untyped-def]
    """A (pk 10) beats B (pk 20) 11 times and loses 10, shown on either side; 4 ties."""
    rng = np.random.default_rng(0)
    results = [(10, 20)] * 11 + [(20, 10)] * 10
    left, right, outcome = [], [], []
    for k in rng.permutation(len(results)):
        winner, loser = results[k]
        if rng.random() < 0.5:
            left.append(winner)
            right.append(loser)
            outcome.append(LEFT_WINS)
        else:
            left.append(loser)
            right.append(winner)
            outcome.append(RIGHT_WINS)
    left += [10, 20, 10, 20]
    right += [20, 10, 20, 10]
    outcome += [TIE] * 4
    votes = vote_arrays(left, right, outcome)
    return votes, vote_log_from_arrays(votes, ExclusionPolicy(), by_prompt=False, per_vote_max=per_vote_max)


def test_block_names_the_votes_to_drop_and_their_ids():
    votes, log = two_model_log()
    block = robustness_block(log.counted, log.sample, np.array([10, 20]), {10: "A", 20: "B"}, Method(min_votes=5))
    assert block["leader"] == {"id": 10, "label": "A"} and block["reason"] == ""
    assert block["computed_from"]["votes"] == 25 and block["computed_from"]["vote_ids_from"] == "every kept vote"
    rank1 = block["targets"][0]
    assert rank1["status"] == "flips" and rank1["votes"] == 2 and rank1["share_pct"] == 8.0
    assert rank1["after"] == [{"id": 20, "label": "B"}] and rank1["verified"] and rank1["minimal"]
    (drop,) = rank1["drops"]
    assert drop["outcome"] == "win" and drop["first"]["id"] == 10 and drop["second"]["id"] == 20
    a_won = [
        int(v)
        for v, lft, o in zip(votes.vote_id, votes.left, votes.outcome, strict=True)
        if (lft == 10 and o == LEFT_WINS) or (lft == 20 and o == RIGHT_WINS)
    ]
    assert drop["vote_ids"] == sorted(a_won)[-2:][::-1] and rank1["vote_ids_listed"] == 2
    # Two ranked competitors: the top 3 and top 5 are everyone.
    assert [t["status"] for t in block["targets"][1:]] == ["not_computed", "not_computed"]


def test_block_from_a_sample_says_the_ids_may_be_fewer():
    _, log = two_model_log(per_vote_max=10)
    block = robustness_block(log.counted, log.sample, np.array([10, 20]), {10: "A", 20: "B"}, Method(min_votes=5))
    rank1 = block["targets"][0]
    assert rank1["votes"] == 2 and "per-vote sample" in block["computed_from"]["vote_ids_from"]
    sampled = set(log.sample.vote_id.tolist())
    assert rank1["vote_ids_listed"] <= 2 and all(v in sampled for v in rank1["drops"][0]["vote_ids"])


def test_block_on_one_ranked_competitor_says_why():
    votes, log = two_model_log()
    block = robustness_block(log.counted, log.sample, np.array([10, 20]), {}, Method(min_votes=100))
    assert block["leader"] is None and block["targets"] == [] and "fewer than two" in block["reason"]


def test_block_without_votes_or_competitors_says_why():
    votes, log = two_model_log()
    nothing = log.counted.subset(np.zeros(len(log.counted), dtype=bool))
    for ids in (np.array([10, 20]), np.zeros(0, dtype=np.int64)):
        block = robustness_block(nothing, None, ids, {}, Method())
        assert block["leader"] is None and block["targets"] == [] and block["reason"] == "no votes on this board"


@pytest.mark.django_db
def test_recompute_stores_the_audit_on_raw_boards_and_the_api_and_page_show_it(acme, bob, alice_client):
    campaign = acme.campaign
    prompts = list(Prompt.objects.filter(campaign=campaign))
    votes_write(
        campaign=campaign,
        pool=acme.pool,
        raters=[bob],
        prompts=prompts,
        competitors=[acme.left, acme.right],
        strengths=(1.05, 1.0),
        n=80,
        seed=4,
        categories=("coding",),
    )
    Campaign.objects.filter(pk=campaign.pk).update(ranking_min_votes=10, ranking_bootstrap_rounds=10, min_decision_ms=0)
    leaderboards_recompute(campaign_id=campaign.pk)
    raw = LeaderboardSnapshot.objects.get(campaign=campaign, category="", view="raw")
    style = LeaderboardSnapshot.objects.get(campaign=campaign, category="", view="style")
    coding = LeaderboardSnapshot.objects.get(campaign=campaign, category="coding", view="raw")
    block = raw.extra["robustness"]
    assert "robustness" not in style.extra and coding.extra["robustness"]["computed_from"]["votes"] == raw.votes_used
    assert block["computed_from"]["votes"] == raw.votes_used and block["leader"]["id"] == raw.rows[0]["competitor_id"]
    rank1 = block["targets"][0]
    assert rank1["status"] == "flips" and rank1["verified"]

    api = alice_client.get(reverse("leaderboard", args=[campaign.pk])).json()
    assert api["extra"]["robustness"] == block
    html = alice_client.get(reverse("ranking:leaderboard", args=[campaign.pk])).content.decode()
    assert "Robustness: how many votes hold the top" in html
    assert f"removing {rank1['votes']} of {raw.votes_used} votes ({rank1['share_pct']}%) would put" in html
    assert f"{rank1['drops'][0]['votes']} vote" in html and str(rank1["drops"][0]["vote_ids"][0]) in html
