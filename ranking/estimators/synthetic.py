"""Synthetic battles with known truth, for tests, coverage checks and the benchmark.

Generated fully vectorised so a million battles take well under a second.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.special import expit

from .aggregate import BOTH_BAD, LEFT_WINS, RIGHT_WINS, TIE


@dataclass(frozen=True)
class SyntheticBattles:
    """Battle arrays plus, when requested, raw style counts per side and prompt ids."""

    a: NDArray[np.int64]
    b: NDArray[np.int64]
    outcome: NDArray[np.int64]
    left_style: NDArray[np.float64] | None = None
    right_style: NDArray[np.float64] | None = None
    cluster: NDArray[np.int64] | None = None


def random_pairs(
    rng: np.random.Generator, n_competitors: int, n_battles: int
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Uniform random ordered pairs with ``a != b``."""
    a = rng.integers(0, n_competitors, n_battles)
    b = (a + rng.integers(1, n_competitors, n_battles)) % n_competitors
    return a.astype(np.int64), b.astype(np.int64)


def simulate_bt(
    rng: np.random.Generator,
    log_strength: ArrayLike,
    n_battles: int,
    *,
    tie_prob: float = 0.0,
    both_bad_prob: float = 0.0,
    extra_logit: NDArray[np.float64] | None = None,
    a: NDArray[np.int64] | None = None,
    b: NDArray[np.int64] | None = None,
) -> SyntheticBattles:
    """Bradley-Terry battles: with ``tie_prob`` a tie, with ``both_bad_prob`` both_bad, else the
    winner is drawn with ``P(left) = sigmoid(theta_a - theta_b + extra_logit)``."""
    theta = np.asarray(log_strength, dtype=np.float64)
    if a is None or b is None:
        a, b = random_pairs(rng, theta.shape[0], n_battles)
    logit = theta[a] - theta[b]
    if extra_logit is not None:
        logit = logit + extra_logit
    left = rng.random(n_battles) < expit(logit)
    u = rng.random(n_battles)
    outcome = np.where(left, LEFT_WINS, RIGHT_WINS)
    outcome = np.where(u < tie_prob, TIE, outcome)
    outcome = np.where((u >= tie_prob) & (u < tie_prob + both_bad_prob), BOTH_BAD, outcome)
    return SyntheticBattles(a, b, outcome.astype(np.int64))


def simulate_style_counts(rng: np.random.Generator, n_battles: int, n_features: int = 4) -> NDArray[np.float64]:
    """Raw per-answer style counts: token length (log-normal) then headers, list items, bold
    (Poisson, often zero) - the shapes real answers have."""
    out = np.empty((n_battles, n_features))
    out[:, 0] = np.round(rng.lognormal(6.0, 0.6, n_battles))
    if n_features > 1:
        out[:, 1:] = rng.poisson([1.0, 3.0, 2.0, 1.5, 1.0][: n_features - 1], (n_battles, n_features - 1))
    return out


# --- crowd campaigns (the reliability-weighted view's tests and benchmark) ----------------------------
# Honest raters vote by Bradley-Terry, spammers flip a coin, adversaries always pick the weaker side.

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


# --- clustered votes (the interval setting "auto": benchmarks/board_intervals.py and its tests) ---------
# Prompt effects: on prompt p competitor i's logit moves by u_pi ~ N(0, sd^2) ("a coding prompt favours
# the coders"), the same for every vote on p. Shared items: one answer pair judged by k raters, its logit
# moved by e ~ N(0, sd^2) for all k (the answers are fixed; a pair may be much better than the models'
# average). Either way the votes of a cluster are correlated and the leaderboard's estimand is the
# population Bradley-Terry strength of ``population_strengths``.

Clustering = Literal["none", "prompt", "item"]


@dataclass(frozen=True)
class ClusteredVotes:
    a: NDArray[np.int64]
    b: NDArray[np.int64]
    outcome: NDArray[np.int64]
    cluster: NDArray[np.int64]  # the prompt of each vote (a shared item's copies have one prompt)


def clustered_votes(
    rng: np.random.Generator,
    log_strength: ArrayLike,
    *,
    clusters: int,
    size: int,
    design: Clustering,
    effect_sd: float,
) -> ClusteredVotes:
    """``clusters`` x ``size`` votes on uniform random pairs. "none": every vote its own prompt, no effect;
    "prompt": ``size`` votes per prompt on random pairs with per-(prompt, competitor) effects; "item":
    ``size`` raters per item, one pair per item (sides drawn afresh per copy) with a per-item effect."""
    theta = np.asarray(log_strength, dtype=np.float64)
    n = clusters * size
    cluster = np.repeat(np.arange(clusters, dtype=np.int64), size)
    if design == "item":
        first, second = random_pairs(rng, theta.shape[0], clusters)
        swap = rng.random(n) < 0.5
        a = np.where(swap, second[cluster], first[cluster])
        b = np.where(swap, first[cluster], second[cluster])
        effect = effect_sd * rng.standard_normal(clusters)
        # The item's effect favours its first-drawn side whichever side a copy shows it on.
        logit = theta[a] - theta[b] + np.where(swap, -effect[cluster], effect[cluster])
    else:
        a, b = random_pairs(rng, theta.shape[0], n)
        logit = theta[a] - theta[b]
        if design == "prompt":
            u = effect_sd * rng.standard_normal((clusters, theta.shape[0]))
            logit = logit + u[cluster, a] - u[cluster, b]
        else:
            cluster = np.arange(n, dtype=np.int64)
    outcome = np.where(rng.random(n) < expit(logit), LEFT_WINS, RIGHT_WINS).astype(np.int64)
    return ClusteredVotes(a.astype(np.int64), b.astype(np.int64), outcome, cluster)


def population_strengths(log_strength: ArrayLike, *, design: Clustering, effect_sd: float) -> NDArray[np.float64]:
    """The Bradley-Terry strengths (mean 0) a fit of ``clustered_votes`` converges to: the solution of the
    expected score equations ``sum_b (P_ab - sigmoid(t_a - t_b)) = 0`` on the uniform pair design, with
    ``P_ab = E sigmoid(theta_a - theta_b + s Z)`` the marginal win probability (``s = sd sqrt(2)`` for
    prompt effects, ``sd`` for items, 0 without), by Gauss-Hermite quadrature and Newton's method."""
    theta = np.asarray(log_strength, dtype=np.float64)
    k = theta.shape[0]
    s = {"none": 0.0, "prompt": effect_sd * np.sqrt(2.0), "item": effect_sd}[design]
    nodes, weights = np.polynomial.hermite_e.hermegauss(80)
    weights = weights / weights.sum()
    d = theta[:, None] - theta[None, :]
    p = (expit(d[:, :, None] + s * nodes[None, None, :]) * weights).sum(axis=2)
    off = ~np.eye(k, dtype=bool)
    t = theta - theta.mean()
    for _ in range(100):
        q = expit(t[:, None] - t[None, :])
        g = np.where(off, p - q, 0.0).sum(axis=1)
        w = np.where(off, q * (1 - q), 0.0)
        h = np.diag(w.sum(axis=1)) - w + np.ones((k, k)) / k  # Laplacian, its null space pinned
        step = np.linalg.solve(h, g)
        t = t + step
        t -= t.mean()
        if np.max(np.abs(step)) < 1e-13:
            break
    out: NDArray[np.float64] = t
    return out
