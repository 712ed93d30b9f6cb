"""The recompute's map from the log's competitor keys to codes 0..n-1: both paths (a lookup table over
the keys' span, a binary search for a sparse set of keys) give the same codes, and a vote naming a key
outside the competitor list is refused on either path, never mapped onto a neighbour."""

from __future__ import annotations

import numpy as np
import pytest

from ranking import compute
from ranking.compute import competitor_codes


@pytest.fixture(params=["lookup", "search"])
def path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    # The search path is the one for keys spread wider than the table's span: force it by a span of 0.
    if request.param == "search":
        monkeypatch.setattr(compute, "_LOOKUP_SPAN", 0)
    return str(request.param)


def test_keys_map_to_their_positions_in_the_sorted_list(path: str) -> None:
    rng = np.random.default_rng(3)
    ids = np.cumsum(rng.integers(1, 40, 60)).astype(np.int64) + 500
    a, b = rng.integers(0, 60, 5000), rng.integers(0, 60, 5000)
    left, right = competitor_codes(ids[a], ids[b], ids)
    assert np.array_equal(left, a) and np.array_equal(right, b)
    assert left.dtype == np.int64 and right.dtype == np.int64


@pytest.mark.parametrize("stranger", [499, 10**9, None], ids=["below", "above", "in a gap"])
def test_a_key_not_in_the_list_is_refused(path: str, stranger: int | None) -> None:
    ids = np.array([500, 507, 530, 531], dtype=np.int64)
    key = 520 if stranger is None else stranger  # 520 lies between two competitors' keys
    ok = np.array([500, 531], dtype=np.int64)
    with pytest.raises(ValueError, match="not in competitor_ids"):
        competitor_codes(ok, np.array([507, key], dtype=np.int64), ids)
    with pytest.raises(ValueError, match="not in competitor_ids"):
        competitor_codes(np.array([key, 507], dtype=np.int64), ok, ids)


def test_unsorted_or_repeated_ids_are_refused(path: str) -> None:
    one = np.array([1], dtype=np.int64)
    for ids in ([3, 1, 2], [1, 1, 2]):
        with pytest.raises(ValueError, match="sorted and unique"):
            competitor_codes(one, one, np.array(ids, dtype=np.int64))


def test_no_votes_and_no_competitors(path: str) -> None:
    empty = np.zeros(0, dtype=np.int64)
    left, right = competitor_codes(empty, empty, np.array([4, 9], dtype=np.int64))
    assert left.size == 0 and right.size == 0
    left, right = competitor_codes(empty, empty, empty)
    assert left.size == 0 and right.size == 0
    with pytest.raises(ValueError, match="not in competitor_ids"):
        competitor_codes(np.array([4], dtype=np.int64), np.array([4], dtype=np.int64), empty)


def test_fractional_or_non_finite_keys_are_refused_whole_floats_map(path: str) -> None:
    ids = np.array([500, 507, 530], dtype=np.int64)
    for bad in (507.5, np.nan, np.inf):
        with pytest.raises(ValueError, match="whole numbers"):
            competitor_codes(np.array([500.0, bad]), np.array([507, 530], dtype=np.int64), ids)
    left, right = competitor_codes(np.array([507.0, 530.0]), np.array([500, 507], dtype=np.int64), ids)
    assert left.tolist() == [1, 2] and right.tolist() == [0, 1] and left.dtype == np.int64
