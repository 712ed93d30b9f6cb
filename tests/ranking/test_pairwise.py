"""Pairwise win rates, Wilson, binomial test, planning formulas, intransitivity."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import binomtest, norm

from ranking.estimators import (
    BOTH_BAD,
    LEFT_WINS,
    RIGHT_WINS,
    TIE,
    aggregate_cells,
    battles_for_margin,
    battles_for_power,
    binomial_test,
    binomial_test_p,
    count_3cycles,
    cyclic_groups,
    has_cycle,
    majority_graph,
    pairwise_table,
    wilson_interval,
)


def test_wilson_against_hand_computation() -> None:
    # 8 of 10 at 95%: z = 1.959964, centre = (0.8 + z^2/20) / (1 + z^2/10) = 0.716740,
    # half = z / (1 + z^2/10) * sqrt(0.016 + z^2/400) = 0.226577.
    lo, hi = wilson_interval(8, 10)
    assert float(lo) == pytest.approx(0.490162, abs=2e-6)
    assert float(hi) == pytest.approx(0.943318, abs=2e-6)
    lo0, hi0 = wilson_interval(0, 5)
    assert float(lo0) == 0.0 and 0.0 < float(hi0) < 1.0
    assert np.isnan(wilson_interval(0, 0)[0])


def test_binomial_test_matches_scipy_everywhere() -> None:
    w, n = np.meshgrid(np.arange(0, 41), np.arange(1, 41))
    ok = w <= n
    ours = binomial_test_p(w[ok], (n - w)[ok])
    theirs = [binomtest(int(k), int(m), 0.5).pvalue for k, m in zip(w[ok], n[ok], strict=True)]
    np.testing.assert_allclose(ours, theirs, rtol=1e-9, atol=1e-12)
    assert binomial_test(15, 5) == pytest.approx(binomtest(15, 20, 0.5).pvalue)
    assert math.isnan(binomial_test(0, 0))


def test_pairwise_table_counts_and_rates() -> None:
    a = np.array([0, 0, 1, 0, 1, 2, 2, 0])
    b = np.array([1, 1, 0, 1, 0, 0, 1, 2])
    o = np.array([LEFT_WINS, LEFT_WINS, LEFT_WINS, TIE, BOTH_BAD, LEFT_WINS, RIGHT_WINS, TIE])
    t = pairwise_table(aggregate_cells(a, b, o, n_competitors=3))
    # pair (0,1): 0 won 2, 1 won 1, one tie, one both_bad
    assert t.wins[0, 1] == 2 and t.wins[1, 0] == 1
    assert t.ties[0, 1] == t.ties[1, 0] == 1 and t.both_bad[0, 1] == 1
    assert t.battles[0, 1] == 5
    assert t.win_rate[0, 1] == pytest.approx((2 + 1) / 5) and t.win_rate[1, 0] == pytest.approx(2 / 5)
    assert t.tie_rate[0, 1] == pytest.approx(0.2) and t.both_bad_rate[0, 1] == pytest.approx(0.2)
    assert t.p_value[0, 1] == pytest.approx(binomtest(2, 3, 0.5).pvalue)
    # competitor 0 played 5 + 2 battles, 2 ties, 1 both_bad
    assert t.competitor_tie_rate[0] == pytest.approx(2 / 7)
    assert t.competitor_both_bad_rate[0] == pytest.approx(1 / 7)
    dropped = pairwise_table(aggregate_cells(a, b, o, n_competitors=3), both_bad="drop")
    assert dropped.win_rate[0, 1] == pytest.approx(2.5 / 4)
    np.testing.assert_allclose(t.win_rate + t.win_rate.T, np.where(t.battles > 0, 1.0, np.nan))
    assert np.all((t.wilson_lower <= t.win_rate) | np.isnan(t.win_rate))


def test_planning_formulas_match_closed_form() -> None:
    z = norm.ppf(0.975)
    assert battles_for_margin(0.03) == math.ceil(z * z * 0.25 / 0.03**2) == 1068
    assert battles_for_margin(0.05, p=0.7, confidence=0.9) == math.ceil(norm.ppf(0.95) ** 2 * 0.21 / 0.05**2)
    n_w = battles_for_margin(0.03, method="wilson")
    # Wilson half-width at p=0.5 is (z/2)/sqrt(n + z^2): so n = ceil((z/2/m)^2 - z^2).
    assert n_w == math.ceil((z / 2 / 0.03) ** 2 - z * z)
    lo, hi = wilson_interval(0.5 * n_w, n_w)
    assert (hi - lo) / 2 <= 0.03
    za, zb = norm.ppf(0.975), norm.ppf(0.8)
    expected = ((za * 0.5 + zb * math.sqrt(0.6 * 0.4)) / 0.1) ** 2
    assert battles_for_power(0.6) == math.ceil(expected) == 194
    assert battles_for_power(0.4) == battles_for_power(0.6)
    with pytest.raises(ValueError):
        battles_for_power(0.5)


def rps_win_rate() -> np.ndarray:
    a = np.array([0, 1, 2] * 10)
    b = np.array([1, 2, 0] * 10)
    o = np.where(np.arange(30) % 5 == 0, RIGHT_WINS, LEFT_WINS)
    return pairwise_table(aggregate_cells(a, b, o)).win_rate


def test_rock_paper_scissors_is_one_three_cycle() -> None:
    adj = majority_graph(rps_win_rate())
    assert count_3cycles(adj) == 1
    assert has_cycle(adj) and cyclic_groups(adj) == [[0, 1, 2]]
    # add a competitor that beats all three: the cycle is untouched
    big = np.zeros((4, 4), dtype=bool)
    big[:3, :3] = adj
    big[3, :3] = True
    assert count_3cycles(big) == 1 and cyclic_groups(big) == [[0, 1, 2]]


def test_transitive_and_longer_cycles() -> None:
    order = np.triu(np.ones((5, 5), dtype=bool), k=1)
    assert count_3cycles(order) == 0 and not has_cycle(order)
    square = np.zeros((4, 4), dtype=bool)
    square[[0, 1, 2, 3], [1, 2, 3, 0]] = True
    assert count_3cycles(square) == 0 and has_cycle(square)
