"""Benchmark of the rater-segment boards (``extra.segments``, ranking/segments.py) at their caps, against
the raw board's own Bradley-Terry fit on the same votes, measured in the same run. One command:

    python benchmarks/segments.py [--votes 200000] [--competitors 50 300] [--segments 6] [--raters 2000] [--repeat 2]

For each number of competitors: synthetic votes (``--votes``, the block's cap; ``--raters`` raters spread over
``--segments`` values of one attribute, a planted offset in one segment), then, best of ``--repeat``:
plain BT (aggregate the cells, fit: the raw board's core) and the whole block for one attribute key
(``segments_compute``: the joint fit with its rater-clustered covariance and test, one style fit per
segment). The block runs once per key (at most ``SEGMENT_KEYS_MAX``) on every recompute of the overall raw
board. Goal: one key under 5 s at 200,000 votes and 300 competitors on the 2-core machine (the parameter
cap holds the joint fit's dense system at 2,400 unknowns); the ratio to plain BT is printed beside it.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ranking.compute import Method  # noqa: E402
from ranking.estimators import aggregate_cells, fit_bradley_terry  # noqa: E402
from ranking.estimators.synthetic import simulate_style_counts  # noqa: E402
from ranking.policy import VoteArrays  # noqa: E402
from ranking.segments import SEGMENTS_MAX_VOTES, segments_compute  # noqa: E402

GOAL_S = 5.0


def campaign(votes: int, n: int, segments: int, raters: int, seed: int = 0) -> tuple[VoteArrays, dict[int, str]]:
    rng = np.random.default_rng(seed)
    theta = rng.normal(0.0, 0.7, n)
    rater = rng.integers(0, raters, votes)
    segment_of = rng.integers(0, segments, raters)
    offset = np.zeros((segments, n))
    offset[0, : max(1, n // 10)] = 0.5
    a = rng.integers(0, n, votes)
    b = (a + rng.integers(1, n, votes)) % n
    s = segment_of[rater]
    z = theta[a] + offset[s, a] - theta[b] - offset[s, b]
    outcome = np.where(rng.random(votes) < 1 / (1 + np.exp(-z)), 0, 1).astype(np.int64)
    arrays = VoteArrays(
        vote_id=np.arange(1, votes + 1, dtype=np.int64),
        left=a.astype(np.int64) + 1,
        right=b.astype(np.int64) + 1,
        outcome=outcome,
        decision_ms=np.full(votes, 5000, dtype=np.int64),
        rater=rater.astype(np.int64),
        prompt=np.zeros(votes, dtype=np.int64),
        category=np.zeros(votes, dtype=np.int64),
        categories=("",),
        identity=np.zeros(votes, dtype=bool),
        style_left=simulate_style_counts(rng, votes),
        style_right=simulate_style_counts(rng, votes),
    )
    return arrays, {int(r): f"value-{segment_of[r]}" for r in range(raters)}


def best_of(repeat: int, run) -> float:  # type: ignore[no-untyped-def]
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        run()
        times.append(time.perf_counter() - t0)
    return min(times)


def measure(n: int, args: argparse.Namespace) -> tuple[float, float, float]:
    """Best times of plain BT and of one key's block on the same votes, and the block's test's p-value."""
    votes, values = campaign(args.votes, n, args.segments, args.raters)
    ids = np.arange(1, n + 1, dtype=np.int64)
    method = Method(min_votes=30)
    out: dict[str, Any] = {}

    def plain() -> None:
        fit_bradley_terry(aggregate_cells(votes.left - 1, votes.right - 1, votes.outcome, n_competitors=n))

    def block() -> None:
        out["block"] = segments_compute(votes, ids, {}, method, kept=len(votes), attributes={"group": values})

    plain_s, block_s = best_of(args.repeat, plain), best_of(args.repeat, block)
    return plain_s, block_s, float(out["block"]["keys"][0]["heterogeneity"]["p_value"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--votes", type=int, default=SEGMENTS_MAX_VOTES)
    parser.add_argument("--competitors", type=int, nargs="+", default=[50, 300])
    parser.add_argument("--segments", type=int, default=6)
    parser.add_argument("--raters", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    print(f"rater-segment block for one key: {args.votes:,} votes, {args.raters:,} raters, {args.segments} segments")
    print(f"{'competitors':>12}{'plain BT s':>12}{'segments s':>12}{'ratio':>8}{'p (planted)':>13}")
    for n in args.competitors:
        plain, seg, p = measure(n, args)
        print(f"{n:>12}{plain:>12.3f}{seg:>12.3f}{seg / plain:>8.1f}{p:>13.2g}")
    print(f"goal: one key under {GOAL_S:g} s at {SEGMENTS_MAX_VOTES:,} votes and 300 competitors (2 cores)")


if __name__ == "__main__":
    main()
