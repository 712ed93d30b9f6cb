"""Bradley-Terry on cells: closed forms, invariances, priors, disconnected graphs."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ranking.estimators import (
    BOTH_BAD,
    LEFT_WINS,
    RIGHT_WINS,
    TIE,
    aggregate_cells,
    fit_bradley_terry,
)


def battles(*groups: tuple[int, int, int, int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(a, b, outcome, repeat) groups -> arrays."""
    a = np.concatenate([np.full(k, x) for x, _, _, k in groups])
    b = np.concatenate([np.full(k, y) for _, y, _, k in groups])
    o = np.concatenate([np.full(k, z) for _, _, z, k in groups])
    return a, b, o


def fit(a, b, o, n=None, **kw):
    return fit_bradley_terry(aggregate_cells(a, b, o, n_competitors=n), **kw)


@pytest.mark.parametrize(("w", "n_lost"), [(30, 10), (7, 13), (1, 1), (55, 3)])
def test_two_competitors_closed_form(w: int, n_lost: int) -> None:
    a, b, o = battles((0, 1, LEFT_WINS, w), (1, 0, LEFT_WINS, n_lost))
    res = fit(a, b, o, prior_games=0)
    assert res.scores[0] - res.scores[1] == pytest.approx(400 * np.log10(w / n_lost), abs=1e-6)
    assert res.scores.mean() == pytest.approx(1000.0, abs=1e-9)
    assert res.converged


def test_default_prior_barely_moves_a_well_measured_pair() -> None:
    a, b, o = battles((0, 1, LEFT_WINS, 300), (0, 1, RIGHT_WINS, 100))
    gap = np.diff(fit(a, b, o).scores[::-1])[0]
    assert gap == pytest.approx(400 * np.log10(3), rel=0.01)
    assert gap < 400 * np.log10(3)


def test_ties_count_half_and_pull_together() -> None:
    a, b, o = battles((0, 1, LEFT_WINS, 30), (0, 1, RIGHT_WINS, 10))
    a2, b2, o2 = battles((0, 1, LEFT_WINS, 30), (0, 1, RIGHT_WINS, 10), (1, 0, TIE, 20))
    gap = np.ptp(fit(a, b, o, prior_games=0).scores)
    gap_t = fit(a2, b2, o2, prior_games=0).scores
    assert gap_t[0] - gap_t[1] == pytest.approx(400 * np.log10(40 / 20), abs=1e-6)
    assert gap_t[0] - gap_t[1] < gap


def test_both_bad_policy_is_recorded_and_applied() -> None:
    a, b, o = battles((0, 1, LEFT_WINS, 30), (0, 1, RIGHT_WINS, 10), (0, 1, BOTH_BAD, 20))
    a_t, b_t, o_t = battles((0, 1, LEFT_WINS, 30), (0, 1, RIGHT_WINS, 10), (0, 1, TIE, 20))
    a_d, b_d, o_d = battles((0, 1, LEFT_WINS, 30), (0, 1, RIGHT_WINS, 10))
    as_tie = fit(a, b, o)
    dropped = fit(a, b, o, both_bad="drop")
    assert as_tie.params.both_bad == "tie" and dropped.params.both_bad == "drop"
    np.testing.assert_allclose(as_tie.scores, fit(a_t, b_t, o_t).scores, atol=1e-9)
    np.testing.assert_allclose(dropped.scores, fit(a_d, b_d, o_d).scores, atol=1e-9)
    with pytest.raises(ValueError):
        fit(a, b, o, both_bad="maybe")


def test_reference_competitor_pinned_to_1000() -> None:
    a, b, o = battles((0, 1, LEFT_WINS, 30), (1, 2, LEFT_WINS, 20), (2, 0, LEFT_WINS, 5), (1, 0, LEFT_WINS, 9))
    free = fit(a, b, o)
    pinned = fit(a, b, o, reference=2)
    assert pinned.scores[2] == 1000.0
    np.testing.assert_allclose(np.diff(free.scores), np.diff(pinned.scores), atol=1e-9)
    assert pinned.params.reference == 2


def test_no_wins_no_losses_and_no_battles_are_finite() -> None:
    # 2 never wins, 3 never loses, 4 never plays.
    a, b, o = battles(
        (0, 1, LEFT_WINS, 10),
        (1, 0, LEFT_WINS, 8),
        (0, 2, LEFT_WINS, 12),
        (2, 1, RIGHT_WINS, 9),
        (3, 0, LEFT_WINS, 6),
        (1, 3, RIGHT_WINS, 7),
    )
    res = fit(a, b, o, n=5)
    assert np.all(np.isfinite(res.scores))
    assert res.scores[2] == res.scores[:4].min()
    assert res.scores[3] == res.scores[:4].max()
    assert res.n_components == 2 and res.scores[4] == 1000.0


def test_disconnected_graph_reported_and_normalised_per_component() -> None:
    a, b, o = battles((0, 1, LEFT_WINS, 10), (1, 0, LEFT_WINS, 5), (2, 3, LEFT_WINS, 3), (3, 2, LEFT_WINS, 9))
    res = fit(a, b, o, prior_games=0)
    assert res.n_components == 2 and not res.connected
    assert res.components[0] == res.components[1] != res.components[2] == res.components[3]
    assert res.scores[:2].mean() == pytest.approx(1000) and res.scores[2:].mean() == pytest.approx(1000)
    assert res.scores[0] - res.scores[1] == pytest.approx(400 * np.log10(2), abs=1e-6)


def test_bad_input_rejected() -> None:
    with pytest.raises(ValueError):
        aggregate_cells([0, 1], [1], [0, 0])
    with pytest.raises(ValueError):
        aggregate_cells([0], [0], [0])
    with pytest.raises(ValueError):
        aggregate_cells([0], [1], [7])
    with pytest.raises(ValueError):
        aggregate_cells([0], [3], [0], n_competitors=2)
    with pytest.raises(ValueError):
        aggregate_cells([0], [1], [0], weight=[-1.0])


def test_weights_equal_repeats() -> None:
    a, b, o = (
        np.array([0, 1, 2, 0]),
        np.array([1, 2, 0, 2]),
        np.array([LEFT_WINS, TIE, RIGHT_WINS, LEFT_WINS]),
    )
    w = np.array([3.0, 2.0, 1.0, 4.0])
    rep = np.repeat(np.arange(4), w.astype(int))
    weighted = fit_bradley_terry(aggregate_cells(a, b, o, w))
    repeated = fit(a[rep], b[rep], o[rep])
    np.testing.assert_allclose(weighted.scores, repeated.scores, atol=1e-9)


battle_lists = st.lists(
    st.tuples(st.integers(0, 4), st.integers(1, 4), st.sampled_from([LEFT_WINS, RIGHT_WINS, TIE, BOTH_BAD])),
    min_size=1,
    max_size=40,
)


def to_arrays(rows: list[tuple[int, int, int]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    a = np.array([r[0] for r in rows])
    b = (a + np.array([r[1] for r in rows])) % 5
    return a, b, np.array([r[2] for r in rows])


@settings(max_examples=60, deadline=None)
@given(battle_lists, st.randoms(use_true_random=False))
def test_invariant_to_battle_order_and_side_swap(rows: list[tuple[int, int, int]], rnd) -> None:
    a, b, o = to_arrays(rows)
    base = fit(a, b, o, n=5).scores
    perm = np.array(rnd.sample(range(len(a)), len(a)))
    np.testing.assert_array_equal(fit(a[perm], b[perm], o[perm], n=5).scores, base)
    flipped = np.where(o == LEFT_WINS, RIGHT_WINS, np.where(o == RIGHT_WINS, LEFT_WINS, o))
    np.testing.assert_array_equal(fit(b, a, flipped, n=5).scores, base)


@settings(max_examples=60, deadline=None)
@given(battle_lists, st.integers(0, 4), st.integers(1, 4))
def test_adding_a_win_never_lowers_the_winner(rows: list[tuple[int, int, int]], x: int, shift: int) -> None:
    """A win never lowers the winner's gap to anyone it is compared with. (Its level can move with the
    centre: a newcomer's first win may bring it into the centre that defines 1000.)"""
    a, b, o = to_arrays(rows)
    first = fit(a, b, o, n=5)
    second = fit(np.append(a, x), np.append(b, (x + shift) % 5), np.append(o, LEFT_WINS), n=5)
    before, after = first.scores, second.scores
    # Gaps are only defined within a connected group (across groups each is centred on its own).
    same = (first.components == first.components[x]) & (second.components == second.components[x])
    assert np.all(((after[x] - after) >= (before[x] - before) - 1e-7)[same])


def test_no_battles_at_all() -> None:
    from ranking.estimators import bootstrap_intervals, sandwich_intervals

    cells = aggregate_cells([], [], [], n_competitors=3)
    res = fit_bradley_terry(cells)
    np.testing.assert_array_equal(res.scores, [1000.0] * 3)
    assert res.n_components == 3
    np.testing.assert_array_equal(bootstrap_intervals(cells, res, rounds=3).lower, [1000.0] * 3)
    np.testing.assert_array_equal(sandwich_intervals(cells, res).se, [0.0] * 3)
