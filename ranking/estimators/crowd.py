"""Crowd Bradley-Terry: competitor scores fitted jointly with a reliability per rater.

Model (the crowd-BT of Chen et al. 2013, "Pairwise ranking aggregation in a crowdsourced setting",
restricted to eta_r >= 1/2)::

    P(rater r reports "i beats j") = eta_r sigmoid(theta_i - theta_j) + (1 - eta_r) sigmoid(theta_j - theta_i)
                                   = rho_r sigmoid(theta_i - theta_j) + (1 - rho_r) / 2,   rho_r = 2 eta_r - 1

``eta_r`` is the probability that rater ``r`` agrees with the model's preference: with probability
``rho_r`` the rater reports a draw of the model's preference, otherwise a coin flip between the sides.
``eta_r = 1`` is plain Bradley-Terry; ``eta_r = 1/2`` votes at random (the vote carries no weight).

Why these choices (each tried against the alternative on the synthetic campaigns of the tests):

* **No flip side (eta_r >= 1/2).** Crowd-BT allows ``eta_r < 1/2`` (an adversary read the other way
  round). We tried it: an adversary that always picks the weaker side is explained *better* by the
  joint likelihood with every gap inflated many times over (scores at +-1500 for a true +-170) and the
  honest raters demoted to ``eta = 0.7``: the model reads a deterministic minority as more reliable than
  an honest, noisy majority. Without the flip side an adversary is scored as no better than chance
  (``eta = 1/2``), its votes count for nothing, and the scale stays that of the honest raters. This also
  removes the model's mirror symmetry (negate every score, ``eta -> 1 - eta``: same likelihood), which
  otherwise only the prior breaks. Cost: an adversary's votes are not used backwards (a strategic
  adversary would choose when to tell the truth, so using them is not safe anyway).
* **Cells per (rater, pair).** The likelihood depends on a rater's votes only through, per pair, how
  much the lo side won and how much the hi side won (ties count half a win each side, as in the raw
  view; both_bad as a tie or dropped by the same rule). The EM runs on (rater x pair) sparse matrices
  and (pair x grid) dense ones: a vote's probability depends only on its pair and its rater's eta.
* **Empirical Bayes on a grid, by EM.** ``eta_r`` takes one of ``GRID`` (0.5, 0.525, ..., 1) and the
  distribution of reliability over the raters (the grid weights) is estimated with the scores. The
  first version maximised the joint posterior of scores and one free ``eta_r`` each (L-BFGS-B, Beta(2,
  1) prior): with honest raters the estimated ``eta_r`` spread over 0.7-1 and, since a lower reliability
  is traded for wider gaps, the scores came out up to 30% wider than plain BT. Pooling the raters'
  information about the population fixes that. EM has two latent layers (the rater's grid value; per
  vote, whether it was the model's draw or a coin flip), so the score M-step is the raw view's concave
  Bradley-Terry fit on fractional pair counts (one warm-started Newton step) and the weight M-step
  a count; SQUAREM extrapolation keeps the number of EM steps near a hundred.
* **Prior and scale.** A Dirichlet prior on the grid weights worth ``PRIOR_RATERS`` rater, spread as
  Beta(2, 1) (density ``2 eta``: favours reliable raters, weakly). Reliability and the spread of the
  scores trade off (a bit less reliable everywhere, a bit wider gaps): the weight at ``eta = 1`` is
  kept at least ``RELIABLE_SHARE`` (one half: at least half the raters are fully reliable), which pins
  the scale to the reliable raters' votes, as plain BT's is to everyone's. The prior on the scores is
  the raw view's (``prior_games`` virtual ties), and the scores are normalised with the raw fit's
  components and centre, so 1000 means the same thing in both views.
* **Identifiability.** ``eta_r`` is identified only by comparing the rater's votes with what the
  others' votes say about the same pairs. Rule, stated and tested: ``eta_r`` is estimated when the
  rater has at least ``MIN_OVERLAP`` counted votes on pairs that another rater also voted on; otherwise
  it is held at 1 (the prior's mode: the votes count as in the raw view) and reported as not estimated.
  ``CrowdFit.identified`` needs ``MIN_RATERS`` estimated raters: with one rater nothing can be compared,
  and with two who disagree nothing can tell which is right. And when the fit finds most votes
  unreliable (``unreliable_share`` over one half) it contradicts its own assumption; the caller
  withholds the view (seen once in 16 campaigns with neighbours 19 points apart and 20% deterministic
  adversaries: the adversaries, agreeing with themselves, were taken for the reliable raters).
* **Intervals.** Scores: percentile bootstrap **over raters** (a rater's votes move together - their
  reliability, their habits - so resampling votes independently would understate the spread): each
  round draws the raters with replacement, counts each as often as drawn, and reruns EM warm-started
  at the full-data optimum. Reliabilities: the 95% credible interval of the rater's posterior over
  the grid (so its ends are grid points), conditional on the fitted scores and grid weights.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike, NDArray
from scipy.special import expit

from .aggregate import BOTH_BAD, LEFT_WINS, RIGHT_WINS, TIE, canonical_pairs, validate_battles, weighted_bincount
from .bradley_terry import BASE, SCALE, BothBad, BTResult, normalise
from .intervals import _round_generators, percentile_bounds
from .newton import damped_newton
from .profile import BTLikelihood

# Reliability takes one of these values: 0.5, 0.525, ..., 1 (see the module docstring).
GRID: NDArray[np.float64] = np.linspace(0.5, 1.0, 21)
PRIOR_A = 2.0  # the Dirichlet prior on the grid weights is spread as Beta(a, b) ...
PRIOR_B = 1.0
PRIOR_RATERS = 1.0  # ... and worth this many raters
# At least this share of the reliability distribution sits at eta = 1 (see "Prior and scale" above).
RELIABLE_SHARE = 0.5
MIN_OVERLAP = 5  # counted votes on pairs some other rater voted on, for eta_r to be estimated
MIN_RATERS = 3  # raters with an estimated eta for the view to be identified
UNRELIABLE_BELOW = 0.75  # "unreliable" for unreliable_share: at most half the votes follow the preference

__all__ = [
    "CrowdCells",
    "CrowdFit",
    "CrowdIntervals",
    "MIN_OVERLAP",
    "MIN_RATERS",
    "GRID",
    "PRIOR_A",
    "PRIOR_B",
    "crowd_bootstrap",
    "crowd_cells",
    "fit_crowd_bt",
    "unreliable_share",
]


@dataclass(frozen=True)
class CrowdCells:
    """Votes reduced to one cell per (rater, pair): ``w_lo``/``w_hi`` the lo and hi side's wins (ties
    half each). ``rater_ids`` maps the dense rater index back to the caller's ids; ``votes`` counts
    each rater's counted votes, ``overlap`` those on pairs another rater also voted on."""

    n_competitors: int
    lo: NDArray[np.int64]
    hi: NDArray[np.int64]
    rater: NDArray[np.int64]
    w_lo: NDArray[np.float64]
    w_hi: NDArray[np.float64]
    rater_ids: NDArray[np.int64]
    votes: NDArray[np.float64]
    overlap: NDArray[np.float64]

    @property
    def n_raters(self) -> int:
        return int(self.rater_ids.shape[0])

    @property
    def n_cells(self) -> int:
        return int(self.lo.shape[0])


def crowd_cells(
    a: ArrayLike,
    b: ArrayLike,
    outcome: ArrayLike,
    rater: ArrayLike,
    *,
    n_competitors: int | None = None,
    both_bad: BothBad = "tie",
) -> CrowdCells:
    """Validate the votes and reduce them to (rater, pair) cells (both_bad counted as a tie or
    dropped, as in the raw view)."""
    if both_bad not in ("tie", "drop"):
        raise ValueError("both_bad must be 'tie' or 'drop'")
    bt = validate_battles(a, b, outcome, n_competitors=n_competitors)
    r_raw = np.asarray(rater).ravel()
    if r_raw.shape[0] != bt.a.shape[0]:
        raise ValueError("rater must have one entry per vote")
    rater_ids, r_idx = np.unique(r_raw.astype(np.int64), return_inverse=True)
    n = bt.n_competitors
    lo, hi, out, _ = canonical_pairs(bt.a, bt.b, bt.outcome)
    used = np.ones(out.shape[0], dtype=bool) if both_bad == "tie" else out != BOTH_BAD
    y = np.select([out == LEFT_WINS, out == RIGHT_WINS, out == TIE], [1.0, 0.0, 0.5], default=0.5)
    n_pairs_key = n * n
    key = r_idx.astype(np.int64) * n_pairs_key + lo * n + hi
    key, y = key[used], y[used]
    uniq, inv = np.unique(key, return_inverse=True)
    w_lo = weighted_bincount(inv, y, minlength=uniq.shape[0])
    w_hi = weighted_bincount(inv, 1.0 - y, minlength=uniq.shape[0])
    cell_rater = uniq // n_pairs_key
    pair = uniq % n_pairs_key
    n_r = rater_ids.shape[0]
    votes = weighted_bincount(cell_rater, w_lo + w_hi, minlength=n_r)
    # Raters per pair: cells are unique per (rater, pair), so counting cells per pair counts raters.
    _, pair_inv, raters_on_pair = np.unique(pair, return_inverse=True, return_counts=True)
    shared = raters_on_pair[pair_inv] >= 2
    overlap = weighted_bincount(cell_rater[shared], (w_lo + w_hi)[shared], minlength=n_r)
    return CrowdCells(
        n_competitors=n,
        lo=(pair // n).astype(np.int64),
        hi=(pair % n).astype(np.int64),
        rater=cell_rater.astype(np.int64),
        w_lo=w_lo,
        w_hi=w_hi,
        rater_ids=rater_ids,
        votes=votes,
        overlap=overlap,
    )


@dataclass(frozen=True)
class CrowdFit:
    """A crowd BT fit. ``scores``/``log_strength`` normalised like the raw fit (its components and
    centre); ``theta_raw`` the optimum before normalisation. Per rater (dense index, see
    ``CrowdCells.rater_ids``): ``eta`` the posterior mean reliability, ``eta_lower``/``eta_upper``
    its credible interval (NaN for held raters), ``posterior`` the weights over ``GRID``;
    ``estimated`` marks raters whose eta was estimated (the others are held at 1). ``weights`` is
    the fitted distribution of reliability over the grid (the estimated raters' population)."""

    scores: NDArray[np.float64]
    log_strength: NDArray[np.float64]
    theta_raw: NDArray[np.float64]
    eta: NDArray[np.float64]
    eta_lower: NDArray[np.float64]
    eta_upper: NDArray[np.float64]
    posterior: NDArray[np.float64]
    estimated: NDArray[np.bool_]
    weights: NDArray[np.float64]
    components: NDArray[np.int64]
    iterations: int
    converged: bool
    log_posterior: float
    prior_games: float
    reference: int | None
    centre: NDArray[np.bool_]

    @property
    def identified(self) -> bool:
        return int(self.estimated.sum()) >= MIN_RATERS


class _EM:
    """EM for crowd BT with the reliability grid prior. Two latent layers: which grid value a rater's
    reliability is (posterior ``tau``, per rater), and, per vote, whether the rater reported the
    model's draw or a coin flip's side. Given both, the votes are plain Bradley-Terry votes (a vote
    that was a coin flip's is counted for neither side in expectation: its BT-draw share is split by
    the posterior), so the M-step for the scores is the raw view's concave fit on fractional pair
    counts, and the M-step for the grid weights is a count.

    Everything runs on (rater x pair) sparse matrices and (pair x grid) dense ones: the probability
    of a vote depends on its pair and its rater's grid value only."""

    def __init__(
        self, cells: CrowdCells, rater_weight: NDArray[np.float64], estimated: NDArray[np.bool_], prior: float
    ):
        n = cells.n_competitors
        self.n = n
        self.prior = prior
        self.m = rater_weight  # how many times each rater counts (bootstrap draws; 1 for the fit)
        self.estimated = estimated
        uniq, cell_pair = np.unique(cells.lo * n + cells.hi, return_inverse=True)
        self.p_lo = (uniq // n).astype(np.int64)
        self.p_hi = (uniq % n).astype(np.int64)
        self.n_pairs = int(uniq.shape[0])
        shape = (cells.n_raters, self.n_pairs)
        self.a_lo = sp.csr_matrix((cells.w_lo, (cells.rater, cell_pair)), shape=shape)
        self.a_hi = sp.csr_matrix((cells.w_hi, (cells.rater, cell_pair)), shape=shape)
        self.a_lo_t = self.a_lo.T.tocsr()
        self.a_hi_t = self.a_hi.T.tocsr()
        # Held raters sit at eta = 1 (the last grid point) with certainty.
        self.held = np.zeros((cells.n_raters, GRID.shape[0]))
        self.held[:, -1] = 1.0
        self.alpha = _dirichlet_alpha()

    def grid_probabilities(self, theta: NDArray[np.float64]) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """Per pair, the model's P(lo wins) and, per grid value, P(a rater reports lo)."""
        p = expit(theta[self.p_lo] - theta[self.p_hi])
        q = np.clip((1.0 - GRID)[None, :] + (2.0 * GRID - 1.0)[None, :] * p[:, None], 1e-300, 1.0 - 1e-16)
        return p, q

    def loglik_grid(self, q: NDArray[np.float64]) -> NDArray[np.float64]:
        """Per rater and grid value, the log-likelihood of the rater's votes (one copy)."""
        ll: NDArray[np.float64] = np.asarray(self.a_lo @ np.log(q) + self.a_hi @ np.log1p(-q))
        return ll

    def posterior(self, ll: NDArray[np.float64], weights: NDArray[np.float64]) -> tuple[NDArray[np.float64], float]:
        with np.errstate(divide="ignore"):
            logw = np.log(weights)
        z = ll + logw[None, :]
        top = z.max(axis=1, keepdims=True)
        e = np.exp(z - top)
        s = e.sum(axis=1, keepdims=True)
        tau = np.where(self.estimated[:, None], e / s, self.held)
        # Held raters contribute their eta = 1 likelihood; they do not inform the grid weights.
        marginal = np.where(self.estimated, top[:, 0] + np.log(s[:, 0]), ll[:, -1])
        return tau, float(self.m @ marginal)

    def step(
        self, theta: NDArray[np.float64], weights: NDArray[np.float64]
    ) -> tuple[NDArray[np.float64], NDArray[np.float64], float]:
        p, q = self.grid_probabilities(theta)
        tau, logpost = self.posterior(self.loglik_grid(q), weights)
        tau_m = tau * self.m[:, None]
        s_lo = np.asarray(self.a_lo_t @ tau_m)  # pair x grid: lo-reports weighted by the posterior
        s_hi = np.asarray(self.a_hi_t @ tau_m)
        rho = 2.0 * GRID[None, :] - 1.0  # P(the rater reports the model's draw; else a coin flip's side)
        f_lo = rho * p[:, None] / q  # P(the report was the model's draw | reported lo)
        f_hi = rho * (1.0 - p[:, None]) / (1.0 - q)
        # A report that was a coin flip says nothing about the draw: the draw is then lo with prob. p.
        w_lo = (s_lo * (f_lo + (1.0 - f_lo) * p[:, None]) + s_hi * (1.0 - f_hi) * p[:, None]).sum(axis=1)
        w_hi = (s_hi * (f_hi + (1.0 - f_hi) * (1.0 - p[:, None])) + s_lo * (1.0 - f_lo) * (1.0 - p[:, None])).sum(
            axis=1
        )
        lik = BTLikelihood(self.n, self.p_lo, self.p_hi, w_lo, w_hi, self.prior)
        # One Newton step with line search (it increases the M-step objective: a generalised EM).
        theta_new, _, _ = damped_newton(theta, lik.objective, lik.value, tol=1e-10, max_iter=1)
        counts = (tau_m[self.estimated]).sum(axis=0) + self.alpha - 1.0
        weights_new = _constrained_weights(np.maximum(counts, 0.0))
        if self.prior > 0:
            logpost += self.prior * float((0.5 * theta - np.logaddexp(0.0, theta)).sum())
        with np.errstate(divide="ignore", invalid="ignore"):
            logpost += float(np.where(self.alpha > 1.0, (self.alpha - 1.0) * np.log(weights), 0.0).sum())
        return theta_new, weights_new, logpost

    def run(
        self, theta: NDArray[np.float64], weights: NDArray[np.float64], max_iter: int, tol: float
    ) -> tuple[NDArray[np.float64], NDArray[np.float64], int, bool, float]:
        """EM accelerated by SQUAREM (Varadhan & Roland 2008): two EM steps give a direction, a step
        of length from their difference extrapolates along it, and one EM step from there stabilises;
        the extrapolation is kept only when it did not lower the log posterior (else the plain EM
        point is used), so every cycle increases the objective like EM."""
        n = self.n

        def em(x: NDArray[np.float64]) -> tuple[NDArray[np.float64], float]:
            th, w, lp = self.step(x[:n], x[n:])
            return np.concatenate([th, w]), lp

        x0 = np.concatenate([theta, weights])
        logpost = -np.inf
        it = 0
        while it < max_iter:
            x1, lp0 = em(x0)
            x2, lp1 = em(x1)
            it += 2
            r = x1 - x0
            v = x2 - x1 - r
            nv = float(np.linalg.norm(v))
            x_next = x2
            if nv > 0:
                alpha = min(-1.0, -float(np.linalg.norm(r)) / nv)
                xs = x0 - 2.0 * alpha * r + alpha * alpha * v
                xs[n:] = np.maximum(xs[n:], 0.0)
                xs[n:] /= xs[n:].sum()
                x3, lp3 = em(xs)
                it += 1
                if np.isfinite(lp3) and lp3 >= lp1:
                    x_next = x3
            logpost = max(lp0, lp1)
            if float(np.abs(x_next - x0).max()) < tol:
                return x_next[:n], x_next[n:], it, True, logpost
            x0 = x_next
        return x0[:n], x0[n:], it, False, logpost


def _constrained_weights(counts: NDArray[np.float64]) -> NDArray[np.float64]:
    """The grid weights maximising ``sum counts log w`` subject to ``w[-1] >= RELIABLE_SHARE`` (eta = 1
    holds at least that share): the bound, when active, is met exactly and the other weights keep
    their proportions (the KKT solution)."""
    w: NDArray[np.float64] = counts / counts.sum()
    if w[-1] >= RELIABLE_SHARE:
        return w
    rest = counts[:-1].sum()
    out: NDArray[np.float64] = np.empty_like(w)
    out[:-1] = (1.0 - RELIABLE_SHARE) * (counts[:-1] / rest if rest > 0 else 1.0 / (w.shape[0] - 1))
    out[-1] = RELIABLE_SHARE
    return out


def _dirichlet_alpha() -> NDArray[np.float64]:
    """Dirichlet prior on the grid weights worth ``PRIOR_RATERS`` raters, spread as Beta(PRIOR_A,
    PRIOR_B) over the grid: it breaks the mirror symmetry towards reliable raters, and otherwise
    hardly matters once there are more than a few raters."""
    density = GRID ** (PRIOR_A - 1.0) * (1.0 - GRID) ** (PRIOR_B - 1.0)
    out: NDArray[np.float64] = 1.0 + PRIOR_RATERS * density / density.sum()
    return out


def _start_weights() -> NDArray[np.float64]:
    w = _dirichlet_alpha() - 1.0 + 1e-3
    out: NDArray[np.float64] = w / w.sum()
    return out


def fit_crowd_bt(
    cells: CrowdCells,
    raw: BTResult,
    *,
    max_iter: int = 1000,
    tol: float = 1e-6,
    confidence: float = 0.95,
) -> CrowdFit:
    """Fit scores and reliabilities jointly (see the module docstring), starting at the raw fit
    ``raw`` (fitted on the same votes, ignoring raters: its components, centre, reference and prior
    are reused so the two views are on one scale)."""
    if cells.n_competitors != raw.scores.shape[0]:
        raise ValueError("cells and raw fit disagree on the number of competitors")
    estimated = cells.overlap >= MIN_OVERLAP
    em = _EM(cells, np.ones(cells.n_raters), estimated, raw.params.prior_games)
    theta, weights, iters, converged, logpost = em.run(raw.theta_raw.copy(), _start_weights(), max_iter, tol)
    _, q = em.grid_probabilities(theta)
    tau, _ = em.posterior(em.loglik_grid(q), weights)
    eta = tau @ GRID
    cdf = np.cumsum(tau, axis=1)
    alpha = 1.0 - confidence
    lower = GRID[np.minimum((cdf < alpha / 2).sum(axis=1), GRID.shape[0] - 1)]
    upper = GRID[np.minimum((cdf < 1.0 - alpha / 2).sum(axis=1), GRID.shape[0] - 1)]
    log_strength = normalise(theta, raw.components, raw.params.reference, raw.bounds.centre)
    return CrowdFit(
        scores=SCALE * log_strength + BASE,
        log_strength=log_strength,
        theta_raw=theta,
        eta=eta,
        eta_lower=np.where(estimated, lower, np.nan),
        eta_upper=np.where(estimated, upper, np.nan),
        posterior=tau,
        estimated=estimated,
        weights=weights,
        components=raw.components,
        iterations=iters,
        converged=converged,
        log_posterior=logpost,
        prior_games=raw.params.prior_games,
        reference=raw.params.reference,
        centre=raw.bounds.centre,
    )


def unreliable_share(cells: CrowdCells, fit: CrowdFit, below: float = UNRELIABLE_BELOW) -> float:
    """The share of the counted votes cast by raters whose estimated eta is under ``below``. Over one
    half the fit contradicts its own assumption (most raters reliable): a consistent minority may have
    been taken for the reliable raters (close competitors, deterministic adversaries), and the caller
    withholds the view."""
    total = float(cells.votes.sum())
    if total <= 0:
        return 0.0
    return float(cells.votes[fit.estimated & (fit.eta < below)].sum()) / total


@dataclass(frozen=True)
class CrowdIntervals:
    """Percentile intervals of the scores from the bootstrap over raters; ``samples`` rounds x n;
    ``not_converged`` counts rounds that stopped at the iteration limit."""

    lower: NDArray[np.float64]
    upper: NDArray[np.float64]
    samples: NDArray[np.float64]
    rounds: int
    confidence: float
    not_converged: int


def crowd_bootstrap(
    cells: CrowdCells,
    fit: CrowdFit,
    *,
    rounds: int = 100,
    confidence: float = 0.95,
    seed: int | np.random.SeedSequence = 0,
    max_iter: int = 300,
    tol: float = 1e-4,
) -> CrowdIntervals:
    """Bootstrap over raters: each round draws the R raters with replacement (multinomial counts),
    counts each rater as often as it was drawn (its cells and its share of the grid weights) and
    reruns EM from the full-data optimum. The same votes and seed give the same output (round r
    draws from its own spawned generator)."""
    if not 0.0 < confidence < 1.0:
        raise ValueError("confidence must lie strictly between 0 and 1")
    if rounds < 1:
        raise ValueError("rounds must be >= 1")
    n = cells.n_competitors
    r = cells.n_raters
    theta = np.empty((rounds, n))
    not_converged = 0
    em = _EM(cells, np.ones(r), fit.estimated, fit.prior_games)  # the matrices are built once
    for k, g in enumerate(_round_generators(seed, rounds)):
        em.m = np.bincount(g.integers(0, r, r), minlength=r).astype(np.float64)
        th, _, _, ok, _ = em.run(fit.theta_raw.copy(), fit.weights.copy(), max_iter, tol)
        not_converged += int(not ok)
        theta[k] = th
    samples = SCALE * normalise(theta, fit.components, fit.reference, fit.centre) + BASE
    lower, upper = percentile_bounds(samples, confidence)
    return CrowdIntervals(lower, upper, samples, rounds, confidence, not_converged)
