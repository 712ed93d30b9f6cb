"""The board's held-out predictive validation (``extra.validation`` of the overall raw board): the
candidate models of ``estimators.validation`` fitted on the earlier votes and scored on the later ones.

Pure numpy on top of ``ranking.estimators``, like ``compute``. It reads the per-vote sample the recompute
already holds (votes one by one, in vote-id order, with their style counts), thinned to at most
``VALIDATION_MAX`` votes by the same deterministic hash (``policy.sample_mask``), so that its cost is
bounded whatever the campaign's size: a dozen fits of at most that many votes."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from . import estimators as est
from .compute import Method, competitor_codes
from .policy import STYLE_FEATURES, VoteArrays, sample_mask, sample_rate

__all__ = ["VALIDATION_MAX", "validation_block"]

# The most votes the validation reads: a nested hash sample of the per-vote sample (policy.PER_VOTE_MAX).
VALIDATION_MAX = 100_000


def validation_block(votes: VoteArrays, kept: int, competitor_ids: NDArray[np.int64], method: Method) -> dict[str, Any]:
    """``extra.validation``: the report of ``est.validate_models`` on ``votes`` (one by one, in log order;
    ``kept``: the board's kept votes, of which ``votes`` is a sample), with what it was computed from."""
    if votes.count is not None:
        raise ValueError("the validation splits the votes by time: pass them one by one")
    rate = sample_rate(kept, VALIDATION_MAX)
    used = votes if len(votes) <= VALIDATION_MAX else votes.subset(sample_mask(votes.vote_id, rate))
    a, b = competitor_codes(used.left, used.right, competitor_ids)
    report = est.validate_models(
        a,
        b,
        used.outcome,
        n_competitors=int(competitor_ids.shape[0]),
        left_style=used.style_left if used.style_left.shape[0] == len(used) else None,
        right_style=used.style_right if used.style_right.shape[0] == len(used) else None,
        feature_names=STYLE_FEATURES,
        both_bad=method.both_bad,
        confidence=method.confidence,
    )
    block = report.as_dict()
    block["computed_from"] = {
        "votes": len(used),
        "of": kept,
        "board": "overall raw board only (every category's votes together)",
        "rule": "the per-vote sample in vote-id order, thinned by the same deterministic hash of the vote id "
        f"(policy.sample_mask) to at most {VALIDATION_MAX:,} votes"
        if len(used) < kept
        else "every kept vote, in vote-id order",
        "both_bad": "counted as a tie" if method.both_bad == "tie" else "dropped",
        "first_test_vote_id": int(used.vote_id[report.train_votes]) if report.reason is None else None,
    }
    return block
