"""Online Elo for the live view, and how much its ratings depend on the order of the votes.

Elo is order-dependent and noisy (the last few battles weigh most), which is why the published
leaderboard uses Bradley-Terry. It is still useful live: it updates in O(1) per vote. Two flags say
when an Elo number should not be trusted: too few comparisons, or a rating that is still moving.
``elo_order_spread`` puts a figure on the order dependence: the same votes replayed in random orders,
each competitor's rating's sd and range over them.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .aggregate import BOTH_BAD, LEFT_WINS, RIGHT_WINS, validate_battles


@dataclass(frozen=True)
class EloResult:
    """Final ratings after processing battles in time order.

    ``comparisons``: battles each competitor took part in (skipped both_bad excluded).
    ``recent_change``: net rating change over the competitor's last ``recent`` comparisons (over all
    of them when it has fewer). ``few_comparisons``: fewer than ``min_comparisons``.
    ``unstable``: ``|recent_change| > max_recent_move``.
    """

    ratings: NDArray[np.float64]
    comparisons: NDArray[np.int64]
    recent_change: NDArray[np.float64]
    few_comparisons: NDArray[np.bool_]
    unstable: NDArray[np.bool_]
    params: Mapping[str, object] = field(default_factory=dict)


def online_elo(
    a: ArrayLike,
    b: ArrayLike,
    outcome: ArrayLike,
    *,
    n_competitors: int | None = None,
    time: ArrayLike | None = None,
    k: float = 32.0,
    base: float = 1000.0,
    scale: float = 400.0,
    both_bad: Literal["tie", "skip"] = "tie",
    min_comparisons: int = 50,
    recent: int = 20,
    max_recent_move: float = 50.0,
) -> EloResult:
    """Sequential Elo: ``E = 1 / (1 + 10^((R_b - R_a) / scale))``, ``R_a += k (S - E)``.

    Battles are processed in the order of ``time`` (stable sort, so equal times keep input order)
    or in input order. A tie scores 0.5; both_bad is a tie or skipped.
    """
    bt = validate_battles(a, b, outcome, n_competitors=n_competitors)
    if both_bad not in ("tie", "skip"):
        raise ValueError("both_bad must be 'tie' or 'skip'")
    n = bt.n_competitors
    order = np.arange(bt.a.shape[0]) if time is None else np.argsort(np.asarray(time), kind="stable")
    # Plain Python floats in the loop: per-element numpy indexing would be ~10x slower.
    aa = bt.a[order].tolist()
    bb = bt.b[order].tolist()
    oo = bt.outcome[order].tolist()
    ratings = [float(base)] * n
    counts = [0] * n
    history: list[deque[float]] = [deque([float(base)], maxlen=recent + 1) for _ in range(n)]
    skip_bb = both_bad == "skip"
    for x, y, o in zip(aa, bb, oo, strict=True):
        if o == BOTH_BAD and skip_bb:
            continue
        s = 1.0 if o == LEFT_WINS else 0.0 if o == RIGHT_WINS else 0.5
        rx, ry = ratings[x], ratings[y]
        e = 1.0 / (1.0 + 10.0 ** ((ry - rx) / scale))
        delta = k * (s - e)
        ratings[x] = rx + delta
        ratings[y] = ry - delta
        counts[x] += 1
        counts[y] += 1
        history[x].append(ratings[x])
        history[y].append(ratings[y])
    r = np.array(ratings)
    c = np.array(counts, dtype=np.int64)
    change = np.array([h[-1] - h[0] for h in history])
    params = {
        "k": k,
        "base": base,
        "scale": scale,
        "both_bad": both_bad,
        "min_comparisons": min_comparisons,
        "recent": recent,
        "max_recent_move": max_recent_move,
        "order": "time" if time is not None else "input",
    }
    return EloResult(r, c, change, c < min_comparisons, np.abs(change) > max_recent_move, params)


ORDER_PERMUTATIONS = 100  # random orders the spread is taken over
# Votes one order replays at most: one vectorised step per vote (a few microseconds each), and the orders
# are held as int32 (permutations x replayed, 40 MB at the cap). A longer log replays each order's last
# ORDER_MAX_REPLAY votes (a uniformly random ordered subset, the tail of a random order) from the base.
ORDER_MAX_REPLAY = 100_000
_ORDER_BLOCK = 4096  # steps whose indices are gathered at once


@dataclass(frozen=True)
class EloOrderSpread:
    """Each competitor's final Elo over ``permutations`` random orders of the same votes: ``sd`` (n - 1
    in the denominator), ``low``/``high`` (the lowest and highest) and ``mean``. ``replayed``: votes each
    order replayed (all of them unless the log is longer than ``ORDER_MAX_REPLAY``)."""

    sd: NDArray[np.float64]
    low: NDArray[np.float64]
    high: NDArray[np.float64]
    mean: NDArray[np.float64]
    permutations: int
    replayed: int
    params: Mapping[str, object] = field(default_factory=dict)


def elo_order_spread(
    a: ArrayLike,
    b: ArrayLike,
    outcome: ArrayLike,
    *,
    n_competitors: int | None = None,
    permutations: int = ORDER_PERMUTATIONS,
    seed: int = 0,
    k: float = 32.0,
    base: float = 1000.0,
    scale: float = 400.0,
    both_bad: Literal["tie", "skip"] = "tie",
    max_replay: int = ORDER_MAX_REPLAY,
) -> EloOrderSpread:
    """``online_elo`` (same K, base, scale and both-bad rule) replayed over ``permutations`` seeded random
    orders of the votes at once: a step updates the pair of that vote in every order, so a log of N votes
    costs N vectorised steps whatever the number of orders. Each order's ratings match ``online_elo`` run
    on the votes in that order (to rounding: ``E = (1 + tanh(ln 10 (R_a - R_b) / (2 scale))) / 2``)."""
    bt = validate_battles(a, b, outcome, n_competitors=n_competitors)
    if both_bad not in ("tie", "skip"):
        raise ValueError("both_bad must be 'tie' or 'skip'")
    if permutations < 2:
        raise ValueError("permutations must be at least 2")
    if max_replay < 1:
        raise ValueError("max_replay must be positive")
    n = bt.n_competitors
    keep = bt.outcome != BOTH_BAD if both_bad == "skip" else np.ones(bt.outcome.shape[0], dtype=bool)
    va, vb, vo = bt.a[keep], bt.b[keep], bt.outcome[keep]
    # The left side's gain per vote is k (S - E), with k (S - 1/2) fixed by the outcome.
    ks = k * (np.where(vo == LEFT_WINS, 1.0, np.where(vo == RIGHT_WINS, 0.0, 0.5)) - 0.5)
    total = int(va.shape[0])
    replay = min(total, max_replay)
    rng = np.random.default_rng(seed)
    if replay == total:
        orders = rng.permuted(np.tile(np.arange(total, dtype=np.int32), (permutations, 1)), axis=1)
    else:
        orders = np.stack([rng.choice(total, size=replay, replace=False).astype(np.int32) for _ in range(permutations)])
    ratings = np.full(permutations * n, float(base))
    offset = np.arange(permutations, dtype=np.int64)[:, None] * n
    c = float(np.log(10.0)) / (2.0 * scale)
    half_k = k / 2.0
    delta = np.empty(permutations)
    for start in range(0, replay, _ORDER_BLOCK):
        block = orders[:, start : start + _ORDER_BLOCK]
        # (steps, 2 * permutations): the left then the right competitor's flat index in each order.
        index = np.ascontiguousarray(np.concatenate([va[block] + offset, vb[block] + offset]).T)
        gain = np.ascontiguousarray(ks[block].T)
        for step in range(index.shape[0]):
            idx = index[step]
            r = ratings[idx]
            np.subtract(r[:permutations], r[permutations:], out=delta)
            delta *= c
            np.tanh(delta, out=delta)
            delta *= -half_k
            delta += gain[step]
            r[:permutations] += delta
            r[permutations:] -= delta
            ratings[idx] = r
    final = ratings.reshape(permutations, n)
    params = {
        "permutations": permutations,
        "seed": seed,
        "votes": total,
        "replayed": replay,
        "k": k,
        "base": base,
        "scale": scale,
        "both_bad": both_bad,
    }
    low, high = final.min(axis=0), final.max(axis=0)
    # Identical ratings in every order have no spread (the float mean of equal values can miss them by 1e-12).
    sd = np.where(high > low, final.std(axis=0, ddof=1), 0.0)
    return EloOrderSpread(sd, low, high, final.mean(axis=0), permutations, replay, params)
