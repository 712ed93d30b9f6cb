"""Rater-segment boards: the overall raw board's ``extra["segments"]`` (docs/statistics/segments.md).

Raters carry attributes (``raters.RaterAttribute``: expertise, language, occupation, or any key a manager
or a crowd vendor's link sets). For each attribute key, the raters' values split the votes into segments;
``estimators.segments.fit_segments`` fits a score per model and an offset per (segment, model) with
intervals clustered by rater, tests whether any segment ranks the models differently, and each segment
also gets its own style coefficients. Pure numpy on top of the estimators, no Django: the recompute
passes the attributes in.

Bounded cost: at most ``SEGMENTS_MAX_VOTES`` kept votes (a deterministic sample nested in the per-vote
sample), ``SEGMENT_KEYS_MAX`` keys (those covering the most votes), ``SEGMENTS_MAX`` segments a key (the
largest; the rest pooled as "other") and ``SEGMENT_PARAMETERS_MAX`` parameters in one joint fit."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy.stats import norm

from . import estimators as est
from .compute import Method, dense_index
from .estimators.segments import HETEROGENEITY_METHOD, fit_segment_styles, fit_segments
from .policy import STYLE_FEATURES, VoteArrays, sample_mask, sample_rate

SEGMENTS_MAX_VOTES = 200_000
SEGMENT_KEYS_MAX = 4
SEGMENTS_MAX = 6
MIN_SEGMENT_VOTES = 100
# (models) x (segments + 1): the joint fit's dense information matrix is this square.
SEGMENT_PARAMETERS_MAX = 1_200
OFFSET_PRIOR = 1.0
OTHER = "(other values)"  # the pooled segment; ``pooled`` tells it from a value spelled the same

SEGMENTS_METHOD: dict[str, Any] = {
    "model": "P(i beats j | rater of segment s) = sigmoid((theta_i + delta_si) - (theta_j + delta_sj)): a score per "
    "model and an offset per (segment, model); ties half a win each side, both_bad as the snapshot's rule",
    "identifiability": f"offsets penalised by a normal prior of sd {1 / OFFSET_PRIOR**0.5:g} logit "
    f"({est.SCALE / OFFSET_PRIOR**0.5:.0f} points): each segment's offsets sum to 0 over the models and each "
    "model's over the segments; the offset is the segment's score minus the model's score across segments",
    "intervals": "Wald, with the sandwich covariance clustered by rater (a rater's votes resampled together), "
    "times R / (R - 1)",
    "heterogeneity": HETEROGENEITY_METHOD,
    "style": "the style control refitted on each segment's votes alone (sandwich intervals by vote)",
    "limits": f"at most {SEGMENTS_MAX_VOTES:,} kept votes (a deterministic sample), {SEGMENT_KEYS_MAX} keys, "
    f"{SEGMENTS_MAX} segments a key (smaller values pooled as '{OTHER}'); a segment needs "
    f"{MIN_SEGMENT_VOTES} votes, a model in a segment the campaign's minimum votes",
}


def _r(value: float, digits: int = 1) -> float | None:
    return round(float(value), digits) if np.isfinite(value) else None


def segments_compute(
    sample: VoteArrays,
    competitor_ids: NDArray[np.int64],
    labels: Mapping[int, str],
    method: Method,
    *,
    kept: int,
    attributes: Mapping[str, Mapping[int, str]],
) -> dict[str, Any]:
    """The block for one board: ``sample`` the kept votes one by one (``VoteLog.sample``), ``kept`` how
    many were kept in all, ``attributes`` key -> {rater id: value} for the raters of these votes."""
    if sample.count is not None:
        raise ValueError("segments need the votes one by one (their raters)")
    rate = sample_rate(kept, SEGMENTS_MAX_VOTES)
    votes = sample.subset(sample_mask(sample.vote_id, rate)) if rate < 1.0 else sample
    if method.both_bad == "drop":
        votes = votes.subset(votes.outcome != est.BOTH_BAD)
    a_all, b_all = dense_index(votes, competitor_ids)
    per_model = np.bincount(a_all, minlength=competitor_ids.shape[0]) + np.bincount(
        b_all, minlength=competitor_ids.shape[0]
    )
    shown = np.flatnonzero(per_model >= method.min_votes)
    block: dict[str, Any] = {
        "computed_from": {
            "board": "overall, raw view",
            "votes": len(votes),
            "kept": int(kept),
            "sampled": len(votes) < kept,
            "models": int(shown.shape[0]),
        },
        "method": {**SEGMENTS_METHOD, "confidence_pct": round(method.confidence * 100)},
        "keys": [],
        "keys_left_out": [],
        "reason": None,
    }
    coverage = {
        key: int(np.isin(votes.rater, np.fromiter(values.keys(), dtype=np.int64, count=len(values))).sum())
        for key, values in attributes.items()
        if values
    }
    keys = sorted((k for k, c in coverage.items() if c > 0), key=lambda k: (-coverage[k], k))
    if len(votes) == 0:
        block["reason"] = "No votes kept yet."
        return block
    if not keys:
        block["reason"] = "No rater of these votes carries an attribute: set them in the console or a study's link."
        return block
    if shown.shape[0] < 2:
        block["reason"] = f"Fewer than two models have {method.min_votes} votes: nothing to rank by segment."
        return block
    block["keys_left_out"] = keys[SEGMENT_KEYS_MAX:]
    code = np.full(competitor_ids.shape[0], -1, dtype=np.int64)
    code[shown] = np.arange(shown.shape[0])
    both = (code[a_all] >= 0) & (code[b_all] >= 0)
    votes = votes.subset(both)
    a, b = code[a_all[both]], code[b_all[both]]
    model_ids = competitor_ids[shown]
    for key in keys[:SEGMENT_KEYS_MAX]:
        block["keys"].append(_key_block(key, attributes[key], votes, a, b, model_ids, labels, method))
    return block


def _segments_of(
    values: Mapping[int, str], rater: NDArray[np.int64], max_segments: int
) -> tuple[NDArray[np.int64], NDArray[np.bool_], list[dict[str, Any]], list[dict[str, Any]]]:
    """Per vote its segment code (-1: no value, or a value left out) and whether its rater has a value, the
    fitted segments' descriptions and the values left out with their reason."""
    raters = np.fromiter(values.keys(), dtype=np.int64, count=len(values))
    names = sorted(set(values.values()))
    code_of = {name: k for k, name in enumerate(names)}
    value_code = np.array([code_of[values[int(r)]] for r in raters], dtype=np.int64)
    order = np.argsort(raters)
    raters, value_code = raters[order], value_code[order]
    pos = np.clip(np.searchsorted(raters, rater), 0, max(raters.shape[0] - 1, 0))
    has = raters.shape[0] > 0 and raters[pos] == rater
    per_vote = np.where(has, value_code[pos], -1)
    counts = np.bincount(per_vote[per_vote >= 0], minlength=len(names))
    ranked = sorted(range(len(names)), key=lambda v: (-counts[v], names[v]))
    enough = [v for v in ranked if counts[v] >= MIN_SEGMENT_VOTES]
    small = [v for v in ranked if 0 < counts[v] < MIN_SEGMENT_VOTES]
    alone, pooled = (
        (enough, []) if len(enough) <= max_segments else (enough[: max_segments - 1], enough[max_segments - 1 :])
    )
    segment = np.full(len(names), -1, dtype=np.int64)
    described: list[dict[str, Any]] = []
    for k, v in enumerate(alone):
        segment[v] = k
        described.append({"value": names[v], "members": [names[v]], "pooled": False})
    if pooled:
        segment[pooled] = len(alone)
        described.append({"value": OTHER, "members": [names[v] for v in pooled], "pooled": True})
    left_out = [
        {
            "value": names[v],
            "votes": int(counts[v]),
            "reason": f"too few votes ({int(counts[v])} < {MIN_SEGMENT_VOTES}): not fitted",
        }
        for v in small
    ]
    return np.where(per_vote >= 0, segment[np.maximum(per_vote, 0)], -1), per_vote >= 0, described, left_out


def _key_block(
    key: str,
    values: Mapping[int, str],
    votes: VoteArrays,
    a: NDArray[np.int64],
    b: NDArray[np.int64],
    model_ids: NDArray[np.int64],
    labels: Mapping[int, str],
    method: Method,
) -> dict[str, Any]:
    n = int(model_ids.shape[0])
    max_segments = min(SEGMENTS_MAX, SEGMENT_PARAMETERS_MAX // n - 1)
    seg, valued, described, left_out = _segments_of(values, votes.rater, max(max_segments, 1))
    inside = seg >= 0
    out: dict[str, Any] = {
        "key": key,
        "votes": int(inside.sum()),
        "votes_without_value": int((~valued).sum()),
        "raters": int(np.unique(votes.rater[inside]).shape[0]),
        "segments": [],
        "left_out": left_out,
        "heterogeneity": None,
        "reason": None,
    }
    if max_segments < 2:
        out["reason"] = (
            f"Too many models ({n}) for segment boards: two segments would pass the joint fit's cap of "
            f"{SEGMENT_PARAMETERS_MAX:,} parameters (models x (segments + 1))."
        )
        return out
    if len(described) < 2:
        out["reason"] = (
            f"Only one segment has {MIN_SEGMENT_VOTES} votes: nothing to compare."
            if described
            else f"No value of this attribute has {MIN_SEGMENT_VOTES} votes."
        )
        return out
    s = len(described)
    fit = fit_segments(
        a[inside],
        b[inside],
        votes.outcome[inside],
        seg[inside],
        votes.rater[inside],
        n_competitors=n,
        n_segments=s,
        both_bad="drop" if method.both_bad == "drop" else "tie",
        offset_prior=OFFSET_PRIOR,
        min_cell_votes=method.min_votes,
        min_segment_votes=MIN_SEGMENT_VOTES,
    )
    styles = (
        fit_segment_styles(
            a[inside],
            b[inside],
            votes.outcome[inside],
            votes.style_left[inside],
            votes.style_right[inside],
            seg[inside],
            n_competitors=n,
            n_segments=s,
            both_bad="drop" if method.both_bad == "drop" else "tie",
            min_votes=MIN_SEGMENT_VOTES,
            feature_names=STYLE_FEATURES,
            confidence=method.confidence,
        )
        if votes.style_left.shape[1] == len(STYLE_FEATURES)
        else None
    )
    z = float(norm.ppf(0.5 + method.confidence / 2.0))
    for k, segment in enumerate(described):
        shown = fit.estimable[k]
        score = est.SCALE * fit.segment_theta[k] + est.BASE
        half = z * est.SCALE * fit.segment_se[k]
        offset = est.SCALE * fit.offset[k]
        offset_half = z * est.SCALE * fit.offset_se[k]
        ranks = est.rank_ranges(score - half, score + half, shown=shown)
        rows: list[dict[str, Any]] = [
            {
                "competitor_id": int(model_ids[i]),
                "label": labels.get(int(model_ids[i]), ""),
                "votes": int(fit.cell_votes[k, i]),
                **(
                    {
                        "score": _r(score[i]),
                        "lower": _r(score[i] - half[i]),
                        "upper": _r(score[i] + half[i]),
                        "offset": _r(offset[i]),
                        "offset_lower": _r(offset[i] - offset_half[i]),
                        "offset_upper": _r(offset[i] + offset_half[i]),
                        "offset_se": _r(est.SCALE * fit.offset_se[k, i], 2),
                        "rank_best": int(ranks.best[i]),
                        "rank_worst": int(ranks.worst[i]),
                        "reason": None,
                    }
                    if shown[i]
                    else {
                        "score": None,
                        "lower": None,
                        "upper": None,
                        "offset": None,
                        "offset_lower": None,
                        "offset_upper": None,
                        "offset_se": None,
                        "rank_best": None,
                        "rank_worst": None,
                        "reason": fit.cell_reason[k][i],
                    }
                ),
            }
            for i in range(n)
        ]
        rows.sort(key=lambda r: (r["score"] is None, -(r["score"] or 0.0), r["competitor_id"]))
        style: dict[str, Any] | None = None
        if styles is not None:
            st = styles[k]
            style = {
                "coefficients": [
                    {
                        "feature": name,
                        "coef": round(float(st.coef[j]), 4),
                        "lower": round(float(st.lower[j]), 4),
                        "upper": round(float(st.upper[j]), 4),
                    }
                    for j, name in enumerate(st.names)
                ]
                if st.coef is not None and st.lower is not None and st.upper is not None
                else [],
                "dropped": [{"feature": name, "reason": why} for name, why in st.dropped],
                "votes": st.votes,
                "reason": st.reason,
            }
        out["segments"].append(
            {
                **segment,
                "votes": int(fit.segment_votes[k]),
                "raters": int(fit.segment_raters[k]),
                "reason": fit.segment_reason[k],
                "rows": rows,
                "style": style,
            }
        )
    h = fit.heterogeneity
    out["heterogeneity"] = {
        "statistic": _r(h.statistic, 3) if h.statistic is not None else None,
        "f_statistic": _r(h.f_statistic, 3) if h.f_statistic is not None else None,
        "df": h.df,
        "df_denominator": h.df_denominator,
        "p_value": float(f"{h.p_value:.4g}") if h.p_value is not None else None,
        "raters": h.raters,
        "segments": [described[k]["value"] for k in h.segments],
        "models": [int(model_ids[i]) for i in h.models],
        "reason": h.reason,
    }
    out["converged"] = bool(fit.converged)
    if fit.groups > 1:
        out["reason"] = "The comparisons fall into separate groups of models: scores compare only within a group."
    return out
