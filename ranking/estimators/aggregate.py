"""Input validation and aggregation of battles into (pair, outcome) cells.

Every estimator in this package that does not need per-battle features works on *cells*, not on
battles: a cell is one unordered competitor pair together with one outcome, carrying how many
battles fell into it and their summed weights. A million battles among 200 competitors collapse to
well under 100k cells, so fitting and bootstrapping touch 10-20x less data, and the multinomial
bootstrap over cells is exactly the row bootstrap (all battles in a cell are interchangeable).

Input convention (shared by the whole package)::

    a, b     integer competitor ids 0..n-1 shown on the left and right
    outcome  LEFT_WINS, RIGHT_WINS, TIE or BOTH_BAD (codes 0..3)
    weight   optional non-negative float per battle (default 1)
    cluster  optional integer prompt/cluster id per battle (for the bootstrap by prompt)

Pairs are canonicalised to ``lo < hi``; an outcome is re-expressed from the ``lo`` side
(``LEFT_WINS`` then means "lo won"). Bradley-Terry has no position effect, so this makes the fit
exactly invariant to swapping left and right.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

LEFT_WINS: int = 0
RIGHT_WINS: int = 1
TIE: int = 2
BOTH_BAD: int = 3
N_OUTCOMES: int = 4

# Above this many possible keys a dense bincount would allocate too much; fall back to np.unique.
_DENSE_KEY_LIMIT = 1 << 23


def weighted_bincount(index: ArrayLike, weights: ArrayLike, minlength: int = 0) -> NDArray[np.float64]:
    """``np.bincount`` with weights, always float64 (numpy returns int64 for empty input, and its stubs
    declare an int result)."""
    out = np.bincount(index, weights, minlength=minlength)
    return out.astype(np.float64, copy=False)


@dataclass(frozen=True)
class Battles:
    """Validated battle arrays (see the module docstring for the convention)."""

    n_competitors: int
    a: NDArray[np.int64]
    b: NDArray[np.int64]
    outcome: NDArray[np.int64]
    weight: NDArray[np.float64] | None
    cluster: NDArray[np.int64] | None


@dataclass(frozen=True)
class Cells:
    """Battles reduced to unique (cluster, pair, outcome) cells, sorted by that key.

    ``outcome`` is from the ``lo`` side: LEFT_WINS means ``lo`` won. ``weight`` is the summed battle
    weight, ``weight_sq`` the summed squared weight (what the sandwich variance needs), ``count``
    the number of battles. ``cluster`` is ``None`` unless clusters were given; ``n_clusters`` is 0
    then.
    """

    n_competitors: int
    lo: NDArray[np.int64]
    hi: NDArray[np.int64]
    outcome: NDArray[np.int64]
    weight: NDArray[np.float64]
    weight_sq: NDArray[np.float64]
    count: NDArray[np.int64]
    cluster: NDArray[np.int64] | None
    n_clusters: int

    @property
    def n_cells(self) -> int:
        return int(self.lo.shape[0])

    @property
    def n_battles(self) -> int:
        return int(self.count.sum())

    def battles_per_competitor(self) -> NDArray[np.float64]:
        """Summed battle weight each competitor took part in (both_bad included)."""
        n = self.n_competitors
        return weighted_bincount(self.lo, self.weight, minlength=n) + weighted_bincount(
            self.hi, self.weight, minlength=n
        )


def validate_battles(
    a: ArrayLike,
    b: ArrayLike,
    outcome: ArrayLike,
    weight: ArrayLike | None = None,
    *,
    n_competitors: int | None = None,
    cluster: ArrayLike | None = None,
    keep_width: bool = False,
) -> Battles:
    """Check shapes, ranges and codes once, so the numeric code can trust its inputs.

    Raises ``ValueError`` on mismatched lengths, ids outside ``0..n-1``, a competitor facing itself,
    unknown outcome codes or negative/non-finite weights: silently fitting bad input would publish a
    wrong leaderboard. ``keep_width``: integer columns keep their own integer type instead of being copied
    to int64 (``aggregate_battles`` reads any width: a log's int16 outcomes and prompt codes).
    """
    a_arr = _whole(a, "competitor ids", keep_width)
    b_arr = _whole(b, "competitor ids", keep_width)
    o_arr = _whole(outcome, "outcome codes", keep_width)
    m = a_arr.shape[0]
    if b_arr.shape[0] != m or o_arr.shape[0] != m:
        raise ValueError("a, b and outcome must have the same length")
    if n_competitors is None:
        n_competitors = int(max(a_arr.max(initial=-1), b_arr.max(initial=-1)) + 1)
    if n_competitors < 1:
        raise ValueError("need at least one competitor")
    if m and (min(a_arr.min(), b_arr.min()) < 0 or max(a_arr.max(), b_arr.max()) >= n_competitors):
        raise ValueError(f"competitor ids must lie in 0..{n_competitors - 1}")
    if np.any(a_arr == b_arr):
        raise ValueError("a competitor cannot battle itself (a == b)")
    if m and (o_arr.min() < 0 or o_arr.max() >= N_OUTCOMES):
        raise ValueError("outcome codes must be LEFT_WINS, RIGHT_WINS, TIE or BOTH_BAD (0..3)")
    w_arr: NDArray[np.float64] | None = None
    if weight is not None:
        w_arr = np.asarray(weight, dtype=np.float64).ravel()
        if w_arr.shape[0] != m:
            raise ValueError("weight must have one entry per battle")
        if not np.all(np.isfinite(w_arr)) or np.any(w_arr < 0):
            raise ValueError("weights must be finite and non-negative")
    c_arr: NDArray[np.int64] | None = None
    if cluster is not None:
        c_raw = np.asarray(cluster).ravel()
        c_arr = c_raw if keep_width and c_raw.dtype.kind in "iu" else c_raw.astype(np.int64, copy=False)
        if c_arr.shape[0] != m:
            raise ValueError("cluster must have one entry per battle")
        if m and c_arr.min() < 0:
            raise ValueError("cluster ids must be non-negative")
    return Battles(n_competitors, a_arr, b_arr, o_arr, w_arr, c_arr)


def _whole(values: ArrayLike, what: str, keep_width: bool = False) -> NDArray[np.int64]:
    """As int64 (``keep_width``: integers as they are), refusing fractions and non-finite values (a cast would
    truncate 1.5 to 1 silently)."""
    raw = np.asarray(values).ravel()
    if keep_width and raw.dtype.kind in "iu":
        return raw
    if raw.dtype.kind in "iub":
        # No copy of what is int64 already (nothing here writes into its input): ten million rows are 80 MB a column.
        return raw.astype(np.int64, copy=False)
    if raw.dtype.kind != "f":
        raise ValueError(f"{what} must be integers, got dtype {raw.dtype}")
    if not np.all(np.isfinite(raw)) or np.any(raw != np.floor(raw)):
        raise ValueError(f"{what} must be whole numbers (got a fractional or non-finite value)")
    return raw.astype(np.int64)


def canonical_pairs(
    a: NDArray[np.int64], b: NDArray[np.int64], outcome: NDArray[np.int64]
) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64], NDArray[np.bool_]]:
    """Return ``(lo, hi, outcome_from_lo, swapped)``: the pair ordered ``lo < hi``.

    ``swapped`` marks battles where ``lo`` was shown on the right; their win codes are exchanged.
    """
    swapped = a > b
    lo = np.where(swapped, b, a)
    hi = np.where(swapped, a, b)
    flip = swapped & (outcome <= RIGHT_WINS)
    out = np.where(flip, 1 - outcome, outcome)
    return lo, hi, out, swapped


def aggregate_cells(
    a: ArrayLike,
    b: ArrayLike,
    outcome: ArrayLike,
    weight: ArrayLike | None = None,
    *,
    n_competitors: int | None = None,
    cluster: ArrayLike | None = None,
    count: ArrayLike | None = None,
) -> Cells:
    """Reduce battles to unique (cluster, pair, outcome) cells.

    ``count``: how many identical battles each row stands for (rows already grouped, e.g. by the
    database); the cells are exactly those of the battles written out one by one.

    The key ``((cluster * n + lo) * n + hi) * 4 + outcome`` is an int64; when the key space is small
    a single ``np.bincount`` counts it (linear time), otherwise ``np.unique`` sorts it. Either way
    the cells come out sorted by key, so the result does not depend on the order of battles.
    Cluster ids are relabelled to ``0..n_clusters-1`` in sorted order.
    """
    if count is not None and _ones(count):
        count = None  # one battle a row (the votes one by one, as counted rows): the same cells as without counts
    m = int(np.size(a))
    # Validated arrays are handed over, not kept here: ``aggregate_battles`` lets go of its copies as it goes.
    return aggregate_battles(
        validate_battles(a, b, outcome, weight, n_competitors=n_competitors, cluster=cluster, keep_width=True),
        count=None if count is None else row_counts(count, m),
    )


def _ones(count: ArrayLike) -> bool:
    """Whether ``count`` is a placeholder of ones (a broadcast 1: ``policy._constant``), read without
    writing the placeholder out."""
    return (
        isinstance(count, np.ndarray) and count.ndim == 1 and count.size > 0 and count.strides[0] == 0 and count[0] == 1
    )


def row_counts(count: ArrayLike, m: int) -> NDArray[np.int64]:
    """Checked multiplicities of grouped rows: whole, non-negative, one per row."""
    out = _whole(count, "row counts")
    if out.shape[0] != m:
        raise ValueError("count must have one entry per row")
    if m and int(out.min()) < 0:
        raise ValueError("row counts must be non-negative")
    return out


def aggregate_battles(bt: Battles, *, count: NDArray[np.int64] | None = None) -> Cells:
    """``aggregate_cells`` for already validated battles (``count``: each row's multiplicity)."""
    if count is not None and not bool(count.all()):
        # Rows standing for no battle make no cell (nor a cluster), exactly as if they were absent.
        present = count > 0
        count = count[present]
        bt = Battles(
            bt.n_competitors,
            bt.a[present],
            bt.b[present],
            bt.outcome[present],
            None if bt.weight is None else bt.weight[present],
            None if bt.cluster is None else bt.cluster[present],
        )
    if count is not None and bool(np.all(count == 1)):
        # One battle a row (the votes one by one, as counted rows): the same cells as without counts.
        count = None
    n = bt.n_competitors
    key = _cell_keys(bt.a, bt.b, bt.outcome, n)
    n_clusters = 0
    clustered = bt.cluster is not None
    if bt.cluster is not None:
        cl, n_clusters = _cluster_codes(bt.cluster)
        cl *= n * n * N_OUTCOMES
        key += cl
        del cl
    w = bt.weight
    del bt  # the validated copies (int64 outcomes and clusters: 80 MB each at ten million rows) are done with
    n_keys = max(n_clusters, 1) * n * n * N_OUTCOMES
    rows = count
    if n_keys <= _DENSE_KEY_LIMIT:
        index, size = key, n_keys
    elif rows is None and w is None:
        # Plain battles past the dense limit (the raw view's (prompt, pair, outcome) cells: ten million votes):
        # the keys sorted in place and counted by their runs, the cells ``np.unique`` would give without its
        # inverse index and argsort, three more arrays the size of the input.
        key.sort()
        m = int(key.shape[0])
        starts = np.flatnonzero(np.concatenate(([True], key[1:] != key[:-1]))) if m else key[:0]
        keys = key[starts]
        del key
        count = np.diff(starts, append=m).astype(np.int64, copy=False)
        del starts
        return _cells_of(n, keys, count, None, None, clustered, n_clusters)
    else:
        keys, index = np.unique(key, return_inverse=True)
        size = int(keys.shape[0])
    if rows is None:
        count = np.bincount(index, minlength=size)
    else:
        # Exact in float64 below 2**53 battles per cell.
        count = weighted_bincount(index, rows, minlength=size).astype(np.int64)
    wsum: NDArray[np.float64] | None = None
    wsq: NDArray[np.float64] | None = None
    if w is not None:
        wsum = weighted_bincount(index, w if rows is None else w * rows, minlength=size)
        wsq = weighted_bincount(index, w * w if rows is None else w * w * rows, minlength=size)
    del index, key
    if n_keys <= _DENSE_KEY_LIMIT:
        keys = np.flatnonzero(count)
        count = count[keys]
        wsum = None if wsum is None else wsum[keys]
        wsq = None if wsq is None else wsq[keys]
    return _cells_of(n, keys, count, wsum, wsq, clustered, n_clusters)


def _cell_keys(a: NDArray[Any], b: NDArray[Any], outcome: NDArray[Any], n: int) -> NDArray[np.int64]:
    """Each battle's cell key ``(lo * n + hi) * 4 + outcome_from_lo`` (``canonical_pairs``), as int64, built in
    one array in place (``lo * n + hi`` is ``lo * (n - 1) + a + b``; a swapped pair's win codes exchange by
    adding one to a left win and taking one from a right win), with no temporary wider than a boolean."""
    key: NDArray[np.int64] = np.minimum(a, b, dtype=np.int64)
    key *= n - 1
    key += a
    key += b
    key *= N_OUTCOMES
    key += outcome
    swapped = a > b
    key += swapped & (outcome == LEFT_WINS)
    key -= swapped & (outcome == RIGHT_WINS)
    return key


def _cluster_codes(cluster: NDArray[np.int64]) -> tuple[NDArray[np.int64], int]:
    """Cluster ids relabelled ``0..n_clusters-1`` in sorted order, and how many there are (``np.unique``'s
    inverse, in linear time where the ids span a small range: prompt codes are dense)."""
    if cluster.size == 0:
        return np.zeros(0, dtype=np.int64), 0
    high = int(cluster.max())
    if high < max(cluster.shape[0], 1 << 20):  # the table no larger than the ids themselves
        present = np.bincount(cluster, minlength=high + 1) > 0
        code = np.cumsum(present) - 1
        return code[cluster], int(np.count_nonzero(present))
    ids, inverse = np.unique(cluster, return_inverse=True)
    return inverse.astype(np.int64), int(ids.shape[0])


def _cells_of(
    n: int,
    keys: NDArray[np.int64],
    count: NDArray[np.int64],
    wsum: NDArray[np.float64] | None,
    wsq: NDArray[np.float64] | None,
    clustered: bool,
    n_clusters: int,
) -> Cells:
    """The cells of these sorted keys (``(cluster * n * n + lo * n + hi) * 4 + outcome``) and their sums
    (``wsum`` None: unweighted battles, whose summed weight and squared weight are both the count, one array
    shared by the two)."""
    keys = keys.astype(np.int64, copy=False)  # (the caller's own: taken apart in place below)
    count = count.astype(np.int64, copy=False)
    weight = count.astype(np.float64) if wsum is None else wsum.astype(np.float64, copy=False)
    cell_cluster = keys // (n * n * N_OUTCOMES) if clustered else None
    out_c = keys % N_OUTCOMES
    keys //= N_OUTCOMES
    keys %= n * n  # the pair
    lo = keys // n
    keys %= n  # hi
    return Cells(
        n_competitors=n,
        lo=lo,
        hi=keys,
        outcome=out_c,
        weight=weight,
        weight_sq=weight if wsq is None else wsq.astype(np.float64, copy=False),
        count=count,
        cluster=cell_cluster,
        n_clusters=n_clusters,
    )
