"""Family-wise control of every "A differs from B" a board offers (issue 20.4): simultaneous difference
intervals (max-|t|), rank ranges that say whether they are simultaneous, and anytime-valid decisions at
the Bonferroni level. Known truths: Tukey's studentized range, Sidak's bound, and boards simulated with
truly equal competitors (``benchmarks/board_intervals.py`` runs the long version)."""

from __future__ import annotations

import numpy as np
from scipy.stats import norm, studentized_range

from ranking.compute import Method, board_compute
from ranking.estimators import (
    bonferroni_confidence,
    confidence_sequence,
    rank_ranges_from_differences,
    simultaneous_bounds,
    simultaneous_from_covariance,
)
from ranking.estimators.multiplicity import max_t_critical
from ranking.estimators.synthetic import clustered_votes
from ranking.policy import VoteArrays

# 10 competitors in groups of equal strength: 3 + 1 + 3 + 1 = 8 truly equal pairs.
STRENGTHS = np.array([0.0, 0.0, 0.0, 0.25, 0.25, 0.5, 0.5, 0.5, 0.8, 0.8])


def votes_for(a: np.ndarray, b: np.ndarray, outcome: np.ndarray, prompt: np.ndarray) -> VoteArrays:
    m = a.shape[0]
    zero = np.zeros(m, dtype=np.int64)
    return VoteArrays(
        vote_id=np.arange(m, dtype=np.int64),
        left=a + 1,
        right=b + 1,
        outcome=outcome,
        decision_ms=zero + 5000,
        rater=np.arange(m, dtype=np.int64),
        prompt=prompt,
        category=zero,
        categories=("",),
        identity=np.zeros(m, dtype=bool),
        style_left=np.zeros((m, 4)),
        style_right=np.zeros((m, 4)),
    )


def _grid(rows: list[list[float | None]], fill: float) -> np.ndarray:
    return np.array([[fill if v is None else v for v in row] for row in rows], dtype=np.float64)


def _shows_different(block: dict, pairs: np.ndarray) -> bool:
    """Does some pair of ``pairs`` have an interval excluding 0?"""
    lower, upper = _grid(block["lower"], -np.inf), _grid(block["upper"], np.inf)
    return bool(np.any(((lower > 0) | (upper < 0)) & pairs))


def test_the_critical_value_is_tukeys_for_independent_equal_levels() -> None:
    """Levels with independent equal variances: max |Z_a - Z_b| / sd over all pairs is the studentized
    range over sqrt 2 (Tukey's HSD), 3.164 for 10 competitors at 95%; one pair: the normal 1.96."""
    family = np.ones((10, 10), dtype=bool)
    c, pairs = simultaneous_from_covariance(np.eye(10), family, 0.95, draws=40_000, seed=1)
    assert pairs == 45
    assert abs(c - studentized_range.ppf(0.95, 10, 1e6) / np.sqrt(2)) < 0.04
    one, _ = simultaneous_from_covariance(np.eye(2), np.ones((2, 2), dtype=bool), 0.95, seed=1)
    assert abs(one - 1.96) < 0.01  # never below z, and the draws' quantile sits at it


def test_max_t_of_independent_pairs_is_sidaks_value() -> None:
    rng = np.random.default_rng(3)
    c = max_t_critical(rng.standard_normal((40_000, 10)), np.ones(10), 0.95)
    assert abs(c - norm.ppf(0.5 + 0.5 * 0.95 ** (1 / 10))) < 0.03  # 2.800


def test_simultaneous_bounds_widen_each_finite_side_and_keep_open_ones() -> None:
    estimate = np.array([[0.0, 10.0], [-10.0, 0.0]])
    lower = np.array([[0.0, 0.0], [-np.inf, 0.0]])
    upper = np.array([[0.0, np.inf], [-4.0, 0.0]])
    lo, hi = simultaneous_bounds(estimate, lower, upper, critical=2 * norm.ppf(0.975), confidence=0.95)
    assert lo[0, 1] == -10.0 and np.isposinf(hi[0, 1])  # 10 below the estimate, twice over
    assert np.isneginf(lo[1, 0]) and hi[1, 0] == 2.0


def test_rank_ranges_from_differences() -> None:
    # a > b surely, c unresolved against both.
    lower = np.array([[0.0, 5.0, -1.0], [-20.0, 0.0, -3.0], [-9.0, -2.0, 0.0]])
    best, worst = rank_ranges_from_differences(lower, np.ones((3, 3), dtype=bool))
    assert best.tolist() == [1, 2, 1] and worst.tolist() == [2, 3, 3]


def test_equal_pairs_are_rarely_shown_different_on_a_board() -> None:
    """30 seeded boards (3,000 votes each): the per-pair intervals show some truly equal pair as different
    on many boards (the issue: 41%), the simultaneous ones on at most the stated 5% (here 1 of 30 at most),
    and every board says which is which."""
    per_pair = together = 0
    for seed in range(30):
        sim = clustered_votes(
            np.random.default_rng(seed), STRENGTHS, clusters=3000, size=1, design="none", effect_sd=0.0
        )
        board = board_compute(
            votes_for(sim.a, sim.b, sim.outcome, sim.cluster), np.arange(1, 11), {}, Method(min_votes=1)
        )
        order = np.asarray(board.pairwise["competitor_ids"]) - 1
        truth = STRENGTHS[order]
        equal = np.triu(np.isclose(truth[:, None], truth[None, :]), 1)
        diff = board.pairwise["difference"]
        simultaneous = diff["simultaneous"]

        per_pair += _shows_different(diff, equal)
        together += _shows_different(simultaneous, equal)
        assert simultaneous["pairs"] == 45 and simultaneous["critical"] > 1.96
        assert diff["coverage"].startswith("per pair") and simultaneous["coverage"].startswith("simultaneous")
        assert board.extra["rank_ranges"]["simultaneous"] is False
        for row in board.rows:
            best, worst = row["rank_simultaneous"]
            assert 1 <= best <= worst <= 10
    print(f"equal pair shown different: per pair {per_pair}/30, simultaneous {together}/30")
    assert per_pair >= 6
    assert together <= 1


def test_wald_boards_get_simultaneous_intervals_too() -> None:
    """Sandwich and Davidson boards: c from draws of the scores' normal law, wider than per pair."""
    rng = np.random.default_rng(5)
    sim = clustered_votes(rng, STRENGTHS, clusters=2000, size=1, design="none", effect_sd=0.0)
    outcome = np.where(rng.random(sim.a.shape[0]) < 0.2, 2, sim.outcome)  # ties, so Davidson's fit runs
    votes = votes_for(sim.a, sim.b, outcome, sim.cluster)
    for method in (Method(min_votes=1, interval="sandwich"), Method(min_votes=1, ties="davidson")):
        diff = board_compute(votes, np.arange(1, 11), {}, method).pairwise["difference"]
        simultaneous = diff["simultaneous"]
        assert "normal law" in simultaneous["method"] and 2.9 < simultaneous["critical"] < 3.4
        lower, upper = _grid(diff["lower"], 0.0), _grid(diff["upper"], 0.0)
        s_lower, s_upper = _grid(simultaneous["lower"], 0.0), _grid(simultaneous["upper"], 0.0)
        assert np.all(s_lower <= lower + 1e-9) and np.all(s_upper >= upper - 1e-9)
        assert np.all(s_upper - s_lower > upper - lower - 1e-9)


def test_anytime_valid_decisions_are_bonferroni_over_the_pairs() -> None:
    """A pair at 70 of 100 is decided by a per-pair 95% sequence but not at 1 - 5%/45: with 10
    competitors shown the board's decision waits (a lone pair would have been decided)."""
    assert confidence_sequence(70.0, 100.0, confidence=0.95)[0] > 0.5
    assert confidence_sequence(70.0, 100.0, confidence=bonferroni_confidence(0.95, 45))[0] < 0.5
    rng = np.random.default_rng(2)
    a = np.concatenate([np.zeros(100, dtype=np.int64), rng.integers(2, 10, 900)])
    b = np.concatenate([np.ones(100, dtype=np.int64), (a[100:] + 1 + rng.integers(0, 8, 900)) % 10])
    b[100:] = np.where(b[100:] == a[100:], (b[100:] + 1) % 10, b[100:])
    outcome = np.concatenate([np.zeros(70, dtype=np.int64), np.ones(30, dtype=np.int64), rng.integers(0, 2, 900)])
    board = board_compute(votes_for(a, b, outcome, np.arange(1000)), np.arange(1, 11), {}, Method(min_votes=1))
    sequential = board.pairwise_full()["sequential"]
    ids = board.pairwise["competitor_ids"]
    cell = sequential["cells"][ids.index(1)][ids.index(2)]
    assert cell["decision"] == "not yet" and cell["lower"] < 0.5
    assert sequential["family"] == {"correction": "Bonferroni", "pairs": 45, "pair_confidence": 0.998889}
    assert "Bonferroni over the 45 pairs" in sequential["decision_rule"]
