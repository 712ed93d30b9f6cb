"""Board-quality statistics against known truths: separability, one board against another (rank agreement,
agreement on the confident pairs, pair-rank Brier score, verdict) and the Hodge cyclic share."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from scipy.stats import norm

from ranking.estimators import aggregate_cells
from ranking.estimators import board_quality as bq
from ranking.estimators.ratio import RatioFit, fit_ratio

Z = float(norm.ppf(0.975))


def row(cid: int, score: float, half: float | None, *, component: int = 0, **over: Any) -> dict[str, Any]:
    r: dict[str, Any] = {
        "competitor_id": cid,
        "hidden": False,
        "component": component,
        "score": score,
        "lower": None if half is None else score - half,
        "upper": None if half is None else score + half,
        "lower_open": half is None,
        "upper_open": half is None,
    }
    r.update(over)
    return r


def board(rows: list[dict[str, Any]]) -> bq.BoardScores:
    return bq.board_scores(rows)


def test_separability_counts_the_pairs_whose_intervals_do_not_overlap() -> None:
    b = board([row(1, 1000, 10), row(2, 1050, 10), row(3, 1060, 10), {**row(4, 0, 0), "hidden": True, "score": None}])
    sep = bq.separability(b)
    # (1000, 1050) and (1000, 1060) apart; (1050, 1060) overlap; the hidden row is not placed.
    assert (sep["competitors"], sep["pairs"], sep["separated"]) == (3, 3, 2)
    assert sep["share"] == pytest.approx(2 / 3, abs=1e-4)
    # An open side never separates in its direction, the closed one still can.
    b = board([row(1, 1000, 10), row(2, 1200, None, lower=1100, lower_open=False)])
    assert bq.separability(b)["separated"] == 1
    b = board([row(1, 1000, 10), row(2, 900, None, lower=1100, lower_open=False, upper=None)])
    assert bq.separability(b)["separated"] == 1  # 2's lower bound 1100 lies above 1's upper 1010


def test_separability_says_why_it_has_no_number() -> None:
    assert bq.separability(board([]))["share"] is None
    one = bq.separability(board([row(1, 1000, 10)]))
    assert one["share"] is None and "fewer than two" in one["reason"]
    apart = bq.separability(board([row(1, 1000, 10, component=0), row(2, 1500, 10, component=1)]))
    assert apart["share"] is None and apart["across_groups"] == 1 and "group" in apart["reason"]


def truth_board(truth: np.ndarray, half: float, noise: np.ndarray | None = None) -> list[dict[str, Any]]:
    scores = truth if noise is None else truth + noise
    return [row(i + 1, float(s), half) for i, s in enumerate(scores)]


def test_a_board_with_the_true_order_stands_in_and_a_reversed_one_does_not() -> None:
    truth = 1000 + 50 * np.arange(12.0)  # 66 pairs, all 50+ points apart: intervals of +-15 resolve them all
    reference = board(truth_board(truth, 15))
    rng = np.random.default_rng(3)
    good = bq.board_comparison(reference, board(truth_board(truth, 15, rng.normal(0, 5, 12))), names=("H", "J"))
    assert good["shared"] == 12 and good["resolved_by_reference"] == 66
    assert good["agreement"]["agree"] == 66 and good["contradicted"] == 0
    assert good["confirmed"] >= 60  # B's own intervals (noisy scores) separate nearly all of them too
    assert good["agreement"]["lower"] >= bq.STAND_IN_AGREEMENT
    assert good["stands_in"] is True and good["verdict"].startswith("J can stand in for H")
    assert good["kendall_tau"]["value"] == 1.0 and good["kendall_tau"]["lower"] > 0.8
    assert good["brier"]["score"] < 0.01 and good["brier"]["skill"] > 0.95

    reversed_ = bq.board_comparison(reference, board(truth_board(truth[::-1].copy(), 15)), names=("H", "J"))
    assert reversed_["kendall_tau"]["value"] == -1.0
    assert reversed_["agreement"]["agree"] == 0 and reversed_["contradicted"] == 66
    assert reversed_["stands_in"] is False and "cannot stand in" in reversed_["verdict"]
    assert reversed_["brier"]["score"] > 0.9


def test_the_pair_rank_brier_score_is_the_closed_form() -> None:
    reference = board([row(1, 1100, 10), row(2, 1000, 10)])
    candidate = board([row(1, 1050, 20), row(2, 1000, 20)])
    out = bq.board_comparison(reference, candidate)
    p = norm.cdf(50 / math.sqrt(2 * (20 / Z) ** 2))
    assert out["brier"]["score"] == pytest.approx((1 - p) ** 2, abs=1e-4)
    # B with both sides open says nothing about the pair: p = 1/2, the uninformed 0.25.
    silent = bq.board_comparison(reference, board([row(1, 1050, None), row(2, 1000, None)]))
    assert silent["brier"]["score"] == 0.25 and silent["brier"]["skill"] == 0.0
    # Too few resolved pairs and too few shared competitors: a reason, no made-up verdict or interval.
    assert out["stands_in"] is None and "Cannot tell yet" in out["verdict"]
    assert out["kendall_tau"]["value"] == 1.0 and out["kendall_tau"]["lower"] is None
    assert "5 shared" in out["kendall_tau"]["reason"]


def test_a_comparison_without_shared_or_resolved_pairs_says_so() -> None:
    none = bq.board_comparison(board([row(1, 1000, 10)]), board([row(2, 1000, 10)]))
    assert none["shared"] == 0 and none["stands_in"] is None and "fewer than two" in none["verdict"]
    assert none["brier"]["score"] is None and none["agreement"]["share"] is None
    ties = bq.board_comparison(
        board([row(k, 1000, 50) for k in range(1, 7)]), board([row(k, 1000, 50) for k in range(1, 7)])
    )
    assert ties["resolved_by_reference"] == 0 and ties["brier"]["reason"]
    assert ties["kendall_tau"]["value"] is None and "one score" in ties["kendall_tau"]["reason"]
    # Only shared competitors count; pairs across A's groups are never "resolved".
    grouped = bq.board_comparison(
        board([row(1, 1000, 5, component=0), row(2, 2000, 5, component=1), row(3, 900, 5)]),
        board([row(1, 1000, 5), row(2, 900, 5), row(9, 1, 5)]),
    )
    assert grouped["shared"] == 2 and grouped["only_candidate"] == 1 and grouped["resolved_by_reference"] == 0


def bt_pairs(strength: np.ndarray, battles: int, seed: int) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    n = strength.size
    lo, hi = np.triu_indices(n, 1)
    p = 1 / (1 + np.exp(-(strength[lo] - strength[hi])))
    wins = rng.binomial(battles, p).astype(float)
    return lo.astype(np.int64), hi.astype(np.int64), wins, battles - wins


def test_a_planted_rock_paper_scissors_cycle_is_cyclic_and_bradley_terry_data_is_not() -> None:
    lo, hi = np.array([0, 1, 0]), np.array([1, 2, 2])  # 0 beats 1, 1 beats 2, 2 beats 0: 80-20 each
    rps = bq.cyclic_share(3, lo, hi, np.array([80.0, 80.0, 20.0]), np.array([20.0, 20.0, 80.0]))
    assert rps["share"] > 0.99 and rps["p_value"] < 1e-6 and rps["degrees_of_freedom"] == 1
    bt = bq.cyclic_share(8, *bt_pairs(np.linspace(-2, 2, 8), 100, seed=0))
    assert bt["share"] < 0.06 and bt["p_value"] > 0.01 and bt["degrees_of_freedom"] == 28 - 7
    # The noise level is what chi-square predicts: the cyclic energy is near its degrees of freedom.
    assert bt["cyclic_energy"] == pytest.approx(bt["degrees_of_freedom"], rel=0.6)
    # A transitive board with a planted cycle among three of its members is flagged.
    lo8, hi8, a8, b8 = bt_pairs(np.zeros(8), 100, seed=1)
    for (i, j), (wi, wj) in {(0, 1): (85, 15), (1, 2): (85, 15), (0, 2): (15, 85)}.items():
        k = int(np.flatnonzero((lo8 == i) & (hi8 == j))[0])
        a8[k], b8[k] = wi, wj
    assert bq.cyclic_share(8, lo8, hi8, a8, b8)["p_value"] < 1e-6


def test_the_cyclic_share_edge_cases() -> None:
    chain = bq.cyclic_share(4, np.array([0, 1, 2]), np.array([1, 2, 3]), np.full(3, 70.0), np.full(3, 30.0))
    assert (
        chain["share"] == pytest.approx(0.0, abs=1e-9)
        and chain["p_value"] is None
        and "tree" in chain["p_value_reason"]
    )
    few = bq.cyclic_share(3, np.array([0, 1]), np.array([1, 2]), np.array([5.0, 5.0]), np.array([1.0, 1.0]))
    assert few["share"] is None and "three" in few["reason"]
    ties = bq.cyclic_share(3, np.array([0, 1, 0]), np.array([1, 2, 2]), np.full(3, 10.0), np.full(3, 10.0))
    assert ties["share"] is None and "even" in ties["reason"]
    # Two disconnected triangles: one cyclic, one transitive; each is solved in its own group.
    lo, hi = np.array([0, 1, 0, 3, 4, 3]), np.array([1, 2, 2, 4, 5, 5])
    two = bq.cyclic_share(6, lo, hi, np.array([80.0, 80, 20, 70, 70, 85]), np.array([20.0, 20, 80, 30, 30, 15]))
    assert two["groups"] == 2 and two["degrees_of_freedom"] == 2 and 0.2 < two["share"] < 0.9


def test_pair_records_count_decisive_wins_and_ties_and_orient_each_pair_low_to_high() -> None:
    # (a, b, outcome): 1 beats 0 twice (as left), a tie, a both-bad, 2 beats 1 once.
    cells = aggregate_cells([1, 1, 0, 0, 1], [0, 0, 1, 1, 2], [0, 0, 2, 3, 1], n_competitors=3)
    lo, hi, a, b, t = bq.pair_records(cells, both_bad="tie")
    assert lo.tolist() == [0, 1] and hi.tolist() == [1, 2]
    assert a.tolist() == [0.0, 0.0] and b.tolist() == [2.0, 1.0] and t.tolist() == [2.0, 0.0]
    assert bq.pair_records(cells, both_bad="drop")[4].tolist() == [1.0, 0.0]


def test_ties_do_not_read_as_cycles() -> None:
    # Bradley-Terry decisive votes plus 30% ties at every pair: counted as half a win, the ties would bend
    # the flow (the logit of 0.15 + 0.7 p is not additive); the decisive flow stays transitive.
    rng = np.random.default_rng(7)
    strength = np.linspace(-1.5, 1.5, 8)
    lo, hi = np.triu_indices(8, 1)
    p = 1 / (1 + np.exp(-(strength[lo] - strength[hi])))
    ties = rng.binomial(400, 0.3, lo.size).astype(float)
    wins = rng.binomial((400 - ties).astype(int), p).astype(float)
    decisive = bq.cyclic_share(8, lo, hi, wins, 400 - ties - wins, ties)
    halves = bq.cyclic_share(8, lo, hi, wins + ties / 2, 400 - ties - wins + ties / 2)
    assert decisive["p_value"] > 0.01 and decisive["ties_left_out"] == ties.sum()
    assert halves["p_value"] < decisive["p_value"]


def test_the_top_k_error_of_two_entities_is_the_closed_form_flip_probability() -> None:
    # Two entities judged three times each way, 0.04 apart: the error is P(the difference changes sign).
    i, j = np.array([0, 0, 0, 1, 1, 1]), np.array([1, 1, 1, 0, 0, 0])
    r = np.array([0.3, -0.2, 0.1, 0.25, -0.35, 0.05])
    for noise in ("pooled", "entity"):
        fit = fit_ratio(2, i, j, r, noise=noise)
        exact = norm.cdf(-abs(fit.scores[0] - fit.scores[1]) / fit.difference_sd(0, 1))
        out = bq.top_k_error(fit, 1, draws=4000, seed=1)
        assert 0.2 < exact < 0.5
        assert out["probability"] == pytest.approx(exact, abs=4 * out["se"]), noise
        assert out["in_top_k"][0] == pytest.approx(1 - out["probability"], abs=1e-3) and out["boundary"] == [0, 1]


def planted_ratio(truth: np.ndarray, seed: int) -> RatioFit:
    rng = np.random.default_rng(seed)
    a, b = np.triu_indices(truth.size, 1)
    a, b = np.repeat(a, 2), np.repeat(b, 2)
    return fit_ratio(truth.size, a, b, truth[a] - truth[b] + rng.normal(0, 0.3, a.size))


def test_the_top_k_error_is_small_across_a_wide_gap_and_large_across_none() -> None:
    truth = np.r_[3.0, 2.8, 2.6, 0.5, 0.45, 0.4, 0.2, 0.1, 0.0, -0.1]
    fit = planted_ratio(truth, seed=2)
    gap = bq.top_k_error(fit, 3, draws=1000)
    assert gap["probability"] < 0.01 and min(gap["in_top_k"][:3]) > 0.99
    # Entities 3, 4 and 5 are 0.05 apart: which two of them make the top 5 is close to a coin toss.
    none = bq.top_k_error(fit, 5, draws=1000)
    assert none["probability"] > 0.3 and sum(none["in_top_k"]) == pytest.approx(5.0)
    assert bq.top_k_error(fit, 5, draws=1000) == none  # seeded: the same draws


def test_the_top_k_error_says_why_it_has_no_number() -> None:
    fit = planted_ratio(np.r_[1.0, 0.0, -1.0], seed=0)
    assert "between 1 and 2" in bq.top_k_error(fit, 3)["reason"]
    split = fit_ratio(4, [0, 2], [1, 3], [0.5, 0.5])
    out = bq.top_k_error(split, 1)
    assert out["probability"] is None and "groups" in out["reason"]
    assert bq.top_k_draws(10) == bq.TOP_K_DRAWS and bq.top_k_draws(10_000) == 500 and bq.top_k_draws(10**7) == 200


def test_separability_counts_as_a_brute_force_over_every_pair_does(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(5)
    n = 60
    score = rng.normal(1000, 80, n)
    half = rng.uniform(5, 60, n)
    lower, upper = score - half, score + half
    lower[::7], upper[::11] = -np.inf, np.inf  # some open sides
    comp = rng.integers(0, 3, n)
    b = bq.BoardScores(np.arange(n), score, lower, upper, comp)
    brute = sum(
        1
        for i in range(n)
        for j in range(i + 1, n)
        if comp[i] == comp[j] and (lower[i] > upper[j] or lower[j] > upper[i])
    )
    same = sum(1 for i in range(n) for j in range(i + 1, n) if comp[i] == comp[j])
    sep = bq.separability(b)
    assert (sep["separated"], sep["pairs"], sep["across_groups"]) == (brute, same, n * (n - 1) // 2 - same)
    # A comparison past its size limit says so instead of comparing.
    monkeypatch.setattr(bq, "MAX_COMPARED", 10)
    out = bq.board_comparison(b, b)
    assert out["stands_in"] is None and "more than 10" in out["verdict"] and out["agreement"]["share"] is None
