"""Family-wise error control for the readings a board invites: "A differs from B", for every pair at once.

A board of ``k`` competitors holds ``m = k(k-1)/2`` difference intervals. Each per-pair 95% interval
covers its own difference 95% of the time, but when several pairs are truly equal some interval
excludes 0 on a large share of boards (41% with 10 competitors in ``benchmarks/board_intervals.py``).
The *simultaneous* intervals here cover every difference of the board at once with the stated
confidence, so the chance that any truly equal pair is shown as different is at most ``1 - confidence``.

**Max-|t| (Tukey's idea, Romano and Wolf's bootstrap form).** For every pair the standardised
deviation ``t = (d* - d_hat) / se`` is computed on each bootstrap round (or, for a Wald board, on
draws from the normal law of the estimate, ``N(0, Sigma)``); the critical value ``c`` is the
``confidence``-quantile of ``max |t|`` over the pairs of the family, which accounts for the
correlation between pairs (pairs sharing a competitor move together) and so is narrower than
Bonferroni. The simultaneous interval keeps the per-pair interval's shape and widens each finite side's
distance from the estimate by ``c / z`` (``z`` the per-pair normal quantile): for a symmetric interval
that is ``d_hat +- c se``, and a side the votes cannot bound stays open. ``c`` is never below ``z``.

**Anytime-valid decisions.** Confidence sequences are valid under peeking but, per pair, not over a
family; ``bonferroni_confidence`` gives the per-pair level (``1 - alpha / m``) whose union bound makes
the decisions family-wise.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from .pairwise import _z

__all__ = [
    "NORMAL_DRAWS",
    "Simultaneous",
    "bonferroni_confidence",
    "max_t_critical",
    "rank_ranges_from_differences",
    "simultaneous_bounds",
    "simultaneous_from_covariance",
    "simultaneous_from_samples",
]

# Draws from the estimate's normal law for a Wald board's critical value: the 95% quantile of the max
# then has a Monte-Carlo standard error of about 0.01 in c (a fraction of a score point).
NORMAL_DRAWS = 4000
_CHUNK = 500


@dataclass(frozen=True)
class Simultaneous:
    """Simultaneous intervals of ``score_a - score_b`` (rows a, columns b, score points) for a board's
    competitors ``idx``: ``critical`` is c, ``pair_confidence`` the per-pair level it corresponds to
    (``2 Phi(c) - 1``), ``pairs`` the size of the family, ``method`` how c was found."""

    lower: NDArray[np.float64]
    upper: NDArray[np.float64]
    critical: float
    pair_confidence: float
    pairs: int
    method: str


def max_t_critical(deviations: NDArray[np.float64], se: NDArray[np.float64], confidence: float) -> float:
    """The ``confidence``-quantile of ``max_pairs |deviation / se|`` over the rows (rounds or draws) of
    ``deviations`` (rounds x pairs), never below the per-pair normal quantile. Pairs with a zero or
    undefined standard error are left out (their interval does not come from this spread)."""
    z = _z(confidence)
    usable = np.isfinite(se) & (se > 0)
    if deviations.shape[0] == 0 or not usable.any():
        return z
    with np.errstate(invalid="ignore"):
        t = np.abs(deviations[:, usable]) / se[usable]
    worst = np.nanmax(np.where(np.isfinite(t), t, np.nan), axis=1)
    worst = worst[np.isfinite(worst)]
    if worst.size == 0:
        return z
    # The (R + 1) q-th order statistic, as the percentile intervals use (numpy's "weibull" rule).
    return max(z, float(np.quantile(worst, confidence, method="weibull")))


def _pairs(family: NDArray[np.bool_]) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    rows, cols = np.nonzero(np.triu(family, 1))
    return rows.astype(np.int64), cols.astype(np.int64)


def simultaneous_from_samples(
    samples: NDArray[np.float64], estimate: NDArray[np.float64], family: NDArray[np.bool_], confidence: float
) -> tuple[float, int]:
    """c and the family's size from bootstrap scores ``samples`` (rounds x k, the board's competitors in
    order) and the estimated differences ``estimate`` (k x k); ``family[a, b]``: the pair is read."""
    a, b = _pairs(family)
    if a.size == 0:
        return _z(confidence), 0
    diffs = samples[:, a] - samples[:, b]
    se = diffs.std(axis=0, ddof=1) if samples.shape[0] > 1 else np.zeros(a.size)
    return max_t_critical(diffs - estimate[a, b], se, confidence), int(a.size)


def simultaneous_from_covariance(
    covariance: NDArray[np.float64],
    family: NDArray[np.bool_],
    confidence: float,
    *,
    draws: int = NORMAL_DRAWS,
    seed: int = 0,
) -> tuple[float, int]:
    """c and the family's size for Wald intervals from the covariance of the board's scores (k x k, any
    scale): the max of ``|Z_a - Z_b| / sd`` over ``draws`` seeded draws of ``Z ~ N(0, covariance)``."""
    a, b = _pairs(family)
    if a.size == 0:
        return _z(confidence), 0
    cov = 0.5 * (covariance + covariance.T)
    values, vectors = np.linalg.eigh(cov)
    root = vectors * np.sqrt(np.clip(values, 0.0, None))
    var = np.diag(cov)[a] + np.diag(cov)[b] - 2.0 * cov[a, b]
    se = np.sqrt(np.clip(var, 0.0, None))
    rng = np.random.default_rng(seed)
    worst = []
    for start in range(0, draws, _CHUNK):
        z = rng.standard_normal((min(_CHUNK, draws - start), cov.shape[0])) @ root.T
        diffs = z[:, a] - z[:, b]
        usable = se > 0
        if not usable.any():
            return _z(confidence), int(a.size)
        worst.append(np.max(np.abs(diffs[:, usable]) / se[usable], axis=1))
    return max(_z(confidence), float(np.quantile(np.concatenate(worst), confidence, method="weibull"))), int(a.size)


def simultaneous_bounds(
    estimate: NDArray[np.float64],
    lower: NDArray[np.float64],
    upper: NDArray[np.float64],
    *,
    critical: float,
    confidence: float,
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Per-pair bounds widened to simultaneous ones: each finite side's distance from the estimate times
    ``critical / z``; an open (infinite) side stays open."""
    ratio = critical / _z(confidence)
    with np.errstate(invalid="ignore"):
        lo = np.where(np.isfinite(lower), estimate - (estimate - lower) * ratio, lower)
        hi = np.where(np.isfinite(upper), estimate + (upper - estimate) * ratio, upper)
    return lo, hi


def bonferroni_confidence(confidence: float, pairs: int) -> float:
    """The per-pair level at which ``pairs`` statements hold together with ``confidence`` (union bound)."""
    _z(confidence)
    return 1.0 - (1.0 - confidence) / max(pairs, 1)


def rank_ranges_from_differences(
    lower: NDArray[np.float64], same: NDArray[np.bool_]
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Rank ranges (1 = top) from difference intervals (row minus column): ``a`` is surely behind ``b``
    when the interval of ``b - a`` lies above 0, surely ahead when that of ``a - b`` does; ranks count
    within ``same`` (one connected group). From simultaneous intervals all the ranges hold together."""
    ahead = (lower > 0) & same  # ahead[a, b]: a is surely ahead of b
    np.fill_diagonal(ahead, False)
    group = same.sum(axis=1)
    best = 1 + ahead.sum(axis=0)
    worst = group - ahead.sum(axis=1)
    return best.astype(np.int64), worst.astype(np.int64)
