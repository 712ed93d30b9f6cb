"""Rater quality from the vote log's arrays: agreement on shared items and the outlier e-process, as
JSON-ready dicts (numpy only, no Django; ``selectors.rater_quality`` reads the log and calls this).

**Items.** An item is one answer pair: a shared battle's copies (``Battle.item_key``, one per rater of
the k a campaign asks for) are one item, and a battle that was not shared is an item of its own (one
rater, so it enters no coefficient). Each copy may show the pair in its own side order; a vote's category
is re-expressed from the lower competitor id's side ("left" means the lower id won), so a swap of sides
does not read as disagreement.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from .estimators.aggregate import LEFT_WINS, RIGHT_WINS
from .estimators.agreement import (
    Coefficient,
    RaterPair,
    Ratings,
    fleiss_kappa,
    krippendorff_alpha,
    pairwise_cohen,
    ratings,
    raw_agreement,
)
from .estimators.rater_outliers import rater_outliers

ITEM_KEY = (
    "shared battle: the copies of one answer pair shown to k raters (Battle.item_key; a battle that was "
    "not shared is an item of its own), categories with sides normalised to the lower competitor id"
)
CATEGORIES = ("left", "right", "tie", "both_bad")


def _num(value: float | None) -> float | None:
    if value is None or not math.isfinite(value):
        return None
    return float(value)


def coefficient_dict(c: Coefficient) -> dict[str, Any]:
    return {
        "value": _num(c.value),
        "lower": _num(c.lower),
        "upper": _num(c.upper),
        "confidence": c.confidence,
        "interval_method": c.interval_method,
        "reason": c.reason,
        "interval_reason": c.interval_reason,
        "observed_agreement": _num(c.observed),
        "chance_agreement": _num(c.expected),
        "se": _num(c.se),
        "se_null": _num(c.se_null),
        "z": _num(c.z),
        "p_value": _num(c.p_value),
        "items": c.n_items,
        "values": c.n_values,
        "bootstrap_undefined": c.bootstrap_undefined,
        "raters_per_item": c.extra.get("raters_per_item"),
    }


def item_categories(
    item: NDArray[np.int64], left: NDArray[np.int64], right: NDArray[np.int64], outcome: NDArray[np.int64]
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Dense item codes (from any integer item key per vote) and each vote's category with sides
    normalised to the lower competitor id (see the module doc)."""
    if item.size == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    _, codes = np.unique(item, return_inverse=True)
    swapped = left > right
    category = outcome.copy()
    category[swapped & (outcome == LEFT_WINS)] = RIGHT_WINS
    category[swapped & (outcome == RIGHT_WINS)] = LEFT_WINS
    return np.asarray(codes, dtype=np.int64).reshape(-1), category.astype(np.int64)


def _agreement(data: Ratings, *, bootstrap: int, seed: int) -> dict[str, Any]:
    raw = raw_agreement(data)
    return {
        "raters": int(len(data.raters)),
        "items": int(len(data.items)),
        "shared_items": raw.n_items,
        "raw_agreement": _num(raw.overall),
        "raw_agreement_pairs": _num(raw.overall_pairs),
        "raw_agreement_reason": raw.reason,
        "fleiss_kappa": coefficient_dict(fleiss_kappa(data, bootstrap=bootstrap, seed=seed)),
        "krippendorff_alpha": coefficient_dict(krippendorff_alpha(data, bootstrap=bootstrap, seed=seed)),
    }


def _pair_dict(pair: RaterPair) -> dict[str, Any]:
    return {"rater_a": pair.rater_a, "rater_b": pair.rater_b, "cohen_kappa": coefficient_dict(pair.kappa)}


def quality_report(
    *,
    vote_id: NDArray[np.int64],
    rater: NDArray[np.int64],
    item: NDArray[np.int64],
    left: NDArray[np.int64],
    right: NDArray[np.int64],
    outcome: NDArray[np.int64],
    pools: Sequence[tuple[int, str, Sequence[int]]] = (),
    alpha: float = 0.01,
    min_common: int = 10,
    bootstrap: int = 1000,
    seed: int = 0,
) -> dict[str, Any]:
    """Agreement overall and per pool (``pools``: (id, name, member user ids)), Cohen's kappa of rater
    pairs with at least ``min_common`` common items, and per rater raw agreement and the outlier test.
    Votes in log order; ``item`` is each vote's item (any integer key: equal keys, one item)."""
    item, category = item_categories(item, left, right, outcome)
    data = ratings(item, rater, category, n_categories=len(CATEGORIES))
    overall = _agreement(data, bootstrap=bootstrap, seed=seed)
    overall["repeat_votes"] = data.n_repeats
    overall["rater_pairs"] = [_pair_dict(p) for p in pairwise_cohen(data, min_common=min_common)]

    per_pool = []
    for pool_id, name, members in pools:
        mask = np.isin(rater, np.asarray(list(members), dtype=np.int64))
        sub = ratings(item[mask], rater[mask], category[mask], n_categories=len(CATEGORIES))
        per_pool.append({"pool_id": pool_id, "name": name, **_agreement(sub, bootstrap=bootstrap, seed=seed)})

    raw = raw_agreement(data)
    share = raw.rater_share
    outliers = rater_outliers(rater, left, right, outcome, alpha=alpha)
    index_of: Mapping[int, int] = {int(r): i for i, r in enumerate(outliers.raters)}
    votes = np.bincount(data.rater, minlength=len(data.raters))
    rows = []
    for i, rater_id in enumerate(data.raters.tolist()):
        j = index_of[rater_id]
        flag_row = int(outliers.flag_row[j])
        rows.append(
            {
                "rater_id": rater_id,
                "votes": int(outliers.n_votes[j]),
                "items": int(votes[i]),
                "shared_items": int(raw.rater_items[i]),
                "agreement": _num(float(share[i])),
                "agreeing_pairs": int(raw.rater_agreeing[i]),
                "pairs": int(raw.rater_pairs[i]),
                "informative_votes": int(outliers.n_informative[j]),
                "e_value": _num(float(np.exp(min(outliers.log_e[j], 700.0)))),
                "e_value_max": _num(float(np.exp(min(outliers.log_e_max[j], 700.0)))),
                "flagged": bool(outliers.flagged[j]),
                "votes_to_flag": int(outliers.votes_to_flag[j]) or None,
                "flag_vote_id": int(vote_id[flag_row]) if flag_row >= 0 else None,
            }
        )
    return {
        "item_key": ITEM_KEY,
        "votes": int(rater.size),
        "confidence": 0.95,
        "bootstrap_rounds": bootstrap,
        "seed": seed,
        "overall": overall,
        "pools": per_pool,
        "raters": rows,
        "outliers": {
            "alpha": alpha,
            "threshold": outliers.threshold,
            "ties": "skip",
            "method": outliers.method,
            "flagged": int(outliers.flagged.sum()),
        },
    }
