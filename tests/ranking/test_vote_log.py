"""The log as the recompute reads it (issue 23.3): counts grouped by PostgreSQL, votes one by one only for the
views that fit each vote (a deterministic sample above ``PER_VOTE_MAX``). On a known board the grouped path
gives exactly what reading every vote gives: the same arrays, and the same snapshots as the per-vote
computation the recompute ran before."""

from __future__ import annotations

import math
from dataclasses import fields, replace
from typing import Any

import numpy as np
import pytest

from battles.models import Campaign, Prompt
from ranking.board_analyses import OVERALL_BOARD_ANALYSES, RAW_BOARD_ANALYSES, board_analyses
from ranking.compute import Method, board_compute, elo_compute
from ranking.policy import VoteArrays, VoteLog, sample_mask, vote_log_from_arrays
from ranking.selectors import exclusion_policy_for, vote_arrays, vote_log
from ranking.services import leaderboards_recompute
from ranking.services import recompute as recompute_module
from ranking.services.recompute import method_for
from raters.models import RaterFlag
from tests.factories import CompetitorFactory, ModelEndpointFactory, UserFactory

from .synth import votes_write

pytestmark = pytest.mark.django_db


@pytest.fixture
def log_board(acme, bob):  # type: ignore[no-untyped-def]
    """Five competitors, 720 votes in two categories, where every exclusion rule excludes some votes: too
    fast, identity leaks, over the prompt cap, over the rater cap, a flagged rater; both-bad votes too."""
    campaign = acme.campaign
    competitors = [acme.left, acme.right]
    for k in range(3):
        endpoint = ModelEndpointFactory(organization=acme.organization, name=f"log-{k}")
        competitors.append(CompetitorFactory.create(campaign=campaign, endpoint=endpoint, version_label="1"))
    prompts = list(Prompt.objects.filter(campaign=campaign))
    raters = [bob] + [UserFactory.create() for _ in range(6)]
    common = {"campaign": campaign, "pool": acme.pool, "prompts": prompts, "competitors": competitors}
    strengths = (3.0, 1.5, 1.0, 0.7, 0.5)
    votes_write(
        **common,
        raters=raters,
        strengths=strengths,
        n=660,
        seed=3,
        both_bad_rate=0.05,
        categories=("coding", "writing"),
        identity_every=23,
    )
    votes_write(**common, raters=raters[1:3], strengths=strengths, n=60, seed=4, decision_ms=400)
    RaterFlag.objects.create(organization=acme.organization, rater=raters[-1], reason="a script")
    Campaign.objects.filter(pk=campaign.pk).update(
        ranking_min_votes=30,
        ranking_bootstrap_rounds=20,
        min_decision_ms=1000,
        prompt_hash_cap=85,
        rater_vote_cap=115,
        both_bad_as_tie=False,
    )
    campaign.refresh_from_db()
    return campaign


def _equal(left: Any, right: Any) -> bool:
    if isinstance(left, VoteArrays):
        return all(_equal(getattr(left, f.name), getattr(right, f.name)) for f in fields(VoteArrays))
    if isinstance(left, np.ndarray):
        return left.shape == right.shape and bool(np.array_equal(left, right))
    return bool(left == right)


def test_the_database_groups_the_log_as_numpy_does(log_board):
    """PostgreSQL's reading (the policy applied in SQL, a few columns a vote) and the per-vote reading with
    the policy in numpy give equal arrays: the counts (by prompt or not), the counts per prompt, every rule's
    tally overall and per category, and the sample, whose hash SQL computes as numpy does."""
    policy = exclusion_policy_for(log_board)
    votes = vote_arrays(campaign_id=log_board.pk)
    rules = policy.rules(votes)
    assert all(int(hits.sum()) > 0 for hits in rules.values()), {k: int(v.sum()) for k, v in rules.items()}
    for by_prompt, per_vote_max in ((True, 1_000_000), (False, 1_000_000), (True, 250)):
        database = vote_log(campaign_id=log_board.pk, policy=policy, by_prompt=by_prompt, per_vote_max=per_vote_max)
        reference = vote_log_from_arrays(votes, policy, by_prompt=by_prompt, per_vote_max=per_vote_max)
        for field in fields(VoteLog):
            assert _equal(getattr(database, field.name), getattr(reference, field.name)), (field.name, by_prompt)
        assert database.counted.votes == database.kept == len(votes) - database.excluded["total"]
        assert database.total == len(votes) == 720
    assert database.sample_rate < 1 and 150 < len(database.sample) < 350
    assert database.sample.count is None and len(database.counted) == database.kept  # by prompt: one a vote
    grouped = vote_log(campaign_id=log_board.pk, policy=policy, by_prompt=False)
    assert len(grouped.counted) < grouped.kept == grouped.counted.votes


def _per_vote_snapshots(campaign: Campaign) -> dict[tuple[str, str], Any]:
    """The boards as the recompute computed them before: every vote read one by one, policy in numpy."""
    votes = vote_arrays(campaign_id=campaign.pk)
    keep, _ = exclusion_policy_for(campaign).apply(votes)
    kept = votes.subset(keep)
    ids = np.array(sorted(c.pk for c in campaign.competitors.filter(gold=False)), dtype=np.int64)
    labels = {c.pk: f"{c.model_name} {c.version_label}" for c in campaign.competitors.all()}
    method = method_for(campaign)
    out: dict[tuple[str, str], Any] = {}
    for category, mask in [("", np.ones(len(kept), dtype=bool))] + [
        (name, kept.category == code) for code, name in enumerate(kept.categories)
    ]:
        for view in ("raw", "style", "reliability"):
            votes = kept.subset(mask)
            board = board_compute(votes, ids, labels, method, view=view)  # type: ignore[arg-type]
            if view == "raw":  # the board analyses, from every vote too (no rater has attributes here)
                analyses = board_analyses(
                    votes, votes, ids, labels, method, board, overall=category == "", kept=len(kept), attributes={}
                )
                board = replace(board, extra={**board.extra, **analyses})
            out[(category, view)] = board
    out[("elo", "")] = elo_compute(kept, ids, labels, method)
    return out


@pytest.mark.parametrize(
    "settings",
    [
        {},  # the defaults: "auto" intervals (counts grouped by prompt), half-win ties
        {"ranking_interval": "bootstrap", "ranking_style_interval": "auto", "ranking_ties": "davidson"},
    ],
)
def test_snapshots_from_the_counts_equal_those_from_every_vote(log_board, settings):
    """Every snapshot the recompute writes from the grouped log (raw, style, reliability; overall and per
    category; Elo) is exactly the one computed from every vote one by one: rows, pairwise table, extra, the
    board analyses included."""
    Campaign.objects.filter(pk=log_board.pk).update(**settings)
    log_board.refresh_from_db()
    expected = _per_vote_snapshots(log_board)
    snapshots = leaderboards_recompute(campaign_id=log_board.pk)
    assert len(snapshots) == len(expected) - 1 == 12  # overall and three categories, three views each
    for snapshot in snapshots:
        board = expected[(snapshot.category, snapshot.view)]
        extra = dict(snapshot.extra)
        if snapshot.category == "" and snapshot.view == "raw":
            assert (extra.pop("elo"), extra.pop("elo_order")) == expected[("elo", "")]
        assert snapshot.rows == board.rows, (snapshot.category, snapshot.view)
        assert snapshot.pairwise == board.pairwise, (snapshot.category, snapshot.view)
        assert extra == board.extra, (snapshot.category, snapshot.view)
        analyses = RAW_BOARD_ANALYSES + (OVERALL_BOARD_ANALYSES if snapshot.category == "" else ())
        assert (snapshot.view == "raw") == all(key in extra for key in analyses)
        assert "per_vote_sample" not in extra
    shown = [s for s in snapshots if s.view == "style" and s.category == ""][0]
    assert not shown.extra.get("style_withheld") and any("score" in row for row in shown.rows)


def test_above_the_per_vote_cap_the_style_and_reliability_views_fit_a_sample(log_board, monkeypatch):
    """With the cap below the board's kept votes, the style and reliability views fit the deterministic
    sample and say so (votes, of, the widening of their intervals); their counts, the competitors shown
    and the raw view still come from every vote; the full-data style scores lie inside the sample's
    intervals."""
    full = {(s.category, s.view): s for s in leaderboards_recompute(campaign_id=log_board.pk)}
    monkeypatch.setattr(recompute_module, "PER_VOTE_MAX", 300)
    monkeypatch.setattr(recompute_module, "RELIABILITY_MAX", 200)
    sampled = {(s.category, s.view): s for s in leaderboards_recompute(campaign_id=log_board.pk)}
    policy = exclusion_policy_for(log_board)
    votes = vote_arrays(campaign_id=log_board.pk)
    kept = votes.subset(policy.apply(votes)[0])
    in_sample = sample_mask(kept.vote_id, 300 / len(kept))
    for key, snapshot in sampled.items():
        assert snapshot.votes_used == full[key].votes_used
        if key[1] == "raw" or snapshot.votes_used == 0:  # the fast category's votes are all too fast
            assert snapshot.rows == full[key].rows and snapshot.pairwise == full[key].pairwise
            continue
        note = snapshot.extra["per_vote_sample"]
        assert note["of"] == snapshot.votes_used
        if key == ("", "style"):
            assert note["votes"] == int(in_sample.sum()) < 330
        assert note["interval_widening"] == round(math.sqrt(note["of"] / note["votes"]), 2)
        withheld = snapshot.extra.get(f"{key[1]}_withheld")
        counts = [(r["competitor_id"], r["votes"], r["hidden"] and not withheld) for r in snapshot.rows]
        assert sorted(counts) == sorted((r["competitor_id"], r["votes"], r["hidden"]) for r in full[key].rows), key
    assert sampled[("", "reliability")].extra["per_vote_sample"]["votes"] <= 230
    assert not sampled[("", "style")].extra.get("style_withheld")
    assert sampled[("", "raw")].extra["elo_sample"]["votes"] == int(in_sample.sum())
    # The full-data score against the sample's interval: the sample is part of the full data, so their
    # difference has sd about sqrt(1 - sample/full) of the sample's standard error (0.84 here), and a 95%
    # interval misses the full score about 2% of the time a competitor: 9% for five, whichever votes the
    # ids put in the sample (they differ with the database's sequences). Half as wide again, a miss is 3.5 sd
    # out (0.05% a competitor): the check holds whatever the ids, and a sample that fits wrongly still fails.
    truth = {r["competitor_id"]: r["score"] for r in full[("", "style")].rows if "score" in r}
    inside = [
        r["score"] - 1.5 * (r["score"] - r["lower"])
        <= truth[r["competitor_id"]]
        <= r["score"] + 1.5 * (r["upper"] - r["score"])
        for r in sampled[("", "style")].rows
        if "score" in r
    ]
    assert inside and all(inside)


def test_grouped_rows_need_the_votes_one_by_one_for_the_per_vote_views(log_board):
    """A board given grouped rows alone refuses the views that fit each vote, and Elo, rather than fit the
    groups as if they were votes."""
    log: VoteLog = vote_log(campaign_id=log_board.pk, policy=exclusion_policy_for(log_board), by_prompt=True)
    ids = np.array(sorted(c.pk for c in log_board.competitors.all()), dtype=np.int64)
    for view in ("style", "reliability"):
        with pytest.raises(ValueError, match="one by one"):
            board_compute(log.counted, ids, {}, Method(), view=view)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="one by one"):
        elo_compute(log.counted, ids, {}, Method())


def test_grouped_rows_aggregate_as_the_votes_written_out():
    """``aggregate_cells(count=...)`` and the design effect with counts equal those of the rows repeated
    (with weights and clusters, on the dense and the sorted key paths)."""
    from ranking.estimators import aggregate_cells, design_effect

    rng = np.random.default_rng(5)
    for n, clusters in ((6, 40), (400, 60)):  # 400 x 400 x 4 x 60 keys: past the dense limit
        m = 500
        a = rng.integers(0, n, m)
        b = (a + rng.integers(1, n, m)) % n
        outcome, cluster = rng.integers(0, 4, m), rng.integers(0, clusters, m)
        count, weight = rng.integers(0, 4, m), rng.random(m)
        rows = np.repeat(np.arange(m), count)
        grouped = aggregate_cells(a, b, outcome, weight, n_competitors=n, cluster=cluster, count=count)
        written = aggregate_cells(a[rows], b[rows], outcome[rows], weight[rows], n_competitors=n, cluster=cluster[rows])
        for field in ("lo", "hi", "outcome", "count", "cluster"):
            assert np.array_equal(getattr(grouped, field), getattr(written, field)), field
        assert grouped.n_clusters == written.n_clusters
        assert np.allclose(grouped.weight, written.weight) and np.allclose(grouped.weight_sq, written.weight_sq)
        assert design_effect(cluster, count) == pytest.approx(design_effect(cluster[rows]))
