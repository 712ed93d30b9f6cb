"""The board analyses of a raw board (issue 24), each under its own key of the snapshot's ``extra``, computed
the same way by the recompute and by anyone who recomputes a board from the log:

- every raw board (overall and per category): ``robustness`` (the fewest votes whose removal changes rank 1
  and the top k, ``board_robustness``), ``position`` and ``pair_frequency`` (``board_position``), ``quality``
  and ``cyclic`` (``board_quality``);
- the overall raw board also: ``planning`` (``board_planning``), ``validation`` (``board_validation``) and
  ``segments`` (``segments``).

``votes`` are the board's votes as the raw view reads them (grouped rows or one by one); ``per_vote`` the
same votes one by one, or the recompute's deterministic sample of them (the analyses that need each vote:
its id, its time order, its rater).

Each analysis is isolated: one that fails on some votes logs its exception and leaves a ``reason`` in its
blocks, and the board and the other analyses are stored as usual (a failure once took every board of the
campaign down with it)."""

from __future__ import annotations

import logging
from collections.abc import Callable
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

logger = logging.getLogger(__name__)

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
    out: dict[str, Any] = {}
    out.update(_isolated(("robustness",), lambda: robustness_block(votes, per_vote, competitor_ids, labels, method)))
    out.update(
        _isolated(("position", "pair_frequency"), lambda: position_compute(votes, competitor_ids, labels, method))
    )
    out.update(_isolated(("quality", "cyclic"), lambda: quality_blocks(votes, competitor_ids, board.rows, method)))
    if overall:
        out.update(
            _isolated(("planning",), lambda: planning_compute(votes, competitor_ids, board.rows, board.extra, method))
        )
        out.update(_isolated(("validation",), lambda: validation_block(per_vote, votes.votes, competitor_ids, method)))
        out.update(
            _isolated(
                ("segments",),
                lambda: segments_compute(per_vote, competitor_ids, labels, method, kept=kept, attributes=attributes),
            )
        )
    return out


def _isolated(keys: tuple[str, ...], compute: Callable[[], Any]) -> dict[str, Any]:
    """``keys`` to the block (or blocks, in order) ``compute`` returns; a reason in each where it raises."""
    try:
        result = compute()
    except Exception as exc:
        logger.exception("board analysis %s failed; its block says so and the board is stored", "/".join(keys))
        reason = (
            f"this analysis failed on these votes ({type(exc).__name__}): the error is logged for the operator; "
            "the board and the other analyses are not affected"
        )
        return {key: {"reason": reason, "failed": True} for key in keys}
    if len(keys) == 1:
        return {keys[0]: result}
    if isinstance(result, dict):
        return {key: result[key] for key in keys}
    return dict(zip(keys, result, strict=True))
