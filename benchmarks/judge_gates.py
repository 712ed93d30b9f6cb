"""How often a judge passes a calibration gate it does not deserve (issue 20.1). One command:

    python benchmarks/judge_gates.py [--draws 20000] [--seed 0]

Known truth: a judge whose true agreement with the humans is below a gate (0.90 "may run alone", 0.75 "with
humans"), calibrated on n battles (n from 20 to 2,000), ``--draws`` times each. The agreement on each draw is a
binomial count, and the gate is read as the product reads it (``ranking.estimators.calibration_gates``: the
lower end of the agreement's 95% Wilson interval must reach the gate), beside the old rule (the point
estimate reaches the gate). Printed per truth and n: the false-pass rate of both rules, and for the worst case
(a judge just below the gate) the largest false-pass rate over n against the goal, 2.5% (the one-sided error of
a 95% interval's lower end) plus three Monte Carlo standard errors. A few draws go through the whole
calibration (``ranking.compute.calibration_compute`` on 4 x 4 tables) to check that the product reads the same
gate. Last, the price of the rule: how many battles a judge of true agreement 0.95 (or 0.85) needs before it
passes its gate on four draws in five.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ranking import estimators as est  # noqa: E402
from ranking.compute import calibration_compute  # noqa: E402

SIZES = (20, 30, 50, 100, 200, 500, 1000, 2000)
GOAL = 0.025  # the one-sided error of the 95% interval's lower end


def _passes(gates: np.ndarray, gate: float) -> np.ndarray:
    if gate == est.GATE_ALONE:
        return gates == "may_run_alone"
    return np.isin(gates, ["with_humans", "may_run_alone"])


def false_passes(draws: int, seed: int) -> bool:
    rng = np.random.default_rng(seed)
    ok = True
    for gate, truths in ((est.GATE_ALONE, (0.80, 0.85, 0.88, 0.899)), (est.GATE_NEEDS_WORK, (0.65, 0.70, 0.749))):
        print(f"gate {gate:.2f}: false-pass rate, interval rule / point rule ({draws:,} calibrations per cell)")
        print(f"{'truth':>7}" + "".join(f"{n:>15,}" for n in SIZES))
        worst = 0.0
        for truth in truths:
            cells = []
            for n in SIZES:
                agreed = rng.binomial(n, truth, size=draws)
                interval = float(_passes(est.calibration_gates(agreed, np.full(draws, n)), gate).mean())
                point = float((agreed / n >= gate).mean())
                worst = max(worst, interval)
                cells.append(f"{interval:>7.3f} / {point:.2f}")
            print(f"{truth:>7.3f}" + "".join(f"{c:>15}" for c in cells))
        limit = GOAL + 3 * np.sqrt(GOAL * (1 - GOAL) / draws)
        verdict = "met" if worst <= limit else "MISSED"
        ok &= worst <= limit
        print(f"  worst false-pass rate {worst:.4f}; goal <= {GOAL:.3f} (+3 s.e.: {limit:.4f}): {verdict}\n")
    return ok


def through_the_product(seed: int) -> bool:
    """The gate ``calibration_compute`` writes, on real 4 x 4 tables, is the vectorised rule's."""
    rng = np.random.default_rng(seed + 1)
    same = 0
    trials = 300
    for _ in range(trials):
        n = int(rng.choice(SIZES[:5]))
        human = rng.integers(0, 4, size=n)
        right = rng.random(n) < rng.uniform(0.6, 1.0)
        judge = np.where(right, human, (human + rng.integers(1, 4, size=n)) % 4)
        out = calibration_compute(human.astype(np.int64), judge.astype(np.int64))
        same += out["gate"] == est.calibration_gate(int(right.sum()), n)
    print(f"through calibration_compute: {same} of {trials} random calibrations read the same gate")
    return same == trials


def price(seed: int) -> None:
    rng = np.random.default_rng(seed + 2)
    for truth, gate, name in ((0.95, est.GATE_ALONE, "may_run_alone"), (0.85, est.GATE_NEEDS_WORK, "with_humans")):
        for n in range(20, 5001, 10):
            agreed = rng.binomial(n, truth, size=4000)
            if _passes(est.calibration_gates(agreed, np.full(4000, n)), gate).mean() >= 0.8:
                print(f"price: a judge of true agreement {truth:.2f} reaches {name} on 4 draws in 5 from {n} battles")
                break


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--draws", type=int, default=20000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    print(est.GATE_RULE + "\n")
    ok = false_passes(args.draws, args.seed)
    ok &= through_the_product(args.seed)
    price(args.seed)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
