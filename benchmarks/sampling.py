"""Active against uniform pair sampling on simulated campaigns with a known truth: one command, a printed ratio.

    python benchmarks/sampling.py [--seeds 200] [--budget 1500]

The campaign (``tests/battles/sampling_sim.py``): eight competitors at 1100, 1040, 1020, 1000, 980, 960,
940 and 900 points (the leader 60 ahead), Bradley-Terry votes without ties, batches of 50 votes between
leaderboard refits (sandwich intervals, shown from 30 votes), at most 6,000 votes. For each policy, the
same seeds:

  votes      until the board separates the leader (its interval above every other's): median and
             quartiles over seeds; how many runs separated within the cap, and how many separated a
             competitor that is not the true leader
  share      the true leader's share of the votes until then
  budget     at a fixed budget of ``--budget`` votes: the share of runs whose leader is separated, and the
             RMS error of all eight scores against the truth (what focusing on the top costs the rest)

Policies: uniform, active (``battles.sampling.active_pair_weights``, the default) and the overlap-anywhere
rule active sampling used before (a pair weighs 0.1 plus the overlap of its two intervals), for reference.
Goal: active separates the leader with fewer votes than uniform (ratio of medians below 1).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from battles.sampling import ACTIVE_FLOOR, ACTIVE_NEW_BOOST, active_pair_weights, interval_overlap  # noqa: E402
from tests.battles.sampling_sim import Weights, simulate, uniform_weights  # noqa: E402


def overlap_anywhere_weights(competitors: Sequence[int], intervals: Mapping[int, tuple[float, float]]) -> list[float]:
    """Active sampling's rule before: the floor plus the overlap of the pair's own two intervals."""
    weights = []
    for i, first in enumerate(competitors):
        for second in competitors[i + 1 :]:
            if first not in intervals or second not in intervals:
                weights.append(ACTIVE_NEW_BOOST)
            else:
                weights.append(ACTIVE_FLOOR + interval_overlap(intervals[first], intervals[second]))
    return weights


POLICIES: dict[str, Weights] = {
    "uniform": uniform_weights,
    "active": active_pair_weights,
    "overlap (before)": overlap_anywhere_weights,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=200)
    parser.add_argument("--budget", type=int, default=1500)
    args = parser.parse_args()
    medians: dict[str, float] = {}
    print(f"{args.seeds} seeds; fixed budget {args.budget} votes")
    print(
        f"{'policy':18} {'median':>7} {'q1':>6} {'q3':>6} {'separated':>9} {'wrong':>5} {'share':>6}"
        f" {'sep@budget':>10} {'rmse@budget':>11} {'s':>5}"
    )
    for name, weights in POLICIES.items():
        t0 = time.perf_counter()
        runs = [simulate(weights, seed=seed) for seed in range(args.seeds)]
        fixed = [simulate(weights, seed=seed, max_votes=args.budget, stop=False) for seed in range(args.seeds)]
        votes = sorted(r.votes for r in runs)
        q1, median, q3 = (
            statistics.quantiles(votes, n=4)[0],
            statistics.median(votes),
            statistics.quantiles(votes, n=4)[2],
        )
        medians[name] = median
        print(
            f"{name:18} {median:7.0f} {q1:6.0f} {q3:6.0f} {sum(r.separated for r in runs):9d}"
            f" {sum(r.separated and not r.correct for r in runs):5d}"
            f" {statistics.mean(r.leader_share for r in runs):6.3f}"
            f" {sum(r.separated and r.correct for r in fixed) / len(fixed):10.2f}"
            f" {statistics.mean(r.score_rmse for r in fixed):11.1f} {time.perf_counter() - t0:5.0f}"
        )
    ratio = medians["active"] / medians["uniform"]
    print(
        f"active / uniform median votes to separate the leader: {ratio:.2f} (goal: below 1): "
        f"{'met' if ratio < 1 else 'MISSED'}"
    )


if __name__ == "__main__":
    main()
