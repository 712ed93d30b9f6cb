"""Style control: coefficient recovery, symmetry, intervals, reproducibility."""

from __future__ import annotations

import numpy as np
import pytest

from ranking.estimators import (
    LEFT_WINS,
    RIGHT_WINS,
    TIE,
    aggregate_cells,
    fit_bradley_terry,
    fit_style,
    style_bootstrap_intervals,
    style_design,
    style_differences,
    style_sandwich_intervals,
)
from ranking.estimators.synthetic import random_pairs, simulate_bt, simulate_style_counts

BETA = np.array([0.4, 0.1, 0.0, 0.15])


def synthetic(n_battles: int, n_competitors: int = 20, seed: int = 0, tie_prob: float = 0.0):
    rng = np.random.default_rng(seed)
    theta = rng.normal(0, 0.7, n_competitors)
    a, b = random_pairs(rng, n_competitors, n_battles)
    left, right = simulate_style_counts(rng, n_battles), simulate_style_counts(rng, n_battles)
    x = style_differences(left, right).x
    sim = simulate_bt(rng, theta, n_battles, tie_prob=tie_prob, extra_logit=x @ BETA, a=a, b=b)
    return theta, a, b, sim.outcome, left, right


def test_style_normalisation_by_hand() -> None:
    left = np.array([[100, 0], [300, 2], [50, 0]])
    right = np.array([[300, 0], [100, 0], [50, 1]])
    f = style_differences(left, right, names=("length", "bold"))
    d = np.array([[-0.5, 0.0], [0.5, 1.0], [0.0, -1.0]])
    np.testing.assert_allclose(f.std, d.std(axis=0))
    np.testing.assert_allclose(f.mean, d.mean(axis=0))
    np.testing.assert_allclose(f.x, d / d.std(axis=0))  # scaled, not centred
    np.testing.assert_allclose(style_differences(right, left).x, -f.x)


def test_recovers_known_length_coefficient_within_5_percent() -> None:
    theta, a, b, o, left, right = synthetic(200_000)
    fit = fit_style(style_design(a, b, o, left, right, n_competitors=20))
    assert fit.converged
    assert fit.coef[0] == pytest.approx(BETA[0], rel=0.05)
    np.testing.assert_allclose(fit.coef, BETA, atol=0.02)
    np.testing.assert_allclose(fit.log_strength, theta - theta.mean(), atol=0.05)
    assert fit.params.coef_penalty == 0.0
    # Without style information the same votes give no coefficients at all.
    assert fit_style(style_design(a, b, o, 0 * left, 0 * right)).coef.tolist() == [0.0] * 4


def test_zero_style_equals_plain_bradley_terry() -> None:
    _, a, b, o, left, _ = synthetic(3000, n_competitors=6, tie_prob=0.1)
    zero = np.zeros_like(left)
    fit = fit_style(style_design(a, b, o, zero, zero))
    plain = fit_bradley_terry(aggregate_cells(a, b, o))
    np.testing.assert_allclose(fit.scores, plain.scores, atol=1e-6)


def test_swap_sides_and_ties() -> None:
    _, a, b, o, left, right = synthetic(4000, n_competitors=6, tie_prob=0.15)
    fit = fit_style(style_design(a, b, o, left, right))
    flipped = np.where(o == LEFT_WINS, RIGHT_WINS, np.where(o == RIGHT_WINS, LEFT_WINS, o))
    swapped = fit_style(style_design(b, a, flipped, right, left))
    np.testing.assert_allclose(swapped.scores, fit.scores, atol=1e-8)
    np.testing.assert_allclose(swapped.coef, fit.coef, atol=1e-10)
    assert fit.params.both_bad == "tie" and (o == TIE).any()


def test_no_wins_competitor_is_finite() -> None:
    _, a, b, o, left, right = synthetic(2000, n_competitors=5)
    o = np.where(a == 4, RIGHT_WINS, np.where(b == 4, LEFT_WINS, o))
    fit = fit_style(style_design(a, b, o, left, right))
    assert np.all(np.isfinite(fit.scores)) and fit.scores[4] == fit.scores.min()


def test_intervals_agree_and_are_reproducible() -> None:
    _, a, b, o, left, right = synthetic(20_000, n_competitors=8, seed=3, tie_prob=0.1)
    sd = style_design(a, b, o, left, right, cluster=np.arange(a.shape[0]) // 4)
    fit = fit_style(sd)
    sand = style_sandwich_intervals(sd, fit)
    boot = style_bootstrap_intervals(sd, fit, rounds=60, seed=5)
    np.testing.assert_allclose(boot.scores.se, sand.scores.se, rtol=0.35)
    np.testing.assert_allclose(boot.coef_se, sand.coef_se, rtol=0.35)
    assert np.all(sand.coef_lower < fit.coef) and np.all(fit.coef < sand.coef_upper)
    assert sand.coef_lower[0] > 0  # length matters, clearly
    again = style_bootstrap_intervals(sd, fit, rounds=60, seed=5, workers=1)
    assert boot.scores.samples is not None and again.scores.samples is not None
    assert again.scores.samples.tobytes() == boot.scores.samples.tobytes()
    assert boot.coef_samples is not None and again.coef_samples is not None
    assert again.coef_samples.tobytes() == boot.coef_samples.tobytes()
    by_prompt = style_bootstrap_intervals(sd, fit, rounds=20, scheme="cluster", seed=1)
    assert np.all(np.isfinite(by_prompt.scores.lower))


def test_style_reference_pins_1000() -> None:
    _, a, b, o, left, right = synthetic(3000, n_competitors=5)
    sd = style_design(a, b, o, left, right)
    fit = fit_style(sd, reference=3, prior_games=0)
    assert fit.scores[3] == 1000.0
    sand = style_sandwich_intervals(sd, fit)
    assert sand.scores.se[3] == pytest.approx(0.0, abs=1e-6)


@pytest.mark.parametrize(("scheme", "prior"), [("multinomial", 1.0), ("poisson", 1.0), ("cluster", 0.0)])
def test_fixed_hessian_rounds_match_newton_rounds(scheme: str, prior: float) -> None:
    """The style bootstrap's fixed-Hessian rounds reach the same maxima as damped Newton on the same
    draws: every round's scores within 0.01 points and coefficients within 1e-4 (both stop at a step of
    1e-5 in log-strength), so the intervals are the same; with no prior (a singular competitor block)
    too."""
    _, a, b, o, left, right = synthetic(6000, n_competitors=12, seed=4, tie_prob=0.1)
    sd = style_design(a, b, o, left, right, cluster=np.arange(a.shape[0]) // 5)
    fit = fit_style(sd, prior_games=prior)
    kw = {"rounds": 15, "seed": 3, "scheme": scheme}
    fast = style_bootstrap_intervals(sd, fit, **kw)  # type: ignore[arg-type]
    slow = style_bootstrap_intervals(sd, fit, solver="newton", **kw)  # type: ignore[arg-type]
    assert fast.scores.samples is not None and slow.scores.samples is not None
    assert np.abs(fast.scores.samples - slow.scores.samples).max() < 0.01
    assert fast.coef_samples is not None and slow.coef_samples is not None
    assert np.abs(fast.coef_samples - slow.coef_samples).max() < 1e-4
    np.testing.assert_allclose(fast.scores.lower, slow.scores.lower, atol=0.01)
    np.testing.assert_allclose(fast.coef_upper, slow.coef_upper, atol=1e-4)


def test_a_round_whose_fixed_hessian_steps_stall_falls_back_to_newton(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rounds the shortcut cannot finish (here: every one) are solved by damped Newton on the rows drawn,
    so the intervals are those of the Newton rounds."""
    from ranking.estimators import style_bootstrap as style

    _, a, b, o, left, right = synthetic(3000, n_competitors=6, seed=5, tie_prob=0.1)
    sd = style_design(a, b, o, left, right)
    fit = fit_style(sd)
    monkeypatch.setattr(style, "fixed_hessian_solve_many", lambda x0, *args, **kwargs: [(None, 3)] * len(x0))
    stalled = style_bootstrap_intervals(sd, fit, rounds=6, seed=2, workers=1)
    newton = style_bootstrap_intervals(sd, fit, rounds=6, seed=2, workers=1, solver="newton")
    assert stalled.scores.samples is not None and newton.scores.samples is not None
    np.testing.assert_allclose(stalled.scores.samples, newton.scores.samples, atol=1e-9)


def test_bootstrap_intervals_cover_the_planted_coefficients_at_their_level() -> None:
    """Over 40 simulated campaigns (6 competitors, 2,000 votes, a tenth tied) the 95% bootstrap intervals of the
    four style coefficients hold the planted ones about 95% of the time (160 intervals: 0.88 to 0.99 allows for
    chance), and their standard errors match the spread of the estimates from campaign to campaign. The draws
    index the design's rows, which are sorted by pair: any fixed order of the rows gives the same distribution
    of rounds, so this, not the samples' bytes, is what the rounds must keep."""
    covered, estimates, ses = [], [], []
    for r in range(40):
        _, a, b, o, left, right = synthetic(2000, n_competitors=6, seed=100 + r, tie_prob=0.1)
        sd = style_design(a, b, o, left, right, n_competitors=6)
        fit = fit_style(sd)
        boot = style_bootstrap_intervals(sd, fit, rounds=100, seed=r)
        covered.append((boot.coef_lower <= BETA) & (BETA <= boot.coef_upper))
        estimates.append(fit.coef)
        ses.append(boot.coef_se)
    coverage = float(np.mean(covered))
    assert 0.88 <= coverage <= 0.99, coverage
    spread = np.std(estimates, axis=0, ddof=1)
    ratio = np.mean(ses, axis=0) / spread
    assert np.all((ratio > 0.7) & (ratio < 1.4)), ratio
