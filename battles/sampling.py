"""Which pair a rater sees next: weights for the campaign's sampling policy (pure Python, no Django).

Active sampling spends votes where they decide the top of the leaderboard. The *leader* is the placed
competitor whose score interval has the highest midpoint; a competitor's *closeness* to it is the overlap
of its interval with the leader's (the leader's own is 1). A pair weighs the floor plus the product of its
two closenesses: the leader against a challenger it overlaps, and two challengers that both overlap it,
get the battles; a pair with someone the leader is already clear of gets only the floor, so that every
pair keeps being checked; a competitor without an interval yet (new, or under the vote threshold) gets a
boost until the leaderboard can place it.

Why this rule, and not more battles wherever two intervals overlap (the rule before): on a simulated
campaign with a known truth (``benchmarks/sampling.py``) the overlap-anywhere rule spread its votes over
the undecided middle of the table and needed more votes than uniform sampling to separate the leader
(median 2,150 against 1,550 over 200 campaigns; the leader in 15% of the votes against 25%); this one
needs fewer (1,200, the leader in 34%)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

# Stated parameters of the active policy.
ACTIVE_FLOOR = 0.1  # every pair keeps at least this weight (a pair with the leader weighs up to 1 + floor)
ACTIVE_NEW_BOOST = 2.0  # weight of a pair with a competitor the leaderboard cannot place yet


def interval_overlap(a: tuple[float, float], b: tuple[float, float]) -> float:
    """Overlap of two intervals as a fraction of the narrower one: 1 when one contains the other,
    0 when they are disjoint."""
    width = min(a[1] - a[0], b[1] - b[0])
    shared = min(a[1], b[1]) - max(a[0], b[0])
    if width <= 0:
        return 1.0 if shared >= 0 else 0.0
    return max(0.0, min(1.0, shared / width))


def interval_leader(intervals: Mapping[int, tuple[float, float]]) -> int | None:
    """The placed competitor whose interval has the highest midpoint (the smaller id on a tie); None
    when none is placed."""
    if not intervals:
        return None
    return max(sorted(intervals), key=lambda c: intervals[c][0] + intervals[c][1])


def active_pair_weights(
    competitors: Sequence[int],
    intervals: Mapping[int, tuple[float, float]],
    *,
    floor: float = ACTIVE_FLOOR,
    new_boost: float = ACTIVE_NEW_BOOST,
) -> list[float]:
    """Weights for every unordered pair ``(competitors[i], competitors[j])``, i < j, in that order."""
    leader = interval_leader({c: intervals[c] for c in competitors if c in intervals})
    closeness = {
        c: 1.0 if c == leader else interval_overlap(intervals[c], intervals[leader])
        for c in competitors
        if c in intervals and leader is not None
    }
    weights = []
    for i, first in enumerate(competitors):
        for second in competitors[i + 1 :]:
            if first not in closeness or second not in closeness:
                weights.append(new_boost)
            else:
                weights.append(floor + closeness[first] * closeness[second])
    return weights
