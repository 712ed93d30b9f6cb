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

__all__ = [
    "STYLE_FEATURES",
    "ExclusionPolicy",
    "VoteArrays",
    "VoteLog",
    "cumcount",
    "sample_mask",
    "vote_log_from_arrays",
]


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
    # Grouped rows (``VoteLog.counted``): how many identical votes each row stands for; None: one vote a
    # row. Grouped rows carry only what they are grouped by (category, prompt when grouped by it, the
    # pair, the outcome); their other columns are placeholders (rater -1, no style columns).
    count: NDArray[np.int64] | None = None

    def __len__(self) -> int:
        """Rows (votes, or groups of votes when ``count`` is set; ``votes`` counts votes)."""
        return int(self.vote_id.shape[0])

    @property
    def votes(self) -> int:
        return len(self) if self.count is None else int(self.count.sum())

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


# --- The log as a recompute reads it: counts for every vote, one by one only where a view needs it ---------

# The views that need each vote (the style control's features, the reliability view's raters, Elo's order)
# read at most this many kept votes of a campaign; above it a deterministic sample of the kept votes
# (``sample_mask``) of about this size. Every count, the raw view and the pairwise tables read every vote.
PER_VOTE_MAX = 1_000_000
# The reliability view reads at most this many of them (a sample nested in the one above): its rater
# bootstrap refits the reliabilities over every (rater, pair) cell each round.
RELIABILITY_MAX = 50_000

# Sampling: a vote is in a sample of rate r when its hashed id is below r * 2**32. The hash, the id's low 32
# bits times an odd constant modulo 2**32, permutes every 2**32 consecutive ids, so a sample of rate r holds
# r of any long run of the log, and a vote in the sample stays in it while the rate stays the same.
_HASH_MULTIPLIER = 1_640_531_527
_HASH_SPAN = 1 << 32


def sample_threshold(rate: float) -> int:
    return _HASH_SPAN if rate >= 1.0 else int(rate * _HASH_SPAN)


def sample_mask(vote_id: NDArray[np.int64], rate: float) -> NDArray[np.bool_]:
    """The votes in the deterministic sample of ``rate`` (the SQL of ``selectors.vote_log`` computes
    the same hash: ``((id & 4294967295) * 1640531527) & 4294967295``)."""
    if rate >= 1.0:
        return np.ones(vote_id.shape[0], dtype=bool)
    hashed = ((vote_id.astype(np.int64) & (_HASH_SPAN - 1)) * _HASH_MULTIPLIER) & (_HASH_SPAN - 1)
    mask: NDArray[np.bool_] = hashed < sample_threshold(rate)
    return mask


def sample_rate(kept: int, cap: int) -> float:
    """The rate of the per-vote sample: every vote up to ``cap`` kept votes, else about ``cap`` of them."""
    return 1.0 if kept <= cap else cap / kept


RULES = ("too_fast", "identity_leak", "over_prompt_cap", "over_rater_cap", "flagged_rater")


def _constant(value: int, m: int) -> NDArray[np.int64]:
    """A read-only column of one value that takes no memory (a placeholder of grouped rows; ten million
    votes would otherwise carry 80 MB of it per column)."""
    out: NDArray[np.int64] = np.broadcast_to(np.int64(value), (m,))
    return out


def grouped_votes(
    category: NDArray[np.int64],
    prompt: NDArray[np.int64],
    left: NDArray[np.int64],
    right: NDArray[np.int64],
    outcome: NDArray[np.int64],
    count: NDArray[np.int64],
    last_id: NDArray[np.int64],
    categories: tuple[str, ...],
) -> VoteArrays:
    """Rows already grouped (one per distinct key) as ``VoteArrays`` with ``count``, sorted by (category,
    prompt, left, right, outcome) so that two readings of one log give equal arrays."""
    order = np.lexsort((outcome, right, left, prompt, category))
    m = int(order.shape[0])
    return VoteArrays(
        vote_id=last_id[order].astype(np.int64),
        left=left[order].astype(np.int64),
        right=right[order].astype(np.int64),
        outcome=outcome[order].astype(np.int64),
        decision_ms=_constant(0, m),
        rater=_constant(-1, m),
        prompt=prompt[order].astype(np.int64),
        category=category[order].astype(np.int64),
        categories=categories,
        identity=np.broadcast_to(np.False_, (m,)),
        style_left=np.zeros((m, 0)),
        style_right=np.zeros((m, 0)),
        count=count[order].astype(np.int64),
    )


@dataclass(frozen=True)
class LogCounts:
    """Everything of a ``VoteLog`` but its sample (``log_counts``)."""

    counted: VoteArrays
    # The kept votes grouped by (category, left, right, outcome) whatever ``by_prompt`` says (``counted`` itself
    # when not by prompt): what the views whose intervals do not resample prompts read (style, reliability).
    paired: VoteArrays
    # The kept votes counted per (category, prompt) (pair and outcome -1): what the interval's choice reads
    # (how much prompts repeat) when ``counted`` is not grouped by prompt.
    prompts: VoteArrays
    total: int
    totals: NDArray[np.int64]
    kept: int
    excluded: dict[str, int]
    excluded_in: dict[str, dict[str, int]]
    last_vote_id: int


@dataclass(frozen=True)
class VoteLog(LogCounts):
    """A campaign's log under its exclusion policy, as the recompute reads it.

    ``counted``: the kept votes grouped by (category, prompt when ``by_prompt``, left, right, outcome),
    each row with its ``count``, sorted by those keys; everything that needs only counts reads this.
    ``sample``: the kept votes one by one, in log order: all of them when at most ``PER_VOTE_MAX`` were
    kept, else those in the sample of ``sample_rate`` (``sample_mask``). ``total``/``totals``: the votes in
    the log, and per category (codes into ``categories``), before the policy; ``excluded`` and
    ``excluded_in`` the policy's counts (``ExclusionPolicy.apply`` and ``counts_by_category``)."""

    sample: VoteArrays
    sample_rate: float
    categories: tuple[str, ...]
    by_prompt: bool


def log_counts(
    *,
    category: NDArray[np.int64],
    categories: tuple[str, ...],
    prompt: NDArray[np.int64],
    left: NDArray[np.int64],
    right: NDArray[np.int64],
    outcome: NDArray[np.int64],
    rules: NDArray[np.int64],
    vote_id: NDArray[np.int64],
    by_prompt: bool,
) -> LogCounts:
    """The counts of a log given every vote's columns and the bitmask of the rules excluding it (bit k:
    ``RULES[k]``), in any order. Kept votes are grouped by (category, left, right, outcome); grouped by
    prompt as well (``by_prompt``) they would be about one a vote at scale, so they stay one a row
    (``count`` 1), in log order."""
    n_categories = len(categories)
    total = int(vote_id.shape[0])
    keep = rules == 0

    def tally(code: int | None) -> dict[str, int]:
        within = np.ones(total, dtype=bool) if code is None else category == code
        out = {name: int(np.count_nonzero(within & ((rules >> k) & 1 == 1))) for k, name in enumerate(RULES)}
        out["total"] = int(np.count_nonzero(within & ~keep))
        return out

    k_category, k_prompt, k_id = category[keep], prompt[keep], vote_id[keep]
    frame = pd.DataFrame(
        {"category": k_category, "left": left[keep], "right": right[keep], "outcome": outcome[keep], "id": k_id}
    )
    groups = frame.groupby(["category", "left", "right", "outcome"], sort=False)["id"].agg(["size", "max"])
    del frame
    keys = groups.index.to_frame(index=False)
    paired = grouped_votes(
        keys["category"].to_numpy(dtype=np.int64),
        np.full(len(keys), -1, dtype=np.int64),
        keys["left"].to_numpy(dtype=np.int64),
        keys["right"].to_numpy(dtype=np.int64),
        keys["outcome"].to_numpy(dtype=np.int64),
        groups["size"].to_numpy(dtype=np.int64),
        groups["max"].to_numpy(dtype=np.int64),
        categories,
    )
    counted = paired
    if by_prompt:
        order = np.argsort(k_id, kind="stable")
        m = int(order.shape[0])
        counted = VoteArrays(
            vote_id=k_id[order],
            left=left[keep][order],
            right=right[keep][order],
            outcome=outcome[keep][order],
            decision_ms=_constant(0, m),
            rater=_constant(-1, m),
            prompt=k_prompt[order],
            category=k_category[order],
            categories=categories,
            identity=np.broadcast_to(np.False_, (m,)),
            style_left=np.zeros((m, 0)),
            style_right=np.zeros((m, 0)),
            count=_constant(1, m),
        )
    per_prompt = pd.DataFrame({"category": k_category, "prompt": k_prompt, "id": k_id})
    prompt_groups = per_prompt.groupby(["category", "prompt"], sort=False)["id"].agg(["size", "max"])
    del per_prompt
    prompt_keys = prompt_groups.index.to_frame(index=False)
    none = np.full(len(prompt_keys), -1, dtype=np.int64)
    prompts = grouped_votes(
        prompt_keys["category"].to_numpy(dtype=np.int64),
        prompt_keys["prompt"].to_numpy(dtype=np.int64),
        none,
        none,
        none,
        prompt_groups["size"].to_numpy(dtype=np.int64),
        prompt_groups["max"].to_numpy(dtype=np.int64),
        categories,
    )
    return LogCounts(
        counted=counted,
        paired=paired,
        prompts=prompts,
        total=total,
        totals=np.bincount(category, minlength=n_categories).astype(np.int64),
        kept=int(k_id.shape[0]),
        excluded=tally(None),
        excluded_in={name: tally(code) for code, name in enumerate(categories)},
        last_vote_id=int(vote_id.max()) if total else 0,
    )


def vote_log_from_arrays(
    votes: VoteArrays, policy: ExclusionPolicy, *, by_prompt: bool, per_vote_max: int = PER_VOTE_MAX
) -> VoteLog:
    """The ``VoteLog`` of votes read one by one (``selectors.vote_arrays``): the rules applied in numpy
    (other databases than PostgreSQL; and the reference the tests compare the database's reading with)."""
    bits = np.zeros(len(votes), dtype=np.int64)
    rules = policy.rules(votes)
    for k, name in enumerate(RULES):
        bits |= rules[name].astype(np.int64) << k
    counts = log_counts(
        category=votes.category,
        categories=votes.categories,
        prompt=votes.prompt,
        left=votes.left,
        right=votes.right,
        outcome=votes.outcome,
        rules=bits,
        vote_id=votes.vote_id,
        by_prompt=by_prompt,
    )
    kept = votes.subset(bits == 0)
    rate = sample_rate(len(kept), per_vote_max)
    return VoteLog(
        sample=kept.subset(sample_mask(kept.vote_id, rate)),
        sample_rate=rate,
        categories=votes.categories,
        by_prompt=by_prompt,
        **counts.__dict__,
    )
