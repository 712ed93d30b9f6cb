"""Position and pair-frequency sections (issue 24.3): what they add to a recompute, and how they do against
a known truth.

    python benchmarks/position.py [--competitors 100] [--votes 1000000] [--boards 100]

Cost. One raw board of ``--competitors`` competitors and ``--votes`` votes on uniform random pairs, grouped by
(left, right, outcome) as the recompute reads them at scale (``VoteLog.counted``). Timed: the raw board
itself (``board_compute``) with the campaign default (bootstrap, 100 rounds) and with sandwich intervals (its
cheapest setting), and ``position_compute`` on the same rows. Goal: the two sections cost at most the
default raw board's own compute (ratio <= 1.0); the ratio to the sandwich board is printed beside it.

Truth. ``--boards`` boards of 6 competitors, 3,000 votes each: (a) a left-side advantage h = 0.3 with sides
by a coin flip: the share of profile intervals holding h (goal 0.93-0.97) and holding 0 (power); (b) one
pair shown 20 times as often as the others with a pair-specific effect (0 beats 1 85% of the time where the
strengths say 55%): the share of competitor intervals holding the balanced design's board, unweighted and
weighted (goal: weighted 0.90 or more).
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ranking.board_position import position_compute  # noqa: E402
from ranking.compute import Method, board_compute  # noqa: E402
from ranking.estimators import aggregate_cells, fit_bradley_terry  # noqa: E402
from ranking.estimators import position as pos  # noqa: E402
from ranking.policy import grouped_votes  # noqa: E402


def grouped(a: NDArray[np.int64], b: NDArray[np.int64], o: NDArray[np.int64]):  # type: ignore[no-untyped-def]
    keys, first, count = np.unique(np.stack([a, b, o]), axis=1, return_index=True, return_counts=True)
    m = keys.shape[1]
    return grouped_votes(
        np.zeros(m, dtype=np.int64),
        np.full(m, -1, dtype=np.int64),
        keys[0] + 1,
        keys[1] + 1,
        keys[2],
        count,
        first + 1,
        ("",),
    )


def random_votes(
    theta: NDArray[np.float64], n: int, h: float, rng: np.random.Generator, tie_rate: float = 0.1
) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64]]:
    k = theta.shape[0]
    a = rng.integers(0, k, n)
    b = (a + rng.integers(1, k, n)) % k
    d = theta[a] - theta[b] + h
    u = rng.random(n)
    return a, b, np.where(u < tie_rate, 2, np.where(rng.random(n) < 1 / (1 + np.exp(-d)), 0, 1))


def cost(competitors: int, votes: int) -> None:
    rng = np.random.default_rng(0)
    theta = rng.normal(0, 1, competitors)
    rows = grouped(*random_votes(theta, votes, 0.1, rng))
    ids = np.arange(1, competitors + 1, dtype=np.int64)
    labels = {int(i): f"m{i}" for i in ids}
    # The interval is fixed: what the board reads per prompt only records that choice.
    prompts = replace(rows, prompt=np.arange(len(rows), dtype=np.int64))
    seconds = {}
    for interval in ("bootstrap", "sandwich"):
        t0 = time.perf_counter()
        board_compute(rows, ids, labels, Method(interval=interval, rounds=100), prompts=prompts)  # type: ignore[arg-type]
        seconds[interval] = time.perf_counter() - t0
    t0 = time.perf_counter()
    position, frequency = position_compute(rows, ids, labels, Method())
    extra = time.perf_counter() - t0
    print(f"cost: {competitors} competitors, {votes:,} votes in {len(rows):,} grouped rows")
    print(
        f"  raw board: {seconds['bootstrap']:.2f} s (bootstrap, 100 rounds), {seconds['sandwich']:.2f} s (sandwich); "
        f"position + pair_frequency: {extra:.2f} s"
    )
    print(
        f"  ratio {extra / seconds['bootstrap']:.2f} to the default board (goal <= 1.0), "
        f"{extra / seconds['sandwich']:.2f} to the sandwich one; h = {position['h']}"
    )
    print(f"  effective votes {frequency['effective_votes']} of {frequency['votes']}")


def truth(boards: int) -> None:
    theta = np.linspace(0.8, -0.8, 6)
    rng = np.random.default_rng(1)
    inside = power = 0
    for _ in range(boards):
        a, b, o = random_votes(theta, 3000, 0.3, rng, tie_rate=0.0)  # the half-win model holds exactly
        r = pos.fit_position(pos.oriented_counts(a, b, o))
        assert r.lower is not None and r.upper is not None
        inside += r.lower < 0.3 < r.upper
        power += not (r.lower < 0 < r.upper)
    print(f"position: h = 0.3 inside the 95% interval on {inside / boards:.3f} of {boards} boards (goal 0.93-0.97);")
    print(f"  0 excluded on {power / boards:.3f}")

    p = 1 / (1 + np.exp(-(theta[:, None] - theta[None, :])))
    p[0, 1], p[1, 0] = 0.85, 0.15
    pairs = [(i, j) for i in range(6) for j in range(i + 1, 6)]
    a_, b_, o_, c_ = [], [], [], []
    for i, j in pairs:
        wins = round(100_000 * p[i, j])
        a_ += [i, i]
        b_ += [j, j]
        o_ += [0, 1]
        c_ += [wins, 100_000 - wins]
    target = fit_bradley_terry(aggregate_cells(a_, b_, o_, count=c_, n_competitors=6), prior_games=0).scores
    held = {"unweighted": 0, "weighted": 0}
    for _ in range(boards):
        a_l, b_l, o_l = [], [], []
        for i, j in pairs:
            m = 20 * 3000 // (20 + len(pairs) - 1) if (i, j) == (0, 1) else 3000 // (20 + len(pairs) - 1)
            left = rng.random(m) < 0.5
            win = rng.random(m) < p[i, j]
            a_l.append(np.where(left, i, j))
            b_l.append(np.where(left, j, i))
            o_l.append(np.where(left == win, 0, 1))
        oc = pos.oriented_counts(np.concatenate(a_l), np.concatenate(b_l), np.concatenate(o_l))
        f = pos.fit_pair_frequency(oc, shown=np.ones(6, dtype=bool))
        for name, side in (("unweighted", f.unweighted), ("weighted", f.weighted)):
            held[name] += int(((side.lower < target) & (target < side.upper)).sum())
    total = boards * 6
    print(
        f"pair frequency: the balanced board inside the 95% intervals: unweighted {held['unweighted'] / total:.3f}, "
        f"weighted {held['weighted'] / total:.3f} (goal >= 0.90 weighted)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--competitors", type=int, default=100)
    parser.add_argument("--votes", type=int, default=1_000_000)
    parser.add_argument("--boards", type=int, default=100)
    args = parser.parse_args()
    cost(args.competitors, args.votes)
    truth(args.boards)


if __name__ == "__main__":
    main()
