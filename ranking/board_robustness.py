"""The robustness audit of a raw board, as its snapshot stores it (``extra["robustness"]``).

Pure numpy on top of ``estimators.robustness`` (no Django): the board's kept votes (grouped rows are
fine: the audit works on cells) give the number; the votes one by one (``VoteLog.sample``) give the ids
of the votes to drop. The block says what it was computed from, and why when it says nothing."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from . import estimators as est
from .compute import Method, dense_index
from .estimators.aggregate import canonical_pairs
from .estimators.robustness import CellDrop, TargetResult, robustness_audit
from .policy import VoteArrays

# The top-k sets audited besides rank 1 (a campaign has no top-k of its own).
TOP_KS = (3, 5)
# The most votes a removal may hold, as a share of the board's votes: beyond it the board is "robust".
MAX_SHARE = 0.1
# Vote ids listed per target (the cells and their counts are always complete).
VOTE_IDS_MAX = 50

METHOD = (
    "Approximate maximum influence perturbation (Broderick, Giordano and Meager 2020; applied to an arena by "
    "Huang et al. 2025): the first-order influence of each vote on the score gaps at the top (one Cholesky "
    "factor of the fit's Hessian), a greedy removal of the most influential votes, then exact refits without "
    "them: more votes while the refit does not flip, then the shortest flipping prefix by bisection, then "
    "each removal one vote smaller refitted (minimal: none of them flips). Every number reported is verified "
    "by an exact refit; it is an upper bound on the true smallest removal (an exhaustive search is out of "
    "reach), equal to it on small boards checked by brute force."
)
LIMITS = (
    "Audits the raw view's half-win Bradley-Terry fit (ties half a win; both_bad as the board counts it; "
    "the same prior of one virtual tied game), not the style-controlled or reliability-weighted views. "
    "Votes are removed, never added or changed. The ranked set is the board's (competitors over its vote "
    "threshold); a removal that would hide a competitor is not treated specially. A removal is searched "
    f"up to {MAX_SHARE:.0%} of the board's votes; beyond it the board is reported robust as far as checked."
)
_OUTCOMES = {est.LEFT_WINS: "win", est.RIGHT_WINS: "win", est.TIE: "tie", est.BOTH_BAD: "both_bad"}


def robustness_block(
    votes: VoteArrays,
    per_vote: VoteArrays | None,
    competitor_ids: NDArray[np.int64],
    labels: dict[int, str],
    method: Method,
) -> dict[str, Any]:
    """The audit of one raw board: ``votes`` its kept votes (grouped or not), ``per_vote`` the same
    votes one by one or a sample of them (for the ids), ``method`` the board's (both_bad, vote threshold)."""
    n = int(competitor_ids.shape[0])
    if n == 0 or votes.votes == 0:
        return {
            "computed_from": {"view": "raw", "votes": votes.votes, "cells": 0, "competitors_ranked": 0},
            "method": METHOD,
            "limits": LIMITS,
            "leader": None,
            "reason": "no votes on this board",
            "targets": [],
        }
    a, b = dense_index(votes, competitor_ids)
    cells = est.aggregate_cells(a, b, votes.outcome, n_competitors=n, count=votes.count)
    shown = _shown(cells, method)
    audit = robustness_audit(cells, both_bad=method.both_bad, shown=shown, ks=(1, *TOP_KS), max_share=MAX_SHARE)

    def who(i: int) -> dict[str, Any]:
        pk = int(competitor_ids[i])
        return {"id": pk, "label": labels.get(pk, str(pk))}

    computed_from: dict[str, Any] = {
        "view": "raw",
        "votes": audit.n_votes,
        "cells": audit.n_cells,
        "competitors_ranked": int(shown.sum()),
        "model": "Bradley-Terry, ties half a win each side, both_bad "
        + ("counted as a tie" if method.both_bad == "tie" else "dropped")
        + ", one virtual tied game per competitor (the raw view's fit)",
    }
    if method.ties == "davidson":
        computed_from["note"] = (
            "this board's scores use Davidson's tie model; the audit refits the half-win Bradley-Terry model "
            "(its leader is the one named here)"
        )
    ids = _VoteIds(per_vote, competitor_ids)
    if per_vote is not None:
        computed_from["vote_ids_from"] = (
            "every kept vote"
            if per_vote.votes >= audit.n_votes
            else f"the per-vote sample ({per_vote.votes:,} of {audit.n_votes:,} kept votes): a cell may list "
            "fewer ids than votes"
        )
    return {
        "computed_from": computed_from,
        "method": METHOD,
        "limits": LIMITS,
        "leader": None if audit.leader is None else who(audit.leader),
        "reason": audit.reason,
        "targets": [_target(t, audit.n_votes, who, ids, cells) for t in audit.targets],
    }


def _shown(cells: est.Cells, method: Method) -> NDArray[np.bool_]:
    """The board's ranked competitors: at least ``min_votes`` votes entering the fit (as ``board_compute``)."""
    n = cells.n_competitors
    counted = cells.count.astype(np.float64)
    if method.both_bad == "drop":
        counted = np.where(cells.outcome == est.BOTH_BAD, 0.0, counted)
    decided = np.bincount(cells.lo, counted, minlength=n) + np.bincount(cells.hi, counted, minlength=n)
    shown: NDArray[np.bool_] = est.shown_mask(decided, method.min_votes)
    return shown


class _VoteIds:
    """The ids of a cell's votes, from the votes one by one: sorted by cell key once, then a slice each."""

    def __init__(self, per_vote: VoteArrays | None, competitor_ids: NDArray[np.int64]) -> None:
        self.n = int(competitor_ids.shape[0])
        if per_vote is None or len(per_vote) == 0:
            self.keys = np.zeros(0, dtype=np.int64)
            self.ids = np.zeros(0, dtype=np.int64)
            return
        a, b = dense_index(per_vote, competitor_ids)
        lo, hi, outcome, _ = canonical_pairs(a, b, per_vote.outcome.astype(np.int64))
        key = (lo * self.n + hi) * 4 + outcome
        order = np.argsort(key, kind="stable")  # stable: log order within a cell
        self.keys = key[order]
        self.ids = per_vote.vote_id[order]

    def latest(self, drop: CellDrop, limit: int) -> list[int]:
        """The cell's most recent votes, up to ``min(drop.votes, limit)`` (any of them would do)."""
        key = (drop.lo * self.n + drop.hi) * 4 + drop.outcome
        start, end = np.searchsorted(self.keys, [key, key + 1])
        take = min(drop.votes, limit, int(end - start))
        return [int(x) for x in self.ids[end - take : end][::-1]] if take else []


def _target(t: TargetResult, n_votes: int, who: Any, ids: _VoteIds, cells: est.Cells) -> dict[str, Any]:
    out: dict[str, Any] = {
        "k": t.k,
        "target": "rank 1" if t.k == 1 else f"top {t.k}",
        "status": t.status,
        "reason": t.reason,
        "before": [who(i) for i in t.top_before],
    }
    if t.status == "not_computed":
        return out
    out.update(
        {
            "approximate": t.approximate,
            "refits": t.refits,
            "checked_up_to": t.checked_up_to,
            "checked_share_pct": _pct(t.checked_up_to, n_votes),
        }
    )
    if t.status != "flips" or t.votes is None:
        return out
    budget = VOTE_IDS_MAX
    drops = []
    for d in t.drops:
        listed = ids.latest(d, budget)
        budget -= len(listed)
        lo_won = d.outcome != est.RIGHT_WINS
        first, second = (d.lo, d.hi) if lo_won else (d.hi, d.lo)
        drops.append(
            {
                "outcome": _OUTCOMES[d.outcome],
                "first": who(first),
                "second": who(second),
                "votes": d.votes,
                "vote_ids": listed,
            }
        )
    before, after = set(t.top_before), set(t.top_after)
    out.update(
        {
            "votes": t.votes,
            "share": round(t.votes / n_votes, 8),
            "share_pct": _pct(t.votes, n_votes),
            "verified": t.verified,
            "minimal": t.minimal,
            "after": [who(i) for i in t.top_after],
            "leaving": [who(i) for i in t.top_before if i not in after],
            "entering": [who(i) for i in t.top_after if i not in before],
            "drops": drops,
            "vote_ids_listed": sum(len(d["vote_ids"]) for d in drops),
        }
    )
    return out


def _pct(votes: int, n_votes: int) -> float:
    """A share in percent to two significant figures (2 of 57,477 is 0.0035%)."""
    return float(f"{100.0 * votes / n_votes:.2g}") if n_votes else 0.0
