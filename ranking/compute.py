"""From the kept votes of one campaign (and category) to the numbers a leaderboard shows.

Pure numpy on top of ``ranking.estimators``; no Django. The result is plain JSON-able data that a
snapshot stores as is, so what the page and the API show is exactly what was computed."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

from . import estimators as est
from .policy import STYLE_FEATURES, VoteArrays


@dataclass(frozen=True)
class Method:
    both_bad: Literal["tie", "drop"] = "tie"
    rounds: int = 100
    seed: int = 0
    confidence: float = 0.95
    min_votes: int = 30
    interval: Literal["bootstrap", "cluster_bootstrap", "sandwich"] = "bootstrap"
    # Style control refits a logistic model on every row (its features are continuous, so rows do not
    # collapse into cells); its analytic interval keeps a full recompute of a million votes in seconds.
    style_interval: Literal["bootstrap", "cluster_bootstrap", "sandwich"] = "sandwich"
    anchor: int | None = None  # a competitor id pinned at 1000; None: geometric mean of strengths 1

    def as_dict(self, *, view: str) -> dict[str, Any]:
        return {
            **asdict(self),
            "estimator": "Bradley-Terry" if view == "raw" else "Bradley-Terry with style control",
            "ties": "half a win each side",
            "confidence_pct": round(self.confidence * 100),
            "interval": self.interval if view == "raw" else self.style_interval,
            "anchor": f"competitor {self.anchor} at 1000" if self.anchor is not None
            else "geometric mean of strengths at 1000",
            "style_features": list(STYLE_FEATURES) if view == "style" else [],
            "degenerate_bootstrap": "a competitor whose bootstrap interval cannot vary gets the analytic one",
        }


@dataclass(frozen=True)
class Board:
    rows: list[dict[str, Any]]
    pairwise: dict[str, Any]
    extra: dict[str, Any]


def dense_index(votes: VoteArrays, competitor_ids: NDArray[np.int64]) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Map competitor primary keys to 0..n-1 in the order of ``competitor_ids`` (sorted)."""
    return np.searchsorted(competitor_ids, votes.left), np.searchsorted(competitor_ids, votes.right)


def _counts(a: NDArray[np.int64], b: NDArray[np.int64], outcome: NDArray[np.int64], n: int) -> dict[str, NDArray]:
    def both(mask: NDArray[np.bool_]) -> NDArray[np.float64]:
        return (np.bincount(a[mask], minlength=n) + np.bincount(b[mask], minlength=n)).astype(np.float64)

    wins = np.bincount(a[outcome == est.LEFT_WINS], minlength=n)
    wins += np.bincount(b[outcome == est.RIGHT_WINS], minlength=n)
    return {
        "votes": both(np.ones_like(outcome, dtype=bool)),
        "wins": wins.astype(np.float64),
        "ties": both(outcome == est.TIE),
        "both_bad": both(outcome == est.BOTH_BAD),
    }


def _intervals(cells: est.Cells, fit: est.BTResult, method: Method) -> tuple[NDArray, NDArray]:
    sandwich = est.sandwich_intervals(cells, fit, confidence=method.confidence)
    if method.interval == "sandwich":
        return sandwich.lower, sandwich.upper
    if method.interval == "cluster_bootstrap":
        boot = est.cluster_bootstrap_intervals(cells, fit, rounds=method.rounds, confidence=method.confidence,
                                               seed=method.seed)
    else:
        boot = est.bootstrap_intervals(cells, fit, rounds=method.rounds, confidence=method.confidence,
                                       seed=method.seed)
    return _no_degenerate(boot.lower, boot.upper, sandwich.lower, sandwich.upper)


# A bootstrap interval narrower than this (in score points) is treated as degenerate.
DEGENERATE_WIDTH = 0.01


def _no_degenerate(lower: NDArray, upper: NDArray, fallback_lower: NDArray,
                   fallback_upper: NDArray) -> tuple[NDArray, NDArray]:
    """Where the bootstrap cannot vary (every battle of a competitor in one outcome cell: 30-0, or only
    ties), its percentile interval collapses to the point estimate. Such a competitor gets the analytic
    (sandwich) interval, which the prior keeps finite, instead of a false certainty."""
    degenerate = (upper - lower) < DEGENERATE_WIDTH
    return (np.where(degenerate, np.minimum(lower, fallback_lower), lower),
            np.where(degenerate, np.maximum(upper, fallback_upper), upper))


def _pairwise(cells: est.Cells, method: Method, shown: NDArray[np.bool_],
              competitor_ids: NDArray[np.int64]) -> dict[str, Any]:
    table = est.pairwise_table(cells, both_bad=method.both_bad, confidence=method.confidence)
    idx = np.flatnonzero(shown)

    def grid(values: NDArray[np.float64]) -> list[list[float | None]]:
        # None where a cell has no battles or no defined value (a p-value of ties only): JSON has no NaN.
        sub = values[np.ix_(idx, idx)]
        n_sub = table.battles[np.ix_(idx, idx)]
        return [[None if n_sub[i, j] == 0 or i == j or not np.isfinite(sub[i, j]) else round(float(sub[i, j]), 4)
                 for j in range(len(idx))] for i in range(len(idx))]

    adjacency = est.majority_graph(table.win_rate[np.ix_(idx, idx)])
    return {
        "competitor_ids": [int(competitor_ids[i]) for i in idx],
        "win_rate": grid(table.win_rate),
        "lower": grid(table.wilson_lower),
        "upper": grid(table.wilson_upper),
        "p_value": grid(table.p_value),
        "n": [[int(table.battles[i, j]) for j in idx] for i in idx],
        "intransitive_triads": int(est.count_3cycles(adjacency)),
    }


def board_compute(votes: VoteArrays, competitor_ids: NDArray[np.int64], labels: dict[int, str], method: Method,
                  *, view: Literal["raw", "style"] = "raw") -> Board:
    """Scores with intervals and rank ranges for every competitor with enough votes; the others are
    listed as hidden, with their vote counts only."""
    n = int(competitor_ids.shape[0])
    a, b = dense_index(votes, competitor_ids)
    counts = _counts(a, b, votes.outcome, n)
    if len(votes) == 0 or n < 2:
        return Board(rows=[_row_counts(i, competitor_ids, labels, counts, method) for i in range(n)], pairwise={},
                     extra={"components": 0})
    cells = est.aggregate_cells(a, b, votes.outcome, n_competitors=n,
                                cluster=votes.prompt if method.interval == "cluster_bootstrap" else None)
    extra: dict[str, Any] = {}
    if view == "raw":
        fit = est.fit_bradley_terry(cells, both_bad=method.both_bad, reference=_anchor(method, competitor_ids))
        lower, upper = _intervals(cells, fit, method)
        scores = fit.scores
        components = fit.components
    else:
        style = _style_fit(votes, a, b, n, method, competitor_ids)
        scores, lower, upper, components = style["scores"], style["lower"], style["upper"], style["components"]
        extra["style_coefficients"] = style["coefficients"]
        extra["style_normalisation"] = style["normalisation"]
    # The threshold counts the votes that enter the fit: under the "drop" rule both-bad votes do not.
    decided = counts["votes"] - (counts["both_bad"] if method.both_bad == "drop" else 0)
    shown = est.shown_mask(decided, method.min_votes)
    ranks = _rank_ranges_by_component(lower, upper, shown, components)
    extra["components"] = int(np.unique(components[shown]).shape[0])
    rows = []
    order = np.lexsort((-counts["votes"], -np.where(shown, scores, -np.inf)))
    for i in order:
        row = _row_counts(int(i), competitor_ids, labels, counts, method)
        row["hidden"] = not bool(shown[i])
        row["component"] = int(components[i])
        if shown[i]:
            row.update({
                "score": round(float(scores[i]), 2), "lower": round(float(lower[i]), 2),
                "upper": round(float(upper[i]), 2), "rank_best": int(ranks.best[i]), "rank_worst": int(ranks.worst[i]),
            })
        rows.append(row)
    return Board(rows=rows, pairwise=_pairwise(cells, method, shown, competitor_ids), extra=extra)


def _rank_ranges_by_component(lower: NDArray[np.float64], upper: NDArray[np.float64], shown: NDArray[np.bool_],
                              components: NDArray[np.int64]) -> est.RankRanges:
    """Rank ranges within each connected group of the comparison graph: scores of competitors that
    were never (even indirectly) compared say nothing about their order."""
    best = np.zeros(shown.shape[0], dtype=np.int64)
    worst = np.zeros(shown.shape[0], dtype=np.int64)
    for component in np.unique(components[shown]):
        mask = shown & (components == component)
        ranks = est.rank_ranges(lower, upper, mask)
        best[mask], worst[mask] = ranks.best[mask], ranks.worst[mask]
    return est.RankRanges(best=best, worst=worst, shown=shown)


def _row_counts(i: int, competitor_ids: NDArray[np.int64], labels: dict[int, str], counts: dict[str, NDArray],
               method: Method) -> dict[str, Any]:
    """Votes, wins, ties and rates of one competitor. Win rate counts ties as half; under the "drop"
    rule both-bad battles are left out of it, under "tie" they count as ties."""
    votes = float(counts["votes"][i])
    ties = counts["ties"][i] + (counts["both_bad"][i] if method.both_bad == "tie" else 0)
    decided = votes - (counts["both_bad"][i] if method.both_bad == "drop" else 0)
    return {
        "competitor_id": int(competitor_ids[i]), "label": labels.get(int(competitor_ids[i]), ""),
        "votes": int(votes), "counted": int(decided), "wins": int(counts["wins"][i]), "ties": int(counts["ties"][i]),
        "both_bad": int(counts["both_bad"][i]),
        "win_rate": round(float((counts["wins"][i] + 0.5 * ties) / decided), 4) if decided else None,
        "tie_rate": round(float(counts["ties"][i] / votes), 4) if votes else None,
        "both_bad_rate": round(float(counts["both_bad"][i] / votes), 4) if votes else None,
        "hidden": True, "component": -1,
    }


def _anchor(method: Method, competitor_ids: NDArray[np.int64]) -> int | None:
    if method.anchor is None:
        return None
    position = int(np.searchsorted(competitor_ids, method.anchor))
    if position >= competitor_ids.shape[0] or competitor_ids[position] != method.anchor:
        raise ValueError(f"anchor competitor {method.anchor} is not in this campaign")
    return position


def _style_fit(votes: VoteArrays, a: NDArray[np.int64], b: NDArray[np.int64], n: int, method: Method,
               competitor_ids: NDArray[np.int64]) -> dict[str, Any]:
    cluster = method.style_interval == "cluster_bootstrap"
    design = est.style_design(a, b, votes.outcome, votes.style_left, votes.style_right, n_competitors=n,
                              both_bad=method.both_bad, cluster=votes.prompt if cluster else None,
                              feature_names=STYLE_FEATURES)
    fit = est.fit_style(design, reference=_anchor(method, competitor_ids))
    sandwich = est.style_sandwich_intervals(design, fit, confidence=method.confidence)
    intervals = sandwich
    lower, upper = sandwich.scores.lower, sandwich.scores.upper
    if method.style_interval != "sandwich":
        intervals = est.style_bootstrap_intervals(design, fit, rounds=method.rounds, confidence=method.confidence,
                                                  scheme="cluster" if cluster else "multinomial", seed=method.seed)
        lower, upper = _no_degenerate(intervals.scores.lower, intervals.scores.upper, lower, upper)
    return {
        "scores": fit.scores, "lower": lower, "upper": upper,
        "components": fit.components,
        "coefficients": [
            {"feature": name, "coef": round(float(fit.coef[k]), 4), "lower": round(float(intervals.coef_lower[k]), 4),
             "upper": round(float(intervals.coef_upper[k]), 4)}
            for k, name in enumerate(fit.feature_names)
        ],
        "normalisation": {
            "rule": "per feature: (left - right) / (left + right), 0 when both are 0, divided by its standard "
                    "deviation over the battles; not centred",
            "mean": [round(float(v), 6) for v in fit.feature_mean],
            "std": [round(float(v), 6) for v in fit.feature_std],
        },
    }


def elo_compute(votes: VoteArrays, competitor_ids: NDArray[np.int64], labels: dict[int, str],
                method: Method) -> list[dict[str, Any]]:
    """The live view: online Elo in log order, with its two warning flags; both-bad follows the
    snapshot's rule (a tie, or skipped)."""
    a, b = dense_index(votes, competitor_ids)
    result = est.online_elo(a, b, votes.outcome, n_competitors=int(competitor_ids.shape[0]),
                            both_bad="skip" if method.both_bad == "drop" else "tie")
    rows = [{
        "competitor_id": int(cid), "label": labels.get(int(cid), ""), "rating": round(float(result.ratings[i]), 1),
        "comparisons": int(result.comparisons[i]), "few_comparisons": bool(result.few_comparisons[i]),
        "unstable": bool(result.unstable[i]),
    } for i, cid in enumerate(competitor_ids)]
    return sorted(rows, key=lambda r: -r["rating"])
