"""Pairwise summaries: win rates, Wilson intervals, exact binomial tests, tie rates, planning and
intransitivity.

These are the model-free views next to Bradley-Terry: they show what the raw votes say about one
pair, and they are what a reader checks when the model's ranking looks surprising.

Conventions: the win rate counts a tie as half a win each side (as the BT fit does), both_bad as a
tie by default or dropped. The exact binomial test compares decisive battles only (ties and
both_bad excluded) against 0.5, since a tie carries no direction. Win rates, Wilson intervals and
rates use the (weighted) sums; the exact test needs integers and so uses the raw battle counts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike, NDArray
from scipy.sparse.csgraph import connected_components
from scipy.special import betaln
from scipy.stats import binom, binomtest, norm

from .aggregate import BOTH_BAD, LEFT_WINS, RIGHT_WINS, TIE, Cells, weighted_bincount


@dataclass(frozen=True)
class PairwiseTable:
    """n x n pairwise summaries; row i, column j is "i against j".

    ``wins[i, j]``: (weighted) battles i won against j; ``ties``, ``both_bad`` and ``battles`` are
    symmetric. ``win_rate`` counts ties (and both_bad, when counted as ties) half; NaN where the
    pair never met. ``wilson_lower``/``wilson_upper`` bound ``win_rate``. ``p_value`` is the exact
    two-sided binomial test of decisive wins vs 0.5 (NaN without decisive battles).
    ``competitor_tie_rate``/``competitor_both_bad_rate`` are over all of a competitor's battles.
    """

    wins: NDArray[np.float64]
    ties: NDArray[np.float64]
    both_bad: NDArray[np.float64]
    battles: NDArray[np.float64]
    win_rate: NDArray[np.float64]
    wilson_lower: NDArray[np.float64]
    wilson_upper: NDArray[np.float64]
    p_value: NDArray[np.float64]
    tie_rate: NDArray[np.float64]
    both_bad_rate: NDArray[np.float64]
    competitor_tie_rate: NDArray[np.float64]
    competitor_both_bad_rate: NDArray[np.float64]
    params: Mapping[str, object] = field(default_factory=dict)


def _z(confidence: float) -> float:
    if not 0.0 < confidence < 1.0:
        raise ValueError("confidence must lie strictly between 0 and 1")
    return float(norm.ppf(0.5 + confidence / 2.0))


def wilson_interval(
    successes: ArrayLike, n: ArrayLike, *, confidence: float = 0.95
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Wilson score interval for a proportion (vectorised; NaN where ``n == 0``).

    Unlike the Wald interval p +- z sqrt(p(1-p)/n) it never leaves [0, 1] and keeps near-nominal
    coverage for small n and for rates near 0 or 1 - common for lopsided pairs early in a campaign.
    Fractional successes (ties counted half) are accepted.
    """
    z = _z(confidence)
    s = np.asarray(successes, dtype=np.float64)
    m = np.asarray(n, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        p = s / m
        denom = 1.0 + z * z / m
        centre = (p + z * z / (2.0 * m)) / denom
        half = z / denom * np.sqrt(p * (1.0 - p) / m + z * z / (4.0 * m * m))
    lower = np.where(m > 0, np.clip(centre - half, 0.0, 1.0), np.nan)
    upper = np.where(m > 0, np.clip(centre + half, 0.0, 1.0), np.nan)
    return lower, upper


def binomial_test(wins: int, losses: int) -> float:
    """Exact two-sided binomial test of ``wins`` out of ``wins + losses`` against 0.5 (scipy)."""
    if wins + losses == 0:
        return float("nan")
    return float(binomtest(int(wins), int(wins + losses), 0.5, alternative="two-sided").pvalue)


def binomial_test_p(wins: ArrayLike, losses: ArrayLike) -> NDArray[np.float64]:
    """Vectorised ``binomial_test``: for p = 0.5 the distribution is symmetric, so scipy's two-sided
    p-value (sum of outcomes no more likely than the observed) is ``min(1, 2 P(X <= min(k, n-k)))``.
    """
    w = np.asarray(wins, dtype=np.int64)
    n = w + np.asarray(losses, dtype=np.int64)
    k = np.minimum(w, n - w)
    with np.errstate(invalid="ignore"):
        p = np.minimum(1.0, 2.0 * binom.cdf(k, n, 0.5))
    return np.where(n > 0, p, np.nan)


def pairwise_table(
    cells: Cells, *, both_bad: Literal["tie", "drop"] = "tie", confidence: float = 0.95
) -> PairwiseTable:
    """All pairwise summaries from aggregated cells (see the module docstring)."""
    if both_bad not in ("tie", "drop"):
        raise ValueError("both_bad must be 'tie' or 'drop'")
    n = cells.n_competitors

    def mat(mask: NDArray[np.bool_], values: NDArray[np.float64], lo_row: bool) -> NDArray[np.float64]:
        r, c = (cells.lo, cells.hi) if lo_row else (cells.hi, cells.lo)
        flat = weighted_bincount(r[mask] * n + c[mask], values[mask], minlength=n * n)
        return flat.reshape(n, n)

    w = cells.weight
    cnt = cells.count.astype(np.float64)
    o = cells.outcome
    wins = mat(o == LEFT_WINS, w, True) + mat(o == RIGHT_WINS, w, False)
    ties_half = mat(o == TIE, w, True)
    ties = ties_half + ties_half.T
    bb_half = mat(o == BOTH_BAD, w, True)
    bb = bb_half + bb_half.T
    battles = wins + wins.T + ties + bb
    counted_ties = ties + (bb if both_bad == "tie" else 0.0)
    counted = wins + wins.T + counted_ties
    score = wins + counted_ties / 2.0
    with np.errstate(invalid="ignore", divide="ignore"):
        win_rate = np.where(counted > 0, score / counted, np.nan)
        tie_rate = np.where(battles > 0, ties / battles, np.nan)
        bb_rate = np.where(battles > 0, bb / battles, np.nan)
    lower, upper = wilson_interval(score, counted, confidence=confidence)
    wins_n = mat(o == LEFT_WINS, cnt, True) + mat(o == RIGHT_WINS, cnt, False)
    p_value = binomial_test_p(wins_n, wins_n.T)
    per_battles = battles.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        comp_tie = np.where(per_battles > 0, ties.sum(axis=1) / per_battles, np.nan)
        comp_bb = np.where(per_battles > 0, bb.sum(axis=1) / per_battles, np.nan)
    params = {"both_bad": both_bad, "ties": "half_win_each", "confidence": confidence}
    return PairwiseTable(
        wins=wins,
        ties=ties,
        both_bad=bb,
        battles=battles,
        win_rate=win_rate,
        wilson_lower=lower,
        wilson_upper=upper,
        p_value=p_value,
        tie_rate=tie_rate,
        both_bad_rate=bb_rate,
        competitor_tie_rate=comp_tie,
        competitor_both_bad_rate=comp_bb,
        params=params,
    )


# --- sample-size planning -------------------------------------------------------------------------


def battles_for_margin(
    margin: float,
    *,
    confidence: float = 0.95,
    p: float = 0.5,
    method: Literal["normal", "wilson"] = "normal",
) -> int:
    """Battles needed so a win-rate interval has half-width at most ``margin`` when the rate is ``p``.

    ``normal``: ``n = ceil(z^2 p (1 - p) / margin^2)`` (p = 0.5 is the worst case, hence the
    default). ``wilson``: the smallest n whose Wilson half-width at observed rate p is <= margin
    (slightly fewer, about ``z^2`` less at p = 0.5), found by bisection since it decreases in n.
    """
    if not 0.0 < margin < 0.5 or not 0.0 <= p <= 1.0:
        raise ValueError("need 0 < margin < 0.5 and 0 <= p <= 1")
    z = _z(confidence)
    n_normal = max(1, int(np.ceil(z * z * p * (1.0 - p) / (margin * margin) - 1e-9)))
    if method == "normal":
        return n_normal
    if method != "wilson":
        raise ValueError("method must be 'normal' or 'wilson'")

    def half(n: int) -> float:
        denom = 1.0 + z * z / n
        return z / denom * float(np.sqrt(p * (1.0 - p) / n + z * z / (4.0 * n * n)))

    lo, hi = 1, max(n_normal, 1)
    while half(hi) > margin:
        hi *= 2
    while lo < hi:
        mid = (lo + hi) // 2
        if half(mid) <= margin:
            hi = mid
        else:
            lo = mid + 1
    return lo


def battles_for_power(p1: float, *, power: float = 0.8, alpha: float = 0.05, p0: float = 0.5) -> int:
    """Decisive battles needed to detect a true win rate ``p1`` against ``p0`` (default 0.5).

    Normal approximation to the two-sided level-``alpha`` binomial test:
    ``n = ((z_{1-alpha/2} sqrt(p0 q0) + z_{power} sqrt(p1 q1)) / (p1 - p0))^2``, rounded up.
    Ties are not decisive: divide by (1 - tie rate) for the battles to schedule.
    """
    if not 0.0 < p1 < 1.0 or p1 == p0 or not 0.0 < power < 1.0 or not 0.0 < alpha < 1.0:
        raise ValueError("need 0 < p1 < 1, p1 != p0, 0 < power < 1, 0 < alpha < 1")
    za = float(norm.ppf(1.0 - alpha / 2.0))
    zb = float(norm.ppf(power))
    n = ((za * np.sqrt(p0 * (1 - p0)) + zb * np.sqrt(p1 * (1 - p1))) / (p1 - p0)) ** 2
    return int(np.ceil(n - 1e-9))


# --- intransitivity -------------------------------------------------------------------------------


def majority_graph(win_rate: ArrayLike) -> NDArray[np.bool_]:
    """Directed graph with an edge i -> j when i beat j more often than not (rate > 0.5).

    Pairs that never met (NaN) or split exactly even get no edge.
    """
    r = np.asarray(win_rate, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        adj = r > 0.5
    np.fill_diagonal(adj, False)
    return adj


def count_3cycles(adj: ArrayLike) -> int:
    """Number of directed 3-cycles i -> j -> k -> i: ``trace(A^3) / 3`` (each cycle is counted once
    per starting vertex)."""
    # trace(A^3) = sum over (i, j) of (A^2)_ij A_ji: one product, not two, and in floating point, which
    # BLAS multiplies (numpy's integer product is a plain triple loop: 1.7 s at 1,000 competitors against
    # 0.05 s). Exact: every partial sum is a whole number below k^3 < 2^53.
    a = np.asarray(adj, dtype=np.float64)
    return int(round(float(np.sum((a @ a) * a.T)))) // 3


def cyclic_groups(adj: ArrayLike) -> list[list[int]]:
    """Groups of competitors lying on a common directed cycle (strongly connected components with
    more than one member); empty when the majority graph is a consistent (acyclic) order."""
    a = sp.csr_matrix(np.asarray(adj, dtype=bool))
    _, labels = connected_components(a, directed=True, connection="strong")
    groups = [np.flatnonzero(labels == g).tolist() for g in np.unique(labels)]
    return [g for g in groups if len(g) > 1]


def has_cycle(adj: ArrayLike) -> bool:
    """Whether the majority graph contains any directed cycle (of any length)."""
    return bool(cyclic_groups(adj))


def holm_adjust(p_values: ArrayLike) -> NDArray[np.float64]:
    """Holm's step-down adjusted p-values (family-wise error control, any dependence); NaN entries
    are not tests and stay NaN. ``adjusted <= alpha`` rejects with family-wise error at most alpha."""
    p = np.asarray(p_values, dtype=np.float64)
    flat = p.ravel()
    valid = np.flatnonzero(np.isfinite(flat))
    out = np.full(flat.shape, np.nan)
    m = valid.shape[0]
    if m:
        order = valid[np.argsort(flat[valid], kind="stable")]
        adj = np.maximum.accumulate((m - np.arange(m)) * flat[order])
        out[order] = np.minimum(adj, 1.0)
    return out.reshape(p.shape)


# --- anytime-valid decisions --------------------------------------------------------------------

# Beta(a, a) mixing distribution of the confidence sequence. Any a > 0 gives a valid sequence; a
# moderate a puts the mixture's mass on win probabilities within about +-0.3 of one half, where the
# pairs that are still undecided live, and keeps the sequence tight over a few hundred votes.
CS_MIXTURE_A = 5.0
CONFIDENCE_SEQUENCE_METHOD = (
    f"beta-binomial mixture martingale (Beta({CS_MIXTURE_A:g}, {CS_MIXTURE_A:g}) mixture, Robbins 1970; "
    "Ville's inequality), ties counting half a win"
)


def confidence_sequence(
    score: ArrayLike, n: ArrayLike, *, confidence: float = 0.95, a: float = CS_MIXTURE_A
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Anytime-valid confidence sequence for a pair's win probability (ties count half), vectorised.

    For a candidate p0 the mixture ``M_t(p0) = B(a + S, a + F) / B(a, a) / (p0^S (1 - p0)^F)`` (S the
    win score, F = t - S) is a nonnegative supermartingale with mean at most 1 when the true mean
    share is p0: for outcomes y in [0, 1] (a tie is 0.5), ``(p/p0)^y ((1-p)/(1-p0))^(1-y)`` is convex
    in y, hence at most its chord, whose mean is 1. By Ville's inequality
    ``P(exists t: M_t(p0) >= 1/alpha) <= alpha``, so ``{p0 : M_t(p0) < 1/alpha}`` covers the truth at
    every t simultaneously: a team may look after every vote and stop whenever it likes. The set is
    an interval (``log M`` is convex in p0); its ends are found by bisection. NaN where ``n == 0``.
    """
    _z(confidence)
    score_all, n_all = np.broadcast_arrays(np.asarray(score, dtype=np.float64), np.asarray(n, dtype=np.float64))
    # The bounds are a function of (score, n) alone, and a board's pairs repeat a few of them (a million pairs
    # of a 1,000-competitor board hold about a hundred distinct ones): each is solved once and handed back to
    # every pair that has it, the same numbers as solving each pair.
    s, t, inverse = _distinct_pairs(score_all.ravel(), n_all.ravel())
    lower, upper = _confidence_sequence(s, t, confidence=confidence, a=a)
    return lower[inverse].reshape(score_all.shape), upper[inverse].reshape(score_all.shape)


def _distinct_pairs(
    s: NDArray[np.float64], t: NDArray[np.float64]
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.intp]]:
    """The distinct (s, t) pairs of two flat arrays, and for each element the index of its pair. Half-whole
    scores and whole counts (unweighted votes, ties half) are keyed as one integer; any other values as a
    complex number, which numpy sorts by real then imaginary part."""
    if s.size == 0:
        return s, t, np.zeros(0, dtype=np.intp)
    twice = 2.0 * s
    whole = bool(
        np.all(np.isfinite(twice))
        and np.all(np.isfinite(t))
        and np.all(twice == np.round(twice))
        and np.all(t == np.round(t))
        and float(np.abs(twice).max()) < 2**26
        and float(t.min()) >= 0
        and float(t.max()) < 2**26
    )
    if whole:
        key = (twice.astype(np.int64) << 27) + t.astype(np.int64)
        first, inverse = np.unique(key, return_index=True, return_inverse=True)[1:]
    else:
        first, inverse = np.unique(s + 1j * t, return_index=True, return_inverse=True)[1:]
    return s[first], t[first], inverse.ravel()


def _confidence_sequence(
    s: NDArray[np.float64], t: NDArray[np.float64], *, confidence: float, a: float
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    f = np.maximum(t - s, 0.0)
    log_bound = float(np.log(1.0 / (1.0 - confidence)))
    base = betaln(a + s, a + f) - betaln(a, a)
    with np.errstate(divide="ignore", invalid="ignore"):
        centre = np.where(t > 0, s / np.where(t > 0, t, 1.0), 0.5)

    def log_m(p0: NDArray[np.float64]) -> NDArray[np.float64]:
        with np.errstate(divide="ignore", invalid="ignore"):
            out: NDArray[np.float64] = (
                base - np.where(s > 0, s * np.log(p0), 0.0) - np.where(f > 0, f * np.log1p(-p0), 0.0)
            )
            return out

    def end(outside: NDArray[np.float64]) -> NDArray[np.float64]:
        inside = centre.copy()
        out = outside.copy()
        # Where even the extreme value is not rejected, the sequence reaches it.
        reaches = log_m(np.clip(outside, 1e-300, 1 - 1e-16)) < log_bound
        for _ in range(40):  # 2^-40: far below the 4 decimals stored
            mid = 0.5 * (inside + out)
            rejected = log_m(mid) >= log_bound
            out = np.where(rejected, mid, out)
            inside = np.where(rejected, inside, mid)
        return np.where(reaches, outside, 0.5 * (inside + out))

    lower = end(np.zeros_like(centre))
    upper = end(np.ones_like(centre))
    return np.where(t > 0, lower, np.nan), np.where(t > 0, upper, np.nan)
