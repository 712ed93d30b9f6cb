"""The exclusion policy applied to the vote log before any ranking (numpy only, no Django).

Every rule is explicit, parameterised and counted, and the policy with its counts is stored in each
snapshot, so any published number can be recomputed from the log and argued about rule by rule."""

from __future__ import annotations

import math
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
        m = int(np.count_nonzero(mask))

        def take(v: Any) -> Any:
            if not isinstance(v, np.ndarray):
                return v
            if v.ndim == 1 and v.size and v.strides[0] == 0:  # a placeholder of one value (``_constant``) stays one
                return np.broadcast_to(v[:1], (m,))
            return v[mask]

        return VoteArrays(**{k: take(v) for k, v in self.__dict__.items()})


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


# Up to this many possible keys a grouping counts with one ``bincount`` over the key (linear time, the table a
# few tens of MB at most); above it the rows are sorted by their columns.
_DENSE_GROUPS = 1 << 24


def _codes(values: NDArray[Any]) -> tuple[NDArray[Any], NDArray[np.int64]]:
    """Dense codes of ``values`` (integers) in their sorted order, and the distinct values (``np.unique``'s
    ``return_inverse`` in linear time where the values span a small range; a sort otherwise)."""
    if values.size == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    low, high = int(values.min()), int(values.max())
    if high - low < _DENSE_GROUPS:
        offset = np.subtract(values, low, dtype=np.int64) if low else values
        present = np.bincount(offset, minlength=high - low + 1) > 0
        distinct = np.flatnonzero(present)
        code = np.cumsum(present) - 1
        kind = np.int32 if distinct.shape[0] <= np.iinfo(np.int32).max else np.int64
        codes: NDArray[Any] = code.astype(kind)[offset]
        return codes, (distinct + low).astype(np.int64)
    distinct, inverse = np.unique(values, return_inverse=True)
    return inverse.astype(np.int64), distinct.astype(np.int64)


def group_rows(
    columns: list[NDArray[Any]], vote_id: NDArray[np.int64]
) -> tuple[list[NDArray[np.int64]], NDArray[np.int64], NDArray[np.int64]]:
    """The distinct rows of ``columns`` (integer columns of equal length), sorted by the columns in order:
    each group's values (a column each), its number of rows and its largest ``vote_id``. What
    ``DataFrame.groupby(columns)[id].agg(["size", "max"])`` gives, sorted, in numpy: a ``bincount`` over the
    combined key where its space is small (pairs, outcomes, categories: ten million votes in a table of about
    a million keys), a sort of the rows otherwise."""
    m = int(vote_id.shape[0])
    coded = [_codes(column) for column in columns]
    sizes = [max(int(distinct.shape[0]), 1) for _, distinct in coded]
    space = math.prod(sizes)
    if space <= _DENSE_GROUPS:
        key = np.zeros(m, dtype=np.int32)
        for (codes, _), size in zip(coded, sizes, strict=True):
            key *= size
            key += codes
        count = np.bincount(key, minlength=space)
        groups = np.flatnonzero(count)
        last = np.full(space, np.iinfo(np.int64).min, dtype=np.int64)
        np.maximum.at(last, key, vote_id)
        del key
        count, last = count[groups], last[groups]
        values = []
        for (_, distinct), size in reversed(list(zip(coded, sizes, strict=True))):
            values.append(distinct[groups % size] if distinct.size else distinct)
            groups //= size
        return values[::-1], count.astype(np.int64), last
    order = np.lexsort([codes for codes, _ in reversed(coded)])
    starts = np.zeros(m, dtype=bool)
    starts[:1] = True
    for codes, _ in coded:
        ordered = codes[order]
        starts[1:] |= ordered[1:] != ordered[:-1]
    first = np.flatnonzero(starts)
    del starts
    rows = order[first]
    count = np.diff(np.append(first, m)).astype(np.int64)
    last = np.maximum.reduceat(vote_id[order], first) if m else np.zeros(0, dtype=np.int64)
    return [distinct[codes[rows]] for codes, distinct in coded], count, last.astype(np.int64)


def log_counts(
    *,
    category: NDArray[Any],
    categories: tuple[str, ...],
    prompt: NDArray[Any],
    left: NDArray[Any],
    right: NDArray[Any],
    outcome: NDArray[Any],
    rules: NDArray[Any],
    vote_id: NDArray[np.int64],
    by_prompt: bool,
) -> LogCounts:
    """The counts of a log given every vote's columns (integers of any width) and the bitmask of the rules
    excluding it (bit k: ``RULES[k]``), in any order. Kept votes are grouped by (category, left, right,
    outcome) (``group_rows``); grouped by prompt as well (``by_prompt``) they would be about one a vote at
    scale, so they stay one a row (``count`` 1), in log order, in the columns' own integer types (a
    ten-million-vote log's rows are 220 MB with int32 competitors and prompts, 480 MB as int64)."""
    n_categories = len(categories)
    total = int(vote_id.shape[0])
    keep = rules == 0
    excluded: dict[str, int] = {}
    excluded_in: dict[str, dict[str, int]] = {name: {} for name in categories}
    for k, name in enumerate([*RULES, "total"]):
        hits = ~keep if name == "total" else (rules & (1 << k)) != 0
        excluded[name] = int(np.count_nonzero(hits))
        per_category = np.bincount(category[hits], minlength=n_categories)
        for code, category_name in enumerate(categories):
            excluded_in[category_name][name] = int(per_category[code])
        del hits

    every = bool(keep.all())

    def kept(column: NDArray[Any]) -> NDArray[Any]:
        return column if every else column[keep]

    k_category, k_id = kept(category), kept(vote_id)
    (g_category, g_left, g_right, g_outcome), size, last = group_rows(
        [k_category, kept(left), kept(right), kept(outcome)], k_id
    )
    paired = grouped_votes(
        g_category, np.full(size.shape[0], -1, dtype=np.int64), g_left, g_right, g_outcome, size, last, categories
    )
    k_prompt = kept(prompt)
    (p_category, p_prompt), p_size, p_last = group_rows([k_category, k_prompt], k_id)
    none = np.full(p_size.shape[0], -1, dtype=np.int64)
    prompts = grouped_votes(p_category, p_prompt, none, none, none, p_size, p_last, categories)
    counted = paired
    if by_prompt:
        m = int(k_id.shape[0])
        ordered = m < 2 or bool(np.all(k_id[1:] > k_id[:-1]))
        order = None if ordered else np.argsort(k_id, kind="stable")

        def in_order(column: NDArray[Any]) -> NDArray[Any]:
            return column if order is None else column[order]

        counted = VoteArrays(
            vote_id=in_order(k_id),
            left=in_order(kept(left)),
            right=in_order(kept(right)),
            outcome=in_order(kept(outcome)),
            decision_ms=_constant(0, m),
            rater=_constant(-1, m),
            prompt=in_order(k_prompt),
            category=in_order(k_category),
            categories=categories,
            identity=np.broadcast_to(np.False_, (m,)),
            style_left=np.zeros((m, 0)),
            style_right=np.zeros((m, 0)),
            count=_constant(1, m),
        )
    return LogCounts(
        counted=counted,
        paired=paired,
        prompts=prompts,
        total=total,
        totals=np.bincount(category, minlength=n_categories).astype(np.int64),
        kept=int(k_id.shape[0]),
        excluded=excluded,
        excluded_in=excluded_in,
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
