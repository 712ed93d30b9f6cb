"""The reliability-weighted view's estimator (crowd Bradley-Terry) on synthetic campaigns with known
truth: honest raters only, 20% voting at random, 20% adversarial; identifiability; intervals."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import spearmanr

from ranking import compute
from ranking.compute import Method, board_compute, reliability_rounds
from ranking.estimators import (
    aggregate_cells,
    bootstrap_intervals,
    crowd_bootstrap,
    crowd_cells,
    crowd_sandwich,
    fit_bradley_terry,
    fit_crowd_bt,
)
from ranking.estimators.crowd import MIN_OVERLAP, unreliable_share
from ranking.estimators.synthetic import crowd_campaign, discordant_pairs
from ranking.policy import VoteArrays

THETA = np.linspace(-0.8, 0.8, 10)  # ten competitors, neighbours 0.18 logits (31 points) apart
SEEDS = range(16)


def fits(kind: str, seed: int, theta: np.ndarray = THETA, n_raters: int = 20, n_votes: int = 6000):  # type: ignore[no-untyped-def]
    c = crowd_campaign(np.random.default_rng(seed), theta, n_raters=n_raters, n_votes=n_votes, kind=kind)  # type: ignore[arg-type]
    cells = aggregate_cells(c.a, c.b, c.outcome, n_competitors=theta.shape[0])
    raw = fit_bradley_terry(cells)
    cc = crowd_cells(c.a, c.b, c.outcome, c.rater, n_competitors=theta.shape[0])
    return c, cells, raw, cc, fit_crowd_bt(cc, raw)


def test_all_honest_matches_plain_bradley_terry() -> None:
    c, cells, raw, cc, crowd = fits("honest", 0)
    assert crowd.converged and crowd.identified
    assert spearmanr(crowd.scores, raw.scores).statistic == pytest.approx(1.0)
    raw_iv = bootstrap_intervals(cells, raw, rounds=50, seed=0)
    half_width = np.median(raw_iv.upper - raw_iv.lower) / 2
    # Within a tenth of the typical interval half-width everywhere (under 2 points of 19 here).
    assert np.abs(crowd.scores - raw.scores).max() < 0.1 * half_width
    assert crowd.eta.min() > 0.85  # every honest rater is seen as reliable
    assert crowd.weight.min() > 0.7 and crowd.cell_weight.min() > 0.7


def _error_and_slope(n: int, kind: str, seeds: range, **campaign: object) -> tuple[float, float]:
    """Over seeded campaigns with a random true board: the crowd fit's error over plain BT's (root mean
    square distance of the centred log-strengths to the truth, averaged over campaigns) and its mean
    gap slope (least squares of the crowd's centred scores on plain BT's, through the origin)."""
    err_plain, err_crowd, slopes = [], [], []
    for seed in seeds:
        rng = np.random.default_rng(seed)
        truth = np.asarray(rng.normal(0.0, 0.5, n), dtype=np.float64)
        c = crowd_campaign(rng, truth, kind=kind, **campaign)  # type: ignore[arg-type]
        raw = fit_bradley_terry(aggregate_cells(c.a, c.b, c.outcome, n_competitors=n))
        fit = fit_crowd_bt(crowd_cells(c.a, c.b, c.outcome, c.rater, n_competitors=n), raw)
        p, q, t = (x - x.mean() for x in (raw.log_strength, fit.log_strength, truth))
        err_plain.append(np.sqrt(np.mean((p - t) ** 2)))
        err_crowd.append(np.sqrt(np.mean((q - t) ** 2)))
        slopes.append(float(q @ p / (p @ p)))
    return float(np.mean(err_crowd) / np.mean(err_plain)), float(np.mean(slopes))


def test_honest_raters_cost_nothing_and_adversaries_are_still_removed() -> None:
    """Issue 20.2. Ten competitors drawn N(0, 0.5), 20 raters, 2,000 votes, 12 seeds. With every rater
    honest the weighted view must be plain Bradley-Terry's equal: error ratio within 2% of 1 and no
    stretched gaps (the joint crowd-BT fit measured 1.24 and a slope of 1.11: a lower reliability was
    traded for wider gaps). With 20% adversaries it must stay far better than plain BT (measured 0.28)."""
    ratio, slope = _error_and_slope(10, "honest", range(12), n_raters=20, n_votes=2000)
    assert ratio < 1.02 and abs(slope - 1.0) < 0.01
    ratio_bad, _ = _error_and_slope(10, "adversarial", range(12), n_raters=20, n_votes=2000)
    assert ratio_bad < 0.4


def test_random_raters_are_found_and_the_order_recovered_better() -> None:
    raw_d, crowd_d, eta_bad, eta_good = [], [], [], []
    for seed in SEEDS:
        c, _, raw, _, crowd = fits("random", seed)
        raw_d.append(discordant_pairs(raw.scores, THETA))
        crowd_d.append(discordant_pairs(crowd.scores, THETA))
        eta_bad.extend(crowd.eta[c.bad])
        eta_good.extend(crowd.eta[~c.bad])
    assert np.mean(crowd_d) < np.mean(raw_d)
    assert max(eta_bad) < 0.75 < 0.8 < min(eta_good)
    assert np.mean(eta_bad) < 0.6 and np.mean(eta_good) > 0.95


def test_adversarial_raters_are_ignored_and_the_order_recovered_much_better() -> None:
    raw_d, crowd_d, eta_bad = [], [], []
    for seed in SEEDS:
        c, _, raw, _, crowd = fits("adversarial", seed)
        raw_d.append(discordant_pairs(raw.scores, THETA))
        crowd_d.append(discordant_pairs(crowd.scores, THETA))
        eta_bad.extend(crowd.eta[c.bad])
    # Plain BT loses about three pairs in 45 to the adversaries; the crowd fit is back to the honest rate.
    assert np.mean(crowd_d) <= np.mean(raw_d) / 3
    # An adversary is read as no better than chance (the model has no flip side: see crowd.py).
    assert max(eta_bad) < 0.55


def test_rater_with_one_vote_keeps_the_prior() -> None:
    c = crowd_campaign(np.random.default_rng(3), THETA, n_raters=10, n_votes=2000)
    a = np.append(c.a, 0)
    b = np.append(c.b, 9)
    outcome = np.append(c.outcome, 0)  # the weakest beats the strongest: a surprising vote
    rater = np.append(c.rater, 99)
    raw = fit_bradley_terry(aggregate_cells(a, b, outcome, n_competitors=10))
    cc = crowd_cells(a, b, outcome, rater, n_competitors=10)
    fit = fit_crowd_bt(cc, raw)
    newcomer = int(np.flatnonzero(cc.rater_ids == 99)[0])
    assert cc.votes[newcomer] == 1 and not fit.estimated[newcomer]
    assert fit.eta[newcomer] == 1.0 and np.isnan(fit.eta_lower[newcomer])
    assert fit.estimated.sum() == 10 and fit.identified


def test_reliability_is_not_identified_without_raters_to_compare() -> None:
    c = crowd_campaign(np.random.default_rng(4), THETA, n_raters=20, n_votes=3000)
    raw = fit_bradley_terry(aggregate_cells(c.a, c.b, c.outcome, n_competitors=10))
    # One rater: nothing to compare with.
    one = fit_crowd_bt(crowd_cells(c.a, c.b, c.outcome, np.zeros_like(c.rater), n_competitors=10), raw)
    assert not one.estimated.any() and not one.identified
    # Two raters: estimated, but the mirror of two disagreeing raters cannot be told apart: not identified.
    two = fit_crowd_bt(crowd_cells(c.a, c.b, c.outcome, c.rater % 2, n_competitors=10), raw)
    assert two.estimated.all() and not two.identified
    # Every rater on its own pairs (rater = pair): no overlap, nobody estimated, the scores are plain BT.
    pair_rater = np.minimum(c.a, c.b) * 10 + np.maximum(c.a, c.b)
    disjoint_cells = crowd_cells(c.a, c.b, c.outcome, pair_rater, n_competitors=10)
    disjoint = fit_crowd_bt(disjoint_cells, raw)
    assert disjoint_cells.overlap.max() == 0 and not disjoint.estimated.any() and not disjoint.identified
    assert np.abs(disjoint.scores - raw.scores).max() < 0.5
    # A rater needs MIN_OVERLAP shared votes: one with exactly that many is estimated.
    assert MIN_OVERLAP >= 2


def test_rater_bootstrap_is_reproducible_and_covers_the_estimate() -> None:
    _, _, _, cc, fit = fits("random", 1, n_votes=3000)
    first = crowd_bootstrap(cc, fit, rounds=20, seed=7)
    again = crowd_bootstrap(cc, fit, rounds=20, seed=7)
    assert np.array_equal(first.samples, again.samples)
    assert np.all(first.lower <= fit.scores + 1e-6) and np.all(fit.scores <= first.upper + 1e-6)
    assert first.not_converged == 0


def test_interval_coverage_on_honest_campaigns() -> None:
    """Nominal 95% per competitor over 40 simulated campaigns (6 competitors, 30 raters, 1,200 votes),
    30 rater-bootstrap rounds each: the share of (campaign, competitor) intervals holding the true
    centred score must lie in [0.85, 1] (measured: 0.91; the raw view's vote bootstrap on the same
    campaigns: 0.93). 40 x 30 is what two shared cores allow in a test; with 240 intervals and 30
    rounds the estimate itself is noisy (a standard error near 0.015), hence the wide band. With only
    12 raters the rater bootstrap undercovers more (0.87): few clusters make a cluster bootstrap
    optimistic, stated in docs/statistics/reliability-weighted.md."""
    theta = np.linspace(-0.6, 0.6, 6)
    truth = 400 / np.log(10) * (theta - theta.mean()) + 1000
    hits = []
    for seed in range(40):
        _, _, _, cc, fit = fits("honest", 100 + seed, theta=theta, n_raters=30, n_votes=1200)
        iv = crowd_bootstrap(cc, fit, rounds=30, seed=seed)
        hits.extend((iv.lower <= truth) & (truth <= iv.upper))
    assert 0.85 <= np.mean(hits) <= 1.0


def test_bootstrap_rounds_are_capped_by_the_work_they_take() -> None:
    assert reliability_rounds(100, 1_000) == 100
    assert reliability_rounds(100, 100_000) == 50
    assert reliability_rounds(100, 10_000_000) == 10  # never under ten
    assert reliability_rounds(5, 10_000_000) == 5  # nor over the campaign's


def test_a_fit_that_finds_most_votes_unreliable_is_flagged() -> None:
    """Neighbours 19 points apart. With 20% deterministic adversaries the held-out reliabilities find
    them and the board is right (the joint fit once took them for the reliable raters and put this
    campaign upside down). With 40% the adversaries outweigh the honest signal: plain BT is upside
    down already and so is the weighted fit, which finds 60% of the votes unreliable, against its own
    assumption: ``unreliable_share`` exposes it, and the view is withheld."""
    theta = np.linspace(-0.5, 0.5, 10)
    c, _, raw, cc, fit = fits("adversarial", 15, theta=theta)
    assert discordant_pairs(fit.scores, theta) <= 3 < discordant_pairs(raw.scores, theta)
    assert unreliable_share(cc, fit) < 0.3
    many = crowd_campaign(np.random.default_rng(0), theta, n_raters=20, n_votes=6000, kind="adversarial", bad_share=0.4)
    raw_many = fit_bradley_terry(aggregate_cells(many.a, many.b, many.outcome, n_competitors=10))
    cc_many = crowd_cells(many.a, many.b, many.outcome, many.rater, n_competitors=10)
    fit_many = fit_crowd_bt(cc_many, raw_many)
    assert discordant_pairs(raw_many.scores, theta) > 40 and discordant_pairs(fit_many.scores, theta) > 40
    assert unreliable_share(cc_many, fit_many) > 0.5
    # The campaigns the method is meant for stay well under one half.
    for kind in ("random", "adversarial"):
        _, _, _, cc_ok, fit_ok = fits(kind, 0)
        assert unreliable_share(cc_ok, fit_ok) < 0.3


def test_the_rater_sandwich_agrees_with_the_rater_bootstrap_and_covers() -> None:
    """The analytic interval of large reliability boards (``crowd_sandwich``: clustered by rater, the weights held
    at their estimates). Against the rater bootstrap on one campaign with 20% random raters: standard errors
    within 25% (measured 1.06-1.19 times the bootstrap's over three seeds and three kinds of raters at 100
    rounds). Coverage of the true centred scores over 40 honest campaigns (6 competitors, 30 raters, 1,200 votes):
    in [0.9, 1] (measured 0.96 over 100 campaigns; the rater bootstrap's 0.91 in the test above)."""
    _, _, _, cc, fit = fits("random", 2, n_raters=20, n_votes=1500)
    boot = crowd_bootstrap(cc, fit, rounds=40, seed=0)
    sandwich = crowd_sandwich(cc, fit)
    assert sandwich.method == "rater_sandwich" and sandwich.se is not None and sandwich.samples.shape[0] == 0
    ratio = sandwich.se / boot.samples.std(axis=0, ddof=1)
    assert 0.75 < float(np.median(ratio)) < 1.25, ratio
    assert np.allclose(sandwich.upper - fit.scores, fit.scores - sandwich.lower)
    theta = np.linspace(-0.6, 0.6, 6)
    truth = 400 / np.log(10) * (theta - theta.mean()) + 1000
    hits = []
    for seed in range(40):
        _, _, _, cc, fit = fits("honest", 100 + seed, theta=theta, n_raters=30, n_votes=1200)
        iv = crowd_sandwich(cc, fit)
        hits.extend((iv.lower <= truth) & (truth <= iv.upper))
    assert 0.9 <= np.mean(hits) <= 1.0


def test_large_reliability_boards_get_the_sandwich_and_say_so(monkeypatch: pytest.MonkeyPatch) -> None:
    """Above ``RELIABILITY_BOOTSTRAP_CELLS`` (rater, pair) cells the board's intervals are the sandwich's, named in
    extra and on every row; at or below it the rater bootstrap's, with its rounds. Same scores either way."""
    c = crowd_campaign(np.random.default_rng(4), THETA, n_raters=20, n_votes=3000, kind="random")
    m = c.a.shape[0]
    zeros = np.zeros(m, dtype=np.int64)
    votes = VoteArrays(
        vote_id=np.arange(m),
        left=c.a + 1,
        right=c.b + 1,
        outcome=c.outcome,
        decision_ms=zeros + 5000,
        rater=c.rater + 100,
        prompt=np.arange(m),
        category=zeros,
        categories=("",),
        identity=np.zeros(m, dtype=bool),
        style_left=np.zeros((m, 4)),
        style_right=np.zeros((m, 4)),
    )
    ids = np.arange(1, THETA.shape[0] + 1)
    method = Method(rounds=20, min_votes=10)
    boards = {}
    for limit in (0, 10**6):
        monkeypatch.setattr(compute, "RELIABILITY_BOOTSTRAP_CELLS", limit)
        boards[limit] = board_compute(votes, ids, {}, method, view="reliability")
    large, small = boards[0], boards[10**6]
    assert large.extra["reliability_interval"]["chosen"] == "rater_sandwich" and "bootstrap_rounds" not in large.extra
    assert small.extra["reliability_interval"]["chosen"] == "rater_bootstrap" and small.extra["bootstrap_rounds"] == 20
    assert {r["interval_method"] for r in large.rows} == {"rater_sandwich"}
    assert {r["interval_method"] for r in small.rows} == {"rater_bootstrap"}
    width = {k: np.array([r["upper"] - r["lower"] for r in b.rows]) for k, b in boards.items()}
    assert [r["score"] for r in large.rows] == [r["score"] for r in small.rows]
    assert 0.7 < float(np.median(width[0] / width[10**6])) < 1.4
