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

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy.special import logsumexp
from scipy.stats import norm

from .aggregate import BOTH_BAD, LEFT_WINS, RIGHT_WINS, TIE, Cells, weighted_bincount
from .bradley_terry import BASE, SCALE, BothBad, FitParams, normalisation_matrix, normalise, one_class, pair_design
from .graph import Boundedness, boundedness, components, laplacian
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

    def value(x: NDArray[np.float64]) -> float:
        theta, eta = x[:n], x[n]
        d = theta[lo] - theta[hi]
        z = np.stack([0.5 * d, -0.5 * d, np.full_like(d, eta)])
        out = float((w_lo - w_hi) @ (0.5 * d) + ties.sum() * eta - total @ logsumexp(z, axis=0))
        return out + prior * float((0.5 * theta - np.logaddexp(0.0, theta)).sum())

    def objective(x: NDArray[np.float64]) -> tuple[float, NDArray[np.float64], NDArray[np.float64]]:
        theta, eta = x[:n], x[n]
        d = theta[lo] - theta[hi]
        z = np.stack([0.5 * d, -0.5 * d, np.full_like(d, eta)])
        q = np.exp(z - logsumexp(z, axis=0))
        diff = q[0] - q[1]
        g_d = 0.5 * (w_lo - w_hi) - 0.5 * total * diff
        g_eta = float(ties.sum() - total @ q[2])
        h_dd = total * (0.25 * (q[0] + q[1]) - 0.25 * diff * diff)
        h_de = -0.5 * total * q[2] * diff
        h = np.zeros((n + 1, n + 1))
        h[:n, :n] = laplacian(n, lo, hi, h_dd)
        cross = np.bincount(lo, h_de, minlength=n) - np.bincount(hi, h_de, minlength=n)
        h[:n, n] = cross
        h[n, :n] = cross
        h[n, n] = float(total @ (q[2] - q[2] ** 2))
        p0 = 1.0 / (1.0 + np.exp(-theta))
        h[np.arange(n), np.arange(n)] += prior * p0 * (1.0 - p0)
        g = np.concatenate(
            [np.bincount(lo, g_d, minlength=n) - np.bincount(hi, g_d, minlength=n) + prior * (0.5 - p0), [g_eta]]
        )
        return value(x), g, h

    share = float(ties.sum() / total.sum())
    x0 = np.concatenate([np.zeros(n), [np.log(max(2.0 * share / max(1.0 - share, 1e-9), 1e-6))]])
    x, iterations, converged = damped_newton(x0, objective, value, tol=1e-9)
    _, _, info = objective(x)
    cov = np.linalg.inv(info + 1e-12 * np.eye(n + 1))
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
        normalisation="reference" if reference is not None else "geometric_mean_per_component",
        ties="davidson",
    )
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
        nu_lower=float(np.exp(eta - z * eta_se)),
        nu_upper=float(np.exp(eta + z * eta_se)),
        tie_probability_at_equal_strength=nu / (2.0 + nu),
        iterations=iterations,
        converged=converged,
        params=params,
        bounds=bounds,
    )


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
