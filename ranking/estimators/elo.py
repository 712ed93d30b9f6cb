"""Online Elo for the live view.

Elo is order-dependent and noisy (the last few battles weigh most), which is why the published
leaderboard uses Bradley-Terry. It is still useful live: it updates in O(1) per vote. Two flags say
when an Elo number should not be trusted: too few comparisons, or a rating that is still moving.
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
