"""The pairwise part of a board: the win-rate table with Wilson intervals and Holm-adjusted p-values,
the anytime-valid decisions (confidence sequences) and the intervals of score differences.

Every reading of "A differs from B" the board offers has family-wise control over the board's pairs:
Holm for the p-values, Bonferroni for the anytime-valid decisions and simultaneous (max-|t|) intervals
beside the per-pair difference intervals (``estimators.multiplicity``).

Pure numpy on top of ``ranking.estimators``, like ``compute``; its output is stored in the snapshot's
``pairwise`` as is."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray
from scipy.stats import norm

from . import estimators as est

if TYPE_CHECKING:
    from .compute import Method

__all__ = [
    "MAX_DIFFERENCE_COMPETITORS",
    "RANK_RANGES",
    "bound",
    "pairwise_block",
    "sequential_block",
    "simultaneous_differences",
]


# Difference intervals are stored for every pair of shown competitors: k^2 numbers. Past this many
# shown competitors the matrix is left out of the snapshot (the API says so) to keep snapshots small.
MAX_DIFFERENCE_COMPETITORS = 60


def bound(value: float) -> float | None:
    """JSON has no infinity: an open (unbounded) side is ``None`` next to an explicit ``*_open`` flag."""
    return None if not np.isfinite(value) else round(float(value), 2)


# What a row's rank range is, stated in every snapshot (extra.rank_ranges).
RANK_RANGES = {
    "method": "from each competitor's own interval: best = 1 + the number whose lower bound is above its upper "
    "bound, worst = the number shown in its group minus those whose upper bound is below its lower bound",
    "simultaneous": False,
    "note": "each range is read from per-competitor intervals, so the ranges do not hold all together at the stated "
    "confidence; rank_simultaneous (where given) comes from the simultaneous difference intervals, and all of "
    "those ranges hold together",
}


def simultaneous_differences(
    differences: est.DifferenceIntervals,
    components: NDArray[np.int64],
    method: Method,
    *,
    samples: NDArray[np.float64] | None = None,
    covariance: NDArray[np.float64] | None = None,
) -> est.Simultaneous:
    """Simultaneous intervals over every pair of ``differences.idx`` in one comparison group: c from the
    bootstrap rounds (``samples``, rounds x all competitors) or from the normal law of the scores
    (``covariance``, over ``differences.idx``), then each per-pair interval widened by c / z."""
    idx = differences.idx
    family = components[idx][:, None] == components[idx][None, :]
    if samples is not None:
        critical, pairs = est.simultaneous_from_samples(
            samples[:, idx], differences.estimate, family, method.confidence
        )
        how = f"max-|t| over the {samples.shape[0]} bootstrap rounds"
    elif covariance is not None:
        critical, pairs = est.simultaneous_from_covariance(covariance, family, method.confidence, seed=method.seed)
        how = f"max-|t| over {est.multiplicity.NORMAL_DRAWS} draws from the scores' normal law (seed {method.seed})"
    else:
        raise ValueError("simultaneous intervals need the bootstrap samples or the covariance")
    lower, upper = est.simultaneous_bounds(
        differences.estimate, differences.lower, differences.upper, critical=critical, confidence=method.confidence
    )
    pair_confidence = float(2.0 * norm.cdf(critical) - 1.0)
    return est.Simultaneous(lower, upper, critical, pair_confidence, pairs, how)


def pairwise_block(
    cells: est.Cells,
    method: Method,
    shown: NDArray[np.bool_],
    competitor_ids: NDArray[np.int64],
    differences: est.DifferenceIntervals | None,
    components: NDArray[np.int64],
    simultaneous: est.Simultaneous | None = None,
) -> dict[str, Any]:
    table = est.pairwise_table(cells, both_bad=method.both_bad, confidence=method.confidence)
    idx = np.flatnonzero(shown)
    sub_n = table.battles[np.ix_(idx, idx)]
    sub_p = table.p_value[np.ix_(idx, idx)]
    # One test per unordered pair (the matrix holds each twice): adjust the upper triangle, mirror it.
    upper_tri = np.triu(np.ones_like(sub_p, dtype=bool), 1) & np.isfinite(sub_p)
    adjusted = np.full_like(sub_p, np.nan)
    adjusted[upper_tri] = est.holm_adjust(sub_p[upper_tri])
    adjusted = np.where(np.isfinite(adjusted), adjusted, adjusted.T)

    def grid(values: NDArray[np.float64], full: bool = True) -> list[list[float | None]]:
        # None where a cell has no battles or no defined value (a p-value of ties only): JSON has no NaN.
        sub = values[np.ix_(idx, idx)] if full else values
        return [
            [
                None if sub_n[i, j] == 0 or i == j or not np.isfinite(sub[i, j]) else round(float(sub[i, j]), 4)
                for j in range(len(idx))
            ]
            for i in range(len(idx))
        ]

    adjacency = est.majority_graph(table.win_rate[np.ix_(idx, idx)])
    out: dict[str, Any] = {
        "competitor_ids": [int(competitor_ids[i]) for i in idx],
        "win_rate": grid(table.win_rate),
        "lower": grid(table.wilson_lower),
        "upper": grid(table.wilson_upper),
        "p_value": grid(table.p_value),
        "p_holm": grid(adjusted, full=False),
        "correction": f"Holm over the {int(upper_tri.sum())} pairs shown with decisive votes (family-wise error "
        f"at most {100 - round(method.confidence * 100)}%); p_value is unadjusted",
        "n": [[int(table.battles[i, j]) for j in idx] for i in idx],
        "intransitive_triads": int(est.count_3cycles(adjacency)),
        "sequential": sequential_block(table, idx, method),
    }
    if differences is not None:
        same = components[idx][:, None] == components[idx][None, :]
        k = len(idx)

        def dgrid(values: NDArray[np.float64]) -> list[list[float | None]]:
            return [[bound(values[i, j]) if same[i, j] else None for j in range(k)] for i in range(k)]

        def opens(lower: NDArray[np.float64], upper: NDArray[np.float64]) -> dict[str, list[list[bool]]]:
            return {
                "lower_open": [[bool(same[i, j] and np.isneginf(lower[i, j])) for j in range(k)] for i in range(k)],
                "upper_open": [[bool(same[i, j] and np.isposinf(upper[i, j])) for j in range(k)] for i in range(k)],
            }

        pct = round(method.confidence * 100)
        out["difference"] = {
            "method": differences.method,
            "note": "row minus column in score points; a null bound with *_open true: the votes cannot bound "
            "that side; null with *_open false: different comparison groups (no difference defined)",
            "coverage": f"per pair: each of lower/upper covers its own difference {pct}% of the time, so with many "
            "pairs some truly equal pair is likely to look different; read simultaneous to compare several pairs",
            "estimate": dgrid(differences.estimate),
            "lower": dgrid(differences.lower),
            "upper": dgrid(differences.upper),
            **opens(differences.lower, differences.upper),
        }
        if simultaneous is not None:
            out["difference"]["simultaneous"] = {
                "coverage": f"simultaneous: all {simultaneous.pairs} pairs of a comparison group covered together "
                f"{pct}% of the time (the chance that any truly equal pair is shown as different is at most "
                f"{100 - pct}%)",
                "method": f"{simultaneous.method}; each per-pair side's distance from the estimate times c / z",
                "critical": round(simultaneous.critical, 4),
                "pair_confidence": round(simultaneous.pair_confidence, 6),
                "pairs": simultaneous.pairs,
                "lower": dgrid(simultaneous.lower),
                "upper": dgrid(simultaneous.upper),
                **opens(simultaneous.lower, simultaneous.upper),
            }
    elif len(idx) > MAX_DIFFERENCE_COMPETITORS:
        out["difference"] = {"omitted": f"more than {MAX_DIFFERENCE_COMPETITORS} competitors shown"}
    return out


def sequential_block(table: est.PairwiseTable, idx: NDArray[np.int64], method: Method) -> dict[str, Any]:
    """Anytime-valid confidence sequence per pair beside the fixed-sample Wilson interval, at the
    Bonferroni level over every pair of the shown competitors, so the decisions are family-wise: the
    chance that any pair is ever decided the wrong way is at most 1 - confidence, however often anyone
    looks."""
    counted_ties = table.ties + (table.both_bad if method.both_bad == "tie" else 0.0)
    score = table.wins + 0.5 * counted_ties
    counted = table.wins + table.wins.T + counted_ties
    sub_w, sub_n = score[np.ix_(idx, idx)], counted[np.ix_(idx, idx)]
    k = len(idx)
    pairs = k * (k - 1) // 2
    level = est.bonferroni_confidence(method.confidence, pairs)
    lower, upper = est.confidence_sequence(sub_w, sub_n, confidence=level)

    def cell(i: int, j: int) -> dict[str, Any] | None:
        if i == j or sub_n[i, j] == 0:
            return None
        lo, hi = float(lower[i, j]), float(upper[i, j])
        decision = "row beats column" if lo > 0.5 else "column beats row" if hi < 0.5 else "not yet"
        return {"lower": round(lo, 4), "upper": round(hi, 4), "decision": decision}

    return {
        "method": est.CONFIDENCE_SEQUENCE_METHOD,
        "decision_rule": f"a pair is decided once its sequence excludes 0.5; each sequence is at level "
        f"{level:.6g} (Bonferroni over the {pairs} pairs of shown competitors), so the chance that any pair is "
        f"ever decided the wrong way is at most {100 - round(method.confidence * 100)}%, however often the board "
        "is looked at (unlike the fixed-sample Wilson interval)",
        "family": {"correction": "Bonferroni", "pairs": pairs, "pair_confidence": round(level, 6)},
        "cells": [[cell(i, j) for j in range(k)] for i in range(k)],
    }
