"""Attribute boards from ratio judgements: the robust Laplacian fit, its intervals and diagnostics.

Synthetic boards with known log-strengths; the simulated judge answers a log-ratio with Gaussian
noise (sd 0.5) and, in a share of calls, a wild answer drawn uniformly from the ladder's range.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import spearmanr

from ranking.estimators.graph import laplacian
from ranking.estimators.ratio import HUBER_K, fit_ratio, fuse_observations
from ranking.estimators.ratio_factor import factor_reduced, factor_reduced_sparse, laplacian_sparse
from ranking.estimators.ratio_noise import t_inflation

LADDER = np.log(26.0)


def judge(
    rng: np.random.Generator, theta: np.ndarray, i: np.ndarray, j: np.ndarray, *, sd: float = 0.5, wild: float = 0.05
) -> np.ndarray:
    r = theta[i] - theta[j] + rng.normal(0.0, sd, i.size)
    bad = rng.random(i.size) < wild
    r[bad] = rng.uniform(-LADDER, LADDER, int(bad.sum()))
    return np.clip(r, -LADDER, LADDER)


def random_design(rng: np.random.Generator, n: int, pairs: int) -> tuple[np.ndarray, np.ndarray]:
    """Distinct random pairs on a ring (so the graph is connected) plus random chords."""
    seen: set[tuple[int, int]] = set()
    out = []
    for k in range(n):
        p = (k, (k + 1) % n)
        seen.add((min(p), max(p)))
        out.append(p)
    while len(out) < pairs:
        a, b = (int(x) for x in rng.choice(n, 2, replace=False))
        key = (min(a, b), max(a, b))
        if key not in seen:
            seen.add(key)
            out.append((a, b))
    arr = np.array(out, dtype=np.int64)
    return arr[:, 0], arr[:, 1]


def both_orders(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return np.r_[a, b], np.r_[b, a]


def test_exact_differences_are_recovered_with_no_cyclic_flow() -> None:
    theta = np.array([0.0, 0.7, 2.0, 1.1, 3.0])
    a, b = random_design(np.random.default_rng(0), 5, 8)
    fit = fit_ratio(5, a, b, theta[a] - theta[b])
    assert fit.scores == pytest.approx(theta - theta.min(), abs=1e-9)
    assert fit.cyclic_share == pytest.approx(0.0, abs=1e-12)
    assert fit.n_components == 1 and not fit.degraded and fit.converged


def test_a_pure_cycle_is_all_cyclic_flow() -> None:
    fit = fit_ratio(3, [0, 1, 2], [1, 2, 0], [1.0, 1.0, 1.0])
    assert fit.cyclic_share == pytest.approx(1.0)
    assert np.ptp(fit.scores) == pytest.approx(0.0, abs=1e-9)


def test_both_orientations_fold_onto_one_edge_and_fuse_by_precision() -> None:
    edges = fuse_observations(3, [0, 1, 1, 2], [1, 0, 0, 1], [1.0, -1.2, -0.8, 0.5])
    assert edges.lo.tolist() == [0, 1] and edges.hi.tolist() == [1, 2]
    assert edges.n_obs.tolist() == [3, 1]
    assert edges.y[0] == pytest.approx(1.0) and edges.y[1] == pytest.approx(-0.5)
    # Too few repeats to pool (2 degrees of freedom): the prior 0.25 with 8 pseudo degrees of freedom.
    ss = 0.2**2 * 2
    assert edges.variance[0] == pytest.approx((8 * 0.25 + ss) / (8 + 2))
    assert edges.variance[1] == pytest.approx(0.25)
    assert edges.weight[0] == pytest.approx(3 / edges.variance[0])
    # Identical repeats cannot give infinite precision: the floor.
    same = fuse_observations(2, [0] * 20, [1] * 20, [0.3] * 20)
    assert same.pooled_from_repeats and same.variance[0] == pytest.approx(0.01)


def test_stated_confidence_is_recorded_not_weighted() -> None:
    rng = np.random.default_rng(3)
    theta = rng.normal(size=12)
    a, b = random_design(rng, 12, 30)
    r = judge(rng, theta, a, b)
    low = fit_ratio(12, a, b, r, confidence=np.full(a.size, 0.1))
    high = fit_ratio(12, a, b, r, confidence=rng.uniform(0, 1, a.size))
    assert np.array_equal(low.scores, high.scores) and np.array_equal(low.std, high.std)
    assert np.allclose(low.edges.confidence, 0.1)
    assert np.isnan(fit_ratio(12, a, b, r).edges.confidence).all()


def test_recovery_at_8_calls_per_entity_random_pairs() -> None:
    """50 entities, 8 calls per entity (400 calls: 200 distinct random pairs, both orders), sd 0.5 and
    5% wild answers. The adaptive design is tested in test_ratio_design.py."""
    rhos = []
    for seed in range(5):
        rng = np.random.default_rng(seed)
        theta = rng.normal(0.0, 1.0, 50)
        a, b = both_orders(*random_design(rng, 50, 200))
        fit = fit_ratio(50, a, b, judge(rng, theta, a, b))
        rhos.append(spearmanr(fit.scores, theta)[0])
    assert min(rhos) >= 0.95, rhos


def _bound_inputs(fit, f_lo: int, f_hi: int) -> tuple[float, float]:
    """(sqrt(w_f), R_f) with R_f the effective resistance in the graph of inlier edges (psi' = 1)."""
    e = fit.edges
    f = int(np.flatnonzero((e.lo == f_lo) & (e.hi == f_hi))[0])
    u = fit.residual * np.sqrt(e.weight)
    inlier = np.abs(u) <= HUBER_K * fit.scale
    lap = laplacian(fit.n_entities, e.lo, e.hi, e.weight * inlier)
    pinv = np.linalg.pinv(lap)
    r_f = pinv[f_lo, f_lo] + pinv[f_hi, f_hi] - 2 * pinv[f_lo, f_hi]
    return float(np.sqrt(e.weight[f])), float(r_f)


@pytest.mark.parametrize("wild", [20.0, -20.0])
def test_one_wild_judgement_has_bounded_influence(wild: float) -> None:
    """Bound from Huber's psi. At the fit, sum_e sqrt(w_e) sigma psi(u_e / sigma) b_e = 0 with |psi| <= k.
    A new edge f adds a force of at most k sigma sqrt(w_f) along b_f = e_lo - e_hi; to first order the
    scores move by k sigma sqrt(w_f) L_in^+ b_f (L_in: the Laplacian of the inlier edges, psi' = 1). The
    potential L^+ b_f of a unit current from lo to hi ranges over exactly R_f (maximum principle), and
    shifting each component to min zero moves a score by at most the range of the move, so
    |d score| <= k sigma sqrt(w_f) R_f, however wild the judgement. Allowed: 1.25 x (linearisation)."""
    rng = np.random.default_rng(11)
    n = 40
    theta = rng.normal(size=n)
    a, b = both_orders(*random_design(rng, n, 160))
    r = judge(rng, theta, a, b, wild=0.0)
    observed = set(zip(np.minimum(a, b).tolist(), np.maximum(a, b).tolist(), strict=True))
    f_lo, f_hi = next((x, y) for x in range(n) for y in range(x + 1, n) if (x, y) not in observed)
    base = fit_ratio(n, a, b, r)
    hit = fit_ratio(n, np.r_[a, f_lo], np.r_[b, f_hi], np.r_[r, wild])
    move = float(np.max(np.abs(hit.scores - base.scores)))
    sqrt_w, r_f = _bound_inputs(hit, f_lo, f_hi)
    bound = HUBER_K * hit.scale * sqrt_w * r_f
    assert move <= 1.25 * bound
    edge = int(np.flatnonzero((hit.edges.lo == f_lo) & (hit.edges.hi == f_hi))[0])
    assert hit.overridden[edge] and abs(hit.loo_t[edge]) > 10
    # Without the Huber loss (k huge) the same judgement moves the scores far past the bound.
    plain = fit_ratio(n, np.r_[a, f_lo], np.r_[b, f_hi], np.r_[r, wild], huber_k=1e9)
    assert float(np.max(np.abs(plain.scores - fit_ratio(n, a, b, r, huber_k=1e9).scores))) > 4 * bound


@pytest.mark.parametrize("noise", ["pooled", "entity"])
@pytest.mark.parametrize("repeats", [False, True])
def test_posterior_std_matches_monte_carlo(repeats: bool, noise: str) -> None:
    """A fixed design, fresh Gaussian noise (sd 0.5) 300 times: the empirical sd of each score (relative
    to the mean, the reported gauge) against the mean reported sd. Pooled: without repeats the variance is
    the prior (0.25, the truth here) and the scale is estimated; with both orders it is pooled from
    repeats. Per-entity noise (the default): the sd is widened by Student's t for the noise estimate's
    degrees of freedom (ratio_noise.t_inflation: 8 and 16 observations per entity here), so it is never
    narrower than Monte Carlo, and not more than that widening wider."""
    rng = np.random.default_rng(5)
    n = 30
    theta = rng.normal(size=n)
    a, b = random_design(rng, n, 120)
    if repeats:
        a, b = both_orders(a, b)
    reps = 300
    centred = np.empty((reps, n))
    reported = np.empty((reps, n))
    for k in range(reps):
        fit = fit_ratio(n, a, b, judge(rng, theta, a, b, wild=0.0), noise=noise)
        centred[k] = fit.scores - fit.scores.mean()
        reported[k] = fit.std
    ratio = reported.mean(axis=0) / centred.std(axis=0, ddof=1)
    if noise == "pooled":
        assert np.all(np.abs(ratio - 1) < 0.15), ratio
        assert abs(float(np.median(ratio)) - 1) < 0.06
    else:
        widening = float(np.sqrt(t_inflation(np.array([8 if not repeats else 16]), np.array([0]), np.array([0]))[0]))
        assert np.all((ratio > 0.9) & (ratio < 1.3 * widening)), ratio
        assert 0.97 < float(np.median(ratio)) < 1.04 * widening


def test_hutchinson_std_is_close_to_exact_and_deterministic() -> None:
    rng = np.random.default_rng(8)
    n = 300
    theta = rng.normal(size=n)
    a, b = both_orders(*random_design(rng, n, 1500))
    r = judge(rng, theta, a, b)
    exact = fit_ratio(n, a, b, r, exact_limit=1000)
    approx = fit_ratio(n, a, b, r, seed=4)
    assert exact.std_method == "exact" and approx.std_method == "hutchinson" and approx.probes == 128
    assert np.array_equal(exact.scores, approx.scores)
    rel = np.abs(approx.std / exact.std - 1)
    assert float(np.median(rel)) < 0.03 and float(rel.max()) < 0.15
    # Leverage from the Johnson-Lindenstrauss sketch: relative error about sqrt(2 / 128) = 12.5%.
    lev_rel = np.abs(approx.leverage / exact.leverage - 1)
    assert float(np.median(lev_rel)) < 0.12 and float(np.max(np.abs(approx.leverage - exact.leverage))) < 0.15
    assert fit_ratio(n, a, b, r, seed=4).canonical_bytes() == approx.canonical_bytes()
    assert fit_ratio(n, a, b, r, seed=5).canonical_bytes() != approx.canonical_bytes()


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(3, 25),
    extra=st.integers(0, 40),
    exact_limit=st.sampled_from([2, 256]),
)
def test_same_observations_in_any_order_give_identical_bytes(seed: int, n: int, extra: int, exact_limit: int) -> None:
    rng = np.random.default_rng(seed)
    theta = rng.normal(size=n)
    a, b = random_design(rng, n, n + min(extra, n * (n - 1) // 2 - n))
    a, b = np.r_[a, a[: extra // 2]], np.r_[b, b[: extra // 2]]  # some repeats
    r = judge(rng, theta, a, b)
    conf = rng.uniform(0, 1, a.size)
    first = fit_ratio(n, a, b, r, conf, exact_limit=exact_limit, seed=1)
    perm = rng.permutation(a.size)
    flip = rng.random(a.size) < 0.5
    a2, b2 = np.where(flip, b, a)[perm], np.where(flip, a, b)[perm]
    r2 = np.where(flip, -r, r)[perm]
    second = fit_ratio(n, a2, b2, r2, conf[perm], exact_limit=exact_limit, seed=1)
    assert first.canonical_bytes() == second.canonical_bytes()
    raw = [np.frombuffer(x.canonical_bytes(), dtype=np.uint8) for x in (first, second)]
    assert np.array_equal(raw[0], raw[1])
    # Every component has its minimum at zero; scores are finite.
    for c in range(first.n_components):
        assert first.scores[first.component == c].min() == 0.0
    assert np.all(np.isfinite(first.scores))


def test_two_components_each_start_at_zero_and_are_flagged() -> None:
    rng = np.random.default_rng(2)
    theta = rng.normal(size=10)
    a1, b1 = random_design(rng, 5, 8)
    a2, b2 = random_design(rng, 4, 6)
    a2, b2 = a2 + 5, b2 + 5  # entity 9 is never compared
    a, b = np.r_[a1, a2], np.r_[b1, b2]
    fit = fit_ratio(10, a, b, theta[a] - theta[b])
    assert fit.n_components == 3 and fit.pinned.tolist() == [0, 5, 9]
    assert fit.component.tolist() == [0] * 5 + [1] * 4 + [2]
    assert fit.scores[:5] == pytest.approx(theta[:5] - theta[:5].min(), abs=1e-9)
    assert fit.scores[5:9] == pytest.approx(theta[5:9] - theta[5:9].min(), abs=1e-9)
    assert fit.scores[9] == 0.0 and fit.std[9] == np.inf and not fit.observed[9]
    assert np.all(np.isfinite(fit.std[:9]))
    assert fit.degraded and "3 components (1 entities never compared)" in fit.degraded_reasons[0]
    assert fit.difference_sd(0, 6) == np.inf and np.isfinite(fit.difference_sd(0, 3))
    assert np.isinf(fit.resistance(0, 6)).all()


def test_tiny_weights_make_a_degraded_solve() -> None:
    """Entity 0 is linked only by a pair whose repeats disagree by 2e6: its precision is ~1e-12 of the
    others', so the ridge, not the data, sets its score."""
    rng = np.random.default_rng(4)
    theta = rng.normal(size=8)
    a, b = random_design(rng, 7, 14)
    a, b = a + 1, b + 1
    r = theta[a] - theta[b] + rng.normal(0, 0.5, a.size)
    fit = fit_ratio(8, np.r_[a, 0, 0, 0], np.r_[b, 1, 1, 1], np.r_[r, 1e6, -1e6, 0.0])
    assert fit.edges.weight[0] < 1e-10
    assert fit.degraded and any("ill-conditioned" in x for x in fit.degraded_reasons)
    healthy = fit_ratio(8, np.r_[a, 0], np.r_[b, 1], np.r_[r, 0.0])
    assert not healthy.degraded


def test_a_failed_factorisation_escalates_the_ridge_and_says_so() -> None:
    indefinite = np.array([[1.0, 3.0], [3.0, 1.0]])  # eigenvalue -2: no ridge up to 1 helps
    fac = factor_reduced(indefinite, np.array([1, 2]), 3)
    assert fac.cho is None and fac.pinv is not None
    assert len(fac.reasons) == 6 and "ridge escalated" in fac.reasons[0]
    assert "pseudo-inverse" in fac.reasons[-1]
    # A numerically singular but positive semi-definite one passes with the ridge and is flagged.
    singular = np.array([[1.0, 1.0], [1.0, 1.0]])
    fac2 = factor_reduced(singular, np.array([1, 2]), 3)
    assert fac2.cho is not None and "ill-conditioned" in fac2.reasons[0]


def test_loo_flags_the_comparisons_the_fit_overrode() -> None:
    rng = np.random.default_rng(9)
    n = 40
    theta = rng.normal(size=n)
    a, b = random_design(rng, n, 200)
    r = judge(rng, theta, a, b, wild=0.0)
    planted = [3, 50, 120]
    r[planted] = (theta[a] - theta[b])[planted] + np.array([4.0, -4.0, 5.0])
    fit = fit_ratio(n, a, b, r)
    lo, hi = np.minimum(a, b), np.maximum(a, b)
    flagged = {(int(lo[k]), int(hi[k])) for k in planted}
    got = set(zip(fit.edges.lo[fit.overridden].tolist(), fit.edges.hi[fit.overridden].tolist(), strict=True))
    assert flagged <= got and len(got) <= len(flagged) + 3
    assert np.all(fit.huber_weight[fit.overridden] < 1)
    assert np.all((fit.leverage >= 0) & (fit.leverage <= 1))


def test_a_bridge_has_no_leave_one_out_residual() -> None:
    fit = fit_ratio(3, [0, 1], [1, 2], [0.5, 0.2])
    assert fit.leverage == pytest.approx([1.0, 1.0])
    assert np.isnan(fit.loo_t).all() and not fit.overridden.any()


@pytest.mark.parametrize(
    ("i", "j", "r", "message"),
    [
        ([0], [0], [1.0], "itself"),
        ([0], [5], [1.0], r"\[0, n_entities\)"),
        ([0], [1], [np.inf], "finite"),
        ([0.5], [1], [1.0], "integer"),
        ([0, 1], [1], [1.0], "same length"),
    ],
)
def test_bad_input_is_refused(i, j, r, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        fit_ratio(3, i, j, r)


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(3, 20), scale=st.floats(0.2, 5.0))
def test_relabelling_reversing_and_rescaling_act_on_the_scores(seed: int, n: int, scale: float) -> None:
    """Renaming entities permutes the scores; reversing every judgement mirrors them (max - s); scaling
    every log-ratio by c scales the scores by c (the robust scale follows the data)."""
    rng = np.random.default_rng(seed)
    theta = rng.normal(size=n)
    a, b = both_orders(*random_design(rng, n, min(3 * n, n * (n - 1) // 2)))
    r = judge(rng, theta, a, b)
    fit = fit_ratio(n, a, b, r)
    perm = rng.permutation(n)  # entity k is called perm[k]
    renamed = fit_ratio(n, perm[a], perm[b], r)
    assert renamed.scores[perm] == pytest.approx(fit.scores, abs=1e-7)
    assert renamed.std[perm] == pytest.approx(fit.std, rel=1e-6)
    mirrored = fit_ratio(n, a, b, -r)
    assert mirrored.scores == pytest.approx(fit.scores.max() - fit.scores, abs=1e-7)
    if fit.residual_df >= 10:
        scaled = fit_ratio(n, a, b, scale * r, prior_variance=0.25 * scale**2, variance_floor=0.01 * scale**2)
        assert scaled.scores == pytest.approx(scale * fit.scores, abs=1e-6 * scale)
        assert scaled.std == pytest.approx(scale * fit.std, rel=1e-5)


def test_the_sparse_factorisation_gives_the_dense_fit(monkeypatch: pytest.MonkeyPatch) -> None:
    """Above SPARSE_ABOVE free nodes the Laplacian is factorised sparse: on the same board (forced sparse
    here) the scores, sds, leverages and flags agree with the dense path to rounding, and the
    ridge-dominated direction is flagged the same way."""
    import ranking.estimators.ratio as ratio

    rng = np.random.default_rng(21)
    n = 300
    theta = rng.normal(size=n)
    a, b = random_design(rng, n, 4 * n)
    i, j = both_orders(a, b)
    r = theta[i] - theta[j] + rng.normal(0, 0.5, i.size)
    dense = fit_ratio(n, i, j, r, exact_limit=0)
    monkeypatch.setattr(ratio, "SPARSE_ABOVE", 0)
    sparse = fit_ratio(n, i, j, r, exact_limit=0)
    assert np.max(np.abs(sparse.scores - dense.scores)) < 1e-10
    assert np.max(np.abs(sparse.std - dense.std)) < 1e-10
    assert np.allclose(sparse.leverage, dense.leverage, atol=1e-10)
    assert sparse.degraded == dense.degraded is False and sparse.iterations == dense.iterations
    fac = factor_reduced_sparse(
        laplacian_sparse(3, np.array([0, 1]), np.array([1, 2]), np.array([1.0, 1e-30]))[1:, 1:].tocsc(),
        np.array([1, 2]),
        3,
    )
    assert fac.lu is not None and any("ill-conditioned" in x for x in fac.reasons)
