"""Online Elo, its trust flags and its spread over the order of the votes."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from ranking.estimators import BOTH_BAD, LEFT_WINS, RIGHT_WINS, TIE, elo_order_spread, online_elo


def test_single_update() -> None:
    r = online_elo([0], [1], [LEFT_WINS])
    np.testing.assert_allclose(r.ratings, [1016.0, 984.0])
    r = online_elo([0], [1], [TIE])
    np.testing.assert_allclose(r.ratings, [1000.0, 1000.0])
    r = online_elo([0, 0], [1, 1], [LEFT_WINS, BOTH_BAD], both_bad="skip", k=10)
    assert r.comparisons.tolist() == [1, 1] and r.ratings[0] == pytest.approx(1005.0)


def test_time_order_is_used() -> None:
    rng = np.random.default_rng(0)
    a = rng.integers(0, 4, 200)
    b = (a + rng.integers(1, 4, 200)) % 4
    o = rng.integers(0, 3, 200)
    t = rng.permutation(200)
    order = np.argsort(t)
    shuffled = online_elo(a, b, o, time=t)
    in_order = online_elo(a[order], b[order], o[order])
    np.testing.assert_allclose(shuffled.ratings, in_order.ratings)
    assert shuffled.ratings.sum() == pytest.approx(4000.0)


def test_flags() -> None:
    # 0 and 1 trade wins for 60 battles: settled, enough comparisons.
    a = [0, 1] * 30
    b = [1, 0] * 30
    o = [LEFT_WINS] * 60
    # 2 plays 10 battles only; 3 then beats 0 twenty times in a row: it moves far.
    a += [2] * 10 + [3] * 20
    b += [1] * 10 + [0] * 20
    o += [TIE] * 10 + [LEFT_WINS] * 20
    r = online_elo(a, b, o, n_competitors=4)
    assert r.few_comparisons.tolist() == [False, False, True, True]
    assert not r.unstable[1] and not r.unstable[2]
    assert r.unstable[3] and r.recent_change[3] > 50
    assert r.unstable[0] and r.recent_change[0] < -50
    assert r.comparisons.tolist() == [80, 70, 10, 20]
    assert r.params["k"] == 32.0


def test_k_factor() -> None:
    r = online_elo([0], [1], [RIGHT_WINS], k=16, base=1500)
    np.testing.assert_allclose(r.ratings, [1492.0, 1508.0])


def test_order_spread_is_zero_when_every_order_is_the_same() -> None:
    """One pair, the same outcome every time: every order is the same sequence, so no spread."""
    a, b, o = [0] * 40, [1] * 40, [LEFT_WINS] * 40
    spread = elo_order_spread(a, b, o)
    in_order = online_elo(a, b, o).ratings
    np.testing.assert_array_equal(spread.sd, [0.0, 0.0])
    np.testing.assert_allclose(spread.low, in_order, atol=1e-9)
    np.testing.assert_allclose(spread.high, in_order, atol=1e-9)
    assert spread.permutations == 100 and spread.replayed == 40


def test_order_spread_covers_exactly_the_ratings_of_every_order() -> None:
    """Five votes among three competitors have 120 orders, each enumerated with ``online_elo``. The
    spread over 3,000 random orders reaches exactly the lowest and highest rating of those 120 (each order
    is drawn about 25 times), its mean and sd match the enumeration's to sampling error, and the two
    votes A>B, B>A give A exactly its two possible ratings, 998.53 and 1001.47."""
    a, b, o = [0, 1, 2, 0, 1], [1, 2, 0, 2, 0], [LEFT_WINS, LEFT_WINS, TIE, RIGHT_WINS, LEFT_WINS]
    every = np.array(
        [online_elo(np.take(a, p), np.take(b, p), np.take(o, p)).ratings for p in itertools.permutations(range(5))]
    )
    spread = elo_order_spread(a, b, o, permutations=3000, seed=5)
    np.testing.assert_allclose(spread.low, every.min(axis=0), atol=1e-9)
    np.testing.assert_allclose(spread.high, every.max(axis=0), atol=1e-9)
    np.testing.assert_allclose(spread.mean, every.mean(axis=0), atol=4 * every.std(axis=0).max() / np.sqrt(3000))
    np.testing.assert_allclose(spread.sd, every.std(axis=0), rtol=0.06)
    two = elo_order_spread([0, 1], [1, 0], [LEFT_WINS, LEFT_WINS])
    expected = 1016.0 - 32.0 * (1.0 - 1.0 / (1.0 + 10.0 ** ((1016.0 - 984.0) / 400.0)))
    assert two.low[0] == pytest.approx(expected) and two.high[0] == pytest.approx(2000.0 - expected)
    assert two.low[0] == pytest.approx(998.53, abs=0.01)


def test_log_order_far_outside_the_spread_over_orders() -> None:
    """A won its first 100 votes against B and lost the next 100. In log order Elo puts B about 600 points
    above A; over random orders of the same votes the two sit near 1000 with an sd near 40, and the log
    order's ratings lie beyond the whole range: the order, not the votes, made that gap."""
    a, b, o = [0] * 200, [1] * 200, [LEFT_WINS] * 100 + [RIGHT_WINS] * 100
    in_order = online_elo(a, b, o).ratings
    spread = elo_order_spread(a, b, o, seed=1)
    assert in_order[1] - in_order[0] > 550
    assert np.all(np.abs(spread.mean - 1000.0) < 15)
    assert np.all((20 < spread.sd) & (spread.sd < 60))
    assert in_order[0] < spread.low[0] and in_order[1] > spread.high[1]
    # both_bad: skipped votes are no steps at all; as ties they are half a win in every order
    with_bb = elo_order_spread(a + [0], b + [1], o + [BOTH_BAD], both_bad="skip", seed=1)
    np.testing.assert_allclose(with_bb.sd, spread.sd)
    assert with_bb.params["votes"] == 200


def test_order_spread_of_a_long_log_replays_each_orders_tail() -> None:
    """Replaying each order's last 1,000 of 3,000 votes from the base gives the spread of the full replay:
    Elo (K = 32) has forgotten its start after a few hundred of a competitor's games. Six competitors,
    Bradley-Terry votes; the sds agree to the sampling error of an sd over 100 orders (about 7%)."""
    rng = np.random.default_rng(3)
    strength = np.linspace(-1.0, 1.0, 6)
    a = rng.integers(0, 6, 3000)
    b = (a + rng.integers(1, 6, 3000)) % 6
    o = np.where(rng.random(3000) < 1.0 / (1.0 + np.exp(strength[b] - strength[a])), LEFT_WINS, RIGHT_WINS)
    full = elo_order_spread(a, b, o, n_competitors=6)
    tail = elo_order_spread(a, b, o, n_competitors=6, max_replay=1000)
    assert full.replayed == 3000 and tail.replayed == 1000 and tail.params["votes"] == 3000
    np.testing.assert_allclose(tail.sd, full.sd, rtol=0.25)
    np.testing.assert_allclose(tail.mean, full.mean, atol=15.0)
    with pytest.raises(ValueError):
        elo_order_spread(a, b, o, permutations=1)
