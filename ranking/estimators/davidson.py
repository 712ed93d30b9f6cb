"""Davidson's tie model beside "a tie is half a win".

Davidson (1970): with strengths ``pi = e^theta`` and a tie parameter ``nu >= 0``,

    P(i beats j) = pi_i / D,   P(j beats i) = pi_j / D,   P(tie) = nu sqrt(pi_i pi_j) / D,
    D = pi_i + pi_j + nu sqrt(pi_i pi_j)

so at equal strength a tie has probability ``nu / (2 + nu)``, and among decisive votes
``P(i beats j) = sigmoid(theta_i - theta_j)`` exactly as in Bradley-Terry: scores stay on the same
400 log10 + 1000 scale. "Half a win" treats a tie as evidence that the two are close (it pulls every gap
toward even; with 30-40% ties, as public arenas see, by a visible amount); Davidson models how often
ties happen and lets the decisive votes set the gaps. Both are recorded method parameters, so a team
can compare the two boards.

The log-likelihood is concave in ``(theta, eta = log nu)``: per pair it is linear minus
``N logsumexp(d/2, -d/2, eta)`` with ``d = theta_i - theta_j``. It is fitted by the package's damped
Newton (``profile.damped_newton``) with the same virtual-tie prior on the strengths as the other fits;
``eta`` is unpenalised. Intervals are Wald intervals from the prior-regularised observed information
(model-based: Davidson models the tie outcome, so its information does not vanish at all-tie records
as the half-win sandwich does), with the open sides of ``graph.boundedness`` applied; ``nu``'s interval
is the Wald interval of ``eta`` mapped back (always positive).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
from numpy.typing import NDArray
from scipy.stats import norm

from .aggregate import BOTH_BAD, LEFT_WINS, RIGHT_WINS, TIE, Cells, weighted_bincount
from .bradley_terry import (
    BASE,
    SCALE,
    BothBad,
    FitParams,
    _normalisation_label,
    normalisation_matrix,
    normalise,
    one_class,
    pair_design,
)
from .graph import Boundedness, boundedness, components, laplacian
from .intervals import (
    PROFILE_FULL_MAX,
    PROFILE_PRIOR_FRACTION,
    BoundaryIntervals,
    DifferenceIntervals,
    one_class_pairs,
    widen_differences,
    widen_levels,
)
from .profile import damped_newton


@dataclass(frozen=True)
class DavidsonResult:
    scores: NDArray[np.float64]
    lower: NDArray[np.float64]
    upper: NDArray[np.float64]
    se: NDArray[np.float64]
    log_strength: NDArray[np.float64]
    components: NDArray[np.int64]
    n_components: int
    battles: NDArray[np.float64]
    nu: float
    nu_lower: float
    nu_upper: float
    tie_probability_at_equal_strength: float
    iterations: int
    converged: bool
    params: FitParams
    bounds: Boundedness
    # The fitted ``(theta, log nu)``, its covariance (inverse prior-regularised information) and the
    # likelihood, for difference intervals and the profile widening.
    x: NDArray[np.float64]
    covariance: NDArray[np.float64]
    likelihood: DavidsonLikelihood


def _logsumexp_columns(z: NDArray[np.float64]) -> NDArray[np.float64]:
    """``scipy.special.logsumexp(z, axis=0)`` for the likelihood's finite ``(3, pairs)`` array: the same
    max-shifted sum, without scipy's per-call overhead (about 150 us against 10 us here; the profile
    likelihood's root finding evaluates it tens of thousands of times per board)."""
    top = z.max(axis=0)
    top = np.where(np.isfinite(top), top, 0.0)  # as scipy shifts: an infinite column stays infinite, not nan
    out: NDArray[np.float64] = top + np.log(np.exp(z - top).sum(axis=0))
    return out


@dataclass(frozen=True)
class DavidsonLikelihood:
    """Davidson's log-likelihood of ``x = (theta, eta = log nu)`` on unique pairs, with the virtual-tie
    prior on the strengths (``eta`` unpenalised); concave, strictly so with ``prior > 0``."""

    n: int
    lo: NDArray[np.int64]
    hi: NDArray[np.int64]
    w_lo: NDArray[np.float64]
    w_hi: NDArray[np.float64]
    ties: NDArray[np.float64]
    prior: float

    def _z(self, x: NDArray[np.float64]) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        theta, eta = x[: self.n], x[self.n]
        d = theta[self.lo] - theta[self.hi]
        return d, np.stack([0.5 * d, -0.5 * d, np.full_like(d, eta)])

    def _value(self, x: NDArray[np.float64], d: NDArray[np.float64], lse: NDArray[np.float64]) -> float:
        theta, eta = x[: self.n], float(x[self.n])
        total = self.w_lo + self.w_hi + self.ties
        out = float((self.w_lo - self.w_hi) @ (0.5 * d) + self.ties.sum() * eta - total @ lse)
        return out + self.prior * float((0.5 * theta - np.logaddexp(0.0, theta)).sum())

    def value(self, x: NDArray[np.float64]) -> float:
        d, z = self._z(x)
        return self._value(x, d, _logsumexp_columns(z))

    def objective(self, x: NDArray[np.float64]) -> tuple[float, NDArray[np.float64], NDArray[np.float64]]:
        n, lo, hi = self.n, self.lo, self.hi
        theta = x[:n]
        d, z = self._z(x)
        total = self.w_lo + self.w_hi + self.ties
        lse = _logsumexp_columns(z)
        q = np.exp(z - lse)
        diff = q[0] - q[1]
        g_d = 0.5 * (self.w_lo - self.w_hi) - 0.5 * total * diff
        g_eta = float(self.ties.sum() - total @ q[2])
        h_dd = total * (0.25 * (q[0] + q[1]) - 0.25 * diff * diff)
        h_de = -0.5 * total * q[2] * diff
        h = np.zeros((n + 1, n + 1))
        h[:n, :n] = laplacian(n, lo, hi, h_dd)
        cross = np.bincount(lo, h_de, minlength=n) - np.bincount(hi, h_de, minlength=n)
        h[:n, n] = cross
        h[n, :n] = cross
        h[n, n] = float(total @ (q[2] - q[2] ** 2))
        p0 = 1.0 / (1.0 + np.exp(-theta))
        h[np.arange(n), np.arange(n)] += self.prior * p0 * (1.0 - p0)
        g = np.concatenate(
            [np.bincount(lo, g_d, minlength=n) - np.bincount(hi, g_d, minlength=n) + self.prior * (0.5 - p0), [g_eta]]
        )
        return self._value(x, d, lse), g, h


def _pair_counts(
    cells: Cells, both_bad: BothBad
) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """Per unique pair: lo wins, hi wins, ties (both_bad counted as ties or dropped)."""
    n = cells.n_competitors
    key = cells.lo * n + cells.hi
    uniq, pair = np.unique(key, return_inverse=True)
    p = uniq.shape[0]
    w = cells.weight
    tie_mask = (cells.outcome == TIE) | ((cells.outcome == BOTH_BAD) if both_bad == "tie" else False)
    w_lo = weighted_bincount(pair, np.where(cells.outcome == LEFT_WINS, w, 0.0), minlength=p)
    w_hi = weighted_bincount(pair, np.where(cells.outcome == RIGHT_WINS, w, 0.0), minlength=p)
    ties = weighted_bincount(pair, np.where(tie_mask, w, 0.0), minlength=p)
    return (uniq // n).astype(np.int64), (uniq % n).astype(np.int64), w_lo, w_hi, ties


def fit_davidson(
    cells: Cells,
    *,
    both_bad: BothBad = "tie",
    prior_games: float = 1.0,
    reference: int | None = None,
    confidence: float = 0.95,
) -> DavidsonResult:
    """Fit Davidson's model on aggregated cells; see the module docstring."""
    if both_bad not in ("tie", "drop"):
        raise ValueError("both_bad must be 'tie' or 'drop'")
    if prior_games <= 0:
        raise ValueError("the Davidson fit needs prior_games > 0")
    if not 0.0 < confidence < 1.0:
        raise ValueError("confidence must lie strictly between 0 and 1")
    n = cells.n_competitors
    lo, hi, w_lo, w_hi, ties = _pair_counts(cells, both_bad)
    total = w_lo + w_hi + ties
    if float(ties.sum()) <= 0:
        raise ValueError("no ties among the votes: Davidson's tie parameter is 0 (use the half-win model)")
    prior = float(prior_games)
    lik = DavidsonLikelihood(n, lo, hi, w_lo, w_hi, ties, prior)
    share = float(ties.sum() / total.sum())
    x0 = np.concatenate([np.zeros(n), [np.log(max(2.0 * share / max(1.0 - share, 1e-9), 1e-6))]])
    x, iterations, converged = damped_newton(x0, lik.objective, lik.value, tol=1e-9)
    _, _, info = lik.objective(x)
    cov = np.asarray(np.linalg.inv(info + 1e-12 * np.eye(n + 1)), dtype=np.float64)
    theta, eta = x[:n], float(x[n])
    # Ties count half each way for the win digraph: the same sides are (un)bounded as in the half-win
    # fit (a tie is evidence both ways).
    design = pair_design(cells, both_bad)
    d_lo, d_hi = design.pair_wins(cells.weight)
    n_comp, comps = components(n, design.lo, design.hi, d_lo + d_hi)
    bounds = boundedness(n, design.lo, design.hi, d_lo, d_hi, comps, one_class(cells, design), reference)
    nm = normalisation_matrix(comps, reference, bounds.centre)
    log_strength = normalise(theta, comps, reference, bounds.centre)
    cov_theta = nm @ cov[:n, :n] @ nm.T
    z = float(norm.ppf(0.5 + confidence / 2.0))
    se = SCALE * np.sqrt(np.clip(np.diag(cov_theta), 0.0, None))
    scores = SCALE * log_strength + BASE
    lower = np.where(bounds.open_lower, -np.inf, scores - z * se)
    upper = np.where(bounds.open_upper, np.inf, scores + z * se)
    eta_se = float(np.sqrt(max(cov[n, n], 0.0)))
    nu = float(np.exp(eta))
    battles = weighted_bincount(lo, total, minlength=n) + weighted_bincount(hi, total, minlength=n)
    params = FitParams(
        model="davidson",
        both_bad=both_bad,
        prior_games=prior,
        reference=reference,
        normalisation=_normalisation_label(reference, bounds),
        ties="davidson",
    )
    # Without a decisive vote nu has no upper bound: eta's se is huge and its exp overflows to inf on purpose.
    with np.errstate(over="ignore"):
        nu_lower, nu_upper = float(np.exp(eta - z * eta_se)), float(np.exp(eta + z * eta_se))
    return DavidsonResult(
        scores=scores,
        lower=lower,
        upper=upper,
        se=se,
        log_strength=log_strength,
        components=comps,
        n_components=n_comp,
        battles=battles,
        nu=nu,
        nu_lower=nu_lower,
        nu_upper=nu_upper,
        tie_probability_at_equal_strength=nu / (2.0 + nu),
        iterations=iterations,
        converged=converged,
        params=params,
        bounds=bounds,
        x=x,
        covariance=cov,
        likelihood=lik,
    )


def davidson_boundary_intervals(
    fit: DavidsonResult, *, confidence: float = 0.95, only: NDArray[np.bool_] | None = None
) -> BoundaryIntervals:
    """The Davidson board's levels made honest at the boundary, as ``intervals.boundary_intervals`` does
    for the half-win fit: for a competitor (among ``only``) with an open side, a one-class or a thin
    record, the Wald interval becomes its union with the profile-likelihood interval of the published
    level under Davidson's likelihood (``tie parameter`` profiled out too: it is free at every point),
    with a hundredth of the fitted prior (``PROFILE_PRIOR_FRACTION``: the prior keeps the estimate
    finite but is not evidence); open sides stay open."""
    if not 0.0 < confidence < 1.0:
        raise ValueError("confidence must lie strictly between 0 and 1")
    b = fit.bounds
    select = b.needs_profile.copy()
    if only is not None:
        select &= only
    lower, upper = fit.lower.copy(), fit.upper.copy()
    idx = np.flatnonzero(select & (fit.battles > 0))
    if idx.size:
        lik, x_hat = _profile_likelihood(fit)
        nm = normalisation_matrix(fit.components, fit.params.reference, b.centre)
        widen_levels(lik, x_hat, nm, idx, b, fit.params.reference, lower, upper, confidence=confidence)
    profiled = np.zeros(fit.scores.shape[0], dtype=bool)
    profiled[idx] = True
    return BoundaryIntervals(lower, upper, profiled, b.open_lower.copy(), b.open_upper.copy())


def _profile_likelihood(fit: DavidsonResult) -> tuple[DavidsonLikelihood, NDArray[np.float64]]:
    lik = replace(fit.likelihood, prior=fit.likelihood.prior * PROFILE_PRIOR_FRACTION)
    x_hat, _, _ = damped_newton(fit.x, lik.objective, lik.value, tol=1e-9, max_iter=200)
    return lik, x_hat


def davidson_difference_intervals(
    cells: Cells, fit: DavidsonResult, idx: NDArray[np.int64], *, confidence: float = 0.95
) -> DifferenceIntervals:
    """Intervals of ``score_a - score_b`` on a Davidson board: Wald from the same covariance as the
    levels (``var_a + var_b - 2 cov_ab``: two overlapping level intervals do not make an unclear
    difference), the union with the profile-likelihood interval of ``theta_a - theta_b`` for pairs with
    a competitor that needs the profile or whose own record is one-class, and open sides where the win
    digraph cannot bound them (``Boundedness.difference_open``)."""
    if not 0.0 < confidence < 1.0:
        raise ValueError("confidence must lie strictly between 0 and 1")
    n = fit.scores.shape[0]
    s = fit.scores[idx]
    est_d = s[:, None] - s[None, :]
    c = fit.covariance[:n, :n][np.ix_(idx, idx)]
    var = np.clip(np.diag(c)[:, None] + np.diag(c)[None, :] - 2 * c, 0.0, None)
    z = float(norm.ppf(0.5 + confidence / 2.0))
    lower, upper = est_d - z * SCALE * np.sqrt(var), est_d + z * SCALE * np.sqrt(var)
    method = "fisher (Wald from Davidson's prior-regularised information)"
    open_up, open_lo = fit.bounds.difference_open(idx)
    profile = fit.bounds.needs_profile[idx]
    select = profile[:, None] | profile[None, :] | open_up | open_lo | one_class_pairs(cells, fit.params.both_bad, idx)
    if select.any() and n <= PROFILE_FULL_MAX:
        lik, x_hat = _profile_likelihood(fit)
        widen_differences(lik, x_hat, idx, select, open_lo, open_up, lower, upper, confidence=confidence)
        method += " (profile likelihood where a record is one-sided, thin or all ties)"
    lower = np.where(open_lo, -np.inf, lower)
    upper = np.where(open_up, np.inf, upper)
    np.fill_diagonal(lower, 0.0)
    np.fill_diagonal(upper, 0.0)
    return DifferenceIntervals(idx, est_d, lower, upper, method)


def simulate_davidson(
    rng: np.random.Generator, log_strength: NDArray[np.float64], nu: float, a: NDArray[np.int64], b: NDArray[np.int64]
) -> NDArray[np.int64]:
    """Outcomes (LEFT_WINS, RIGHT_WINS, TIE) of battles ``a`` vs ``b`` under Davidson's model."""
    d = log_strength[a] - log_strength[b]
    p_left = np.exp(0.5 * d)
    p_right = np.exp(-0.5 * d)
    denom = p_left + p_right + nu
    u = rng.random(a.shape[0]) * denom
    return np.where(u < p_left, LEFT_WINS, np.where(u < p_left + p_right, RIGHT_WINS, TIE)).astype(np.int64)
