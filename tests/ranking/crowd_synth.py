"""Synthetic crowd campaigns with known truth: honest raters vote by Bradley-Terry, spammers flip a
coin, adversaries always pick the weaker side (shared by the tests and the benchmark)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import NDArray
from scipy.special import expit

from ranking.estimators.synthetic import random_pairs

Kind = Literal["honest", "random", "adversarial"]


@dataclass(frozen=True)
class CrowdCampaign:
    a: NDArray[np.int64]
    b: NDArray[np.int64]
    outcome: NDArray[np.int64]
    rater: NDArray[np.int64]
    bad: NDArray[np.bool_]  # per rater: a spammer or an adversary


def crowd_campaign(
    rng: np.random.Generator,
    theta: NDArray[np.float64],
    *,
    n_raters: int,
    n_votes: int,
    kind: Kind = "honest",
    bad_share: float = 0.2,
) -> CrowdCampaign:
    """Votes spread evenly over the raters (rater of vote i: i mod R) and uniform random pairs; the
    first ``bad_share`` of the raters are bad (none when ``kind`` is honest)."""
    a, b = random_pairs(rng, theta.shape[0], n_votes)
    rater = np.arange(n_votes, dtype=np.int64) % n_raters
    bad = np.zeros(n_raters, dtype=bool)
    if kind != "honest":
        bad[: int(round(bad_share * n_raters))] = True
    left = rng.random(n_votes) < expit(theta[a] - theta[b])
    coin = rng.random(n_votes) < 0.5
    if kind == "random":
        left = np.where(bad[rater], coin, left)
    elif kind == "adversarial":
        left = np.where(bad[rater], theta[a] < theta[b], left)
    return CrowdCampaign(a, b, np.where(left, 0, 1).astype(np.int64), rater, bad)


def discordant_pairs(scores: NDArray[np.float64], truth: NDArray[np.float64]) -> int:
    """Kendall tau distance: pairs the scores order the other way round from the truth."""
    ds = scores[:, None] - scores[None, :]
    dt = truth[:, None] - truth[None, :]
    return int(np.triu((ds * dt) < 0, 1).sum())
