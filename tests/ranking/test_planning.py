"""The sample-size planner (``ranking.estimators.planning``) against known truths: closed forms for the
information per vote and for uniform designs, and simulations of the planned design (the fit the board
runs, repeated), whose spread and power must match the plan within Monte Carlo error."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ranking.estimators import SCALE, aggregate_cells, fit_bradley_terry, fit_davidson, simulate_davidson
from ranking.estimators.planning import (
    difference_se,
    pair_information,
    plan_uniform,
    separation_plan,
    wald_power,
)


@pytest.mark.parametrize("tie_rate", [0.0, 0.2, 0.5])
def test_information_per_vote_at_equal_strength_has_closed_forms(tie_rate: float) -> None:
    # Ties as half: 1 / (4 (1 - t)) on the board's (shrunken) scale; Davidson: (1 - t) / 4. Rescaled to the
    # decisive-vote scale (gaps shrink by 1 - t under the half rule) both say a tie carries nothing.
    half = pair_information(0.0, tie_rate, "half")
    davidson = pair_information(0.0, tie_rate, "davidson")
    assert half == pytest.approx(1.0 / (4.0 * (1.0 - tie_rate)))
    assert davidson == pytest.approx((1.0 - tie_rate) / 4.0)
    assert half * (1.0 - tie_rate) ** 2 == pytest.approx(davidson)


def test_information_falls_with_the_gap_and_without_ties_is_p_times_q() -> None:
    gap = 1.2
    p = 1.0 / (1.0 + math.exp(-gap))
    assert pair_information(gap, 0.0, "half") == pytest.approx(p * (1 - p))
    assert pair_information(gap, 0.0, "davidson") == pytest.approx(p * (1 - p))
    assert pair_information(gap, 0.3, "davidson") < pair_information(0.0, 0.3, "davidson")


def test_uniform_plan_matches_the_closed_form() -> None:
    # Var(gap) = (k - 1) / (N I) for N battles evenly over all pairs of k competitors.
    k, margin, t = 5, 40.0, 0.25
    plan = plan_uniform(competitors=k, margin=margin, tie_rate=t, ties="davidson")
    info = (1 - t) / 4
    z = 1.959963984540054
    expected = (k - 1) * (z * SCALE / margin) ** 2 / info
    assert plan.battles_for_margin == math.ceil(expected - 1e-9)
    assert plan.battles_per_pair_for_margin == pytest.approx(plan.battles_for_margin / 10)
    # Two competitors without ties: the textbook n = (z_a + z_b)^2 / (d^2 p q) up to the far tail.
    two = plan_uniform(competitors=2, margin=margin, tie_rate=0.0)
    d = margin / SCALE
    p = 1 / (1 + math.exp(-d))
    textbook = (z + 0.8416212335729143) ** 2 / (d * d * p * (1 - p))
    assert abs(two.battles_for_power - textbook) / textbook < 0.01
    assert plan.battles_for_power > plan.battles_for_margin  # 80% power needs (z_a + z_b)^2 / z_a^2 ~ 2x


def test_more_ties_mean_more_battles_for_the_same_underlying_preference() -> None:
    # Davidson's gap is the decisive-vote preference: ties lower the information, the battles rise 1 / (1 - t).
    base = plan_uniform(competitors=4, margin=30.0, tie_rate=0.0, ties="davidson")
    tied = plan_uniform(competitors=4, margin=30.0, tie_rate=0.4, ties="davidson")
    assert tied.battles_for_margin / base.battles_for_margin == pytest.approx(1 / 0.6, rel=0.01)


def test_invalid_plans_are_refused() -> None:
    with pytest.raises(ValueError):
        plan_uniform(competitors=1, margin=10.0)
    with pytest.raises(ValueError):
        plan_uniform(competitors=3, margin=0.0)
    with pytest.raises(ValueError):
        plan_uniform(competitors=3, margin=10.0, tie_rate=1.0)
    with pytest.raises(ValueError):
        plan_uniform(competitors=3, margin=10.0, power=0.01)


def _simulate_half(
    rng: np.random.Generator, theta: np.ndarray, n: int, tie_rate: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """n battles evenly over the pairs; ties at a constant rate, the rest split so that the expected
    half-win score is sigmoid(gap): the model the half rule's board fits."""
    k = theta.shape[0]
    pairs = np.array([(i, j) for i in range(k) for j in range(i + 1, k)])
    a, b = pairs[rng.integers(0, len(pairs), n)].T
    p = 1.0 / (1.0 + np.exp(-(theta[a] - theta[b])))
    u = rng.random(n)
    outcome = np.where(u < p - tie_rate / 2, 0, np.where(u < p + tie_rate / 2, 2, 1))
    return a, b, outcome


def _uniform(k: int, n: float) -> np.ndarray:
    return np.triu(np.ones((k, k)), 1) * n / (k * (k - 1) / 2)


def test_planned_battles_reach_the_power_and_the_half_width_in_simulation_half_rule() -> None:
    k, t, margin = 4, 0.3, 60.0
    plan = plan_uniform(competitors=k, margin=margin, tie_rate=t)
    d = margin / SCALE
    theta = np.zeros(k)
    theta[0], theta[1] = d / 2, -d / 2
    rng = np.random.default_rng(7)
    rounds = 400
    gaps = np.empty(rounds)
    for r in range(rounds):
        a, b, outcome = _simulate_half(rng, theta, plan.battles_for_power, t)
        fit = fit_bradley_terry(aggregate_cells(a, b, outcome, n_competitors=k))
        gaps[r] = fit.log_strength[0] - fit.log_strength[1]
    se = difference_se(_uniform(k, plan.battles_for_power), theta, 0, 1, tie_rate=t)
    # The spread of the fitted gap is the planned one (sd of an sd estimate: 1 / sqrt(2R) = 3.5%).
    assert gaps.std() / se == pytest.approx(1.0, abs=0.11)
    assert gaps.mean() == pytest.approx(d, abs=4 * se / math.sqrt(rounds))
    power = float(np.mean(np.abs(gaps) / se > 1.959963984540054))
    assert power == pytest.approx(0.8, abs=3 * math.sqrt(0.16 / rounds) + 0.01)
    # The half-width plan at equal strength: z * sd of the fitted gap is the margin.
    theta0 = np.zeros(k)
    null = np.empty(rounds)
    for r in range(rounds):
        a, b, outcome = _simulate_half(rng, theta0, plan.battles_for_margin, t)
        fit = fit_bradley_terry(aggregate_cells(a, b, outcome, n_competitors=k))
        null[r] = fit.log_strength[0] - fit.log_strength[1]
    assert 1.959963984540054 * null.std() * SCALE / margin == pytest.approx(1.0, abs=0.11)
    # And the test's level holds at no gap.
    se0 = difference_se(_uniform(k, plan.battles_for_margin), theta0, 0, 1, tie_rate=t)
    assert float(np.mean(np.abs(null) / se0 > 1.959963984540054)) < 0.05 + 3 * math.sqrt(0.0475 / rounds)


def test_planned_battles_reach_the_power_in_simulation_davidson() -> None:
    k, t, margin = 3, 0.3, 60.0
    plan = plan_uniform(competitors=k, margin=margin, tie_rate=t, ties="davidson")
    d = margin / SCALE
    theta = np.array([d / 2, -d / 2, 0.0])
    rng = np.random.default_rng(11)
    pairs = np.array([(0, 1), (0, 2), (1, 2)])
    rounds = 300
    gaps = np.empty(rounds)
    for r in range(rounds):
        a, b = pairs[rng.integers(0, 3, plan.battles_for_power)].T
        outcome = simulate_davidson(rng, theta, 2 * t / (1 - t), a, b)
        fit = fit_davidson(aggregate_cells(a, b, outcome, n_competitors=k))
        gaps[r] = fit.log_strength[0] - fit.log_strength[1]
    se = difference_se(_uniform(k, plan.battles_for_power), theta, 0, 1, tie_rate=t, ties="davidson")
    assert gaps.std() / se == pytest.approx(1.0, abs=0.13)
    power = float(np.mean(np.abs(gaps) / se > 1.959963984540054))
    assert power == pytest.approx(0.8, abs=3 * math.sqrt(0.16 / rounds) + 0.01)


def test_separation_counts_the_battles_already_voted() -> None:
    theta = np.array([0.2, 0.1, -0.3])
    voted = _uniform(3, 600)
    everywhere = separation_plan(voted, theta, 0, 1, future=_uniform(3, 1), tie_rate=0.2)
    on_the_pair = separation_plan(
        voted, theta, 0, 1, future=np.array([[0, 1, 0], [0, 0, 0], [0, 0, 0.0]]), tie_rate=0.2
    )
    assert everywhere.additional is not None and on_the_pair.additional is not None
    assert on_the_pair.additional < everywhere.additional  # battles on the pair itself are the cheapest
    # After the planned battles the power is the target; one battle in a hundred fewer falls short.
    after = difference_se(voted + everywhere.additional * _uniform(3, 1), theta, 0, 1, tie_rate=0.2)
    assert wald_power(0.1, after, alpha=0.05) == pytest.approx(0.8, abs=0.002)
    short = difference_se(voted + 0.99 * everywhere.additional * _uniform(3, 1), theta, 0, 1, tie_rate=0.2)
    assert wald_power(0.1, short, alpha=0.05) < 0.8
    assert everywhere.gap == pytest.approx(0.1 * SCALE, abs=0.01)
    assert everywhere.power_now is not None and everywhere.power_now < 0.8


def test_separation_edge_cases_say_why() -> None:
    theta = np.array([0.5, -0.5, 0.0])
    # Already separated: no more battles.
    done = separation_plan(_uniform(3, 20000), theta, 0, 1, future=_uniform(3, 1), tie_rate=0.1)
    assert done.additional == 0 and done.power_now is not None and done.power_now >= 0.8
    # Equal estimates: nothing to detect.
    equal = separation_plan(_uniform(3, 100), np.zeros(3), 0, 1, future=_uniform(3, 1), tie_rate=0.1)
    assert equal.additional is None and "equal" in equal.reason
    # Disconnected now and in the plan (more battles only on 0-2 never connect 1).
    only = np.zeros((3, 3))
    only[0, 2] = 50
    never = separation_plan(only, theta, 0, 1, future=only, tie_rate=0.1)
    assert never.additional is None and never.se is None and "never connect" in never.reason
    # Disconnected now, connected by the uniform plan: a finite number.
    joined = separation_plan(only, theta, 0, 1, future=_uniform(3, 1), tie_rate=0.1)
    assert joined.additional is not None and joined.additional > 0
    # All ties under Davidson (t close to 1) still gives a finite, larger plan than no ties.
    assert difference_se(_uniform(3, 100), theta, 0, 1, tie_rate=0.9, ties="davidson") > difference_se(
        _uniform(3, 100), theta, 0, 1, tie_rate=0.0, ties="davidson"
    )
