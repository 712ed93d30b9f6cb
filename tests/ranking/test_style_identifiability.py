"""Style identifiability: aliased and collinear features are dropped or the view withheld, separation
is reported, and no competitor other than the anchor gets a zero-width interval."""

from __future__ import annotations

import numpy as np
import pytest

from ranking.compute import Method, board_compute
from ranking.estimators import ALIASED_REASON, fit_style, style_checks, style_design
from ranking.estimators.synthetic import random_pairs, simulate_bt, simulate_style_counts
from ranking.policy import VoteArrays


def _votes(a: np.ndarray, b: np.ndarray, o: np.ndarray, left: np.ndarray, right: np.ndarray) -> VoteArrays:
    m = a.shape[0]
    z = np.zeros(m, dtype=np.int64)
    return VoteArrays(
        vote_id=np.arange(m),
        left=a + 1,
        right=b + 1,
        outcome=o,
        decision_ms=z + 5000,
        rater=z,
        prompt=np.arange(m),
        category=z,
        categories=("",),
        identity=np.zeros(m, dtype=bool),
        style_left=left,
        style_right=right,
    )


def _demo_like(m: int = 400, seed: int = 0) -> tuple[np.ndarray, ...]:
    """Three competitors, each with a constant style (one always writes headers and lists)."""
    rng = np.random.default_rng(seed)
    a, b = random_pairs(rng, 3, m)
    style = np.array([[300, 3, 6, 2], [120, 0, 0, 0], [200, 1, 2, 1]], dtype=float)
    sim = simulate_bt(rng, np.array([0.4, -0.3, 0.0]), m, a=a, b=b)
    return a, b, sim.outcome, style[a], style[b]


def test_constant_style_per_competitor_withholds_the_view() -> None:
    a, b, o, left, right = _demo_like()
    sd = style_design(a, b, o, left, right, n_competitors=3)
    checks = style_checks(sd)
    assert not checks.identified and all(reason == ALIASED_REASON for _, reason in checks.dropped)
    board = board_compute(_votes(a, b, o, left, right), np.array([1, 2, 3]), {}, Method(min_votes=10), view="style")
    assert board.extra["style_withheld"] == ALIASED_REASON
    assert all(row["hidden"] and "score" not in row for row in board.rows)


def test_identical_features_drop_the_second_and_name_the_first() -> None:
    rng = np.random.default_rng(1)
    m = 3000
    a, b = random_pairs(rng, 6, m)
    left, right = simulate_style_counts(rng, m), simulate_style_counts(rng, m)
    left[:, 3], right[:, 3] = left[:, 1], right[:, 1]  # "bold" is a copy of "headers"
    sim = simulate_bt(rng, rng.normal(0, 0.5, 6), m, a=a, b=b)
    sd = style_design(a, b, sim.outcome, left, right, n_competitors=6)
    checks = style_checks(sd)
    assert checks.kept == (0, 1, 2)
    assert checks.dropped == (("bold", "collinear with tokens, headers, list_items"),)
    board = board_compute(
        _votes(a, b, sim.outcome, left, right), np.arange(1, 7), {}, Method(min_votes=10), view="style"
    )
    assert "style_withheld" not in board.extra
    assert [c["feature"] for c in board.extra["style_coefficients"]] == ["tokens", "headers", "list_items"]
    shown = [r for r in board.rows if not r["hidden"]]
    assert all(r["upper"] - r["lower"] > 1 for r in shown)
    assert board.extra["style_checks"]["dropped"] == [
        {"feature": "bold", "reason": "collinear with tokens, headers, list_items"}
    ]


def test_separable_style_is_reported_not_converged() -> None:
    """The longer answer always wins: the length coefficient has no finite estimate."""
    rng = np.random.default_rng(2)
    m = 600
    a, b = random_pairs(rng, 4, m)
    left, right = simulate_style_counts(rng, m), simulate_style_counts(rng, m)
    o = np.where(left[:, 0] > right[:, 0], 0, 1)
    sd = style_design(a, b, o, left, right, n_competitors=4)
    assert style_checks(sd).identified
    fit = fit_style(sd)
    assert fit.separated and not fit.converged
    board = board_compute(_votes(a, b, o, left, right), np.arange(1, 5), {}, Method(min_votes=10), view="style")
    assert "predicts the winner" in board.extra["style_withheld"]
    assert board.extra["style_checks"]["separated"] is True


def test_well_behaved_style_fit_is_not_flagged() -> None:
    rng = np.random.default_rng(3)
    m = 4000
    a, b = random_pairs(rng, 8, m)
    left, right = simulate_style_counts(rng, m), simulate_style_counts(rng, m)
    sd = style_design(a, b, simulate_bt(rng, rng.normal(0, 0.5, 8), m, a=a, b=b).outcome, left, right, n_competitors=8)
    checks = style_checks(sd)
    assert checks.kept == (0, 1, 2, 3) and checks.dropped == () and checks.condition < 100
    fit = fit_style(sd)
    assert fit.converged and not fit.separated


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_non_finite_style_counts_are_rejected(bad: float) -> None:
    a, b, o, left, right = _demo_like(20)
    left = left.copy()
    left[3, 1] = bad
    with pytest.raises(ValueError, match="finite"):
        style_design(a, b, o, left, right, n_competitors=3)


@pytest.mark.parametrize("ids", [[0.0, 1.5], [0.0, np.nan], ["0", "1"]])
def test_fractional_competitor_ids_are_rejected(ids: list) -> None:
    from ranking.estimators import aggregate_cells

    with pytest.raises(ValueError, match="competitor ids"):
        aggregate_cells(np.array(ids), np.array([1, 0]), np.array([0, 1]))


def test_whole_float_ids_are_accepted() -> None:
    from ranking.estimators import aggregate_cells

    assert aggregate_cells(np.array([0.0, 1.0]), np.array([1, 0]), np.array([0, 1])).n_battles == 2


def test_young_demo_campaign_never_claims_zero_width() -> None:
    """23 votes among three competitors with a constant style each (the demo): over many seeds no
    shown competitor gets a zero-width interval in the raw view, and the style view is withheld."""
    style = np.array([[300, 3, 6, 2], [120, 0, 0, 0], [200, 1, 2, 1]], dtype=float)
    for seed in range(25):
        rng = np.random.default_rng(seed)
        a, b = random_pairs(rng, 3, 23)
        o = rng.choice([0, 1, 2, 3], 23, p=[0.45, 0.3, 0.2, 0.05])
        votes = _votes(a, b, o, style[a], style[b])
        raw = board_compute(votes, np.array([1, 2, 3]), {}, Method(min_votes=1, rounds=50))
        for row in raw.rows:
            lower = -np.inf if row["lower"] is None else row["lower"]
            upper = np.inf if row["upper"] is None else row["upper"]
            assert upper - lower > 1, (seed, row)
        style_board = board_compute(votes, np.array([1, 2, 3]), {}, Method(min_votes=1, rounds=50), view="style")
        assert style_board.extra["style_withheld"] == ALIASED_REASON
