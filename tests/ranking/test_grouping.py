"""Issue 23.3's memory pass: the log's counts grouped in numpy (``policy.group_rows``, ``log_counts``), the cells
keyed without ``np.unique``'s sort (``aggregate_cells``) and the pairs numbered through a table (``pair_design``)
give exactly what the definitions they replaced gave (pandas' grouping, ``np.unique`` with its inverse), kept
here as the reference, on synthetic logs with the edge cases: no votes, one vote, every vote excluded, a
category without votes, sparse competitor keys, ids out of order, narrow integer columns, both grouping paths."""

from __future__ import annotations

from dataclasses import fields
from typing import Any

import numpy as np
import pandas as pd
import pytest

from ranking import policy as policy_module
from ranking.estimators import aggregate as aggregate_module
from ranking.estimators import bradley_terry as bt_module
from ranking.estimators.aggregate import N_OUTCOMES, Cells, aggregate_cells, canonical_pairs, validate_battles
from ranking.estimators.bradley_terry import pair_design
from ranking.policy import RULES, VoteArrays, grouped_votes, log_counts


def _reference_log_counts(
    *, category, categories, prompt, left, right, outcome, rules, vote_id, by_prompt
) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    """``log_counts`` as it was before (pandas' groupby), every column as int64."""
    category, prompt, left, right, outcome, rules, vote_id = (
        np.asarray(x, dtype=np.int64) for x in (category, prompt, left, right, outcome, rules, vote_id)
    )
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
            decision_ms=np.zeros(m, dtype=np.int64),
            rater=np.full(m, -1, dtype=np.int64),
            prompt=k_prompt[order],
            category=k_category[order],
            categories=categories,
            identity=np.zeros(m, dtype=bool),
            style_left=np.zeros((m, 0)),
            style_right=np.zeros((m, 0)),
            count=np.ones(m, dtype=np.int64),
        )
    per_prompt = pd.DataFrame({"category": k_category, "prompt": k_prompt, "id": k_id})
    prompt_groups = per_prompt.groupby(["category", "prompt"], sort=False)["id"].agg(["size", "max"])
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
    return {
        "counted": counted,
        "paired": paired,
        "prompts": prompts,
        "total": total,
        "totals": np.bincount(category, minlength=len(categories)).astype(np.int64),
        "kept": int(k_id.shape[0]),
        "excluded": tally(None),
        "excluded_in": {name: tally(code) for code, name in enumerate(categories)},
        "last_vote_id": int(vote_id.max()) if total else 0,
    }


def _same(left: Any, right: Any) -> bool:
    if isinstance(left, VoteArrays):
        return all(_same(getattr(left, f.name), getattr(right, f.name)) for f in fields(VoteArrays))
    if isinstance(left, np.ndarray):
        return left.shape == right.shape and bool(np.array_equal(left, right))
    return bool(left == right) and list(left) == list(right) if isinstance(left, dict) else bool(left == right)


def _log(rng: np.random.Generator, m: int, *, sparse_keys: bool = False, shuffled: bool = True) -> dict[str, Any]:
    """A synthetic log: ``m`` votes, 3 categories of which the last has none, 7 competitors (primary keys far
    apart with ``sparse_keys``), 12 prompts, every rule excluding some votes, ids past 2**32."""
    ids = np.array([3, 17, 101, 2**33, 2**33 + 5, 2**40, 2**40 + 1]) if sparse_keys else np.arange(40, 47)
    a = rng.integers(0, 7, m)
    b = (a + rng.integers(1, 7, m)) % 7
    vote_id = np.sort(rng.choice(np.arange(1, 5 * m + 10) + 2**32, m, replace=False))
    if shuffled:
        vote_id = rng.permutation(vote_id)
    rules = np.where(rng.random(m) < 0.3, rng.integers(1, 32, m), 0)
    return {
        "category": rng.integers(0, 2, m),
        "categories": ("coding", "maths", "writing"),
        "prompt": rng.integers(0, 12, m),
        "left": ids[a],
        "right": ids[b],
        "outcome": rng.integers(0, 4, m),
        "rules": rules,
        "vote_id": vote_id,
    }


def _narrow(log: dict[str, Any]) -> dict[str, Any]:
    """The columns as ``selectors.vote_log`` passes them: int8 categories, int32 keys, int16 codes."""
    return {
        **log,
        "category": log["category"].astype(np.int8),
        "prompt": log["prompt"].astype(np.int32),
        "left": log["left"].astype(np.int32),
        "right": log["right"].astype(np.int32),
        "outcome": log["outcome"].astype(np.int16),
        "rules": log["rules"].astype(np.int16),
    }


def _logs() -> list[tuple[str, dict[str, Any]]]:
    rng = np.random.default_rng(23)
    big = _log(rng, 2_000)
    everything_excluded = {**_log(rng, 50), "rules": np.full(50, 4)}
    nothing_excluded = {**_log(rng, 300, shuffled=False), "rules": np.zeros(300, dtype=np.int64)}
    return [
        ("no votes", _log(rng, 0)),
        ("one vote", _log(rng, 1)),
        ("one excluded vote", {**_log(rng, 1), "rules": np.array([16])}),
        ("every vote excluded", everything_excluded),
        ("nothing excluded, in id order", nothing_excluded),
        ("sparse competitor keys", _log(rng, 500, sparse_keys=True)),
        ("ids out of order", big),
        ("narrow columns", _narrow(big)),
    ]


@pytest.mark.parametrize("by_prompt", [True, False])
@pytest.mark.parametrize("dense_limit", [policy_module._DENSE_GROUPS, 1])  # the bincount path, then the sort path
def test_log_counts_equal_pandas_grouping(monkeypatch, by_prompt, dense_limit):
    monkeypatch.setattr(policy_module, "_DENSE_GROUPS", dense_limit)
    for name, log in _logs():
        counts = log_counts(**log, by_prompt=by_prompt)
        reference = _reference_log_counts(**log, by_prompt=by_prompt)
        for field, expected in reference.items():
            assert _same(getattr(counts, field), expected), (name, field)
        assert counts.counted.votes == counts.kept == counts.paired.votes == counts.prompts.votes, name


def test_group_rows_counts_and_takes_the_largest_id():
    """Rows grouped by their columns, sorted by them: sizes and the largest id, on a log small enough to read."""
    columns = [np.array([1, 0, 1, 1, 0]), np.array([7, 9, 7, 5, 9])]
    values, size, last = policy_module.group_rows(columns, np.array([10, 20, 30, 40, 5]))
    assert [v.tolist() for v in values] == [[0, 1, 1], [9, 5, 7]]
    assert size.tolist() == [2, 1, 2] and last.tolist() == [20, 40, 30]


def _reference_aggregate(a, b, outcome, weight=None, *, n_competitors, cluster=None, count=None) -> Cells:  # type: ignore[no-untyped-def]
    """``aggregate_cells`` as it was before: ``np.unique`` for the clusters and, past the dense limit, the keys."""
    bt = validate_battles(a, b, outcome, weight, n_competitors=n_competitors, cluster=cluster)
    rows = None if count is None else np.asarray(count, dtype=np.int64)
    if rows is not None and not bool(rows.all()):
        present = rows > 0
        rows = rows[present]
        a_, b_, o_ = bt.a[present], bt.b[present], bt.outcome[present]
        w_ = None if bt.weight is None else bt.weight[present]
        c_ = None if bt.cluster is None else bt.cluster[present]
    else:
        a_, b_, o_, w_, c_ = bt.a, bt.b, bt.outcome, bt.weight, bt.cluster
    n = bt.n_competitors
    lo, hi, out, _ = canonical_pairs(a_, b_, o_)
    key = (lo * n + hi) * N_OUTCOMES + out
    n_clusters = 0
    if c_ is not None:
        cluster_ids, cl = np.unique(c_, return_inverse=True)
        n_clusters = int(cluster_ids.shape[0])
        key = cl.astype(np.int64) * (n * n * N_OUTCOMES) + key
    n_keys = max(n_clusters, 1) * n * n * N_OUTCOMES
    if n_keys <= aggregate_module._DENSE_KEY_LIMIT:
        index, size = key, n_keys
    else:
        keys, index = np.unique(key, return_inverse=True)
        size = int(keys.shape[0])
    if rows is None:
        cnt = np.bincount(index, minlength=size)
    else:
        cnt = np.bincount(index, rows, minlength=size).astype(np.int64)
    if w_ is None:
        wsum = cnt.astype(np.float64)
        wsq = wsum.copy()
    else:
        wsum = np.bincount(index, w_ if rows is None else w_ * rows, minlength=size).astype(np.float64)
        wsq = np.bincount(index, w_ * w_ if rows is None else w_ * w_ * rows, minlength=size).astype(np.float64)
    if n_keys <= aggregate_module._DENSE_KEY_LIMIT:
        keys = np.flatnonzero(cnt)
        cnt, wsum, wsq = cnt[keys], wsum[keys], wsq[keys]
    keys = keys.astype(np.int64)
    pair = (keys // N_OUTCOMES) % (n * n)
    return Cells(
        n_competitors=n,
        lo=pair // n,
        hi=pair % n,
        outcome=keys % N_OUTCOMES,
        weight=wsum,
        weight_sq=wsq,
        count=cnt.astype(np.int64),
        cluster=keys // (n * n * N_OUTCOMES) if c_ is not None else None,
        n_clusters=n_clusters,
    )


def _cells_equal(left: Cells, right: Cells) -> bool:
    for field in fields(Cells):
        x, y = getattr(left, field.name), getattr(right, field.name)
        if isinstance(x, np.ndarray) or isinstance(y, np.ndarray):
            if x is None or y is None or x.shape != y.shape or not np.array_equal(x, y) or x.dtype != y.dtype:
                return False
        elif x != y:
            return False
    return True


@pytest.mark.parametrize("m", [0, 1, 7, 3_000])
@pytest.mark.parametrize("n, clusters", [(6, 40), (400, 60), (5, 10**9)])  # dense keys; past the limit; sparse ids
def test_cells_equal_the_unique_definition(m, n, clusters):
    rng = np.random.default_rng(m + n)
    a = rng.integers(0, n, m)
    b = (a + rng.integers(1, n, m)) % n
    outcome, cluster = rng.integers(0, 4, m), rng.integers(0, clusters, m)
    cases: list[dict[str, Any]] = [
        {},
        {"cluster": cluster},
        {"cluster": cluster, "count": np.broadcast_to(np.int64(1), (m,))},  # the counted rows: one vote each
        {"cluster": cluster, "count": rng.integers(0, 3, m)},  # grouped rows, some standing for none
        {"cluster": cluster, "weight": rng.random(m)},
        {"count": rng.integers(0, 3, m), "weight": rng.random(m)},
        {"cluster": cluster.astype(np.int32), "count": np.ones(m, dtype=np.int64)},
    ]
    for case in cases:
        got = aggregate_cells(a.astype(np.int32), b, outcome.astype(np.int16), n_competitors=n, **case)
        expected = _reference_aggregate(a, b, outcome, n_competitors=n, **case)
        assert _cells_equal(got, expected), sorted(case)


def test_pairs_numbered_through_the_table_equal_unique(monkeypatch):
    rng = np.random.default_rng(3)
    for n, m in ((2, 1), (9, 400), (300, 20_000)):
        a = rng.integers(0, n, m)
        b = (a + rng.integers(1, n, m)) % n
        cells = aggregate_cells(a, b, rng.integers(0, 4, m), n_competitors=n, cluster=rng.integers(0, 50, m))
        for both_bad in ("tie", "drop"):
            dense = pair_design(cells, both_bad)
            monkeypatch.setattr(bt_module, "_DENSE_PAIRS", 0)  # np.unique, as before
            sorted_ = pair_design(cells, both_bad)
            monkeypatch.undo()
            for field in ("lo", "hi", "cell_pair", "cell_y", "cell_used"):
                x, y = getattr(dense, field), getattr(sorted_, field)
                assert x.dtype == y.dtype and np.array_equal(x, y), (n, field)
            assert (dense.inc_t != sorted_.inc_t).nnz == 0 and (dense.absinc_t != sorted_.absinc_t).nnz == 0


def test_one_class_records_equal_the_gathered_definition():
    """``one_class`` (per competitor) and ``one_class_pairs`` (per pair), read through masks and per-pair counts,
    equal the definitions that gathered the used cells' columns (with both_bad dropped or a tie, zero weights,
    one-sided and all-tie records)."""
    from ranking.estimators.bradley_terry import one_class
    from ranking.estimators.intervals import one_class_pairs

    rng = np.random.default_rng(11)
    n, m = 7, 400
    a = rng.integers(0, n, m)
    b = (a + rng.integers(1, n, m)) % n
    outcome = rng.integers(0, 4, m)
    outcome[(a == 0) | (b == 0)] = 2  # competitor 0: ties only
    outcome[(a == 1) & (b != 0)] = 0  # competitor 1 wins whenever shown on the left against a non-zero
    weight = np.where(rng.random(m) < 0.1, 0.0, 1.0)
    cells = aggregate_cells(a, b, outcome, weight, n_competitors=n, cluster=rng.integers(0, 5, m))
    idx = np.arange(n)
    for both_bad in ("tie", "drop"):
        design = pair_design(cells, both_bad)  # type: ignore[arg-type]
        used = design.cell_used & (cells.weight > 0)
        y, lo, hi = design.cell_y[used], cells.lo[used], cells.hi[used]
        classes = np.zeros((n, 3), dtype=bool)
        for code, (mask_lo, mask_hi) in enumerate(((y == 1.0, y == 0.0), (y == 0.0, y == 1.0), (y == 0.5, y == 0.5))):
            classes[lo[mask_lo], code] = True
            classes[hi[mask_hi], code] = True
        assert np.array_equal(one_class(cells, design), classes.sum(axis=1) == 1), both_bad
        per_pair = np.zeros((n, n), dtype=np.int64)
        np.add.at(per_pair, (lo, hi), 1)
        tie_like = used & (design.cell_y == 0.5)
        both = np.zeros((n, n), dtype=np.int64)
        np.add.at(both, (cells.lo[tie_like], cells.hi[tie_like]), 1)
        distinct = per_pair - np.maximum(both - 1, 0)
        expected = (distinct + distinct.T)[np.ix_(idx, idx)] == 1
        got = one_class_pairs(cells, both_bad, idx)  # type: ignore[arg-type]
        assert np.array_equal(got, expected) and got.any(), both_bad
