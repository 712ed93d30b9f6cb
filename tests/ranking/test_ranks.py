"""Rank ranges from intervals and the vote threshold."""

from __future__ import annotations

import numpy as np

from ranking.estimators import rank_ranges, shown_mask


def test_rank_ranges_by_hand() -> None:
    lower = np.array([1090.0, 1000.0, 990.0, 900.0])
    upper = np.array([1110.0, 1040.0, 1030.0, 950.0])
    r = rank_ranges(lower, upper)
    # 0 is clear of everyone; 1 and 2 overlap each other only; 3 is clearly last.
    np.testing.assert_array_equal(r.best, [1, 2, 2, 4])
    np.testing.assert_array_equal(r.worst, [1, 3, 3, 4])


def test_hidden_competitors_take_no_rank_positions() -> None:
    lower = np.array([1090.0, 500.0, 1000.0, 900.0])
    upper = np.array([1110.0, 1500.0, 1040.0, 950.0])
    shown = shown_mask(np.array([400, 3, 500, 350]), min_battles=50)
    r = rank_ranges(lower, upper, shown)
    np.testing.assert_array_equal(shown, [True, False, True, True])
    np.testing.assert_array_equal(r.best, [1, 0, 2, 3])
    np.testing.assert_array_equal(r.worst, [1, 0, 2, 3])


def test_ties_of_bounds_do_not_separate() -> None:
    r = rank_ranges(np.array([10.0, 0.0]), np.array([20.0, 10.0]))
    np.testing.assert_array_equal(r.best, [1, 1])
    np.testing.assert_array_equal(r.worst, [2, 2])


def test_matches_quadratic_definition() -> None:
    rng = np.random.default_rng(0)
    centre = rng.normal(1000, 50, 60)
    half = rng.uniform(5, 40, 60)
    lo, hi = centre - half, centre + half
    r = rank_ranges(lo, hi)
    best = 1 + (lo[None, :] > hi[:, None]).sum(axis=1)
    worst = 60 - (hi[None, :] < lo[:, None]).sum(axis=1)
    np.testing.assert_array_equal(r.best, best)
    np.testing.assert_array_equal(r.worst, worst)
