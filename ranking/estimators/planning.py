"""Sample-size planning for pairwise boards: how many battles resolve a score margin, or detect a true gap
at a given power, for a design (competitors and how battles spread over their pairs), with ties counted.

Scale. Every margin is on the board's own scale: Elo points, ``SCALE * log_strength`` (400 / ln 10 per
unit of natural log-strength), under the board's tie rule.

Information per vote. For a pair at log-strength gap ``g`` (natural units) and tie rate ``t``:

* ties as half a win (``"half"``): the board's fit solves ``sum (y - p) = 0`` with ``y`` in {1, 1/2, 0};
  its sandwich (Godambe) information per vote is ``bread^2 / meat`` with ``bread = p (1 - p)`` (``p =
  sigmoid(g)``, the expected score) and ``meat = Var(y) = w + t / 4 - p^2`` (``w = p - t / 2`` the win
  probability, ties independent of the gap). At ``g = 0``: ``1 / (4 (1 - t))``. That is more than the
  ``1 / 4`` of a vote without ties because the half-win scale itself shrinks: a preference that splits the
  decisive votes ``q : 1 - q`` shows as ``p - 1/2 = (1 - t)(q - 1/2)``, gaps shrink by ``(1 - t)`` near 0, so
  measured on the decisive-vote scale the information is ``(1 - t)^2 / (4 (1 - t)) = (1 - t) / 4``: a tie
  carries no information about who is better.
* Davidson (``"davidson"``): ``P(win) = e^{g/2} / D``, ``P(loss) = e^{-g/2} / D``, ``P(tie) = nu / D``, ``D =
  e^{g/2} + e^{-g/2} + nu``, ``nu = 2 t / (1 - t)`` (``t`` the tie probability at equal strength); Fisher
  information of ``(g, log nu)`` per vote, the shared ``log nu`` profiled out over the whole design (a
  Schur complement). At ``g = 0``: ``(1 - t) / 4`` again.

Design. ``counts[i, j]`` battles of each pair; the covariance of the log-strengths is the pseudo-inverse of
the weighted graph Laplacian (sandwiched for ``"half"``), computed as a linear solve of ``L + P`` on the
difference vector, ``P`` the projector onto the components' constant vectors (``L`` annihilates them, so the
solve equals the pseudo-inverse on contrasts within a component). A pair in two components of the design
has no finite variance.

Criteria. Half-width: ``z_{conf} * se <= margin``. Power: the two-sided level-``alpha`` Wald test of ``gap =
0`` rejects with probability ``Phi(d / se - z) + Phi(-d / se - z)`` when the true gap is ``d``, with ``se``
evaluated at the alternative (the pair at ``+d/2, -d/2``, every other competitor at 0). Uniform designs
scale exactly as ``1 / N``; a board's ``current + m * future`` design is solved for ``m`` by regula falsi
on the information (linear in the battles).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike, NDArray
from scipy.optimize import brentq
from scipy.sparse.csgraph import connected_components
from scipy.special import expit
from scipy.stats import norm

from .bradley_terry import SCALE

__all__ = [
    "DesignPlan",
    "Separation",
    "TieRule",
    "difference_se",
    "pair_information",
    "plan_uniform",
    "separation_plan",
    "wald_power",
]

TieRule = Literal["half", "davidson"]
MAX_BATTLES = 10**12  # beyond this a plan is "not reachable" rather than a number


def _check_tie(tie_rate: float, ties: str) -> None:
    if ties not in ("half", "davidson"):
        raise ValueError("ties must be 'half' or 'davidson'")
    if not 0.0 <= tie_rate < 1.0:
        raise ValueError("need 0 <= tie_rate < 1")


def _davidson_blocks(gap: NDArray[np.float64], tie_rate: float) -> tuple[NDArray[np.float64], ...]:
    """Per vote, the Fisher information entries (gg, g-lognu, lognu-lognu) of Davidson's model at each gap."""
    nu = 2.0 * tie_rate / (1.0 - tie_rate)
    up, down = np.exp(0.5 * gap), np.exp(-0.5 * gap)
    d = up + down + nu
    pw, pl, pt = up / d, down / d, nu / d
    dg = 0.5 * (up - down) / d  # d log D / d gap
    dn = nu / d  # d log D / d log nu
    sg = (0.5 - dg, -0.5 - dg, -dg)
    sn = (-dn, -dn, 1.0 - dn)
    probs = (pw, pl, pt)
    gg = sum(p * a * a for p, a in zip(probs, sg, strict=True))
    gn = sum(p * a * b for p, a, b in zip(probs, sg, sn, strict=True))
    nn = sum(p * b * b for p, b in zip(probs, sn, strict=True))
    return np.asarray(gg), np.asarray(gn), np.asarray(nn)


def _half_blocks(gap: NDArray[np.float64], tie_rate: float) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Per vote, the sandwich's bread and meat under ties as half a win at each gap (the tie rate capped
    where a constant rate is impossible: a tie rate t needs both win probabilities p -/+ t/2 >= 0)."""
    p = expit(gap)
    t = np.minimum(tie_rate, 2.0 * np.minimum(p, 1.0 - p))
    bread = p * (1.0 - p)
    meat = (p - t / 2.0) + t / 4.0 - p * p
    return bread, meat


def pair_information(gap: float, tie_rate: float, ties: TieRule = "half") -> float:
    """Information per vote about a pair's log-strength gap (natural units), on the board's scale, for one
    isolated pair: ``bread^2 / meat`` (half) or the Davidson information with ``log nu`` known."""
    _check_tie(tie_rate, ties)
    g = np.asarray([gap], dtype=np.float64)
    if ties == "half":
        bread, meat = _half_blocks(g, tie_rate)
        return float(bread[0] ** 2 / meat[0])
    gg, _, _ = _davidson_blocks(g, tie_rate)
    return float(gg[0])


def _components(weights: NDArray[np.float64]) -> NDArray[np.int32]:
    """Component label of each competitor in the graph of pairs with battles."""
    _, labels = connected_components(sp.csr_matrix(weights > 0), directed=False)
    return np.asarray(labels, dtype=np.int32)


def _laplacian(weights: NDArray[np.float64]) -> NDArray[np.float64]:
    """``diag(W 1) - W`` of a symmetric weight matrix with a zero diagonal."""
    lap = -weights
    lap[np.diag_indices_from(lap)] = weights.sum(axis=1)
    return lap


def _blocks(theta: NDArray[np.float64], tie_rate: float, ties: str) -> tuple[NDArray[np.float64], ...]:
    """Per-vote information of every pair at the strengths ``theta`` (k x k each): (bread, meat) for the half
    rule, (gg, gn, nn) for Davidson."""
    gap = theta[:, None] - theta[None, :]
    return _half_blocks(gap, tie_rate) if ties == "half" else _davidson_blocks(gap, tie_rate)


Parts = tuple[NDArray[np.float64], ...]


def _parts(n: NDArray[np.float64], blocks: tuple[NDArray[np.float64], ...], ties: str) -> Parts:
    """The design's information for symmetric pair counts ``n``, as matrices linear in ``n`` (so a design
    ``c + m f`` is ``parts(c) + m parts(f)``): the bread and meat Laplacians (half); the information
    Laplacian, the (theta, log nu) cross column and the log nu information (Davidson)."""
    if ties == "half":
        bread, meat = blocks
        return _laplacian(n * bread), _laplacian(n * meat)
    gg, gn, nn = blocks
    # d^2 loglik / d theta_i d log nu: gn is odd in the gap; the log nu information counts each pair once.
    return _laplacian(n * gg), (n * gn).sum(axis=1), np.asarray((n * nn).sum() / 2.0)


def _se_of(parts: Parts, projector: NDArray[np.float64], contrast: NDArray[np.float64], ties: str) -> float:
    if ties == "half":
        bread, meat = parts
        u = _solve(bread + projector, contrast)
        return float(math.sqrt(max(float(u @ meat @ u), 0.0)))
    info, cross, nu = parts
    nu_info = float(nu)
    if nu_info > 0:  # profile out the shared log nu (tie rate 0: nu is 0 and carries nothing)
        info = info - np.outer(cross, cross) / nu_info
    u = _solve(info + projector, contrast)
    return float(math.sqrt(max(float(contrast @ u), 0.0)))


def _symmetric(counts: NDArray[np.float64]) -> NDArray[np.float64]:
    n = counts + counts.T
    n[np.diag_indices_from(n)] = 0.0
    return n


def _projector(labels: NDArray[np.int32]) -> NDArray[np.float64]:
    """Onto the components' constant vectors: they are in the null space of the information, so adding it
    makes the matrix invertible without changing its inverse on contrasts within a component."""
    same = labels[:, None] == labels[None, :]
    return np.asarray(same / np.bincount(labels)[labels][:, None], dtype=np.float64)


def _contrast(k: int, a: int, b: int) -> NDArray[np.float64]:
    contrast = np.zeros(k)
    contrast[a], contrast[b] = 1.0, -1.0
    return contrast


def difference_se(
    counts: ArrayLike,
    log_strength: ArrayLike,
    a: int,
    b: int,
    *,
    tie_rate: float,
    ties: TieRule = "half",
) -> float:
    """Standard error of ``log_strength[a] - log_strength[b]`` (natural units) for a design of ``counts[i, j]``
    battles per pair (either triangle, or both summed) whose true log-strengths are ``log_strength``;
    ``inf`` when the design does not connect ``a`` and ``b``. Dense k x k work: one solve, O(k^3)."""
    _check_tie(tie_rate, ties)
    c = np.asarray(counts, dtype=np.float64)
    theta = np.asarray(log_strength, dtype=np.float64)
    k = c.shape[0]
    if c.shape != (k, k) or theta.shape != (k,) or not (0 <= a < k and 0 <= b < k) or a == b:
        raise ValueError("counts must be k x k, log_strength k long, a != b competitors")
    if np.any(c < 0) or not np.all(np.isfinite(c)):
        raise ValueError("counts must be finite and non-negative")
    n = _symmetric(c)
    labels = _components(n)
    if labels[a] != labels[b]:
        return math.inf
    parts = _parts(n, _blocks(theta, tie_rate, ties), ties)
    return _se_of(parts, _projector(labels), _contrast(k, a, b), ties)


def _solve(matrix: NDArray[np.float64], rhs: NDArray[np.float64]) -> NDArray[np.float64]:
    return np.asarray(np.linalg.solve(matrix, rhs), dtype=np.float64)


def wald_power(gap: float, se: float, *, alpha: float) -> float:
    """Probability that the two-sided level-``alpha`` Wald test of a zero gap rejects when the true gap is
    ``gap`` and the estimate's standard error is ``se`` (same units)."""
    if not 0.0 < alpha < 1.0:
        raise ValueError("need 0 < alpha < 1")
    if se <= 0:
        return 1.0 if gap != 0 else alpha
    if not math.isfinite(se):
        return alpha
    z = float(norm.ppf(1.0 - alpha / 2.0))
    r = abs(gap) / se
    return float(norm.cdf(r - z) + norm.cdf(-r - z))


def _se_for_power(gap: float, power: float, alpha: float) -> float:
    """The standard error at which the Wald test reaches ``power`` for a true ``gap`` (exact, both tails)."""
    z = float(norm.ppf(1.0 - alpha / 2.0))
    zb = float(norm.ppf(power))
    ratio = float(
        brentq(lambda r: float(norm.cdf(r - z) + norm.cdf(-r - z)) - power, 1e-9, z + zb + 10.0, xtol=1e-12, rtol=1e-12)
    )
    return abs(gap) / ratio


def _uniform_counts(k: int) -> NDArray[np.float64]:
    """One battle in all, spread evenly over the k (k - 1) / 2 pairs."""
    c = np.triu(np.full((k, k), 1.0), 1)
    return np.asarray(c / c.sum(), dtype=np.float64)


@dataclass(frozen=True)
class DesignPlan:
    """Battles (in all, spread evenly over every pair of ``competitors``) for one pair's margin."""

    competitors: int
    margin: float  # Elo points on the board's scale
    tie_rate: float
    ties: str
    confidence: float
    power: float
    alpha: float
    information_per_vote: float  # one isolated pair at equal strength, natural units
    battles_for_margin: int  # the pair's confidence interval half-width <= margin
    battles_for_power: int  # the pair's true gap of ``margin`` found at ``power`` by the level-alpha test
    battles_per_pair_for_margin: float
    battles_per_pair_for_power: float


def plan_uniform(
    *,
    competitors: int,
    margin: float,
    tie_rate: float = 0.0,
    ties: TieRule = "half",
    confidence: float = 0.95,
    power: float = 0.8,
    alpha: float | None = None,
) -> DesignPlan:
    """Battles needed under uniform pair sampling over ``competitors``, for a pair's margin in Elo points:
    so that its interval's half-width is at most ``margin`` (the pair at equal strength), and so that a
    true gap of ``margin`` is detected at ``power`` by the two-sided level-``alpha`` test (default: 1 -
    ``confidence``). Exact for the linearised fit; the variance of a uniform design is ``v1 / N``."""
    _check_tie(tie_rate, ties)
    if competitors < 2:
        raise ValueError("a plan needs at least two competitors")
    if not margin > 0 or not math.isfinite(margin):
        raise ValueError("margin must be a positive number of Elo points")
    if not 0.0 < confidence < 1.0 or not 0.0 < power < 1.0:
        raise ValueError("need 0 < confidence < 1 and 0 < power < 1")
    alpha = round(1.0 - confidence, 12) if alpha is None else alpha
    if not 0.0 < alpha < 1.0:
        raise ValueError("need 0 < alpha < 1")
    if power <= alpha:
        raise ValueError("power must exceed alpha (the test rejects with probability alpha under no gap)")
    k = competitors
    counts = _uniform_counts(k)
    d = margin / SCALE
    zero = np.zeros(k)
    v_null = difference_se(counts, zero, 0, 1, tie_rate=tie_rate, ties=ties) ** 2
    z = float(norm.ppf(0.5 + confidence / 2.0))
    n_margin = _ceil(v_null * (z / d) ** 2)
    alternative = zero.copy()
    alternative[0], alternative[1] = d / 2.0, -d / 2.0
    v_alt = difference_se(counts, alternative, 0, 1, tie_rate=tie_rate, ties=ties) ** 2
    n_power = _ceil(v_alt / _se_for_power(d, power, alpha) ** 2)
    pairs = k * (k - 1) / 2.0
    return DesignPlan(
        competitors=k,
        margin=float(margin),
        tie_rate=float(tie_rate),
        ties=ties,
        confidence=float(confidence),
        power=float(power),
        alpha=float(alpha),
        information_per_vote=pair_information(0.0, tie_rate, ties),
        battles_for_margin=n_margin,
        battles_for_power=n_power,
        battles_per_pair_for_margin=n_margin / pairs,
        battles_per_pair_for_power=n_power / pairs,
    )


def _ceil(x: float) -> int:
    return int(math.ceil(x - 1e-9))


@dataclass(frozen=True)
class Separation:
    """More battles for a board's pair ``(a, b)`` (its current gap taken as the truth) to be detected at
    ``power``: ``additional`` battles spread as ``allocation``; ``None`` with a ``reason`` when it cannot
    be said."""

    gap: float  # Elo points, a - b, the board's estimate
    se: float | None  # its standard error now (Elo points), None when the design does not connect them
    power_now: float | None
    additional: int | None
    reason: str


def separation_plan(
    counts: ArrayLike,
    log_strength: ArrayLike,
    a: int,
    b: int,
    *,
    future: ArrayLike,
    tie_rate: float,
    ties: TieRule = "half",
    power: float = 0.8,
    alpha: float = 0.05,
) -> Separation:
    """How many more battles, spread in the proportions of ``future`` (a k x k pattern, scaled to one
    battle), bring the power to detect the current gap between ``a`` and ``b`` to ``power``, given the
    ``counts`` already voted and the fitted ``log_strength`` taken as the truth. The current gap is the
    board's estimate: the winner's curse makes a close race look wider than it is, so treat the number
    as a lower bound."""
    c = np.asarray(counts, dtype=np.float64)
    f = np.asarray(future, dtype=np.float64)
    theta = np.asarray(log_strength, dtype=np.float64)
    if f.shape != c.shape or np.any(f < 0) or not f.sum() > 0:
        raise ValueError("future must be a non-negative k x k pattern like counts, not all zero")
    if not 0.0 < alpha < power < 1.0:
        raise ValueError("need 0 < alpha < power < 1")
    f = f / f.sum()
    gap = float(theta[a] - theta[b])
    se_now = difference_se(c, theta, a, b, tie_rate=tie_rate, ties=ties)
    gap_elo = round(gap * SCALE, 2)
    se_elo = round(se_now * SCALE, 2) if math.isfinite(se_now) else None
    if gap == 0.0:
        return Separation(gap_elo, se_elo, None, None, "the two are estimated equal: no gap to detect")
    labels = _components(_symmetric(c + f))
    if labels[a] != labels[b]:
        return Separation(gap_elo, se_elo, None, None, "the battles so far and those planned never connect the two")
    power_now = wald_power(gap, se_now, alpha=alpha)
    if power_now >= power:
        return Separation(gap_elo, se_elo, round(power_now, 4), 0, "the votes so far already reach the power")

    # Everything but the counts is fixed: the information of c + m f is parts(c) + m parts(f), one solve each.
    blocks = _blocks(theta, tie_rate, ties)
    now, more = _parts(_symmetric(c), blocks, ties), _parts(_symmetric(f), blocks, ties)
    labels_now = _components(_symmetric(c))
    projector_now, projector_after = _projector(labels_now), _projector(labels)
    contrast = _contrast(c.shape[0], a, b)

    def excess(m: float) -> float:
        """Information short of the target after m more battles (< 0 while short, increasing in m)."""
        if m == 0 and labels_now[a] != labels_now[b]:
            return -1.0 / target**2
        parts = tuple(x + m * y for x, y in zip(now, more, strict=True))
        se = _se_of(parts, projector_now if m == 0 else projector_after, contrast, ties)
        return (1.0 / se**2 if math.isfinite(se) and se > 0 else 0.0) - 1.0 / target**2

    target = _se_for_power(gap, power, alpha)
    # The information grows nearly linearly in m: a first guess from one probe, a bracket by doubling, then
    # regula falsi (Illinois) on it, a few solves instead of the tens bisection takes (each solve is O(k^3)).
    probe = max(float(c.sum()), 100.0)
    f_lo, f_probe = excess(0.0), excess(probe)
    slope = (f_probe - f_lo) / probe
    hi = min(max(-f_lo / slope if slope > 0 else probe, 1.0), float(MAX_BATTLES))
    lo = 0.0
    f_hi = excess(hi)
    while f_hi < 0:
        lo, f_lo = hi, f_hi
        hi *= 2.0
        if hi > MAX_BATTLES:
            return Separation(gap_elo, se_elo, round(power_now, 4), None, "more than 10^12 battles")
        f_hi = excess(hi)
    side = 0
    for _ in range(100):
        if hi - lo <= max(1.0, 1e-4 * hi):
            break
        mid = (lo * f_hi - hi * f_lo) / (f_hi - f_lo)
        if not lo < mid < hi:
            mid = (lo + hi) / 2.0
        f_mid = excess(mid)
        if f_mid < 0:
            lo, f_lo = mid, f_mid
            if side == -1:
                f_hi /= 2.0  # Illinois: the end that stayed put is halved, so both ends close in
            side = -1
        else:
            hi, f_hi = mid, f_mid
            if side == 1:
                f_lo /= 2.0
            side = 1
    return Separation(gap_elo, se_elo, round(power_now, 4), _ceil(hi), "")
