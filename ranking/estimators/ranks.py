"""Rank ranges from score intervals, and which competitors are shown at all.

A point rank overstates what the votes know; the published rank is a range. Competitor ``i`` is
certainly behind every competitor whose *lower* bound is above ``i``'s *upper* bound, and certainly
ahead of every one whose upper bound is below ``i``'s lower bound, so

* best (upper) rank  = 1 + #{k : lower_k > upper_i}
* worst (lower) rank = n - #{k : upper_k < lower_i}

among the ``n`` shown competitors. Competitors under the vote threshold are hidden rather than
listed with huge intervals, and they do not take rank positions from the others.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray


@dataclass(frozen=True)
class RankRanges:
    """``best`` and ``worst`` rank (1 = top) per competitor; 0 for hidden competitors."""

    best: NDArray[np.int64]
    worst: NDArray[np.int64]
    shown: NDArray[np.bool_]


def shown_mask(battles: ArrayLike, min_battles: float) -> NDArray[np.bool_]:
    """Competitors with at least ``min_battles`` (weighted) battles are shown."""
    return np.asarray(battles, dtype=np.float64) >= min_battles


def rank_ranges(lower: ArrayLike, upper: ArrayLike, shown: ArrayLike | None = None) -> RankRanges:
    """Rank ranges among the shown competitors (all when ``shown`` is None); hidden get 0.

    Comparing intervals is only meaningful inside one connected component of the comparison graph;
    pass a mask selecting one component when the graph is disconnected.
    """
    lo = np.asarray(lower, dtype=np.float64)
    hi = np.asarray(upper, dtype=np.float64)
    if lo.shape != hi.shape or lo.ndim != 1:
        raise ValueError("lower and upper must be 1-d arrays of equal length")
    mask = np.ones(lo.shape[0], dtype=bool) if shown is None else np.asarray(shown, dtype=bool)
    best = np.zeros(lo.shape[0], dtype=np.int64)
    worst = np.zeros(lo.shape[0], dtype=np.int64)
    slo, shi = lo[mask], hi[mask]
    m = slo.shape[0]
    # Sorting turns the O(n^2) pairwise comparison into two searchsorted calls.
    above = m - np.searchsorted(np.sort(slo), shi, side="right")
    below = np.searchsorted(np.sort(shi), slo, side="left")
    best[mask] = 1 + above
    worst[mask] = m - below
    return RankRanges(best=best, worst=worst, shown=mask)
