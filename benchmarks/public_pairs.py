"""The pairwise judgements the board analyses in ``benchmarks/board_audit.py`` run on: ``load_public_pairs()``.

Where they come from. A real public data set of pairwise judgements was looked for in registry packages
on 2026-12-04 (PyPI through ``pip download --no-deps``): arena-rank 0.1.1 (LMArena's ranking code; its
example notebooks load their data from a hub at run time, none ships), evalica 0.4.2 (the wheel ships
code and tests only; its sdist cannot be prepared without crates.io), arenakit 0.1.1, choix 0.4.1,
elote 1.5.1 (its datasets download at run time) and pairwise-ranking 1.0.2: none ships judgements. So
this is a **simulated campaign with a known truth**, shaped like the public arena the robustness study
audited (Huang et al. 2025: 57,477 votes): 25 models whose true scores (Elo-like scale) are fixed below,
the top two 6 points apart (a near tie, as at the top of public boards), popular models drawn more often,
a fifth of the votes ties and 6% both bad. The truth is returned with the votes, so an analysis can say
whether what it finds is real.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from ranking.estimators import BOTH_BAD, LEFT_WINS, RIGHT_WINS, SCALE, TIE

# True scores on the board's scale (400 log10 strength + 1000): a near tie at the top, then a spread.
TRUE_SCORES = (
    1250.0,
    1244.0,
    1228.0,
    1215.0,
    1207.0,
    1196.0,
    1180.0,
    1171.0,
    1160.0,
    1148.0,
    1139.0,
    1120.0,
    1108.0,
    1095.0,
    1080.0,
    1062.0,
    1050.0,
    1031.0,
    1012.0,
    990.0,
    975.0,
    951.0,
    930.0,
    902.0,
    870.0,
)
VOTES = 57_477
TIE_RATE = 0.2
BOTH_BAD_RATE = 0.06


@dataclass(frozen=True)
class PublicPairs:
    """Pairwise judgements: competitor codes ``a`` (left) and ``b`` (right), the outcome (LEFT_WINS,
    RIGHT_WINS, TIE, BOTH_BAD), the competitors' names, where the data come from and under what licence,
    and the true scores when they are known (a simulation), else None."""

    source: str
    licence: str
    names: tuple[str, ...]
    a: NDArray[np.int64]
    b: NDArray[np.int64]
    outcome: NDArray[np.int64]
    true_scores: NDArray[np.float64] | None

    @property
    def votes(self) -> int:
        return int(self.a.shape[0])


def load_public_pairs(*, seed: int = 2025, votes: int = VOTES) -> PublicPairs:
    """The simulated campaign described in the module docstring (deterministic for a seed)."""
    rng = np.random.default_rng(seed)
    scores = np.asarray(TRUE_SCORES)
    n = scores.shape[0]
    theta = (scores - 1000.0) / SCALE
    # Popularity: the stronger models are shown more often (about 4x from the last to the first).
    popularity = np.exp(np.linspace(1.4, 0.0, n))
    popularity /= popularity.sum()
    a = rng.choice(n, size=votes, p=popularity)
    b = rng.choice(n, size=votes, p=popularity)
    same = a == b
    while same.any():  # both sides by popularity, never a model against itself
        b[same] = rng.choice(n, size=int(same.sum()), p=popularity)
        same = a == b
    p_left = 1.0 / (1.0 + np.exp(-(theta[a] - theta[b])))
    u = rng.random(votes)
    outcome = np.where(
        u < TIE_RATE,
        TIE,
        np.where(u < TIE_RATE + BOTH_BAD_RATE, BOTH_BAD, np.where(rng.random(votes) < p_left, LEFT_WINS, RIGHT_WINS)),
    ).astype(np.int64)
    return PublicPairs(
        source="simulated campaign with a known truth (benchmarks/public_pairs.py: no registry package found "
        "that ships real pairwise judgements)",
        licence="generated here (the project's own)",
        names=tuple(f"model-{k + 1:02d}" for k in range(n)),
        a=a.astype(np.int64),
        b=b.astype(np.int64),
        outcome=outcome,
        true_scores=scores,
    )
