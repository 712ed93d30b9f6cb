"""Interval methods: coverage on synthetic truth, the worked example, reproducibility."""

from __future__ import annotations

import numpy as np
import pytest

from ranking.estimators import (
    SCALE,
    aggregate_cells,
    bootstrap_intervals,
    cluster_bootstrap_intervals,
    fit_bradley_terry,
    rank_ranges,
    sandwich_intervals,
)
from ranking.estimators.intervals import multinomial_draw, multinomial_table
from ranking.estimators.synthetic import simulate_bt


def test_worked_example_four_models() -> None:
    """True strengths 1.6, 1.0, 0.9, 0.5; 1,200 uniform battles; 10% ties.

    b and c are only 18 points apart in truth (less after ties) against intervals of about +-20, so
    their order is a coin flip with some bias: across seeds 0..39 the strict order a > b > c > d
    holds in 25. The fixed seed is one of those, giving 1076 / 1027 / 991 / 905.
    """
    strengths = np.array([1.6, 1.0, 0.9, 0.5])
    sim = simulate_bt(np.random.default_rng(1), np.log(strengths), 1200, tie_prob=0.1)
    cells = aggregate_cells(sim.a, sim.b, sim.outcome, n_competitors=4)
    fit = fit_bradley_terry(cells)
    boot = bootstrap_intervals(cells, fit, seed=1)
    sand = sandwich_intervals(cells, fit)
    s = fit.scores
    assert s[0] > s[1] > s[2] > s[3]
    # Ties count half a win each side, so they pull every gap toward even.
    assert s[0] - s[1] < 400 * np.log10(1.6 / 1.0)
    assert 1055 < s[0] < 1105 and 985 < s[1] < 1045 and 960 < s[2] < 1020 and 880 < s[3] < 945
    for iv in (boot, sand):
        half = (iv.upper - iv.lower) / 2
        assert np.all((half > 15) & (half < 30)), half
        assert iv.upper[2] > iv.lower[1]  # b and c overlap
        assert np.all((iv.lower < s) & (s < iv.upper))
    ranks = rank_ranges(sand.lower, sand.upper)
    assert ranks.best[0] == 1 and ranks.best[2] <= 2 and ranks.worst[1] >= 3


def _coverage(method: str, replicates: int = 150) -> float:
    rng = np.random.default_rng(11)
    theta = np.linspace(-0.9, 0.9, 8)
    truth = SCALE * (theta - theta.mean()) + 1000
    hits = []
    for r in range(replicates):
        sim = simulate_bt(rng, theta, 400)
        cells = aggregate_cells(sim.a, sim.b, sim.outcome, n_competitors=8)
        fit = fit_bradley_terry(cells)
        if method == "bootstrap":
            iv = bootstrap_intervals(cells, fit, rounds=100, seed=r, workers=1)
        else:
            iv = sandwich_intervals(cells, fit)
        hits.append((iv.lower <= truth) & (truth <= iv.upper))
    return float(np.mean(hits))


@pytest.mark.parametrize("method", ["bootstrap", "sandwich"])
def test_95_percent_intervals_cover_the_truth(method: str) -> None:
    # 150 data sets x 8 competitors = 1,200 pooled intervals: the binomial s.e. is ~0.6%.
    cov = _coverage(method)
    assert 0.93 <= cov <= 0.97, cov


def test_bootstrap_byte_identical_for_same_seed() -> None:
    sim = simulate_bt(np.random.default_rng(5), np.linspace(-1, 1, 6), 3000, tie_prob=0.1)
    cells = aggregate_cells(sim.a, sim.b, sim.outcome)
    fit = fit_bradley_terry(cells)
    one = bootstrap_intervals(cells, fit, seed=42, workers=1)
    two = bootstrap_intervals(cells, fit, seed=42, workers=2)
    assert one.samples is not None and two.samples is not None
    assert one.samples.tobytes() == two.samples.tobytes()
    assert one.lower.tobytes() == two.lower.tobytes() and one.upper.tobytes() == two.upper.tobytes()
    other = bootstrap_intervals(cells, fit, seed=43)
    assert other.samples is not None and other.samples.tobytes() != one.samples.tobytes()
    p1 = bootstrap_intervals(cells, fit, seed=3, scheme="poisson")
    p2 = bootstrap_intervals(cells, fit, seed=3, scheme="poisson")
    assert p1.samples is not None and p2.samples is not None
    assert p1.samples.tobytes() == p2.samples.tobytes()
    # Refitting from the same votes is also byte-identical.
    again = fit_bradley_terry(aggregate_cells(sim.a, sim.b, sim.outcome))
    assert again.scores.tobytes() == fit.scores.tobytes()


def test_cluster_bootstrap_is_wider_when_prompts_matter() -> None:
    """Each prompt shifts every competitor's strength: battles on one prompt are correlated."""
    rng = np.random.default_rng(8)
    n_prompts, per = 150, 20
    cluster = np.repeat(np.arange(n_prompts), per)
    shift = rng.normal(0, 1.0, (n_prompts, 4))
    a = np.tile(np.array([0, 1, 2, 3]), n_prompts * per // 4)
    b = (a + 1 + rng.integers(0, 3, a.shape[0])) % 4
    effect = shift[cluster, a] - shift[cluster, b]
    sim = simulate_bt(rng, np.zeros(4), a.shape[0], extra_logit=effect, a=a, b=b)
    cells = aggregate_cells(sim.a, sim.b, sim.outcome, cluster=cluster)
    fit = fit_bradley_terry(cells)
    plain = bootstrap_intervals(cells, fit, seed=1)
    by_prompt = cluster_bootstrap_intervals(cells, fit, seed=1)
    robust = sandwich_intervals(cells, fit, cluster_robust=True)
    naive = sandwich_intervals(cells, fit)
    assert np.all(by_prompt.se > 1.2 * plain.se)
    assert np.all(robust.se > 1.2 * naive.se)
    np.testing.assert_allclose(robust.se, by_prompt.se, rtol=0.35)
    again = cluster_bootstrap_intervals(cells, fit, seed=1, workers=1)
    assert again.samples is not None and by_prompt.samples is not None
    assert again.samples.tobytes() == by_prompt.samples.tobytes()


def test_sandwich_matches_bootstrap_on_plenty_of_data() -> None:
    sim = simulate_bt(np.random.default_rng(9), np.linspace(-1, 1, 5), 20000, tie_prob=0.1)
    cells = aggregate_cells(sim.a, sim.b, sim.outcome)
    fit = fit_bradley_terry(cells)
    boot = bootstrap_intervals(cells, fit, rounds=300, seed=0)
    sand = sandwich_intervals(cells, fit)
    np.testing.assert_allclose(sand.se, boot.se, rtol=0.2)
    assert fit.params.both_bad == "tie"


def test_reference_interval_is_a_point() -> None:
    sim = simulate_bt(np.random.default_rng(3), np.linspace(-1, 1, 4), 2000)
    cells = aggregate_cells(sim.a, sim.b, sim.outcome)
    fit = fit_bradley_terry(cells, reference=1)
    sand = sandwich_intervals(cells, fit)
    boot = bootstrap_intervals(cells, fit, rounds=20)
    assert sand.se[1] == pytest.approx(0.0, abs=1e-6)
    assert boot.lower[1] == pytest.approx(1000.0) and boot.upper[1] == pytest.approx(1000.0)


def test_multinomial_draw_is_multinomial() -> None:
    p = np.array([0.5, 0.3, 0.15, 0.05])
    g = np.random.default_rng(1)
    x = np.array([multinomial_draw(g, 200, p, np.cumsum(p)) for _ in range(4000)])
    assert np.all(x.sum(axis=1) == 200)
    np.testing.assert_allclose(x.mean(axis=0), 200 * p, rtol=0.02)
    cov = np.cov(x.T)
    expected = 200 * (np.diag(p) - np.outer(p, p))
    np.testing.assert_allclose(cov, expected, atol=2.5)
    # tiny totals take the all-categorical path
    assert multinomial_draw(g, 3, p, np.cumsum(p)).sum() == 3


def test_poisson_table_draws_poisson() -> None:
    """The table sampler behind the bootstrap's Poisson step: for small, medium and large means (one
    table per distinct mean, mixed in one vector) the frequencies match the Poisson pmf (chi-square
    over the bins with expected count >= 5, p > 0.001) and a zero mean gives zeros."""
    from scipy.stats import chisquare, poisson

    from ranking.estimators.intervals import PoissonTable

    means = np.array([0.0, 0.3, 2.5, 16.0, 137.2, 4321.5])
    reps = 40_000
    table = PoissonTable(np.repeat(means, reps))
    x = table.draw(np.random.default_rng(9)).reshape(means.shape[0], reps)
    assert np.all(x[0] == 0)
    for lam, row in zip(means[1:], x[1:], strict=True):
        ks = np.arange(int(lam + 8 * np.sqrt(lam) + 10))
        expected = reps * poisson.pmf(ks, lam)
        keep = expected >= 5
        observed = np.bincount(row, minlength=ks.shape[0])[: ks.shape[0]]
        obs, exp = observed[keep], expected[keep]
        # The bins left out are pooled into one, so the totals agree.
        obs = np.append(obs, reps - obs.sum())
        exp = np.append(exp, reps - exp.sum())
        assert chisquare(obs, exp).pvalue > 1e-3, lam
    # The same generator state gives the same draws (byte-identical bootstrap reruns).
    again = table.draw(np.random.default_rng(9)).reshape(means.shape[0], reps)
    assert np.array_equal(x, again)


def test_multinomial_draw_with_table_is_multinomial() -> None:
    p = np.array([0.5, 0.3, 0.15, 0.05])
    g = np.random.default_rng(2)
    table = multinomial_table(200, p)
    assert table is not None
    x = np.array([multinomial_draw(g, 200, p, np.cumsum(p), table) for _ in range(4000)])
    assert np.all(x.sum(axis=1) == 200)
    np.testing.assert_allclose(x.mean(axis=0), 200 * p, rtol=0.02)
    np.testing.assert_allclose(np.cov(x.T), 200 * (np.diag(p) - np.outer(p, p)), atol=2.5)
