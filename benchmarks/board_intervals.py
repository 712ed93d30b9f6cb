"""Board intervals against a known truth: family-wise error of the difference intervals (issue 20.4) and
coverage of the score intervals when votes come in clusters (issue 20.5), before and after.

    python benchmarks/board_intervals.py [--boards 200] [--rounds 100] [--only fwer|coverage]

FWER. ``--boards`` boards of 10 competitors whose true log-strengths fall in groups (0, 0, 0, 0.25, 0.25,
0.5, 0.5, 0.5, 0.8, 0.8: 8 truly equal pairs), 3,000 votes on uniform random pairs each, every vote its
own prompt. Each board is computed as the leaderboard computes it (``board_compute``, bootstrap, the
campaign default of 100 rounds). Printed: the share of boards on which some truly equal pair is shown as
different (its difference interval excludes 0) by the per-pair intervals (before) and by the simultaneous
ones (after), by the Holm-adjusted p-values and by the anytime-valid decisions; and the share on which
the simultaneous intervals miss any true difference at all. Goal: at most 0.05 after.

Coverage. Boards of 10 competitors (log-strengths evenly spaced over 0..1.5), three designs of
``ranking.estimators.synthetic.clustered_votes``: plain (3,000 votes, each its own prompt), prompt effects
(150 prompts x 20 votes, per-(prompt, competitor) logit effects of sd 1) and k reviewers (600 items x
5 raters, per-item effects of sd 1.5). The truth is the population Bradley-Terry strength
(``population_strengths``). Printed: the share of (board, competitor) score intervals holding the true
score, with the old default (the plain bootstrap) and with "auto", and what auto chose. Goal: 0.93-0.97
for every design with auto.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ranking.compute import Board, Method, board_compute  # noqa: E402
from ranking.estimators import BASE, SCALE  # noqa: E402
from ranking.estimators.synthetic import Clustering, clustered_votes, population_strengths  # noqa: E402
from ranking.policy import VoteArrays  # noqa: E402

FWER_STRENGTHS = np.array([0.0, 0.0, 0.0, 0.25, 0.25, 0.5, 0.5, 0.5, 0.8, 0.8])
COVERAGE_STRENGTHS = np.linspace(0.0, 1.5, 10)
DESIGNS: dict[str, tuple[Clustering, int, int, float]] = {
    "plain": ("none", 3000, 1, 0.0),
    "prompt effects": ("prompt", 150, 20, 1.0),
    "k reviewers (k = 5)": ("item", 600, 5, 1.5),
}


def vote_arrays(
    a: NDArray[np.int64], b: NDArray[np.int64], outcome: NDArray[np.int64], prompt: NDArray[np.int64]
) -> VoteArrays:
    m = a.shape[0]
    zero = np.zeros(m, dtype=np.int64)
    return VoteArrays(
        vote_id=np.arange(m, dtype=np.int64),
        left=a + 1,
        right=b + 1,
        outcome=outcome,
        decision_ms=zero + 5000,
        rater=np.arange(m, dtype=np.int64),
        prompt=prompt,
        category=zero,
        categories=("",),
        identity=np.zeros(m, dtype=bool),
        style_left=np.zeros((m, 4)),
        style_right=np.zeros((m, 4)),
    )


def board(
    seed: int, strengths: NDArray[np.float64], design: Clustering, clusters: int, size: int, sd: float, method: Method
) -> Board:
    sim = clustered_votes(
        np.random.default_rng(seed), strengths, clusters=clusters, size=size, design=design, effect_sd=sd
    )
    ids = np.arange(1, strengths.shape[0] + 1, dtype=np.int64)
    return board_compute(vote_arrays(sim.a, sim.b, sim.outcome, sim.cluster), ids, {}, method)


def fwer_counts(result: Board, truth: NDArray[np.float64]) -> dict[str, bool]:
    """For one board: is some truly equal pair shown as different, by each reading; does the simultaneous
    band miss any true difference. ``truth``: the competitors' true log-strengths (ids 1..k)."""
    pw = result.pairwise_full()
    order = np.asarray(pw["competitor_ids"]) - 1
    t = truth[order]
    true_diff = SCALE * (t[:, None] - t[None, :])
    equal = np.triu(np.isclose(t[:, None], t[None, :]), 1)
    diff = pw["difference"]

    def grid(rows: list[list[float | None]], fill: float) -> NDArray[np.float64]:
        return np.array([[fill if v is None else v for v in row] for row in rows], dtype=np.float64)

    def shows(block: dict) -> NDArray[np.bool_]:
        lower, upper = grid(block["lower"], -np.inf), grid(block["upper"], np.inf)
        return (lower > 0) | (upper < 0)

    def misses(block: dict) -> bool:
        lower, upper = grid(block["lower"], -np.inf), grid(block["upper"], np.inf)
        return bool(np.any(((true_diff < lower - 1e-9) | (true_diff > upper + 1e-9)) & np.triu(np.ones_like(equal), 1)))

    holm = grid(pw["p_holm"], 1.0)
    seq = pw["sequential"]["cells"]
    decided = np.array([[c is not None and c["decision"] != "not yet" for c in row] for row in seq])
    return {
        "per_pair": bool(np.any(shows(diff) & equal)),
        "simultaneous": bool(np.any(shows(diff["simultaneous"]) & equal)),
        "holm": bool(np.any((holm < 0.05) & equal)),
        "sequential": bool(np.any(decided & equal)),
        "simultaneous_misses_any": misses(diff["simultaneous"]),
        "per_pair_misses_any": misses(diff),
    }


def fwer(boards: int, rounds: int) -> bool:
    print(f"FWER: {boards} boards, 10 competitors (8 truly equal pairs), 3,000 votes, bootstrap {rounds} rounds")
    method = Method(rounds=rounds, min_votes=1)
    started = time.perf_counter()
    hits: dict[str, int] = {}
    for seed in range(boards):
        result = board(seed, FWER_STRENGTHS, "none", 3000, 1, 0.0, method)
        for key, value in fwer_counts(result, FWER_STRENGTHS).items():
            hits[key] = hits.get(key, 0) + int(value)
    share = {key: value / boards for key, value in hits.items()}
    print(
        f"  an equal pair shown different: per-pair intervals {share['per_pair']:.3f} (before) -> "
        f"simultaneous {share['simultaneous']:.3f} (after; goal <= 0.05)"
    )
    print(
        f"  Holm-adjusted p < 0.05: {share['holm']:.3f}; "
        f"anytime-valid decisions (Bonferroni): {share['sequential']:.3f}"
    )
    print(
        f"  any true difference outside its interval: per-pair {share['per_pair_misses_any']:.3f}, "
        f"simultaneous {share['simultaneous_misses_any']:.3f}"
    )
    print(f"  ({time.perf_counter() - started:.1f} s)")
    return share["simultaneous"] <= 0.05


def coverage(boards: int, rounds: int) -> bool:
    print(f"Coverage of 95% score intervals: {boards} boards per design, 10 competitors, bootstrap {rounds} rounds")
    ok = True
    for name, (design, clusters, size, sd) in DESIGNS.items():
        truth = population_strengths(COVERAGE_STRENGTHS, design=design, effect_sd=sd)
        figures = {}
        chosen: dict[str, int] = {}
        for setting in ("bootstrap", "auto"):
            method = Method(rounds=rounds, min_votes=1, interval=setting)  # type: ignore[arg-type]
            covered = total = 0
            for seed in range(boards):
                result = board(10_000 + seed, COVERAGE_STRENGTHS, design, clusters, size, sd, method)
                if setting == "auto":
                    choice = result.extra["interval_choice"]["chosen"]
                    chosen[choice] = chosen.get(choice, 0) + 1
                for row in result.rows:
                    true_score = SCALE * truth[row["competitor_id"] - 1] + BASE
                    lower = -np.inf if row["lower"] is None else row["lower"]
                    upper = np.inf if row["upper"] is None else row["upper"]
                    covered += int(lower <= true_score <= upper)
                    total += 1
            figures[setting] = covered / total
        good = 0.93 <= figures["auto"] <= 0.97
        ok &= good
        picks = ", ".join(f"{k} {v}" for k, v in sorted(chosen.items()))
        print(
            f"  {name:22s} plain bootstrap {figures['bootstrap']:.3f} (before) -> auto {figures['auto']:.3f} "
            f"(after; goal 0.93-0.97: {'met' if good else 'NOT met'}); auto chose {picks}"
        )
    return ok


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--boards", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--only", choices=["fwer", "coverage"])
    args = parser.parse_args()
    results = []
    if args.only in (None, "fwer"):
        results.append(fwer(args.boards, args.rounds))
    if args.only in (None, "coverage"):
        results.append(coverage(args.boards, args.rounds))
    print("goals met" if all(results) else "GOALS NOT MET")


if __name__ == "__main__":
    main()
