"""Online Elo and its trust flags."""

from __future__ import annotations

import numpy as np
import pytest

from ranking.estimators import BOTH_BAD, LEFT_WINS, RIGHT_WINS, TIE, online_elo


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
