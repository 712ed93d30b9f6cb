"""The exclusion policy: each rule, its count, and the mask it leaves (pure numpy)."""

from __future__ import annotations

import numpy as np

from ranking.policy import ExclusionPolicy, VoteArrays, cumcount


def _votes(n: int = 8) -> VoteArrays:
    return VoteArrays(
        vote_id=np.arange(1, n + 1),
        left=np.zeros(n, dtype=np.int64),
        right=np.ones(n, dtype=np.int64),
        outcome=np.zeros(n, dtype=np.int64),
        decision_ms=np.array([100, 5000, 5000, 5000, 5000, 5000, 5000, 900])[:n],
        rater=np.array([1, 1, 1, 2, 2, 3, 3, 3])[:n],
        prompt=np.array([0, 0, 0, 0, 1, 1, 2, 2])[:n],
        category=np.zeros(n, dtype=np.int64),
        categories=("other",),
        identity=np.array([False, False, True, False, False, False, False, False])[:n],
        style_left=np.zeros((n, 4)),
        style_right=np.zeros((n, 4)),
    )


def test_cumcount_is_position_within_group_in_log_order():
    assert cumcount(np.array([5, 5, 7, 5, 7])).tolist() == [0, 1, 0, 2, 1]


def test_each_rule_is_counted_and_excluded():
    policy = ExclusionPolicy(
        min_decision_ms=1000, exclude_identity_leaks=True, prompt_hash_cap=3, rater_vote_cap=2, flagged_raters=(3,)
    )
    keep, counts = policy.apply(_votes())
    assert counts == {
        "too_fast": 2,
        "identity_leak": 1,
        "over_prompt_cap": 1,
        "over_rater_cap": 2,
        "flagged_rater": 3,
        "total": 6,
    }
    # Kept: the second vote (rater 1's second, prompt 0's second) and the fifth (rater 2's second, under the
    # rater cap of 2, and prompt 1's first). The fourth is prompt 0's fourth vote: over the prompt cap of 3.
    assert np.flatnonzero(keep).tolist() == [1, 4]


def test_permissive_policy_keeps_everything():
    keep, counts = ExclusionPolicy(exclude_identity_leaks=False).apply(_votes())
    assert keep.all() and counts["total"] == 0


def test_policy_is_recorded_as_plain_data():
    assert ExclusionPolicy(flagged_raters=(9, 2)).as_dict()["flagged_raters"] == [2, 9]
