"""A Davidson board is honest at the boundary too: difference intervals from the same covariance as
the levels, open sides where the win digraph cannot bound them, and the profile-likelihood union (under
Davidson's likelihood) for thin, one-class and open-side competitors. Coverage for nominal 95% against
a known truth, seeded."""

from __future__ import annotations

import numpy as np

from ranking.estimators import (
    SCALE,
    aggregate_cells,
    davidson_boundary_intervals,
    davidson_difference_intervals,
    fit_davidson,
    rank_ranges,
    simulate_davidson,
)
from ranking.estimators.synthetic import random_pairs


def _levels(theta: np.ndarray, centre: np.ndarray) -> np.ndarray:
    return SCALE * (theta - theta[centre].mean()) + 1000


def test_newcomer_losing_every_vote_covers_under_davidson() -> None:
    """Five established competitors (nu = 0.4: about a sixth of their votes tied) and a newcomer 7
    logits below them, which loses (no win, no tie) all of its 30 votes in about two thirds of the
    replicates (Davidson's tie probability falls only as e^(-gap/2)). Its
    interval opens downward and takes the profile likelihood's upper side; everyone covers >= 93%
    (without the profile the newcomer's Wald upper side, from a prior-dominated information, misses)."""
    rng = np.random.default_rng(7)
    theta = np.array([-0.6, -0.2, 0.0, 0.3, 0.5, -7.0])
    reps, hits, wald_hits, lost_all = 300, np.zeros(6), 0, 0
    for _ in range(reps):
        a, b = random_pairs(rng, 5, 600)
        o = simulate_davidson(rng, theta, 0.4, a, b)
        opp = rng.integers(0, 5, 30)
        o_new = simulate_davidson(rng, theta, 0.4, np.full(30, 5), opp)
        cells = aggregate_cells(
            np.concatenate([a, np.full(30, 5)]), np.concatenate([b, opp]), np.concatenate([o, o_new]), n_competitors=6
        )
        fit = fit_davidson(cells)
        iv = davidson_boundary_intervals(fit)
        truth = _levels(theta, fit.bounds.centre)
        hits += (iv.lower <= truth) & (truth <= iv.upper)
        wald_hits += int(fit.lower[5] <= truth[5] <= fit.upper[5])
        if not np.isin(o_new, (0, 2)).any():  # the newcomer (left side) never won nor tied
            lost_all += 1
            assert np.isneginf(iv.lower[5]) and np.isfinite(iv.upper[5]) and iv.profiled[5]
            assert np.isfinite(iv.lower[:5]).all() and np.isfinite(iv.upper[:5]).all()
            assert rank_ranges(iv.lower, iv.upper).worst[5] == 6
    assert lost_all > 150, lost_all
    assert (hits / reps >= 0.93).all(), hits / reps
    assert wald_hits / reps < hits[5] / reps


def test_one_sided_record_opens_the_difference_and_the_level() -> None:
    """0 beat 1 in all 30 of their battles; 1 and 2 split theirs with ties; 0 and 2 never met. Nothing
    bounds 0 from above (1 never beat 0, even through 2): its level and its difference from 1 are open
    above, bounded below by the likelihood (about a 30-0 record's 470 points, less what the tie
    parameter takes), and the thin-record competitor gets the profile union."""
    rng = np.random.default_rng(2)
    a = np.concatenate([np.zeros(30, int), np.ones(200, int)])
    b = np.concatenate([np.ones(30, int), np.full(200, 2)])
    o = np.concatenate([np.zeros(30, int), simulate_davidson(rng, np.array([0.0, 0.2, 0.0]), 0.8, a[30:], b[30:])])
    cells = aggregate_cells(a, b, o, n_competitors=3)
    fit = fit_davidson(cells)
    iv = davidson_boundary_intervals(fit)
    assert np.isposinf(iv.upper[0]) and np.isfinite(iv.lower[0]) and iv.profiled[0]
    d = davidson_difference_intervals(cells, fit, np.arange(3))
    assert np.isposinf(d.upper[0, 1]) and np.isneginf(d.lower[1, 0])
    assert 300 < d.lower[0, 1] < d.estimate[0, 1]
    assert np.isfinite(d.lower[1, 2]) and np.isfinite(d.upper[1, 2])  # 1 vs 2: bounded both ways
    assert "profile" in d.method


def test_difference_intervals_cover_and_differ_from_level_overlap() -> None:
    """Well-behaved Davidson boards (6 competitors, 1,500 votes, nu = 0.8): the Wald difference
    intervals from the joint covariance cover the true gaps at >= 93% over all pairs; they are narrower
    than the sum of the two level half-widths (the common centre cancels in a difference)."""
    theta = np.linspace(-0.6, 0.6, 6)
    reps, hits, narrower = 80, np.zeros((6, 6)), 0
    iu = np.triu_indices(6, 1)
    for seed in range(reps):
        rng = np.random.default_rng(500 + seed)
        a, b = random_pairs(rng, 6, 1500)
        cells = aggregate_cells(a, b, simulate_davidson(rng, theta, 0.8, a, b), n_competitors=6)
        fit = fit_davidson(cells)
        d = davidson_difference_intervals(cells, fit, np.arange(6))
        true_gap = SCALE * (theta[:, None] - theta[None, :])
        hits += (d.lower <= true_gap) & (true_gap <= d.upper)
        half = (fit.upper - fit.lower) / 2
        narrower += int(((d.upper - d.lower)[iu] / 2 < (half[:, None] + half[None, :])[iu]).all())
    coverage = hits[iu] / reps
    assert coverage.mean() >= 0.93 and coverage.min() >= 0.88, coverage
    assert narrower == reps


def test_davidson_board_has_differences_and_profiled_rows() -> None:
    """The board: a difference matrix from the Davidson covariance, a thin newcomer profiled with an
    open lower side (null bound, ``lower_open``) in the row and in its differences."""
    from ranking.compute import Method, board_compute
    from ranking.policy import VoteArrays

    rng = np.random.default_rng(4)
    theta = np.array([-0.4, 0.0, 0.4, -5.0])
    a, b = random_pairs(rng, 3, 1500)
    o = simulate_davidson(rng, theta, 0.7, a, b)
    opp = rng.integers(0, 3, 40)
    a = np.concatenate([a, np.full(40, 3)])
    b = np.concatenate([b, opp])
    o = np.concatenate([o, np.zeros(40, dtype=np.int64) + 1])  # the newcomer (left) lost all 40
    m = a.shape[0]
    z = np.zeros(m, dtype=np.int64)
    votes = VoteArrays(
        vote_id=np.arange(m),
        left=a + 10,
        right=b + 10,
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
    board = board_compute(votes, np.arange(10, 14), {}, Method(ties="davidson", interval="sandwich"))
    rows = {r["competitor_id"]: r for r in board.rows}
    newcomer = rows[13]
    assert newcomer["lower"] is None and newcomer["lower_open"] and newcomer["upper"] is not None
    assert newcomer["interval_method"] == "profile likelihood"
    assert all(rows[c]["interval_method"] == "fisher" for c in (10, 11, 12))
    diff = board.pairwise["difference"]
    k = diff["competitor_ids"].index(13) if "competitor_ids" in diff else board.pairwise["competitor_ids"].index(13)
    assert all(diff["lower_open"][k][j] for j in range(4) if j != k)
    assert all(diff["upper"][k][j] is not None for j in range(4) if j != k)
    assert diff["method"].startswith("fisher")
