"""Which pair a rater sees next: weights for the campaign's sampling policy (pure Python, no Django).

Active sampling spends votes where they change the ranking: a pair whose score intervals overlap
is undecided, so it gets more battles; a pair already far apart gets only a floor, so that every
pair keeps being checked; a competitor without an interval yet (new, or under the vote threshold)
gets a boost until the leaderboard can place it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

# Stated parameters of the active policy.
ACTIVE_FLOOR = 0.1  # every pair keeps at least this weight (one overlapping pair weighs up to 1 + floor)
ACTIVE_NEW_BOOST = 2.0  # weight of a pair with a competitor the leaderboard cannot place yet


def interval_overlap(a: tuple[float, float], b: tuple[float, float]) -> float:
    """Overlap of two intervals as a fraction of the narrower one: 1 when one contains the other,
    0 when they are disjoint."""
    width = min(a[1] - a[0], b[1] - b[0])
    shared = min(a[1], b[1]) - max(a[0], b[0])
    if width <= 0:
        return 1.0 if shared >= 0 else 0.0
    return max(0.0, min(1.0, shared / width))


def active_pair_weights(
    competitors: Sequence[int],
    intervals: Mapping[int, tuple[float, float]],
    *,
    floor: float = ACTIVE_FLOOR,
    new_boost: float = ACTIVE_NEW_BOOST,
) -> list[float]:
    """Weights for every unordered pair ``(competitors[i], competitors[j])``, i < j, in that order."""
    weights = []
    for i, first in enumerate(competitors):
        for second in competitors[i + 1 :]:
            if first not in intervals or second not in intervals:
                weights.append(new_boost)
            else:
                weights.append(floor + interval_overlap(intervals[first], intervals[second]))
    return weights
