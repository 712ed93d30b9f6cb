"""Benchmark of the boundary rule (issue 20.6): a newcomer that lost all of its first 40 votes. One
command:

    python benchmarks/boundary.py [--boards 400] [--seed 0]

Five established competitors (log-strengths -0.6 .. 0.5, 600 votes among them) and a newcomer at a
fixed true strength (-4 .. -2.5 logits), which plays 40 votes against random established opponents.
When it loses all 40 its interval opens downward (the votes cannot bound it below) and its upper end
is the profile-likelihood bound. Printed per true strength, over all outcomes: how often it lost all
40, and how often its interval holds its true level with the two-sided cutoff (``chi2_1(0.95) / 2 =
1.92``, the rule before issue 20.6) and with the boundary rule (``-log(0.025) = 3.69``,
``ranking.estimators.profile``); the established competitors' coverage in the same boards. Goal:
0.93-0.97 for the newcomer at every true strength.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ranking.estimators import SCALE, aggregate_cells, fit_bradley_terry, sandwich_intervals  # noqa: E402
from ranking.estimators.bradley_terry import normalisation_matrix  # noqa: E402
from ranking.estimators.intervals import boundary_intervals, bt_likelihood  # noqa: E402
from ranking.estimators.profile import damped_newton, profile_bounds  # noqa: E402
from ranking.estimators.synthetic import simulate_bt  # noqa: E402

ESTABLISHED = np.array([-0.6, -0.2, 0.0, 0.3, 0.5])
TRUTHS = (-4.0, -3.5, -3.0, -2.75, -2.5)  # the newcomer's true log-strength


def newcomer_coverage(truth_new: float, boards: int, seed: int) -> tuple[float, float, float, float, float, float]:
    """Over ``boards`` boards with the newcomer at ``truth_new`` logits (all outcomes): the share where it
    lost all 40, its coverage with the two-sided cutoff and with the boundary rule (over all boards, then
    over those where it lost all 40), and the established competitors' coverage."""
    rng = np.random.default_rng(seed)
    theta = np.append(ESTABLISHED, truth_new)
    lost_all, new_rule, old_rule, rest = [], [], [], []
    for _ in range(boards):
        est = simulate_bt(rng, theta[:5], 600)
        new = simulate_bt(rng, theta, 40, a=np.full(40, 5), b=rng.integers(0, 5, 40))
        a, b = np.concatenate([est.a, new.a]), np.concatenate([est.b, new.b])
        cells = aggregate_cells(a, b, np.concatenate([est.outcome, new.outcome]), n_competitors=6)
        fit = fit_bradley_terry(cells)
        sand = sandwich_intervals(cells, fit)
        iv = boundary_intervals(cells, fit, sand.lower, sand.upper)
        truth = SCALE * (theta - theta[fit.bounds.centre].mean()) + 1000
        hit = (iv.lower <= truth) & (truth <= iv.upper)
        new_rule.append(bool(hit[5]))
        rest.append(hit[:5])
        lost = not (new.outcome != 1).any()
        lost_all.append(lost)
        old = bool(hit[5])
        if lost:  # the same newcomer's upper bound with the two-sided cutoff (the rule before the fix)
            lik = bt_likelihood(cells, fit)
            theta_hat, _, _ = damped_newton(fit.theta_raw, lik.objective, lik.value, tol=1e-9, max_iter=200)
            nm = normalisation_matrix(fit.components, fit.params.reference, fit.bounds.centre)
            _, upper = profile_bounds(lik, theta_hat, nm[5], confidence=0.95, need_lower=False)
            old = bool(truth[5] <= SCALE * upper + 1000)
        old_rule.append(old)
    went = np.array(lost_all, dtype=bool)
    before, after = np.array(old_rule), np.array(new_rule)
    given = (float(before[went].mean()), float(after[went].mean())) if went.any() else (np.nan, np.nan)
    return float(went.mean()), float(before.mean()), float(after.mean()), given[0], given[1], float(np.mean(rest))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--boards", type=int, default=400)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    t0 = time.perf_counter()
    print(f"newcomer coverage of nominal 95% over {args.boards} boards per truth (all outcomes)")
    print(f"{'':>20}{'all outcomes':^25}{'lost all 40':^25}")
    print(f"{'truth':>7}{'lost all':>10}{'before 1.92':>13}{'after 3.69':>12}{'before':>13}{'after':>12}{'others':>10}")
    worst_old, worst_new = 1.0, 1.0
    for k, truth in enumerate(TRUTHS):
        lost, old_rule, new_rule, old_given, new_given, rest = newcomer_coverage(truth, args.boards, args.seed + k)
        worst_old, worst_new = min(worst_old, old_rule), min(worst_new, new_rule)
        print(
            f"{truth:>7.2f}{lost:>10.2f}{old_rule:>13.3f}{new_rule:>12.3f}{old_given:>13.3f}{new_given:>12.3f}{rest:>10.3f}"
        )
    print(
        f"worst newcomer coverage: before {worst_old:.3f}, after {worst_new:.3f} (goal 0.93-0.97); "
        f"ratio {worst_new / worst_old:.3f}  ({time.perf_counter() - t0:.0f} s)"
    )


if __name__ == "__main__":
    main()
