"""Honest intervals at the boundary: one-sided records, a newcomer that loses every vote, all ties.

Coverage is measured for nominal 95% against a known truth. The one-sided pair is computed exactly
(every possible outcome of 30 battles, weighted by its binomial probability); the others are seeded
simulations. The published level is ``theta_i - mean_centre(theta)``, with the centre the fit reports
(the strongly connected majority when one competitor is cut off), so the truth is taken the same way.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import binom

from ranking.estimators import (
    SCALE,
    aggregate_cells,
    bootstrap_intervals,
    fit_bradley_terry,
    rank_ranges,
    sandwich_intervals,
)
from ranking.estimators.intervals import boundary_intervals
from ranking.estimators.synthetic import simulate_bt


def _levels(theta: np.ndarray, centre: np.ndarray) -> np.ndarray:
    return SCALE * (theta - theta[centre].mean()) + 1000


def test_one_sided_pair_exact_coverage() -> None:
    """p = 0.95 over 30 battles: 30-0 happens 21% of the time. Exact coverage over all 31 outcomes."""
    p, m = 0.95, 30
    theta = np.array([np.log(p / (1 - p)), 0.0])
    covered = {"a": 0.0, "b": 0.0, "gap_30_0_open": True}
    for k in range(m + 1):
        o = np.array([0] * k + [1] * (m - k))
        cells = aggregate_cells(np.zeros(m, int), np.ones(m, int), o, n_competitors=2)
        fit = fit_bradley_terry(cells)
        boot = bootstrap_intervals(cells, fit, rounds=200, seed=k, workers=1)
        iv = boundary_intervals(cells, fit, boot.lower, boot.upper)
        truth = _levels(theta, fit.bounds.centre)
        weight = binom.pmf(k, m, p)
        covered["a"] += weight * float(iv.lower[0] <= truth[0] <= iv.upper[0])
        covered["b"] += weight * float(iv.lower[1] <= truth[1] <= iv.upper[1])
        if k == m:
            # 30-0 bounds the gap below (the boundary rule: p^30 = 0.025, p = 0.884, a gap of 353 points,
            # level +176), not above.
            covered["gap_30_0_open"] = bool(np.isinf(iv.upper[0]) and np.isinf(iv.lower[1]))
            assert 170 < iv.lower[0] - 1000 < 182
    assert covered["gap_30_0_open"]
    assert covered["a"] >= 0.93 and covered["b"] >= 0.93, covered


def test_newcomer_losing_every_vote() -> None:
    """Five established competitors and a newcomer 4.5 logits below them: it loses all of its 40
    votes in about 60% of the replicates. Its interval opens downward, the others are centred on the
    strongly connected majority, and every competitor covers at >= 93%."""
    rng = np.random.default_rng(5)
    theta = np.array([-0.6, -0.2, 0.0, 0.3, 0.5, -4.5])
    reps, hits, lost_all = 300, np.zeros(6), 0
    for _ in range(reps):
        est = simulate_bt(rng, theta[:5], 600)
        opp = rng.integers(0, 5, 40)
        new = simulate_bt(rng, theta, 40, a=np.full(40, 5), b=opp)
        a = np.concatenate([est.a, new.a])
        b = np.concatenate([est.b, new.b])
        o = np.concatenate([est.outcome, new.outcome])
        cells = aggregate_cells(a, b, o, n_competitors=6)
        fit = fit_bradley_terry(cells)
        sand = sandwich_intervals(cells, fit)
        iv = boundary_intervals(cells, fit, sand.lower, sand.upper)
        truth = _levels(theta, fit.bounds.centre)
        hits += (iv.lower <= truth) & (truth <= iv.upper)
        if not (new.outcome == 0).any():
            lost_all += 1
            assert np.isneginf(iv.lower[5]) and np.isfinite(iv.upper[5])
            assert np.isfinite(iv.lower[:5]).all() and np.isfinite(iv.upper[:5]).all()
            ranks = rank_ranges(iv.lower, iv.upper)
            assert ranks.worst[5] == 6
    assert lost_all > 120
    coverage = hits / reps
    assert (coverage >= 0.93).all(), coverage


@pytest.mark.parametrize("p", [0.92, 0.94])
def test_newcomer_that_lost_all_of_its_first_40_votes_is_covered(p: float) -> None:
    """Issue 20.6, exact: a newcomer plays 40 votes against an established competitor that wins each
    with probability p (the newcomer loses all 40 with probability 0.036 at p = 0.92, 0.084 at 0.94).
    Every outcome is enumerated and weighted by its binomial probability. At 0-40 the interval opens
    downward and its upper end follows the boundary rule (``p^40 = 0.025``, Clopper-Pearson's bound).
    The two-sided likelihood cutoff (``p^40 = exp(-1.92)``: p = 0.953, above the truth) covered 0.927
    and 0.885; the one-sided cutoff (``p^40 = 0.05``) 0.927 at p = 0.92."""
    m = 40
    theta = np.array([np.log(p / (1 - p)), 0.0])
    covered = np.zeros(2)
    for k in range(m + 1):
        o = np.array([0] * (m - k) + [1] * k)  # the established competitor (b = 0) wins k
        cells = aggregate_cells(np.ones(m, int), np.zeros(m, int), o, n_competitors=2)
        fit = fit_bradley_terry(cells)
        sand = sandwich_intervals(cells, fit)
        iv = boundary_intervals(cells, fit, sand.lower, sand.upper)
        truth = _levels(theta, fit.bounds.centre)
        covered += binom.pmf(k, m, p) * ((iv.lower <= truth) & (truth <= iv.upper))
        if k == m:  # lost all 40
            assert np.isneginf(iv.lower[1]) and np.isfinite(iv.upper[1])
            assert iv.upper[1] >= truth[1]
    assert 0.93 <= covered[1] <= 0.98 and 0.93 <= covered[0] <= 0.98, covered


def test_all_ties() -> None:
    """Every vote a tie: the record cannot vary, so bootstrap and sandwich collapse to a point; the
    profile interval does not. Truth: equal strengths."""
    o = np.full(40, 2)
    rng = np.random.default_rng(0)
    a = rng.integers(0, 3, 40)
    b = (a + rng.integers(1, 3, 40)) % 3
    cells = aggregate_cells(a, b, o, n_competitors=3)
    fit = fit_bradley_terry(cells)
    boot = bootstrap_intervals(cells, fit, rounds=50, seed=0, workers=1)
    assert np.allclose(boot.upper - boot.lower, 0)
    iv = boundary_intervals(cells, fit, boot.lower, boot.upper)
    assert iv.profiled.all()
    assert ((iv.upper - iv.lower) > 40).all() and ((iv.lower < 1000) & (1000 < iv.upper)).all()


def test_mostly_ties_coverage() -> None:
    """Equal strengths, 85% ties, 12 battles per pair among 4: about 1 in 7 competitors' records are
    ties only in some replicates. Coverage of the true 1000 with sandwich + boundary >= 93%."""
    rng = np.random.default_rng(3)
    theta = np.zeros(4)
    reps, hits, degenerate = 400, np.zeros(4), 0
    for _ in range(reps):
        sim = simulate_bt(rng, theta, 36, tie_prob=0.85)
        cells = aggregate_cells(sim.a, sim.b, sim.outcome, n_competitors=4)
        fit = fit_bradley_terry(cells)
        sand = sandwich_intervals(cells, fit)
        iv = boundary_intervals(cells, fit, sand.lower, sand.upper)
        degenerate += int(fit.bounds.one_class.any())
        truth = _levels(theta, fit.bounds.centre)
        hits += (iv.lower <= truth) & (truth <= iv.upper)
    assert degenerate > 20
    assert (hits / reps >= 0.93).all(), hits / reps


def test_large_boards_use_the_conditional_likelihood(monkeypatch) -> None:
    """Above PROFILE_FULL_MAX competitors the profile is the one-dimensional conditional likelihood:
    for a newcomer that lost every vote its bound is close to the full profile's (others are well
    determined), and it still opens the lower side."""
    from ranking.estimators import intervals

    rng = np.random.default_rng(9)
    theta = np.array([-0.4, 0.0, 0.4, -4.0])
    est = simulate_bt(rng, theta[:3], 900)
    a = np.concatenate([est.a, np.full(40, 3)])
    b = np.concatenate([est.b, rng.integers(0, 3, 40)])
    o = np.concatenate([est.outcome, np.ones(40, dtype=np.int64)])
    cells = aggregate_cells(a, b, o, n_competitors=4)
    fit = fit_bradley_terry(cells)
    sand = sandwich_intervals(cells, fit)
    full = boundary_intervals(cells, fit, sand.lower, sand.upper)
    monkeypatch.setattr(intervals, "PROFILE_FULL_MAX", 1)
    cond = boundary_intervals(cells, fit, sand.lower, sand.upper)
    assert np.isneginf(cond.lower[3]) and np.isneginf(full.lower[3])
    assert abs(cond.upper[3] - full.upper[3]) < 25


def test_boundary_board_reruns_are_byte_identical() -> None:
    """Profiles, differences, sequences and bootstrap together: the same votes give the same bytes."""
    import json

    from ranking.compute import Method, board_compute
    from ranking.policy import VoteArrays

    rng = np.random.default_rng(4)
    theta = np.array([0.3, 0.0, -0.2, -4.0])
    est = simulate_bt(rng, theta[:3], 300)
    a = np.concatenate([est.a, np.full(30, 3)])
    b = np.concatenate([est.b, rng.integers(0, 3, 30)])
    o = np.concatenate([est.outcome, np.ones(30, dtype=np.int64)])
    m = a.shape[0]
    z = np.zeros(m, dtype=np.int64)
    votes = VoteArrays(
        vote_id=np.arange(m),
        left=a,
        right=b,
        outcome=o,
        decision_ms=z + 5000,
        rater=z,
        prompt=z,
        category=z,
        categories=("",),
        identity=np.zeros(m, dtype=bool),
        style_left=np.ones((m, 4)),
        style_right=np.ones((m, 4)),
    )
    runs = [board_compute(votes, np.arange(4), {}, Method(min_votes=10, rounds=40)) for _ in range(2)]
    dumps = [json.dumps([r.rows, r.pairwise_full(), r.extra], sort_keys=True) for r in runs]
    assert dumps[0] == dumps[1]
    newcomer = next(r for r in runs[0].rows if r["competitor_id"] == 3)
    assert newcomer["lower_open"] and newcomer["interval_method"] == "profile likelihood"


def test_linked_one_sided_pair_gets_a_likelihood_difference_interval() -> None:
    """A beats B 30-0 and a third competitor C links them (even against both): the gap is bounded (the
    path through C bounds it above), but the A-B cell cannot vary, so the difference interval is the
    union with its profile-likelihood interval, never narrower than it."""
    from ranking.estimators import difference_intervals
    from ranking.estimators.intervals import bt_likelihood
    from ranking.estimators.profile import damped_newton, profile_bounds

    a = np.array([0] * 30 + [0] * 20 + [2] * 20 + [1] * 20 + [2] * 20)
    b = np.array([1] * 30 + [2] * 20 + [0] * 20 + [2] * 20 + [1] * 20)
    o = np.array([0] * 30 + [0] * 10 + [1] * 10 + [0] * 10 + [1] * 10 + [0] * 10 + [1] * 10 + [0] * 10 + [1] * 10)
    cells = aggregate_cells(a, b, o, n_competitors=3)
    fit = fit_bradley_terry(cells)
    assert not fit.bounds.open_upper.any()
    boot = bootstrap_intervals(cells, fit, rounds=100, seed=0, workers=1)
    diff = difference_intervals(cells, fit, np.arange(3), samples=boot.samples)
    lik = bt_likelihood(cells, fit)
    theta_hat, _, _ = damped_newton(fit.theta_raw, lik.objective, lik.value, tol=1e-9)
    lo_t, hi_t = profile_bounds(lik, theta_hat, np.array([1.0, -1.0, 0.0]), confidence=0.95)
    assert diff.lower[0, 1] <= SCALE * lo_t + 1e-6 and diff.upper[0, 1] >= SCALE * hi_t - 1e-6
    assert np.isfinite(diff.upper[0, 1]) and "profile" in diff.method
