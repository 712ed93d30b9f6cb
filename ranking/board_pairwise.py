"""The pairwise part of a board: the win-rate table with Wilson intervals and Holm-adjusted p-values,
the anytime-valid decisions (confidence sequences) and the intervals of score differences.

Every reading of "A differs from B" the board offers has family-wise control over the board's pairs:
Holm for the p-values, Bonferroni for the anytime-valid decisions and simultaneous (max-|t|) intervals
beside the per-pair difference intervals (``estimators.multiplicity``).

Pure numpy on top of ``ranking.estimators``, like ``compute``. A board's section is two parts: the
statements about the family (the correction, the triads, the sequences' rule, the difference intervals of
up to ``MAX_DIFFERENCE_COMPETITORS``), stored as JSON in the snapshot's ``pairwise``; and the k x k grids
of every pair (``PairwiseGrids``), computed as arrays and stored compactly beside it
(``pairwise_arrays``): at 1,000 competitors a million pairs, 82 MB as JSON lists of lists with one dict per
sequence cell, 4.75 MB this way. ``pairwise_expand`` gives back the JSON shape the API and the download
have always had, on request."""

from __future__ import annotations

import io
import zipfile
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray
from scipy.stats import norm

from . import estimators as est

if TYPE_CHECKING:
    from .compute import Method

__all__ = [
    "DECISIONS",
    "MAX_DIFFERENCE_COMPETITORS",
    "RANK_RANGES",
    "PairwiseGrids",
    "bound",
    "pairwise_block",
    "pairwise_expand",
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


# The anytime-valid decision of a pair, by its code in ``PairwiseGrids.decision`` (0: no sequence, the
# diagonal or a pair without counted votes).
DECISIONS: tuple[str | None, ...] = (None, "row beats column", "column beats row", "not yet")

# Rates, bounds and p-values are stored to four decimals, as whole numbers of 1/10,000 (0..10,000) in
# two bytes; the largest two-byte value stands for "none" (a null in the JSON).
_SCALE = 10_000
_NONE = np.iinfo(np.uint16).max
FORMAT = "arena-pairwise-grids/1"


def _rounded(values: NDArray[np.float64], defined: NDArray[np.bool_]) -> NDArray[np.float64]:
    """Four decimals where ``defined`` and finite (round half to even), NaN elsewhere."""
    with np.errstate(invalid="ignore"):
        return np.where(defined & np.isfinite(values), np.rint(values * _SCALE) / _SCALE, np.nan)


@dataclass(frozen=True)
class PairwiseGrids:
    """The k x k grids of a board's pairwise section, row i against column j over the shown competitors
    (in the order of the section's ``competitor_ids``): rates, bounds and p-values to four decimals, NaN
    where the JSON has null (the diagonal, a pair that never met, a value not defined); ``n`` the battles;
    the anytime-valid sequence's bounds and its decision (a code into ``DECISIONS``)."""

    win_rate: NDArray[np.float64]
    lower: NDArray[np.float64]
    upper: NDArray[np.float64]
    p_value: NDArray[np.float64]
    p_holm: NDArray[np.float64]
    n: NDArray[np.int64]
    sequential_lower: NDArray[np.float64]
    sequential_upper: NDArray[np.float64]
    decision: NDArray[np.int8]

    def encode(self) -> bytes:
        """An ``.npz`` archive (numpy's own format, read without pickle): the rates as ``uint16``
        ten-thousandths, ``n`` as ``uint32``, the decisions as bytes; deflated, which the many repeated
        values of a large board (a pair of a 1,000-competitor board has a couple of battles) shrink well."""
        buffer = io.BytesIO()
        # Level 1: nearly the size of the default level at a fraction of its time on these grids.
        with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=1) as archive:
            for field in fields(self):
                values = getattr(self, field.name)
                if field.name == "n":
                    stored = values.astype(np.uint32)
                elif field.name == "decision":
                    stored = values.astype(np.uint8)
                else:
                    stored = np.where(np.isnan(values), _NONE, np.rint(np.nan_to_num(values) * _SCALE)).astype(
                        np.uint16
                    )
                with archive.open(f"{field.name}.npy", "w") as entry:
                    np.lib.format.write_array(entry, np.ascontiguousarray(stored), allow_pickle=False)
            # A ZipInfo of its own keeps the 1980 timestamp numpy's entries get: the same grids, the same bytes.
            archive.writestr(zipfile.ZipInfo("format.txt"), FORMAT)
        return buffer.getvalue()

    @classmethod
    def decode(cls, data: bytes) -> PairwiseGrids:
        with np.load(io.BytesIO(data), allow_pickle=False) as archive:
            values: dict[str, Any] = {}
            for field in fields(cls):
                stored = archive[field.name]
                if field.name == "n":
                    values["n"] = stored.astype(np.int64)
                elif field.name == "decision":
                    values["decision"] = stored.astype(np.int8)
                else:
                    values[field.name] = np.where(stored == _NONE, np.nan, stored / _SCALE)
        return cls(**values)

    @classmethod
    def from_json(cls, pairwise: dict[str, Any]) -> PairwiseGrids | None:
        """The grids of a snapshot stored before the compact form (lists of lists in its JSON), or None."""
        if "win_rate" not in pairwise:
            return None

        def floats(rows: list[list[float | None]]) -> NDArray[np.float64]:
            return np.array([[np.nan if v is None else v for v in row] for row in rows], dtype=np.float64).reshape(
                len(rows), len(rows)
            )

        k = len(pairwise["win_rate"])
        empty: list[list[Any]] = [[None] * k for _ in range(k)]
        cells = pairwise.get("sequential", {}).get("cells") or empty
        seq = [[cell or {} for cell in row] for row in cells]
        return cls(
            win_rate=floats(pairwise["win_rate"]),
            lower=floats(pairwise["lower"]),
            upper=floats(pairwise["upper"]),
            p_value=floats(pairwise.get("p_value") or empty),
            p_holm=floats(pairwise.get("p_holm") or empty),
            n=np.array(pairwise["n"], dtype=np.int64).reshape(k, k),
            sequential_lower=floats([[c.get("lower") for c in row] for row in seq]),
            sequential_upper=floats([[c.get("upper") for c in row] for row in seq]),
            decision=np.array(
                [[DECISIONS.index(c.get("decision")) for c in row] for row in seq], dtype=np.int8
            ).reshape(k, k),
        )

    def select(self, positions: NDArray[np.int64]) -> PairwiseGrids:
        """The grids of the competitors at ``positions`` only (rows and columns)."""
        at = np.ix_(positions, positions)
        return PairwiseGrids(**{field.name: getattr(self, field.name)[at] for field in fields(self)})

    def as_json(self) -> dict[str, Any]:
        """The JSON shape the section had before the compact form: ``win_rate``, ``lower``, ``upper``,
        ``p_value``, ``p_holm`` and ``n`` as lists of lists, and the sequence's ``cells`` (a dict per pair)."""

        def grid(values: NDArray[np.float64]) -> list[list[float | None]]:
            out = values.astype(object)
            out[np.isnan(values)] = None
            rows: list[list[float | None]] = out.tolist()
            return rows

        lower, upper = grid(self.sequential_lower), grid(self.sequential_upper)
        decisions = self.decision.tolist()
        cells = [
            [
                None if code == 0 else {"lower": lo, "upper": hi, "decision": DECISIONS[code]}
                for code, lo, hi in zip(codes, lows, highs, strict=True)
            ]
            for codes, lows, highs in zip(decisions, lower, upper, strict=True)
        ]
        return {
            "win_rate": grid(self.win_rate),
            "lower": grid(self.lower),
            "upper": grid(self.upper),
            "p_value": grid(self.p_value),
            "p_holm": grid(self.p_holm),
            "n": self.n.tolist(),
            "sequential_cells": cells,
        }


def pairwise_expand(pairwise: dict[str, Any], arrays: bytes | None) -> dict[str, Any]:
    """A stored section (its JSON and its compact grids) in the JSON shape the API's ``include=pairwise``
    and the snapshot download give: the grids as lists of lists and the sequence's ``cells``. A snapshot
    stored before the compact form has them in its JSON already and comes back as it is."""
    if not arrays:
        return pairwise
    grids = PairwiseGrids.decode(bytes(arrays)).as_json()
    out = {**pairwise, **{k: v for k, v in grids.items() if k != "sequential_cells"}}
    if "sequential" in pairwise:
        out["sequential"] = {**pairwise["sequential"], "cells": grids["sequential_cells"]}
    return out


def pairwise_block(
    cells: est.Cells,
    method: Method,
    shown: NDArray[np.bool_],
    competitor_ids: NDArray[np.int64],
    differences: est.DifferenceIntervals | None,
    components: NDArray[np.int64],
    simultaneous: est.Simultaneous | None = None,
) -> tuple[dict[str, Any], PairwiseGrids]:
    """The section's JSON (what is said about the family) and its grids (every pair), all in arrays."""
    table = est.pairwise_table(cells, both_bad=method.both_bad, confidence=method.confidence)
    idx = np.flatnonzero(shown)
    at = np.ix_(idx, idx)
    sub_n = table.battles[at]
    sub_p = table.p_value[at]
    # One test per unordered pair (the matrix holds each twice): adjust the upper triangle, mirror it.
    upper_tri = np.triu(np.ones_like(sub_p, dtype=bool), 1) & np.isfinite(sub_p)
    adjusted = np.full_like(sub_p, np.nan)
    adjusted[upper_tri] = est.holm_adjust(sub_p[upper_tri])
    adjusted = np.where(np.isfinite(adjusted), adjusted, adjusted.T)
    # Null where a pair has no battles or no defined value (a p-value of ties only): JSON has no NaN.
    met = sub_n != 0
    np.fill_diagonal(met, False)
    sequential, seq_lower, seq_upper, decision = sequential_block(table, idx, method)
    grids = PairwiseGrids(
        win_rate=_rounded(table.win_rate[at], met),
        lower=_rounded(table.wilson_lower[at], met),
        upper=_rounded(table.wilson_upper[at], met),
        p_value=_rounded(sub_p, met),
        p_holm=_rounded(adjusted, met),
        n=np.trunc(sub_n).astype(np.int64),
        sequential_lower=seq_lower,
        sequential_upper=seq_upper,
        decision=decision,
    )
    adjacency = est.majority_graph(table.win_rate[at])
    out: dict[str, Any] = {
        "competitor_ids": [int(competitor_ids[i]) for i in idx],
        "correction": f"Holm over the {int(upper_tri.sum())} pairs shown with decisive votes (family-wise error "
        f"at most {100 - round(method.confidence * 100)}%); p_value is unadjusted",
        "intransitive_triads": int(est.count_3cycles(adjacency)),
        "sequential": sequential,
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
    return out, grids


def sequential_block(
    table: est.PairwiseTable, idx: NDArray[np.int64], method: Method
) -> tuple[dict[str, Any], NDArray[np.float64], NDArray[np.float64], NDArray[np.int8]]:
    """Anytime-valid confidence sequence per pair beside the fixed-sample Wilson interval, at the
    Bonferroni level over every pair of the shown competitors, so the decisions are family-wise: the
    chance that any pair is ever decided the wrong way is at most 1 - confidence, however often anyone
    looks. Returns the statement of the rule and, per pair, the sequence's bounds (four decimals) and its
    decision (a code into ``DECISIONS``; 0 on the diagonal and for a pair without counted votes)."""
    counted_ties = table.ties + (table.both_bad if method.both_bad == "tie" else 0.0)
    score = table.wins + 0.5 * counted_ties
    counted = table.wins + table.wins.T + counted_ties
    sub_w, sub_n = score[np.ix_(idx, idx)], counted[np.ix_(idx, idx)]
    k = len(idx)
    pairs = k * (k - 1) // 2
    level = est.bonferroni_confidence(method.confidence, pairs)
    lower, upper = est.confidence_sequence(sub_w, sub_n, confidence=level)
    has = sub_n != 0
    np.fill_diagonal(has, False)
    with np.errstate(invalid="ignore"):
        decision = np.where(lower > 0.5, 1, np.where(upper < 0.5, 2, 3))
    decision = np.where(has, decision, 0).astype(np.int8)
    statement = {
        "method": est.CONFIDENCE_SEQUENCE_METHOD,
        "decision_rule": f"a pair is decided once its sequence excludes 0.5; each sequence is at level "
        f"{level:.6g} (Bonferroni over the {pairs} pairs of shown competitors), so the chance that any pair is "
        f"ever decided the wrong way is at most {100 - round(method.confidence * 100)}%, however often the board "
        "is looked at (unlike the fixed-sample Wilson interval)",
        "family": {"correction": "Bonferroni", "pairs": pairs, "pair_confidence": round(level, 6)},
    }
    return statement, _rounded(lower, has), _rounded(upper, has), decision
