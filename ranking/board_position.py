"""The board's position and pair-frequency sections (``extra.position``, ``extra.pair_frequency``): pure numpy
on top of ``estimators.position``, no Django. Computed on the raw view's boards (overall and per category)
from every counted vote, grouped by ordered pair: the sides as shown (``left`` is the answer shown on the
left, A; which model is shown there is a coin flip made when the battle is created, and recorded on it)."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from . import estimators as est
from .board_pairwise import bound
from .compute import Method, competitor_codes
from .estimators import position as pos
from .policy import VoteArrays

# The fits are dense in the competitors ((n + 2)^2 information, profiled for h): past this many a board
# carries the reason instead (the raw view's own fit is the one that must scale further).
MAX_COMPETITORS = 400
# The most over-sampled pairs listed by name: at most this many, each shown at least OVER_SAMPLED_RATIO
# times the mean count.
OVER_SAMPLED_LISTED = 5
OVER_SAMPLED_RATIO = 1.5

POSITION_MODEL = (
    "Bradley-Terry with a left-side term: P(left wins) = sigmoid(theta_left - theta_right + h) with ties half a "
    "win each side, or Davidson's model with d = theta_left - theta_right + h (the board's tie rule); h and the "
    "strengths fitted jointly (one virtual tied game on each strength and on h)"
)
POSITION_INTERVAL = (
    "profile likelihood of h (strengths refitted at every point; a side the votes cannot close is open, the other "
    "then by the boundary rule)"
)
WEIGHT_RULE = (
    "each unordered pair's votes weigh mean count / the pair's count (the mean over the pairs of shown competitors; "
    f"a pair with a hidden competitor weighs 1), trimmed at {pos.WEIGHT_TRIM:g} and rescaled so the weights sum to "
    "the votes: every pair counts as if shown equally often"
)
PAIR_INTERVAL = (
    "sandwich (robust) intervals from the per-vote scores with the squared weights, for the weighted and the "
    "unweighted fit alike; open sides as on the board; a one-sided or thin record gets at least the width of its "
    "unweighted profile interval"
)


def _computed_from(votes: int, ties: str, method: Method) -> dict[str, Any]:
    return {
        "view": "raw",
        "votes": votes,
        "rows": "every counted vote of this board, grouped by (left, right, outcome): the sides as shown",
        "ties": "Davidson" if ties == "davidson" else "half a win each side",
        "both_bad": method.both_bad,
    }


def position_compute(
    votes: VoteArrays, competitor_ids: NDArray[np.int64], labels: dict[int, str], method: Method
) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(extra["position"], extra["pair_frequency"])`` of one raw board: the left-side advantage with its
    interval and the scores adjusted for it; the board refitted with each pair weighted inversely to how
    often it was shown, beside the same fit unweighted. Either block says why when it cannot be given."""
    n = int(competitor_ids.shape[0])
    a, b = competitor_codes(votes.left, votes.right, competitor_ids)
    oc = pos.oriented_counts(a, b, votes.outcome, n_competitors=max(n, 1), count=votes.count, both_bad=method.both_bad)
    total = int(round(float(oc.total.sum())))
    decisive = float(oc.wins_left.sum() + oc.wins_right.sum())
    # Davidson's model needs ties and decisive votes both (all ties: its tie parameter diverges).
    ties = "davidson" if method.ties == "davidson" and float(oc.ties.sum()) > 0 and decisive > 0 else "half"
    source = _computed_from(total, ties, method)
    reason = None
    if total == 0 or n < 2:
        reason = "not estimable: no counted votes between two competitors"
    elif n > MAX_COMPETITORS:
        reason = f"not computed: over {MAX_COMPETITORS} competitors (the fits are dense in the competitors)"
    if reason is not None:
        return (
            {
                "estimable": False,
                "reason": reason,
                **_side_record(pos.position_counts(oc), method),
                "computed_from": source,
            },
            {"available": False, "reason": reason, "computed_from": source},
        )
    reference = _reference(method, competitor_ids)
    played = np.bincount(oc.left, oc.total, minlength=n) + np.bincount(oc.right, oc.total, minlength=n)
    shown = est.shown_mask(played, method.min_votes)
    return (
        _position_block(oc, competitor_ids, labels, method, ties, reference, shown, source),
        _pair_block(oc, competitor_ids, labels, method, ties, reference, shown, source),
    )


def _reference(method: Method, competitor_ids: NDArray[np.int64]) -> int | None:
    if method.anchor is None:
        return None
    found = np.flatnonzero(competitor_ids == method.anchor)
    return int(found[0]) if found.size else None


def _side_record(counts: pos.PositionCounts, method: Method) -> dict[str, Any]:
    """What the votes say about the sides without a model: wins each side, ties, the left side's share of the
    decisive votes with its Wilson interval (as the judges' position figure), and the pairs shown both ways."""
    decisive = counts.wins_left + counts.wins_right
    share_lo, share_hi = est.wilson_interval(counts.wins_left, decisive, confidence=method.confidence)
    return {
        "confidence_pct": round(method.confidence * 100),
        "left_wins": int(round(counts.wins_left)),
        "right_wins": int(round(counts.wins_right)),
        "ties": int(round(counts.ties)),
        "left_share": round(counts.wins_left / decisive, 4) if decisive else None,
        "left_share_lower": round(float(share_lo), 4) if decisive else None,
        "left_share_upper": round(float(share_hi), 4) if decisive else None,
        "pairs": counts.pairs,
        "pairs_both_ways": counts.pairs_both_ways,
        "votes_in_pairs_both_ways": int(round(counts.votes_in_pairs_both_ways)),
    }


def _position_block(
    oc: pos.OrientedCounts,
    competitor_ids: NDArray[np.int64],
    labels: dict[int, str],
    method: Method,
    ties: str,
    reference: int | None,
    shown: NDArray[np.bool_],
    source: dict[str, Any],
) -> dict[str, Any]:
    res = pos.fit_position(
        oc,
        ties="davidson" if ties == "davidson" else "half",
        both_bad=method.both_bad,
        confidence=method.confidence,
        reference=reference,
    )
    out: dict[str, Any] = {
        "estimable": res.estimable,
        "reason": res.reason,
        "model": POSITION_MODEL,
        "interval": POSITION_INTERVAL,
        **_side_record(res.counts, method),
        "computed_from": source,
    }
    if not res.estimable:
        return out
    assert res.h is not None and res.scores_adjusted is not None and res.scores_plain is not None

    def points(v: float | None) -> float | None:
        return None if v is None else round(est.SCALE * v, 1)

    def prob(v: float | None) -> float | None:
        return None if v is None else round(float(1.0 / (1.0 + np.exp(-v))), 4)

    out.update(
        {
            "h": round(res.h, 4),
            "lower": None if res.lower is None else round(res.lower, 4),
            "upper": None if res.upper is None else round(res.upper, 4),
            "lower_open": res.lower_open,
            "upper_open": res.upper_open,
            # On the board's scale: the score points the left side is worth.
            "points": points(res.h),
            "points_lower": points(res.lower),
            "points_upper": points(res.upper),
            # The share of the votes (ties half) the left side takes between two equally strong competitors.
            "left_win_probability": prob(res.h),
            "left_win_probability_lower": 0.0 if res.lower_open else prob(res.lower),
            "left_win_probability_upper": 1.0 if res.upper_open else prob(res.upper),
            "converged": res.converged,
        }
    )
    rows = [
        {
            "competitor_id": int(competitor_ids[i]),
            "label": labels.get(int(competitor_ids[i]), ""),
            "score": round(float(res.scores_plain[i]), 2),
            "adjusted": round(float(res.scores_adjusted[i]), 2),
            "shift": round(float(res.scores_adjusted[i] - res.scores_plain[i]), 2),
        }
        for i in np.flatnonzero(shown)
    ]
    out["rows"] = sorted(rows, key=lambda r: -r["adjusted"])
    return out


def _pair_block(
    oc: pos.OrientedCounts,
    competitor_ids: NDArray[np.int64],
    labels: dict[int, str],
    method: Method,
    ties: str,
    reference: int | None,
    shown: NDArray[np.bool_],
    source: dict[str, Any],
) -> dict[str, Any]:
    res = pos.fit_pair_frequency(
        oc,
        shown=shown,
        ties="davidson" if ties == "davidson" else "half",
        both_bad=method.both_bad,
        confidence=method.confidence,
        reference=reference,
    )
    share = res.pair_count / res.votes
    order = np.argsort(-res.pair_count, kind="stable")
    over = [k for k in order[:OVER_SAMPLED_LISTED] if res.pair_count[k] >= OVER_SAMPLED_RATIO * res.mean_count]

    def label(i: int) -> str:
        return labels.get(int(competitor_ids[i]), "")

    def side(s: pos.FitSide, i: int) -> dict[str, Any]:
        return {
            "score": round(float(s.scores[i]), 2),
            "lower": bound(s.lower[i]),
            "upper": bound(s.upper[i]),
            "lower_open": bool(np.isneginf(s.lower[i])),
            "upper_open": bool(np.isposinf(s.upper[i])),
            "rank_best": int(s.ranks.best[i]),
            "rank_worst": int(s.ranks.worst[i]),
        }

    rows = [
        {
            "competitor_id": int(competitor_ids[i]),
            "label": label(int(i)),
            "component": int(res.components[i]),
            "profiled": bool(res.profiled[i]),
            "unweighted": side(res.unweighted, int(i)),
            "weighted": side(res.weighted, int(i)),
            "shift": round(float(res.weighted.scores[i] - res.unweighted.scores[i]), 2),
        }
        for i in np.flatnonzero(shown)
    ]
    return {
        "available": True,
        "reason": None,
        "weight_rule": WEIGHT_RULE,
        "interval": PAIR_INTERVAL,
        "confidence_pct": round(method.confidence * 100),
        "pairs": int(res.pair_count.shape[0]),
        "mean_count": round(res.mean_count, 2),
        "votes": int(round(res.votes)),
        "effective_votes": round(res.effective_votes, 1),
        "trimmed_pairs": res.trimmed,
        "balanced": bool(np.allclose(res.pair_weight, 1.0)),
        "over_sampled_rule": f"pairs shown at least {OVER_SAMPLED_RATIO:g} times the mean count, most shown first",
        "over_sampled": [
            {
                "competitor_ids": [int(competitor_ids[res.pair_lo[k]]), int(competitor_ids[res.pair_hi[k]])],
                "labels": [label(int(res.pair_lo[k])), label(int(res.pair_hi[k]))],
                "votes": int(round(float(res.pair_count[k]))),
                "share_of_votes": round(float(share[k]), 4),
                "times_mean": round(float(res.pair_count[k] / res.mean_count), 2),
                "weight": round(float(res.pair_weight[k]), 4),
            }
            for k in over
        ],
        "converged": res.weighted.converged and res.unweighted.converged,
        "rows": sorted(rows, key=lambda r: -r["weighted"]["score"]),
        "computed_from": source,
    }
