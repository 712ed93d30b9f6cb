"""Benchmark of attribute boards: solve time at 1,000 and 10,000 entities, and the judge calls the
adaptive design saves against uniform pairing at the same top-k accuracy (baseline in the same run).

    python benchmarks/ratio_board.py [--sizes 1000 10000] [--seeds 12] [--entities 50] [--top-k 10]

Solve. A board of n entities with log-strengths ~ N(0, 1) at the default budget of 8 calls per entity:
4n distinct pairs (a ring first, so it is connected), each judged in both orders, log-ratio noise sd
0.5 and 5% wild answers uniform on +-log 26, generated before any clock starts. Timed: one full
``fit_ratio`` (robust IRLS/Newton solve, sds by Hutchinson, leave-one-out residuals, Hodge share), CPU
and wall seconds. Above 2,000 entities the Laplacian is factorised sparse; the baseline alongside is the
same fit with the dense factorisation forced (at 10,000 only with ``--dense-10k``: 800 MB a copy).

Calls saved. ``--seeds`` boards of ``--entities`` entities (N(0, 1), the same noisy judge). Uniform
random pairs spend the full 8 calls per entity; the adaptive design (``run_board``, with its certified
early stop) runs at budgets of 2 to 8 calls per entity. Printed: top-k accuracy (the share of the true
top k in the chosen top k) and the calls actually spent, per budget; then the smallest adaptive budget
whose mean accuracy reaches the uniform design's at 8 calls per entity, and the share of calls saved.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import ranking.estimators.ratio as ratio  # noqa: E402
from benchmarks.ratio import board  # noqa: E402
from ranking.estimators.ratio_design import run_board  # noqa: E402

LADDER = float(np.log(26.0))


def timed(
    n: int, i: NDArray[np.int64], j: NDArray[np.int64], r: NDArray[np.float64]
) -> tuple[float, float, ratio.RatioFit]:
    cpu, wall = time.process_time(), time.perf_counter()
    fit = ratio.fit_ratio(n, i, j, r, seed=0)
    return time.process_time() - cpu, time.perf_counter() - wall, fit


def solve(sizes: list[int], dense_10k: bool) -> None:
    print("Solve (8 calls per entity: 4n pairs in both orders, sd 0.5, 5% wild)")
    for n in sizes:
        i, j, r = board(n, 4 * n, seed=n)
        cpu, wall, fit = timed(n, i, j, r)
        path = "sparse" if n - 1 > ratio.SPARSE_ABOVE else "dense"
        print(
            f"  {n:6d} entities, {i.size} judgements: {cpu:7.2f} s CPU ({wall:7.2f} s wall), {path}, "
            f"{fit.iterations} iterations, sd by {fit.std_method}, degraded {fit.degraded}"
        )
        if n <= 5000 or dense_10k:
            other = "dense" if path == "sparse" else "sparse"
            saved = ratio.SPARSE_ABOVE
            ratio.SPARSE_ABOVE = 10**9 if other == "dense" else 0
            try:
                cpu2, wall2, fit2 = timed(n, i, j, r)
            finally:
                ratio.SPARSE_ABOVE = saved
            diff = float(np.max(np.abs(fit2.scores - fit.scores)))
            print(
                f"  {'':6s} same board, {other} factorisation: {cpu2:7.2f} s CPU ({wall2:7.2f} s wall); "
                f"{path} / {other} CPU = {cpu / cpu2:.2f}x; largest score difference {diff:.1e}"
            )


def judge_for(theta: NDArray[np.float64], rng: np.random.Generator) -> Callable[[int, int], float | None]:
    def judge(a: int, b: int) -> float | None:
        if rng.random() < 0.05:
            return float(rng.uniform(-LADDER, LADDER))
        return float(np.clip(theta[a] - theta[b] + rng.normal(0.0, 0.5), -LADDER, LADDER))

    return judge


def accuracy_at(n: int, top_k: int, seeds: int, per_entity: int, adaptive: bool) -> tuple[float, float]:
    acc, calls = [], []
    for seed in range(seeds):
        rng = np.random.default_rng(5000 + seed)
        theta = rng.normal(0.0, 1.0, n)
        run = run_board(
            n, judge_for(theta, rng), top_k=top_k, budget=per_entity * n, batch_size=n // 5, seed=seed,
            adaptive=adaptive,
        )  # fmt: skip
        top = set(np.argsort(-theta)[:top_k].tolist())
        acc.append(len(top & {row.entity for row in run.rows if row.in_top_k}) / top_k)
        calls.append(run.calls)
    return float(np.mean(acc)), float(np.mean(calls))


def calls_saved(n: int, top_k: int, seeds: int) -> None:
    print(f"\nCalls saved ({seeds} boards of {n} entities, top-{top_k}, the same judge)")
    base_acc, base_calls = accuracy_at(n, top_k, seeds, 8, adaptive=False)
    print(f"  uniform  8 calls/entity: top-{top_k} accuracy {base_acc:.3f}, calls {base_calls:.0f}")
    reached: tuple[int, float, float] | None = None
    for per_entity in range(2, 9):
        acc, calls = accuracy_at(n, top_k, seeds, per_entity, adaptive=True)
        print(f"  adaptive {per_entity} calls/entity: top-{top_k} accuracy {acc:.3f}, calls {calls:.0f}")
        if reached is None and acc >= base_acc:
            reached = (per_entity, acc, calls)
    if reached is None:
        print("  the adaptive design did not reach the uniform accuracy within 8 calls per entity")
        return
    per_entity, acc, calls = reached
    print(
        f"  => the adaptive design reaches the uniform design's accuracy ({base_acc:.3f}) at {per_entity} calls "
        f"per entity ({acc:.3f}), spending {calls:.0f} calls against {base_calls:.0f}: "
        f"{1 - calls / base_calls:.0%} of the calls saved"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--dense-10k", action="store_true", help="also time the dense factorisation at 10,000")
    parser.add_argument("--seeds", type=int, default=12)
    parser.add_argument("--entities", type=int, default=50)
    parser.add_argument("--top-k", type=int, default=10)
    parser.add_argument("--skip-solve", action="store_true")
    args = parser.parse_args()
    if not args.skip_solve:
        solve(args.sizes, args.dense_10k)
    calls_saved(args.entities, args.top_k, args.seeds)


if __name__ == "__main__":
    main()
