"""A campaign simulated against a known truth, to compare pair-sampling policies (pure numpy; no database).

Votes arrive in batches; between batches the leaderboard is refitted (Bradley-Terry with sandwich intervals,
a competitor shown from ``min_votes`` votes), as the live board is between recomputes, and the next batch's
pairs are drawn from the weights the policy gives those intervals. The run stops when the board separates
the leader: the top-scored shown competitor's interval lies wholly above every other competitor's, all of
them shown. ``benchmarks/sampling.py`` runs it over many seeds; ``tests/battles/test_sampling.py`` over a
few."""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from battles.sampling import active_pair_weights
from ranking import estimators as est

Weights = Callable[[Sequence[int], Mapping[int, tuple[float, float]]], list[float]]

# Scores (Elo points, BT scale) of the simulated competitors: a leader 60 points ahead of a runner-up,
# then a field spread below. The truth every policy is measured against.
TRUTH = (1100.0, 1040.0, 1020.0, 1000.0, 980.0, 960.0, 940.0, 900.0)


def uniform_weights(competitors: Sequence[int], intervals: Mapping[int, tuple[float, float]]) -> list[float]:
    n = len(competitors)
    return [1.0] * (n * (n - 1) // 2)


POLICIES: dict[str, Weights] = {"uniform": uniform_weights, "active": active_pair_weights}


@dataclass(frozen=True)
class Run:
    votes: int  # votes cast when the leader was separated (``max_votes`` when it never was)
    separated: bool
    correct: bool  # the separated leader is the true best
    leader_share: float  # share of the votes with the true best in them
    score_rmse: float  # RMS error of the final scores against the truth (both centred)


def board_intervals(
    a: np.ndarray, b: np.ndarray, outcome: np.ndarray, n: int, *, min_votes: int
) -> tuple[dict[int, tuple[float, float]], np.ndarray]:
    """The placed competitors' intervals and every competitor's score, as the sampler would read them."""
    cells = est.aggregate_cells(a, b, outcome, n_competitors=n)
    fit = est.fit_bradley_terry(cells)
    iv = est.sandwich_intervals(cells, fit)
    votes = np.bincount(a, minlength=n) + np.bincount(b, minlength=n)
    placed = {
        i: (float(iv.lower[i]), float(iv.upper[i]))
        for i in range(n)
        if votes[i] >= min_votes and np.isfinite(iv.lower[i]) and np.isfinite(iv.upper[i])
    }
    return placed, fit.scores


def leader_separated(intervals: Mapping[int, tuple[float, float]], n: int) -> int | None:
    """The competitor whose interval lies above every other's, when all ``n`` are placed."""
    if len(intervals) < n:
        return None
    top = max(intervals, key=lambda i: intervals[i][0] + intervals[i][1])
    others = max(hi for i, (_, hi) in intervals.items() if i != top)
    return top if intervals[top][0] > others else None


def simulate(
    weights: Weights,
    *,
    seed: int,
    truth: Sequence[float] = TRUTH,
    batch: int = 50,
    max_votes: int = 6000,
    min_votes: int = 30,
    stop: bool = True,
) -> Run:
    """One campaign under ``weights``; with ``stop=False`` it runs the full ``max_votes`` (a fixed budget)."""
    n = len(truth)
    strength = np.asarray(truth, dtype=np.float64) / est.SCALE  # natural log-strengths
    best = int(np.argmax(strength))
    rng = random.Random(seed)
    noise = np.random.default_rng(seed)
    pairs = [(i, j) for i in range(n) for j in range(i + 1, n)]
    a = np.zeros(0, dtype=np.int64)
    b = np.zeros(0, dtype=np.int64)
    outcome = np.zeros(0, dtype=np.int64)
    intervals: dict[int, tuple[float, float]] = {}
    scores = np.full(n, est.BASE)
    top: int | None = None
    while a.shape[0] < max_votes:
        w = weights(list(range(n)), intervals)
        drawn = rng.choices(pairs, weights=w, k=batch)
        ba = np.array([p[0] for p in drawn], dtype=np.int64)
        bb = np.array([p[1] for p in drawn], dtype=np.int64)
        p_left = 1.0 / (1.0 + np.exp(strength[bb] - strength[ba]))
        wins = noise.random(batch) < p_left
        a, b = np.concatenate([a, ba]), np.concatenate([b, bb])
        outcome = np.concatenate([outcome, np.where(wins, est.LEFT_WINS, est.RIGHT_WINS)])
        intervals, scores = board_intervals(a, b, outcome, n, min_votes=min_votes)
        top = leader_separated(intervals, n)
        if top is not None and stop:
            break
    share = float(np.mean((a == best) | (b == best)))
    centred = np.asarray(truth) - np.mean(truth)
    rmse = float(np.sqrt(np.mean((scores - np.mean(scores) - centred) ** 2)))
    return Run(int(a.shape[0]), top is not None, top == best, share, rmse)
