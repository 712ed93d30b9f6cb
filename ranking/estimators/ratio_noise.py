"""Per-entity noise and answers at the ladder's end, for the ratio estimator (``ratio.fit_ratio``).

Per-entity noise. A judge may find some entities hard: every judgement touching them is noisier. The
model: a judgement of ``(i, j)`` has variance ``a_i + a_j`` (each entity adds its own share). Given the
fit, each observation's squared residual ``q_o = r_o^2 / (1 - h_o)`` estimates ``a_lo + a_hi``; ``h_o``
is approximated by ``(n - k) / n * (w_o / W_lo + w_o / W_hi)`` (``W_i`` the precision touching ``i``; the
sum over observations is ``n - k``, the parameters the fit spends). The shares solve a least-squares
problem, rows ``a_lo + a_hi = q_o``, with ``ENTITY_PRIOR_OBS`` pseudo-observations per entity at half
the pooled level (shrinkage toward the pooled noise, strong for an entity seen a few times). The first
pass weighs the rows alike; ``VARIANCE_PASSES`` more weigh each row by ``1 / prediction^2`` (a squared
Gaussian residual has variance ``2 v^2``) and winsorise it at ``WINSOR^2`` times its prediction, so one
wild answer cannot make its entities look hard. A row is never weighed by its own spread (that weighed
the noisy rows down because they were noisy: the hard entities' shares came out 35% low). No share
goes below ``MIN_SHARE`` of the pooled level.

Intervals. ``huber_sandwich`` gives, per edge, the Huber M-estimator's sandwich weights when the
standardised residual is ``N(0, rho)`` (``rho`` the entity model's variance over the one the weights
assumed): the bread (expected Hessian) and the meat (expected squared score). ``t_inflation`` widens the
meat to Student's t with the noise estimate's degrees of freedom; ``sandwich_diag`` gives the scores'
variances, exact or by Hutchinson's estimator.

Answers at the ladder's end. The judge cannot answer beyond the ladder (26x): an answer at its end ``c``
says the log-ratio lies in ``[c, CEILING c]`` (at least 26x; at most 26^2, so that an entity above all its
partners in every answer still has a finite estimate), an interval-censored observation. Given the fit
(mean ``mu``, variance ``v``), ``censored_moments`` gives its conditional mean and second moment under
the doubly truncated normal and its information ``1 - Var(Y | interval) / v`` (at least ``INFO_FLOOR``);
a left-censored answer mirrors it. ``fit_ratio`` refits by Fisher scoring (working value ``mu + (E -
mu) / info`` at weight ``info``) until the scores settle.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla
from numpy.typing import NDArray
from scipy.special import log_ndtr
from scipy.stats import norm
from scipy.stats import t as student_t

# The ladder's end: a judge's largest ratio (serving.ratio_judging.RATIO_MAX) in natural-log units.
LADDER_END = float(np.log(26.0))
# Pseudo-observations per entity at the pooled noise level (the shrinkage of the per-entity variance).
ENTITY_PRIOR_OBS = 2.0
WINSOR = 3.0
VARIANCE_PASSES = 5
MIN_SHARE = 0.2
INFO_FLOOR = 0.05
# An answer at the ladder's end c says the log-ratio lies in [c, CEILING c]: at least 26x, at most 26^2
# (676x). One-sided, an entity above every partner by 26x in every answer has no finite maximum.
CEILING = 2.0
# Rounds of (noise, censored values) -> fit; stops when no score moves by more than ROUND_TOL.
ROUNDS = 40
ROUND_TOL = 1e-5
ROUND_UNSETTLED = 0.01
# An answer within this of the ladder's end counts as at the end (the judge's ratio is a float).
AT_END = 1e-9

__all__ = [
    "CEILING",
    "ENTITY_PRIOR_OBS",
    "INFO_FLOOR",
    "LADDER_END",
    "ROUNDS",
    "ROUND_TOL",
    "censored_side",
    "censored_moments",
    "entity_variances",
    "huber_sandwich",
    "observation_leverage",
    "sandwich_diag",
    "t_inflation",
]


def censored_side(y: NDArray[np.float64], censor_at: float | None) -> NDArray[np.int64]:
    """+1 where ``y`` sits at (or beyond) the upper end, -1 at the lower end, 0 inside."""
    if censor_at is None or not np.isfinite(censor_at):
        return np.zeros(y.shape, dtype=np.int64)
    return np.where(y >= censor_at - AT_END, 1, np.where(y <= -censor_at + AT_END, -1, 0)).astype(np.int64)


def _truncated(
    alpha: NDArray[np.float64], beta: NDArray[np.float64]
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """For a standard normal restricted to ``[alpha, beta]``: ``(phi(a) - phi(b)) / Z`` and ``(a phi(a) -
    b phi(b)) / Z``, ``Z = Phi(b) - Phi(a)``, computed in the tail the interval lies in (no cancellation)."""
    flip = alpha + beta < 0.0  # mostly below zero: mirror (a, b) -> (-b, -a); the first moment changes sign
    a = np.where(flip, -beta, alpha)
    b = np.where(flip, -alpha, beta)
    log_sf_a, log_sf_b = log_ndtr(-a), log_ndtr(-b)
    log_z = log_sf_a + np.log1p(-np.exp(np.minimum(log_sf_b - log_sf_a, 0.0)) + 1e-300)
    pa = np.exp(norm.logpdf(a) - log_z)
    pb = np.where(np.isfinite(b), np.exp(norm.logpdf(np.where(np.isfinite(b), b, 0.0)) - log_z), 0.0)
    first = pa - pb
    second = a * pa - np.where(np.isfinite(b), b, 0.0) * pb
    return np.where(flip, -first, first), second


def censored_moments(
    y: NDArray[np.float64],
    side: NDArray[np.int64],
    mu: NDArray[np.float64],
    var: NDArray[np.float64],
    censor_at: float,
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """For each observation: its value for the fit (the conditional mean where censored), its expected
    squared residual about ``mu`` (``(y - mu)^2`` where not censored) and its information factor (1
    where not censored, ``1 - Var(Y | interval) / v`` where censored, floored at ``INFO_FLOOR``)."""
    value = y.astype(np.float64).copy()
    sq = (y - mu) ** 2
    info = np.ones(y.shape)
    cens = side != 0
    if not cens.any():
        return value, sq, info
    sd = np.sqrt(var[cens])
    sgn = side[cens].astype(np.float64)
    # Mirror a left-censored observation onto the right: Y' = -Y in [c, CEILING c] with mean -mu.
    alpha = (censor_at - sgn * mu[cens]) / sd
    beta = (CEILING * censor_at - sgn * mu[cens]) / sd
    first, second = _truncated(alpha, beta)
    value[cens] = mu[cens] + sgn * sd * first
    sq[cens] = var[cens] * np.maximum(1.0 + second, 0.0)
    info[cens] = np.clip(first**2 - second, INFO_FLOOR, 1.0)
    return value, sq, info


def observation_leverage(
    n: int, n_components: int, lo: NDArray[np.int64], hi: NDArray[np.int64], w: NDArray[np.float64]
) -> NDArray[np.float64]:
    """The approximate leverage of each observation (module docstring), at most 0.95."""
    touch = np.bincount(lo, w, minlength=n) + np.bincount(hi, w, minlength=n)
    touch = np.where(touch > 0, touch, 1.0)
    h = (n - n_components) / max(n, 1) * (w / touch[lo] + w / touch[hi])
    return np.asarray(np.clip(h, 0.0, 0.95), dtype=np.float64)


def entity_variances(
    n: int,
    lo: NDArray[np.int64],
    hi: NDArray[np.int64],
    q: NDArray[np.float64],
    *,
    floor: float,
    prior_obs: float = ENTITY_PRIOR_OBS,
    passes: int = VARIANCE_PASSES,
) -> tuple[NDArray[np.float64], float]:
    """Each entity's noise share ``a`` (an observation of ``(i, j)`` has variance ``a_i + a_j``) and the
    pooled level, from the squared residuals ``q`` (already leverage-corrected; module docstring). Each
    pass weighs and winsorises a row by the previous pass's prediction ``a_lo + a_hi``, never by the
    row's own spread (that would weigh a noisy row down because it is noisy: a_hard came out 35% low)."""
    if q.size == 0:
        return np.full(n, floor / 2), floor
    predicted = np.ones(q.shape)
    count = np.bincount(lo, minlength=n) + np.bincount(hi, minlength=n)
    pooled = floor
    a = np.full(n, floor / 2)
    for k in range(passes + 1):
        # The first pass weighs every row alike and clips none (one level for all would clip the hard
        # entities' rows); the next ones weigh and winsorise by the previous prediction.
        clipped = np.minimum(q, WINSOR**2 * predicted) if k else q
        pooled = max(float(np.mean(clipped)), floor)
        omega = 1.0 / predicted**2
        touch = np.bincount(lo, omega, minlength=n) + np.bincount(hi, omega, minlength=n)
        # The pseudo-observations weigh like prior_obs of the entity's own observations.
        prior_w = prior_obs * np.where(count > 0, touch / np.maximum(count, 1), 1.0 / pooled**2)
        mat = sp.coo_matrix((np.r_[omega, omega], (np.r_[lo, hi], np.r_[hi, lo])), shape=(n, n)).tocsc()
        mat = (mat + sp.diags(touch + prior_w)).tocsc()
        rhs = np.bincount(lo, omega * clipped, minlength=n) + np.bincount(hi, omega * clipped, minlength=n)
        # No entity is judged with less than MIN_SHARE of the pooled level: a share solved near zero
        # would weigh its rows without bound in the next pass and make its intervals vanish.
        least = max(floor / 2, MIN_SHARE * pooled / 2)
        a = np.maximum(np.atleast_1d(np.asarray(spla.spsolve(mat, rhs + prior_w * pooled / 2))), least)
        predicted = a[lo] + a[hi]
    return np.asarray(a, dtype=np.float64), pooled


def sandwich_diag(
    solve: Callable[[NDArray[np.float64]], NDArray[np.float64]],
    centre: Callable[[NDArray[np.float64]], NDArray[np.float64]],
    cov: NDArray[np.float64] | None,
    n: int,
    lo: NDArray[np.int64],
    hi: NDArray[np.int64],
    meat: NDArray[np.float64],
    *,
    probes: int,
    seed: int,
) -> NDArray[np.float64]:
    """``diag(P C M C P)`` with ``M = B^T diag(meat) B``: exact from ``cov`` (``C``), else Hutchinson's
    estimator with seeded Rademacher probes (``solve`` applies ``C``, ``centre`` applies ``P``)."""
    if cov is not None:
        g = centre(cov[:, lo] - cov[:, hi])
        return np.asarray((g * g) @ meat, dtype=np.float64)
    rng = np.random.default_rng(seed + 1)
    z = rng.choice(np.array([-1.0, 1.0]), size=(n, probes))
    x = solve(centre(z))
    flow = (x[lo] - x[hi]) * meat[:, None]
    mx = np.zeros(x.shape)
    np.add.at(mx, lo, flow)
    np.add.at(mx, hi, -flow)
    return np.asarray(np.mean(z * centre(solve(mx)), axis=1), dtype=np.float64)


def huber_sandwich(
    precision: NDArray[np.float64], rho: NDArray[np.float64], threshold: float
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Per edge, the bread and meat weights of the Huber M-estimator's sandwich when the standardised
    residual ``u = sqrt(w) r`` is ``N(0, rho)`` (``rho`` the entity model's variance over the one the
    weights assumed) and Huber clips it at ``threshold``: ``w P(|u| <= t)`` and ``w E[clip(u, t)^2]``.
    With ``rho = 1`` and no clipping both are ``w``: the model-based covariance."""
    rho = np.maximum(rho, 1e-12)
    c = threshold / np.sqrt(rho)
    inside = 2.0 * norm.cdf(c) - 1.0
    second = rho * (inside - 2.0 * c * norm.pdf(c)) + 2.0 * threshold**2 * norm.sf(c)
    return precision * inside, precision * second


def t_inflation(count: NDArray[np.int64], lo: NDArray[np.int64], hi: NDArray[np.int64]) -> NDArray[np.float64]:
    """Per edge, ``(t_nu(0.975) / z(0.975))^2``: the variance factor that makes a normal interval as wide
    as Student's t with the degrees of freedom of the edge's noise estimate, ``nu = prior_obs + m - 1``
    for the less observed endpoint (``m`` its observations)."""
    nu = ENTITY_PRIOR_OBS + np.minimum(count[lo], count[hi]).astype(np.float64) - 1.0
    nu = np.maximum(nu, 1.0)
    return np.asarray((student_t.ppf(0.975, nu) / norm.ppf(0.975)) ** 2, dtype=np.float64)
