"""Board quality from a board's votes and rows, as JSON-ready blocks (numpy only, no Django).

``quality_blocks`` gives the recompute ``extra["quality"]`` (separability) and ``extra["cyclic"]`` (the Hodge
cyclic share of the pairwise flow) of a raw board; ``rows_comparison`` compares two stored boards' rows
(``estimators.board_quality``). The definitions are in that module's docstring and in the manual
(docs/statistics/board-quality.md)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from . import estimators as est
from .compute import Method, dense_index
from .estimators import board_quality as bq
from .policy import VoteArrays

# The Hodge solve factors a Laplacian over the placed competitors (dense up to the ratio code's limit,
# sparse above); past this many the block says so instead of computing.
MAX_CYCLIC_COMPETITORS = 5000


def quality_blocks(
    votes: VoteArrays, competitor_ids: NDArray[np.int64], rows: Sequence[Mapping[str, Any]], method: Method
) -> dict[str, dict[str, Any]]:
    """``{"quality": ..., "cyclic": ...}`` of one raw board: separability from its rows, the cyclic share from
    the decisive votes between its placed competitors, counted per pair (ties left out and counted)."""
    board = bq.board_scores(rows)
    quality = {
        "separability": bq.separability(board),
        "computed_from": "the raw board's own intervals (per-competitor, at the board's confidence)",
        "confidence": method.confidence,
    }
    n = int(competitor_ids.shape[0])
    placed = np.isin(competitor_ids, board.ids)
    cyclic: dict[str, Any]
    if int(placed.sum()) > MAX_CYCLIC_COMPETITORS:
        cyclic = {"share": None, "reason": f"more than {MAX_CYCLIC_COMPETITORS} placed competitors: not computed"}
    elif len(votes) == 0 or n < 3:
        cyclic = {"share": None, "reason": "a cycle needs at least three competitors with votes"}
    else:
        a, b = dense_index(votes, competitor_ids)
        keep = placed[a] & placed[b]
        if method.both_bad == "drop":
            keep &= votes.outcome != est.BOTH_BAD
        cells = est.aggregate_cells(
            a[keep],
            b[keep],
            votes.outcome[keep],
            n_competitors=n,
            count=None if votes.count is None else votes.count[keep],
        )
        lo, hi, wins_lo, wins_hi, ties = bq.pair_records(cells, both_bad=method.both_bad)
        cyclic = bq.cyclic_share(n, lo, hi, wins_lo, wins_hi, ties)
    cyclic["computed_from"] = "the kept decisive votes between placed competitors of this board (counts per pair)"
    return {"quality": quality, "cyclic": cyclic}


def rows_comparison(
    reference: Sequence[Mapping[str, Any]],
    candidate: Sequence[Mapping[str, Any]],
    *,
    names: tuple[str, str],
    confidence: float = 0.95,
) -> dict[str, Any]:
    """Candidate board's rows against the reference board's (both as stored), over the competitors both place."""
    return bq.board_comparison(
        bq.board_scores(reference), bq.board_scores(candidate), confidence=confidence, names=names
    )
