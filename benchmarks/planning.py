"""The sample-size planner (issue 24.6): is the planned number of battles right, and what does the board's
block cost on every recompute? One command:

    python benchmarks/planning.py [--replications 2000] [--competitors 300] [--seed 0]

Known truth: for 6 competitors, battles spread evenly over the pairs, the planner's battles for a 40-point gap
at 80% power (level 5%) are simulated ``--replications`` times under each tie rule and tie rate,
fitted as the board fits them (Bradley-Terry with ties as half a win at tie rates 0 and 0.3; Davidson's fit at
0.1 and 0.3), and the Wald test read
with the planned standard error. Printed: the achieved power against the goal, 0.80 within three Monte Carlo
standard errors (plus 0.01 for the normal approximation), and the spread of the fitted gap against the planned
standard error.

Cost: the board's block (``extra.planning``: two separation plans, evenly and on the pair) for ``--competitors``
shown competitors with battles on every pair, against one Bradley-Terry fit of the same board (which the
recompute runs anyway, before its bootstrap rounds), measured in the same run. Goal: at most 2 x that fit.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ranking import estimators as est  # noqa: E402
from ranking.estimators.planning import difference_se, plan_uniform, separation_plan  # noqa: E402

K = 6
MARGIN = 40.0
COST_GOAL = 2.0


def _uniform(k: int, n: float) -> np.ndarray:
    return np.triu(np.ones((k, k)), 1) * n / (k * (k - 1) / 2)


def achieved_power(replications: int, seed: int) -> bool:
    rng = np.random.default_rng(seed)
    d = MARGIN / est.SCALE
    theta = np.zeros(K)
    theta[0], theta[1] = d / 2, -d / 2
    pairs = np.array([(i, j) for i in range(K) for j in range(i + 1, K)])
    ok = True
    print(f"{K} competitors, a true gap of {MARGIN:g} points, 80% power at 5%, {replications:,} replications each")
    print(f"{'rule':>9} {'ties':>5} {'battles':>8} {'power':>7} {'sd / planned se':>16}  verdict")
    # Davidson's fit needs ties (without any the board fits the half rule).
    for ties, rates in (("half", (0.0, 0.3)), ("davidson", (0.1, 0.3))):
        for t in rates:
            plan = plan_uniform(competitors=K, margin=MARGIN, tie_rate=t, ties=ties)  # type: ignore[arg-type]
            n = plan.battles_for_power
            se = difference_se(_uniform(K, n), theta, 0, 1, tie_rate=t, ties=ties)  # type: ignore[arg-type]
            gaps = np.empty(replications)
            for r in range(replications):
                a, b = pairs[rng.integers(0, len(pairs), n)].T
                if ties == "half":
                    p = 1.0 / (1.0 + np.exp(-(theta[a] - theta[b])))
                    u = rng.random(n)
                    outcome = np.where(u < p - t / 2, 0, np.where(u < p + t / 2, 2, 1))
                    strength = est.fit_bradley_terry(est.aggregate_cells(a, b, outcome, n_competitors=K)).log_strength
                else:
                    outcome = est.simulate_davidson(rng, theta, 2 * t / (1 - t), a, b)
                    strength = est.fit_davidson(est.aggregate_cells(a, b, outcome, n_competitors=K)).log_strength
                gaps[r] = strength[0] - strength[1]
            power = float(np.mean(np.abs(gaps) / se > 1.959963984540054))
            limit = 3 * math.sqrt(0.16 / replications) + 0.01
            met = abs(power - 0.8) <= limit
            ok &= met
            print(
                f"{ties:>9} {t:>5.1f} {n:>8,} {power:>7.3f} {gaps.std() / se:>16.3f}  "
                f"{'met' if met else 'MISSED'} (goal 0.80 ± {limit:.3f})"
            )
    return ok


def cost(competitors: int, seed: int) -> bool:
    rng = np.random.default_rng(seed + 1)
    k = competitors
    theta = np.sort(rng.normal(0, 0.6, k))[::-1].copy()
    theta[1] = theta[0] - 0.03  # a close race at the top
    counts = np.triu(rng.poisson(40, (k, k)).astype(np.float64), 1)
    i, j = np.nonzero(counts)
    reps = counts[i, j].astype(np.int64)
    a, b = np.repeat(i, reps), np.repeat(j, reps)
    p = 1.0 / (1.0 + np.exp(-(theta[a] - theta[b])))
    u = rng.random(a.shape[0])
    outcome = np.where(u < p - 0.1, 0, np.where(u < p + 0.1, 2, 1))
    cells = est.aggregate_cells(a, b, outcome, n_competitors=k)
    t0 = time.perf_counter()
    fit = est.fit_bradley_terry(cells)
    t_fit = time.perf_counter() - t0
    t0 = time.perf_counter()
    pair = np.zeros((k, k))
    pair[0, 1] = 1.0
    plans = [
        separation_plan(counts, fit.log_strength, 0, 1, future=future, tie_rate=0.2)
        for future in (np.triu(np.ones((k, k)), 1), pair)
    ]
    t_plan = time.perf_counter() - t0
    ratio = t_plan / t_fit
    print(
        f"\n{k} competitors, {a.shape[0]:,} votes: one Bradley-Terry fit {t_fit:.3f} s, the board's planning block "
        f"{t_plan:.3f} s ({plans[0].additional:,} more battles evenly, {plans[1].additional:,} on the pair): "
        f"{ratio:.2f} x the fit; goal <= {COST_GOAL:g} x: {'met' if ratio <= COST_GOAL else 'MISSED'}"
    )
    return ratio <= COST_GOAL


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replications", type=int, default=2000)
    parser.add_argument("--competitors", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    print(f"load {os.getloadavg()[0]:.1f}")
    ok = achieved_power(args.replications, args.seed)
    ok &= cost(args.competitors, args.seed)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
