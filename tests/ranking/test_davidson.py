"""Davidson ties: the tie parameter is recovered with an interval that covers it, the strengths too,
and the model's gaps differ from the half-win model's in the direction ties push them."""

from __future__ import annotations

import numpy as np
import pytest

from ranking.estimators import SCALE, Cells, aggregate_cells, fit_bradley_terry
from ranking.estimators.davidson import fit_davidson, simulate_davidson
from ranking.estimators.synthetic import random_pairs as random_pairs_for_tests


def _board(seed: int, nu: float, m: int = 3000, n: int = 6) -> tuple[np.ndarray, Cells]:
    rng = np.random.default_rng(seed)
    theta = np.linspace(-0.8, 0.8, n)
    a, b = random_pairs_for_tests(rng, n, m)
    o = simulate_davidson(rng, theta, nu, a, b)
    return theta, aggregate_cells(a, b, o, n_competitors=n)


def test_recovers_a_known_tie_parameter() -> None:
    theta, cells = _board(0, nu=0.8)
    fit = fit_davidson(cells)
    assert fit.converged
    assert fit.nu_lower < 0.8 < fit.nu_upper and abs(fit.nu - 0.8) < 0.1
    truth = SCALE * (theta - theta.mean()) + 1000
    assert np.all((fit.lower < truth) & (truth < fit.upper))
    assert abs(fit.tie_probability_at_equal_strength - fit.nu / (2 + fit.nu)) < 1e-12


def test_tie_parameter_interval_covers() -> None:
    hits, strengths = 0, np.zeros(6)
    reps = 60
    for seed in range(reps):
        theta, cells = _board(100 + seed, nu=0.6, m=1500)
        fit = fit_davidson(cells)
        hits += fit.nu_lower <= 0.6 <= fit.nu_upper
        truth = SCALE * (theta - theta.mean()) + 1000
        strengths += (fit.lower <= truth) & (truth <= fit.upper)
    assert hits / reps >= 0.9 and (strengths / reps >= 0.9).all()


def test_half_win_shrinks_gaps_that_davidson_keeps() -> None:
    """With 40% ties the half-win model pulls every gap toward even; Davidson recovers the true gap."""
    theta, cells = _board(7, nu=1.4, m=6000)
    dav, half = fit_davidson(cells), fit_bradley_terry(cells)
    true_gap = SCALE * (theta[-1] - theta[0])
    assert abs((dav.scores[-1] - dav.scores[0]) - true_gap) < 60
    assert (half.scores[-1] - half.scores[0]) < 0.8 * true_gap


def test_no_ties_is_refused() -> None:
    cells = aggregate_cells(np.array([0, 1]), np.array([1, 0]), np.array([0, 0]))
    with pytest.raises(ValueError, match="no ties"):
        fit_davidson(cells)


def test_board_records_the_tie_model_and_its_parameter() -> None:
    from ranking.compute import Method, board_compute
    from ranking.policy import VoteArrays

    rng = np.random.default_rng(3)
    m, n = 2000, 4
    a, b = random_pairs_for_tests(rng, n, m)
    o = simulate_davidson(rng, np.linspace(-0.5, 0.5, n), 1.0, a, b)
    z = np.zeros(m, dtype=np.int64)
    votes = VoteArrays(
        vote_id=np.arange(m),
        left=a + 10,
        right=b + 10,
        outcome=o,
        decision_ms=z + 5000,
        rater=z,
        prompt=z,
        category=z,
        categories=("",),
        identity=np.zeros(m, dtype=bool),
        style_left=np.ones((m, 4)),
        style_right=np.ones((m, 4)),
    )
    ids = np.arange(10, 10 + n)
    dav = board_compute(votes, ids, {}, Method(ties="davidson", interval="sandwich"))
    half = board_compute(votes, ids, {}, Method(interval="sandwich"))
    tp = dav.extra["tie_parameter"]
    assert tp["lower"] < 1.0 < tp["upper"]
    assert Method(ties="davidson").as_dict(view="raw")["ties"].startswith("Davidson")
    gap = {name: board.rows[0]["score"] - board.rows[-1]["score"] for name, board in (("dav", dav), ("half", half))}
    assert gap["dav"] > gap["half"] * 1.2  # ~33% ties: half a win shrinks the gaps visibly
    assert all(r["interval_method"] == "fisher" for r in dav.rows)
