"""Benchmark of the ranking estimators: one command, figures as ratios to a floor measured alongside.

    python benchmarks/ranking.py [--battles 1000000] [--competitors 200] [--rounds 100]

Synthetic votes (1,000,000 battles among 200 competitors, 10% ties, 3% both_bad, 4 style features,
prompt ids) are generated first and are already in memory when the clock starts. The *floor* is
the least any estimator must do: count the (pair, outcome) cells of those arrays. Every stage is
printed in seconds and as a multiple of the floor, so the figures travel between machines; peak
memory is the process's maximum resident set size.

Targets (absolute, on the reference 2-core machine):
  raw BT + 100-round bootstrap + rank ranges   <= 1.0 s
  style-controlled BT + analytic intervals     <= 2.0 s
  style-controlled BT + 100-round bootstrap    <= 20 s

Each measured stage is one function ``stage_<name>(data, args) -> None`` listed in ``STAGES``;
further stages (a Django end-to-end recompute, say) are added the same way.
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ranking.estimators import (  # noqa: E402
    aggregate_cells,
    bootstrap_intervals,
    cluster_bootstrap_intervals,
    fit_bradley_terry,
    fit_style,
    online_elo,
    pairwise_table,
    rank_ranges,
    sandwich_intervals,
    shown_mask,
    style_bootstrap_intervals,
    style_design,
    style_differences,
    style_sandwich_intervals,
)
from ranking.estimators.synthetic import random_pairs, simulate_bt, simulate_style_counts  # noqa: E402


@dataclass(frozen=True)
class Data:
    n: int
    a: NDArray[np.int64]
    b: NDArray[np.int64]
    outcome: NDArray[np.int64]
    left: NDArray[np.float64]
    right: NDArray[np.float64]
    prompt: NDArray[np.int64]


def generate(args: argparse.Namespace) -> Data:
    rng = np.random.default_rng(args.seed)
    n, m = args.competitors, args.battles
    theta = rng.normal(0.0, 0.8, n)
    a, b = random_pairs(rng, n, m)
    left, right = simulate_style_counts(rng, m), simulate_style_counts(rng, m)
    x = style_differences(left, right).x
    sim = simulate_bt(
        rng,
        theta,
        m,
        tie_prob=0.10,
        both_bad_prob=0.03,
        extra_logit=x @ np.array([0.3, 0.05, 0.05, 0.1]),
        a=a,
        b=b,
    )
    prompt = rng.integers(0, m // 10, m)
    return Data(n, a, b, sim.outcome, left, right, prompt)


def stage_floor(d: Data, args: argparse.Namespace) -> None:
    """Count the (pair, outcome) cells of in-memory arrays: the floor."""
    aggregate_cells(d.a, d.b, d.outcome, n_competitors=d.n)


def stage_bt_bootstrap_ranks(d: Data, args: argparse.Namespace) -> None:
    """From arrays: aggregate, fit BT, 100-round bootstrap, rank ranges among the shown."""
    cells = aggregate_cells(d.a, d.b, d.outcome, n_competitors=d.n)
    fit = fit_bradley_terry(cells)
    iv = bootstrap_intervals(cells, fit, rounds=args.rounds, seed=0)
    rank_ranges(iv.lower, iv.upper, shown_mask(fit.battles, 50))


def stage_bt_sandwich(d: Data, args: argparse.Namespace) -> None:
    """From arrays: aggregate, fit BT, sandwich intervals."""
    cells = aggregate_cells(d.a, d.b, d.outcome, n_competitors=d.n)
    sandwich_intervals(cells, fit_bradley_terry(cells))


def stage_bt_prompt_bootstrap(d: Data, args: argparse.Namespace) -> None:
    """From arrays: aggregate by (prompt, pair, outcome), fit, 100-round bootstrap by prompt."""
    cells = aggregate_cells(d.a, d.b, d.outcome, n_competitors=d.n, cluster=d.prompt)
    cluster_bootstrap_intervals(cells, fit_bradley_terry(cells), rounds=args.rounds, seed=0)


def stage_pairwise(d: Data, args: argparse.Namespace) -> None:
    """From arrays: the full pairwise table (win rates, Wilson, exact tests, tie rates)."""
    pairwise_table(aggregate_cells(d.a, d.b, d.outcome, n_competitors=d.n))


def stage_style_analytic(d: Data, args: argparse.Namespace) -> None:
    """From arrays: style design, style-controlled fit, sandwich intervals."""
    sd = style_design(d.a, d.b, d.outcome, d.left, d.right, n_competitors=d.n)
    style_sandwich_intervals(sd, fit_style(sd))


def stage_style_bootstrap(d: Data, args: argparse.Namespace) -> None:
    """From arrays: style design, fit, 100-round bootstrap (battles resampled)."""
    sd = style_design(d.a, d.b, d.outcome, d.left, d.right, n_competitors=d.n)
    style_bootstrap_intervals(sd, fit_style(sd), rounds=args.rounds, seed=0)


def stage_online_elo(d: Data, args: argparse.Namespace) -> None:
    """Sequential Elo over all battles (a Python loop by nature)."""
    online_elo(d.a, d.b, d.outcome, n_competitors=d.n)


Stage = Callable[[Data, argparse.Namespace], None]
# (name, function, repeats (best of), target seconds or None)
STAGES: list[tuple[str, Stage, int, float | None]] = [
    ("floor: aggregate to cells", stage_floor, 5, None),
    ("BT + bootstrap + rank ranges", stage_bt_bootstrap_ranks, 3, 1.0),
    ("BT + sandwich", stage_bt_sandwich, 3, None),
    ("BT + bootstrap by prompt", stage_bt_prompt_bootstrap, 1, None),
    ("pairwise table", stage_pairwise, 3, None),
    ("style + analytic intervals", stage_style_analytic, 3, 2.0),
    ("style + bootstrap", stage_style_bootstrap, 1, 20.0),
    ("online Elo", stage_online_elo, 1, None),
]


def measure(fn: Stage, d: Data, args: argparse.Namespace, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn(d, args)
        best = min(best, time.perf_counter() - t0)
    return best


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # kilobytes on Linux


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--battles", type=int, default=1_000_000)
    parser.add_argument("--competitors", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--skip", nargs="*", default=[], help="substrings of stage names to skip")
    args = parser.parse_args(argv)

    t0 = time.perf_counter()
    data = generate(args)
    gen_s = time.perf_counter() - t0
    print(f"{args.battles:,} battles, {args.competitors} competitors, {args.rounds} rounds")
    print(
        f"generated in {gen_s:.2f} s (not part of any figure); rss after generation {peak_rss_mib():.0f} MiB"
    )
    floor = None
    failed = False
    print(f"{'stage':32s} {'seconds':>9s} {'x floor':>9s} {'target':>8s} {'peak MiB':>9s}")
    for name, fn, repeats, target in STAGES:
        if any(s in name for s in args.skip):
            continue
        secs = measure(fn, data, args, repeats)
        if floor is None:
            floor = secs
        ok = "" if target is None else ("ok" if secs <= target else "MISSED")
        failed |= ok == "MISSED"
        tgt = "" if target is None else f"<={target:g}s {ok}"
        print(f"{name:32s} {secs:9.3f} {secs / floor:9.1f} {tgt:>8s} {peak_rss_mib():9.0f}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
