"""The exclusion policy applied to the vote log before any ranking (numpy only, no Django).

Every rule is explicit, parameterised and counted, and the policy with its counts is stored in each
snapshot, so any published number can be recomputed from the log and argued about rule by rule."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from .estimators.style import STYLE_FEATURES

__all__ = ["STYLE_FEATURES", "ExclusionPolicy", "VoteArrays", "cumcount"]


@dataclass(frozen=True)
class VoteArrays:
    """The columns of the vote log a ranking needs, one entry per vote, in log (id) order."""

    vote_id: NDArray[np.int64]
    left: NDArray[np.int64]  # competitor primary keys
    right: NDArray[np.int64]
    outcome: NDArray[np.int64]  # LEFT_WINS=0, RIGHT_WINS=1, TIE=2, BOTH_BAD=3
    decision_ms: NDArray[np.int64]
    rater: NDArray[np.int64]
    prompt: NDArray[np.int64]  # dense codes of the prompt hash
    category: NDArray[np.int64]  # dense codes into `categories`
    categories: tuple[str, ...]
    identity: NDArray[np.bool_]  # prompt asks identity, or an answer names a model
    style_left: NDArray[np.float64]  # (n, len(STYLE_FEATURES))
    style_right: NDArray[np.float64]

    def __len__(self) -> int:
        return int(self.vote_id.shape[0])

    def subset(self, mask: NDArray[np.bool_]) -> VoteArrays:
        fields: dict[str, Any] = {k: v[mask] if isinstance(v, np.ndarray) else v for k, v in self.__dict__.items()}
        return VoteArrays(**fields)


def cumcount(groups: NDArray[np.int64]) -> NDArray[np.int64]:
    """0 for a group's first vote, 1 for its second, ... in log order."""
    if groups.size == 0:
        return np.zeros(0, dtype=np.int64)
    counts: NDArray[np.int64] = pd.Series(groups).groupby(groups, sort=False).cumcount().to_numpy(dtype=np.int64)
    return counts


@dataclass(frozen=True)
class ExclusionPolicy:
    min_decision_ms: int = 0
    exclude_identity_leaks: bool = True
    prompt_hash_cap: int | None = None
    rater_vote_cap: int | None = None
    flagged_raters: tuple[int, ...] = ()
    # The RaterFlag rows in force when the votes were loaded (their raters are ``flagged_raters``):
    # stored in every snapshot, so a board can be traced to the flags, and their reviews, behind it.
    flag_ids: tuple[int, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "flagged_raters": sorted(self.flagged_raters), "flag_ids": sorted(self.flag_ids)}

    def apply(self, votes: VoteArrays) -> tuple[NDArray[np.bool_], dict[str, int]]:
        """The mask of votes kept, and how many votes each rule excludes (a vote may break several
        rules; ``total`` counts each excluded vote once)."""
        rules = self.rules(votes)
        return self._count(rules, np.ones(len(votes), dtype=bool))

    def counts_by_category(self, votes: VoteArrays) -> dict[str, dict[str, int]]:
        """Per category, how many of *its* votes each rule excludes. The caps are still counted over
        the whole log in order (as they are when battles are handed out); only the tally is split."""
        rules = self.rules(votes)
        return {name: self._count(rules, votes.category == code)[1] for code, name in enumerate(votes.categories)}

    @staticmethod
    def _count(
        rules: dict[str, NDArray[np.bool_]], within: NDArray[np.bool_]
    ) -> tuple[NDArray[np.bool_], dict[str, int]]:
        excluded = np.zeros(within.shape[0], dtype=bool)
        for hits in rules.values():
            excluded |= hits
        counts = {name: int((hits & within).sum()) for name, hits in rules.items()}
        counts["total"] = int((excluded & within).sum())
        return ~excluded, counts

    def rules(self, votes: VoteArrays) -> dict[str, NDArray[np.bool_]]:
        """One mask per rule: the votes it excludes."""
        return {
            "too_fast": votes.decision_ms < self.min_decision_ms,
            "identity_leak": votes.identity if self.exclude_identity_leaks else np.zeros(len(votes), dtype=bool),
            "over_prompt_cap": (cumcount(votes.prompt) >= self.prompt_hash_cap)
            if self.prompt_hash_cap is not None
            else np.zeros(len(votes), dtype=bool),
            "over_rater_cap": (cumcount(votes.rater) >= self.rater_vote_cap)
            if self.rater_vote_cap is not None
            else np.zeros(len(votes), dtype=bool),
            "flagged_rater": np.isin(votes.rater, np.asarray(self.flagged_raters, dtype=np.int64)),
        }
