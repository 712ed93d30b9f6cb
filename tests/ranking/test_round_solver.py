"""The bootstrap rounds' shared machinery: the fixed-Hessian iteration's stopping rule (the returned point is
within the tolerance of the maximum, checked against the closed-form maximum of concave quadratics), the fast
logistic against scipy's, the bootstrap's by-battle draw against the battles' own categories, and the style
fit's start from the raw log-strengths (the same maximum)."""

from __future__ import annotations

import dataclasses
import functools

import numpy as np
import pytest
import scipy.linalg as la
from numpy.typing import NDArray
from scipy.special import expit

from ranking.estimators import aggregate_cells, bootstrap_intervals, fit_bradley_terry, fit_style, style_design
from ranking.estimators.bradley_terry import BASE, SCALE, normalise, pair_design, sigmoid
from ranking.estimators.intervals import _draw_cells, _round_generators, _RoundSolver
from ranking.estimators.newton import fixed_hessian_solve, fixed_hessian_solve_many
from ranking.estimators.synthetic import random_pairs, simulate_bt, simulate_style_counts


def _quadratic_gradient(
    h: NDArray[np.float64], b: NDArray[np.float64], x: NDArray[np.float64], it: int
) -> NDArray[np.float64]:
    out: NDArray[np.float64] = b - h @ x
    return out


@pytest.mark.parametrize("depth", [0, 3])
@pytest.mark.parametrize("spread", [0.02, 0.1, 0.3, 0.45])
def test_the_stop_is_within_tolerance_of_the_maximum(depth: int, spread: float) -> None:
    """f(x) = b.x - x'Hx/2 has its maximum at H^-1 b; iterating with a nearby H0 contracts at a rate that
    grows with ``spread`` (to about 0.8). Whatever the rate, the plain map's point is within ``tol`` of the true
    maximum (the Banach bound); with Anderson's mixing the ratios only estimate the rate and the point is within
    2 x ``tol`` (1.7 x at worst over these problems; the step rule alone: 0.3 x)."""
    rng = np.random.default_rng(int(spread * 100) + depth)
    dim, tol = 12, 1e-6
    worst = 0.0
    for _ in range(20):
        q = np.linalg.qr(rng.normal(size=(dim, dim)))[0]
        root = q @ np.diag(np.sqrt(rng.uniform(1.0, 3.0, dim))) @ q.T
        h = root @ root
        # H0 = H^1/2 (I + E) H^1/2: the map's rates are e / (1 + e) for the eigenvalues e of E, up to
        # spread / (1 - spread).
        u = np.linalg.qr(rng.normal(size=(dim, dim)))[0]
        h0 = root @ (np.eye(dim) + u @ np.diag(rng.uniform(-spread, spread, dim)) @ u.T) @ root
        b = rng.normal(size=dim)
        exact = np.linalg.solve(h, b)
        x, _ = fixed_hessian_solve(
            np.zeros(dim),
            functools.partial(_quadratic_gradient, h, b),
            la.cho_factor(h0),
            tol=tol,
            max_iter=200,
            contraction=0.99,
            depth=depth,
        )
        assert x is not None
        worst = max(worst, float(np.abs(x - exact).max()))
    assert worst <= (tol if depth == 0 else 2 * tol)


def test_the_a_posteriori_stop_saves_the_confirming_pass() -> None:
    """At a fast rate (rho about 0.05) the rule stops once the bound is met, one pass before a step would
    itself fall under the tolerance: with the tolerance at 1e-5 and steps 0.95, 0.0475, 0.0024, 1.19e-4, the
    bound 0.05 / 0.95 x 1.19e-4 = 6.3e-6 stops at the fourth pass where the step rule needs a fifth."""
    rho, tol = 0.05, 1e-5
    h, h0 = np.array([[1.0]]), np.array([[1.0 / (1.0 - rho)]])  # x += H0^-1 (b - H x): error times rho
    x, passes = fixed_hessian_solve(
        np.zeros(1), lambda x, it: np.array([1.0]) - h @ x, la.cho_factor(h0), tol=tol, depth=0
    )
    assert x is not None and abs(float(x[0]) - 1.0) <= tol
    assert passes == 4


def test_sigmoid_matches_expit() -> None:
    x = np.concatenate([np.linspace(-40, 40, 10_001), [-800.0, -709.0, 0.0, 709.0, 800.0]])
    got = sigmoid(x)
    want = expit(x)
    assert np.all(np.abs(got - want) <= 4 * np.finfo(float).eps * np.maximum(want, np.finfo(float).tiny) + 1e-300)
    inplace = x.copy()
    assert sigmoid(inplace, out=inplace) is inplace and np.array_equal(inplace, got)
    with np.errstate(all="raise"):
        assert sigmoid(np.array([-1000.0]))[0] == 0.0  # e^1000 overflows: 0, without a warning


def test_by_battle_draws_count_the_battles_of_each_category() -> None:
    """A sparse board (fewer than two battles per cell) is drawn battle by battle: each cell's count, read from
    the cumulative per-battle counts at the cells' bounds, is the number of drawn battles whose cell it is.
    The rounds are those of a bootstrap written here that looks every drawn battle's cell up, byte for byte."""
    rng = np.random.default_rng(3)
    n, m = 40, 900
    a, b = random_pairs(rng, n, m)
    sim = simulate_bt(rng, rng.normal(0, 0.5, n), m, tie_prob=0.1, a=a, b=b)
    cells = aggregate_cells(a, b, sim.outcome, n_competitors=n)
    assert int(cells.count.sum()) <= 2 * cells.count.shape[0]  # the by-battle route
    fit = fit_bradley_terry(cells)
    boot = bootstrap_intervals(cells, fit, rounds=4, seed=11, workers=1)
    design = pair_design(cells, fit.params.both_bad)
    dc = _draw_cells(cells, design)
    total = int(cells.count.sum())
    cell_of_battle = np.repeat(np.arange(dc.count.shape[0]), dc.count.astype(np.int64))
    solver = _RoundSolver(fit, design, *design.pair_wins(cells.weight))
    thetas = []
    for g in _round_generators(11, 4):
        k = np.bincount(cell_of_battle[g.integers(0, total, total)], minlength=dc.count.shape[0])
        thetas.append(solver.solve(*dc.pair_wins(k.astype(np.float64))))
    samples = SCALE * normalise(np.stack(thetas), fit.components, fit.params.reference, fit.bounds.centre) + BASE
    assert boot.samples is not None and boot.samples.tobytes() == samples.tobytes()


def test_style_fit_from_the_raw_log_strengths_reaches_the_same_maximum() -> None:
    rng = np.random.default_rng(8)
    n, m = 15, 6000
    a, b = random_pairs(rng, n, m)
    left, right = simulate_style_counts(rng, m), simulate_style_counts(rng, m)
    sim = simulate_bt(rng, rng.normal(0, 0.7, n), m, tie_prob=0.1, a=a, b=b)
    sd = style_design(a, b, sim.outcome, left, right, n_competitors=n)
    raw = fit_bradley_terry(aggregate_cells(a, b, sim.outcome, n_competitors=n))
    cold = fit_style(sd)
    warm = fit_style(sd, start=raw.theta_raw)
    assert warm.converged and warm.iterations < cold.iterations
    np.testing.assert_allclose(warm.scores, cold.scores, atol=0.01)
    np.testing.assert_allclose(warm.coef, cold.coef, atol=1e-5)
    with pytest.raises(ValueError, match="start"):
        fit_style(sd, start=np.zeros(n + 1))


def test_many_problems_at_once_stop_where_each_stops_alone() -> None:
    """``fixed_hessian_solve_many`` steers each problem by the plain map's rules: on concave quadratics at rates
    from 0.05 to 0.9 (some stop, some stall, some run out of iterations), every problem ends at the same
    iteration, the same way and at the same point (to rounding) as ``fixed_hessian_solve`` alone, and a
    problem's gradient is only asked while it runs."""
    rng = np.random.default_rng(21)
    dim, tol = 8, 1e-6
    problems = []
    for spread in (0.05, 0.2, 0.45, 0.6, 0.9, 0.05, 0.3):
        q = np.linalg.qr(rng.normal(size=(dim, dim)))[0]
        h = q @ np.diag(rng.uniform(1.0, 3.0, dim)) @ q.T
        u = np.linalg.qr(rng.normal(size=(dim, dim)))[0]
        h0 = h + u @ np.diag(rng.uniform(-spread, spread, dim)) @ u.T
        problems.append((h, h0, rng.normal(size=dim)))
    # One fixed Hessian for all (as the bootstrap's rounds share the full data's): the problems' own Hessians
    # differ from it by their spreads.
    h0 = problems[0][1]
    inverse = np.linalg.inv(h0)
    asked: list[list[int]] = []

    def gradients(x: NDArray[np.float64], it: int, active: NDArray[np.int64]) -> NDArray[np.float64]:
        asked.append(active.tolist())
        return np.stack([problems[p][2] - problems[p][0] @ x[j] for j, p in enumerate(active)])

    x0 = np.zeros((len(problems), dim))
    many = fixed_hessian_solve_many(x0, gradients, inverse, tol=tol, max_iter=30)
    outcomes = set()
    for p, (h, _, b) in enumerate(problems):
        alone = fixed_hessian_solve(
            np.zeros(dim),
            functools.partial(_quadratic_gradient, h, b),
            la.cho_factor(h0),
            tol=tol,
            max_iter=30,
            depth=0,
        )
        assert many[p][1] == alone[1]
        if alone[0] is None:
            assert many[p][0] is None
            outcomes.add("stalled" if alone[1] < 30 else "ran out")
        else:
            got = many[p][0]
            assert got is not None
            np.testing.assert_allclose(got, alone[0], rtol=0, atol=1e-12)
            outcomes.add("stopped")
        assert sum(p in a for a in asked) == many[p][1]  # asked once an iteration, while it ran
    assert outcomes >= {"stopped", "stalled"}


def test_style_rounds_solved_together_match_rounds_solved_alone() -> None:
    """The style bootstrap's rounds in batches (one array operation a pass over all of a batch's rounds) reach
    the maxima each round reaches alone, at the same passes; the rows' order (sorted by pair, or shuffled in a
    design built by hand) does not matter either."""
    from ranking.estimators.style_bootstrap import _StyleRoundSolver

    rng = np.random.default_rng(5)
    n, m = 12, 5000
    a, b = random_pairs(rng, n, m)
    left, right = simulate_style_counts(rng, m), simulate_style_counts(rng, m)
    sim = simulate_bt(rng, rng.normal(0, 0.7, n), m, tie_prob=0.1, a=a, b=b)
    sd = style_design(a, b, sim.outcome, left, right, n_competitors=n)
    assert sd.pair_start is not None and np.all(np.diff(sd.pair) >= 0)
    assert np.array_equal(sd.pair[sd.pair_start], np.arange(sd.pair_lo.shape[0]))
    fit = fit_style(sd)
    ks = [np.bincount(g.integers(0, m, m), minlength=m) for g in _round_generators(4, 5)]
    alone = _StyleRoundSolver(sd, fit, None)
    one_by_one = [alone.solve(k) for k in ks]
    together = _StyleRoundSolver(sd, fit, None)
    batched = together.solve_many(ks)
    assert together.iterations == alone.iterations
    for (t1, b1), (t2, b2) in zip(one_by_one, batched, strict=True):
        np.testing.assert_allclose(t1, t2, atol=1e-7)
        np.testing.assert_allclose(b1, b2, atol=1e-7)
    # The same design with its rows shuffled and no record of the pairs' runs: the solver sorts its own copy.
    perm = rng.permutation(m)
    shuffled = dataclasses.replace(
        sd, pair=sd.pair[perm], y=sd.y[perm], x=sd.x[perm], weight=sd.weight[perm], pair_start=None
    )
    other = _StyleRoundSolver(shuffled, fit, None)
    for k, (t1, b1) in zip(ks, one_by_one, strict=True):
        t2, b2 = other.solve(k[perm])
        np.testing.assert_allclose(t1, t2, atol=1e-7)
        np.testing.assert_allclose(b1, b2, atol=1e-7)


def test_pair_runs_sum_and_spread_as_the_pair_index_does() -> None:
    """A design's rows are sorted by pair, so sums over a pair's rows are runs (reduceat) and a pair's value
    reaches its rows by repeat, for all rows and for a subset (a round's rows drawn, where some pairs have
    none): the same as bincount and a gather over the pair index, to rounding."""
    from ranking.estimators.style import _pair_rows, _PairRows

    rng = np.random.default_rng(9)
    n, m = 8, 600
    a, b = random_pairs(rng, n, m)
    left, right = simulate_style_counts(rng, m), simulate_style_counts(rng, m)
    sd = style_design(a, b, simulate_bt(rng, np.zeros(n), m, a=a, b=b).outcome, left, right, n_competitors=n)
    n_pairs = sd.pair_lo.shape[0]
    per_pair = np.asarray(rng.normal(size=n_pairs), dtype=np.float64)
    chosen = rng.choice(n_pairs, 2 * n_pairs // 3, replace=False)  # the other pairs have no row drawn
    subset = np.flatnonzero(np.isin(sd.pair, chosen) & (rng.random(m) < 0.7))
    for rows in (None, subset):
        runs = _pair_rows(sd, rows)
        index = _PairRows(sd.pair if rows is None else sd.pair[rows], n_pairs)
        assert runs.start is not None and index.start is None
        v = rng.normal(size=(m if rows is None else rows.shape[0], 3))
        np.testing.assert_allclose(runs.sums(v[:, 0]), index.sums(v[:, 0]), rtol=0, atol=1e-12)
        np.testing.assert_allclose(runs.sums(v), index.sums(v), rtol=0, atol=1e-12)
        assert np.array_equal(runs.spread(per_pair), index.spread(per_pair))
    assert _pair_rows(sd, subset).filled is not None  # some pairs have no row in the subset
    assert _pair_rows(sd, subset[::-1]).start is None  # rows not increasing: by index
