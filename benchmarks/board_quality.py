"""Board quality's cost on every recompute, and the top-k error's at the end of a ratio run (issue 24.4/24.6).

    python benchmarks/board_quality.py [--competitors 300] [--votes 10000000] [--entities 1000,10000]

Recompute. A raw board of ``--competitors`` competitors (log-strengths evenly spaced over 0..3) whose
``--votes`` votes are grouped into (pair, outcome) counts, as the recompute reads them: every pair met,
counts drawn from Bradley-Terry with 10% ties. Timed: ``board_compute`` (the raw board, 100 bootstrap
rounds: the baseline, measured in the same run) and ``quality_blocks`` (separability and the Hodge cyclic
share) on the same counts and rows. Goal: quality_blocks at most 0.10 x the raw board.

Ratio boards. For each ``--entities`` count, ``fit_ratio`` on 4 judgements per entity (2 pairs each way;
the baseline) and ``top_k_error`` with the draws a run of that size gets (``top_k_draws``), top 10. Goal:
the top-k error at most 1.0 x the fit it follows.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ranking.board_quality import quality_blocks  # noqa: E402
from ranking.compute import Method, board_compute  # noqa: E402
from ranking.estimators import board_quality as bq  # noqa: E402
from ranking.estimators.ratio import fit_ratio  # noqa: E402
from ranking.policy import VoteArrays  # noqa: E402

RECOMPUTE_GOAL = 0.10
TOP_K_GOAL = 1.0


def counted_votes(n: int, votes: int, seed: int) -> VoteArrays:
    rng = np.random.default_rng(seed)
    s = np.linspace(0.0, 3.0, n)
    a, b = np.triu_indices(n, 1)
    per_pair = rng.multinomial(votes, np.full(a.size, 1.0 / a.size))
    p = 1.0 / (1.0 + np.exp(-(s[a] - s[b])))
    ties = rng.binomial(per_pair, 0.1)
    wins = rng.binomial(per_pair - ties, p)
    counts = np.stack([wins, per_pair - ties - wins, ties], axis=1)  # LEFT_WINS, RIGHT_WINS, TIE
    pair = np.repeat(np.arange(a.size), 3)
    outcome = np.tile(np.arange(3), a.size)
    count = counts.ravel()
    keep = count > 0
    pair, outcome, count = pair[keep], outcome[keep], count[keep]
    m = int(pair.size)
    zero = np.zeros(m, dtype=np.int64)
    return VoteArrays(
        vote_id=np.arange(m, dtype=np.int64),
        left=a[pair].astype(np.int64) + 1,
        right=b[pair].astype(np.int64) + 1,
        outcome=outcome.astype(np.int64),
        decision_ms=zero + 5000,
        rater=zero - 1,
        prompt=np.arange(m, dtype=np.int64),  # each row its own prompt: the plain bootstrap
        category=zero,
        categories=("",),
        identity=np.zeros(m, dtype=bool),
        style_left=np.zeros((m, 0)),
        style_right=np.zeros((m, 0)),
        count=count.astype(np.int64),
    )


def recompute(competitors: int, votes: int) -> None:
    counted = counted_votes(competitors, votes, seed=0)
    ids = np.arange(1, competitors + 1, dtype=np.int64)
    method = Method(rounds=100)
    t0 = time.perf_counter()
    board = board_compute(counted, ids, {}, method)
    base = time.perf_counter() - t0
    t0 = time.perf_counter()
    blocks = quality_blocks(counted, ids, board.rows, method)
    cost = time.perf_counter() - t0
    ratio = cost / base
    print(
        f"recompute, {competitors} competitors, {votes:,} votes in {len(counted):,} count rows: raw board "
        f"{base:.2f} s (baseline); quality_blocks {cost:.3f} s = {ratio:.3f} x "
        f"(goal <= {RECOMPUTE_GOAL} x: {'met' if ratio <= RECOMPUTE_GOAL else 'missed'}); "
        f"separability {blocks['quality']['separability']['share']}, cyclic share {blocks['cyclic']['share']}, "
        f"p {blocks['cyclic']['p_value']}"
    )


def ratio_top_k(entities: int) -> None:
    rng = np.random.default_rng(1)
    truth = rng.normal(0.0, 1.0, entities)
    i = np.concatenate([np.arange(entities)] * 2)
    j = (i + rng.integers(1, entities, i.size)) % entities
    i, j = np.concatenate([i, j]), np.concatenate([j, i])  # each pair in both orders
    r = truth[i] - truth[j] + rng.normal(0.0, 0.3, i.size)
    t0 = time.perf_counter()
    fit = fit_ratio(entities, i, j, r)
    base = time.perf_counter() - t0
    draws = bq.top_k_draws(entities)
    t0 = time.perf_counter()
    out = bq.top_k_error(fit, 10, draws=draws)
    cost = time.perf_counter() - t0
    ratio = cost / base
    print(
        f"ratio board, {entities:,} entities, {i.size:,} judgements: fit {base:.2f} s (baseline); top-10 error "
        f"({draws} draws) {cost:.2f} s = {ratio:.2f} x (goal <= {TOP_K_GOAL} x: "
        f"{'met' if ratio <= TOP_K_GOAL else 'missed'}); P(top 10 wrong) = {out['probability']} ± {out['se']}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--competitors", type=int, default=300)
    parser.add_argument("--votes", type=int, default=10_000_000)
    parser.add_argument("--entities", default="1000,10000")
    args = parser.parse_args()
    recompute(args.competitors, args.votes)
    for n in (int(x) for x in args.entities.split(",") if x):
        ratio_top_k(n)


if __name__ == "__main__":
    main()
