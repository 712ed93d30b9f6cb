"""The board analyses of a raw board (issue 24), each under its own key of the snapshot's ``extra``, computed
the same way by the recompute and by anyone who recomputes a board from the log:

- every raw board (overall and per category): ``robustness`` (the fewest votes whose removal changes rank 1
  and the top k, ``board_robustness``), ``position`` and ``pair_frequency`` (``board_position``), ``quality``
  and ``cyclic`` (``board_quality``);
- the overall raw board also: ``planning`` (``board_planning``), ``validation`` (``board_validation``) and
  ``segments`` (``segments``).

``votes`` are the board's votes as the raw view reads them (grouped rows or one by one); ``per_vote`` the
same votes one by one, or the recompute's deterministic sample of them (the analyses that need each vote:
its id, its time order, its rater)."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from .board_planning import planning_compute
from .board_position import position_compute
from .board_quality import quality_blocks
from .board_robustness import robustness_block
from .board_validation import validation_block
from .compute import Board, Method
from .policy import VoteArrays
from .segments import segments_compute

RAW_BOARD_ANALYSES = ("robustness", "position", "pair_frequency", "quality", "cyclic")
OVERALL_BOARD_ANALYSES = ("planning", "validation", "segments")


def board_analyses(
    votes: VoteArrays,
    per_vote: VoteArrays,
    competitor_ids: NDArray[np.int64],
    labels: dict[int, str],
    method: Method,
    board: Board,
    *,
    overall: bool,
    kept: int,
    attributes: dict[str, dict[int, str]],
) -> dict[str, Any]:
    """The analyses of one raw board (``board``, computed from ``votes``), keyed as in ``extra``. ``overall``:
    the campaign's overall board, which also gets the planner, the held-out validation and the rater-segment
    boards (``attributes``: the raters' attributes by key; ``kept``: the votes the policy kept)."""
    out: dict[str, Any] = {"robustness": robustness_block(votes, per_vote, competitor_ids, labels, method)}
    out["position"], out["pair_frequency"] = position_compute(votes, competitor_ids, labels, method)
    out.update(quality_blocks(votes, competitor_ids, board.rows, method))
    if overall:
        out["planning"] = planning_compute(votes, competitor_ids, board.rows, board.extra, method)
        out["validation"] = validation_block(per_vote, votes.votes, competitor_ids, method)
        out["segments"] = segments_compute(per_vote, competitor_ids, labels, method, kept=kept, attributes=attributes)
    return out
