"""The reliability-weighted board: Bradley-Terry with each rater's votes weighted by its reliability,
the reliability estimated against the board fitted without that rater.

Reliability model (the crowd-BT of Chen et al. 2013, "Pairwise ranking aggregation in a crowdsourced
setting", restricted to eta_r >= 1/2)::

    P(rater r reports "i beats j") = eta_r sigmoid(theta_i - theta_j) + (1 - eta_r) sigmoid(theta_j - theta_i)
                                   = rho_r sigmoid(theta_i - theta_j) + (1 - rho_r) / 2,   rho_r = 2 eta_r - 1

``eta_r`` is the probability that rater ``r`` agrees with the model's preference: with probability
``rho_r`` the rater reports a draw of the model's preference, otherwise a coin flip between the sides.
``eta_r = 1`` is plain Bradley-Terry; ``eta_r = 1/2`` votes at random (the vote carries no weight).

Why these choices (each tried against the alternative on the synthetic campaigns of the tests and
``benchmarks/crowd.py``):

* **No flip side (eta_r >= 1/2).** Crowd-BT allows ``eta_r < 1/2`` (an adversary read the other way
  round). We tried it: an adversary that always picks the weaker side is explained *better* by the
  joint likelihood with every gap inflated many times over (scores at +-1500 for a true +-170) and the
  honest raters demoted to ``eta = 0.7``. Without the flip side an adversary is scored as no better
  than chance (``eta = 1/2``) and its votes count for nothing. Cost: an adversary's votes are not used
  backwards (a strategic adversary would choose when to tell the truth, so using them is not safe).
* **Weights, not a joint fit.** The first versions fitted the scores jointly with the reliabilities
  (crowd-BT's likelihood, by EM). There reliability trades off against the spread of the scores
  (everyone a bit less reliable, every gap a bit wider) and each rater is judged against a board its
  own votes helped to fit: with honest raters only, the error was 1.2-1.3 times plain BT's and every
  gap 1.06-1.11 times wider, in most campaigns (issue 20.2). Now the board is the raw view's
  Bradley-Terry fit with each vote counted ``w`` times, ``w`` in [0, 1] the posterior mean of
  ``rho`` (what a vote of a rater with reliability ``rho`` is worth relative to a reliable one: its
  expected pull towards the preference is ``rho`` times as large; 0 for a coin flip or an adversary).
  Equal weights give plain BT exactly, so honest raters cannot stretch the scale.
* **Held out twice.** A rater's reliability is the likelihood of its votes under the board fitted
  *without that rater* (one Newton step from the full board: ``_Reweighted``), so a rater is not
  judged against its own votes; and the weight applied to a rater's votes on one pair comes from its
  votes on its *other* pairs, so the weight of a vote never depends on that vote. Without the second,
  raters whose votes happen to side with the board more get more weight and the gaps still widen
  (1.08 times in thin campaigns: 6 competitors, 40 votes a rater); with both, the weighted estimating
  equation is unbiased at the truth and the gap slope against plain BT is 1.000.
* **Cells per (rater, pair).** A rater's likelihood depends on its votes only through, per pair, how
  much the lo side won and how much the hi side won (ties count half a win each side, as in the raw
  view; both_bad as a tie or dropped by the same rule).
* **Empirical Bayes on a grid.** ``eta_r`` takes one of ``GRID`` (0.5, 0.525, ..., 1); the
  distribution of reliability over the raters (the grid weights) is estimated from all raters' held-out
  likelihoods (EM for the mixture) under a Dirichlet prior worth ``PRIOR_RATERS`` rater, spread as
  Beta(2, 1) (density ``2 eta``: favours reliable raters, weakly), and each rater's posterior over the
  grid follows. Pooling keeps a rater with few votes near the population. The fit alternates board,
  held-out boards, population and weights from plain BT (all weights 1) until no weight moves more
  than ``tol``; the scores are normalised with the raw fit's components and centre, so 1000 means the
  same thing in both views.
* **Identifiability.** ``eta_r`` is identified only by comparing the rater's votes with what the
  others' votes say about the same pairs. Rule, stated and tested: ``eta_r`` is estimated when the
  rater has at least ``MIN_OVERLAP`` counted votes on pairs that another rater also voted on; otherwise
  it is held at 1 (the prior's mode: the votes count as in the raw view) and reported as not estimated.
  ``CrowdFit.identified`` needs ``MIN_RATERS`` estimated raters: with one rater nothing can be compared,
  and with two who disagree nothing can tell which is right. And when the fit finds most votes
  unreliable (``unreliable_share`` over one half) it contradicts its own assumption; the caller
  withholds the view (40% deterministic adversaries with neighbours 19 points apart outweigh the honest
  signal: plain BT is upside down already, and the weighted fit follows it).
* **Intervals.** Scores: percentile bootstrap **over raters** (a rater's votes move together - their
  reliability, their habits - so resampling votes independently would understate the spread): each
  round draws the raters with replacement, counts each as often as drawn, and reruns the alternating
  fit (reliabilities included) warm-started at the full-data one. Reliabilities: the 95% credible
  interval of the rater's posterior over the grid (so its ends are grid points), conditional on the
  held-out board and the grid weights.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.special import expit
from scipy.stats import norm

from .aggregate import BOTH_BAD, LEFT_WINS, RIGHT_WINS, TIE, canonical_pairs, validate_battles, weighted_bincount
from .bradley_terry import BASE, SCALE, BothBad, BTResult, _null_projector, normalisation_matrix, normalise
from .graph import laplacian
from .intervals import _round_generators, percentile_bounds
from .newton import _solve, damped_newton
from .profile import BTLikelihood

# Reliability takes one of these values: 0.5, 0.525, ..., 1 (see the module docstring).
GRID: NDArray[np.float64] = np.linspace(0.5, 1.0, 21)
PRIOR_A = 2.0  # the Dirichlet prior on the grid weights is spread as Beta(a, b) ...
PRIOR_B = 1.0
PRIOR_RATERS = 1.0  # ... and worth this many raters
RHO: NDArray[np.float64] = 2.0 * GRID - 1.0  # a vote's weight at each grid value (see "Weights" above)
HEAVY_SHARE = 0.02  # a rater with more of the counted votes gets an exact held-out Newton step
CHUNK = 65_536  # cells per block of the (cells x grid) work
POPULATION_ITER = 500  # EM steps for the distribution of reliability (each a pass over raters x grid)
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
    "crowd_sandwich",
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
    its credible interval (NaN for held raters), ``weight`` what each of its votes counts in the
    board (the posterior mean of ``2 eta - 1``; 1 for held raters), ``posterior`` the weights over
    ``GRID``;
    ``estimated`` marks raters whose eta was estimated (the others are held at 1). ``weights`` is
    the fitted distribution of reliability over the grid (the estimated raters' population)."""

    scores: NDArray[np.float64]
    log_strength: NDArray[np.float64]
    theta_raw: NDArray[np.float64]
    eta: NDArray[np.float64]
    eta_lower: NDArray[np.float64]
    eta_upper: NDArray[np.float64]
    weight: NDArray[np.float64]
    cell_weight: NDArray[np.float64]
    posterior: NDArray[np.float64]
    estimated: NDArray[np.bool_]
    weights: NDArray[np.float64]
    components: NDArray[np.int64]
    iterations: int
    converged: bool
    prior_games: float
    reference: int | None
    centre: NDArray[np.bool_]

    @property
    def identified(self) -> bool:
        return int(self.estimated.sum()) >= MIN_RATERS


class _Reweighted:
    """The alternating fit (see the module docstring): a reliability-weighted Bradley-Terry board, each
    rater's reliability estimated against the board fitted without that rater's votes, the population's
    distribution of reliability estimated from those, and round again until the weights settle.

    A board is the raw view's concave fit on pair totals where each rater's votes count ``m_r * v_r``
    times (``m_r`` the bootstrap draws, 1 for the fit; ``v_r`` the reliability weight). The board
    without rater ``r`` is one Newton step from the full board with ``r``'s votes taken out: for a
    rater holding over ``HEAVY_SHARE`` of the counted votes the step uses the Hessian without them
    (a solve per such rater, at most ``1 / HEAVY_SHARE`` of them), for the others the full Hessian (one
    solve for all: the infinitesimal jackknife, off by about the rater's share of the step)."""

    def __init__(self, cells: CrowdCells, estimated: NDArray[np.bool_], prior: float, components: NDArray[np.int64]):
        n = cells.n_competitors
        self.n = n
        self.r = cells.n_raters
        self.prior = prior
        self.null_proj = _null_projector(components) if prior <= 0 else None
        self.estimated = estimated
        uniq, cell_pair = np.unique(cells.lo * n + cells.hi, return_inverse=True)
        self.p_lo = (uniq // n).astype(np.int64)
        self.p_hi = (uniq % n).astype(np.int64)
        self.cell_pair = cell_pair.astype(np.int64)
        self.n_pairs = int(uniq.shape[0])
        self.c_lo, self.c_hi, self.c_rater = cells.lo, cells.hi, cells.rater
        self.c_wlo, self.c_whi = cells.w_lo, cells.w_hi
        self.c_tot = cells.w_lo + cells.w_hi
        self.votes = cells.votes
        won_lo, won_hi = np.flatnonzero(cells.w_lo > 0), np.flatnonzero(cells.w_hi > 0)
        self.won = ((won_lo, cells.w_lo[won_lo], False), (won_hi, cells.w_hi[won_hi], True))
        self.held = np.zeros((self.r, GRID.shape[0]))
        self.held[:, -1] = 1.0
        self.alpha = _dirichlet_alpha()

    def board(
        self, theta: NDArray[np.float64], vote_weight: NDArray[np.float64]
    ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """The weighted Bradley-Terry board (each cell's votes counted ``vote_weight`` times,
        warm-started at ``theta``) and its negative Hessian."""
        w_lo = weighted_bincount(self.cell_pair, vote_weight * self.c_wlo, minlength=self.n_pairs)
        w_hi = weighted_bincount(self.cell_pair, vote_weight * self.c_whi, minlength=self.n_pairs)
        lik = BTLikelihood(self.n, self.p_lo, self.p_hi, w_lo, w_hi, self.prior, self.null_proj)
        theta, _, _ = damped_newton(theta, lik.objective, lik.value, tol=1e-9)
        _, _, hessian = lik.objective(theta)
        return theta, hessian

    def held_out_gaps(
        self, theta: NDArray[np.float64], hessian: NDArray[np.float64], vote_weight: NDArray[np.float64]
    ) -> NDArray[np.float64]:
        """Per cell, ``theta_lo - theta_hi`` of the board fitted without the cell's rater
        (``vote_weight`` per cell, as in ``board``)."""
        n = self.n
        d = theta[self.c_lo] - theta[self.c_hi]
        p = expit(d)
        w = vote_weight
        resid = w * (self.c_wlo - self.c_tot * p)  # the cell's share of the gradient, on lo (minus on hi)
        size = self.r * n
        grad = (
            weighted_bincount(self.c_rater * n + self.c_lo, resid, minlength=size)
            - weighted_bincount(self.c_rater * n + self.c_hi, resid, minlength=size)
        ).reshape(self.r, n)
        # Taking rater r out leaves the gradient -g_r at theta: the Newton step is -(H - H_r)^-1 g_r.
        shift = -_solve(hessian, grad.T)[0].T
        counted = weighted_bincount(self.c_rater, w * self.c_tot, minlength=self.r)
        heavy = np.flatnonzero(counted > HEAVY_SHARE * max(float(counted.sum()), 1e-300))
        for r in heavy:
            mine = self.c_rater == r
            h_r = laplacian(n, self.c_lo[mine], self.c_hi[mine], (w * self.c_tot * p * (1.0 - p))[mine])
            shift[r] = -_solve(hessian - h_r, grad[r])[0]
        out: NDArray[np.float64] = d + shift[self.c_rater, self.c_lo] - shift[self.c_rater, self.c_hi]
        return out

    def loglik_grid(self, gaps: NDArray[np.float64]) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """Per cell and per rater, for each grid value, the log-likelihood of the votes given the
        held-out board. ``1 - q(p) = q(1 - p)``, so a cell's log-likelihood is ``w_lo log q(p) + w_hi
        log q(1 - p)``, and a side with no wins (most cells hold one vote) costs nothing; the work runs
        in chunks of ``CHUNK`` rows so no (cells x grid) temporary is built beyond the result."""
        p = expit(gaps)
        per_cell = np.zeros((gaps.shape[0], GRID.shape[0]))
        for rows, wins, flip in self.won:
            x = 1.0 - p if flip else p
            for start in range(0, rows.shape[0], CHUNK):
                idx = rows[start : start + CHUNK]
                q = (1.0 - GRID)[None, :] + (2.0 * GRID - 1.0)[None, :] * x[idx, None]
                per_cell[idx] += wins[start : start + CHUNK, None] * np.log(np.maximum(q, 1e-300))
        ll = np.empty((self.r, GRID.shape[0]))
        for k in range(GRID.shape[0]):
            ll[:, k] = weighted_bincount(self.c_rater, per_cell[:, k], minlength=self.r)
        return per_cell, ll

    def cell_weights(
        self, per_cell: NDArray[np.float64], ll: NDArray[np.float64], pop: NDArray[np.float64]
    ) -> NDArray[np.float64]:
        """Per cell, the weight its rater earns on its *other* cells: the posterior mean of ``rho``
        from the rater's log-likelihood without the cell's own votes (held raters: 1)."""
        out = np.ones(per_cell.shape[0])
        with np.errstate(divide="ignore"):
            logpop = np.log(pop)
        for start in range(0, per_cell.shape[0], CHUNK):
            sl = slice(start, start + CHUNK)
            z = ll[self.c_rater[sl]] - per_cell[sl] + logpop[None, :]
            z -= z.max(axis=1, keepdims=True)
            e = np.exp(z)
            out[sl] = np.where(self.estimated[self.c_rater[sl]], (e @ RHO) / e.sum(axis=1), 1.0)
        return out

    def population(
        self, ll: NDArray[np.float64], m: NDArray[np.float64], weights: NDArray[np.float64]
    ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """The distribution of reliability over the grid (EM for the mixture, the Dirichlet prior's
        posterior mode; the estimated raters, each counted ``m_r`` times) and every rater's posterior."""
        z = ll - ll.max(axis=1, keepdims=True)
        lik = np.exp(z)
        est = self.estimated & (m > 0)
        lik_e, m_e = lik[est], m[est]
        for _ in range(POPULATION_ITER):
            # Each rater's posterior is lik * w / (lik @ w); their m-weighted sum over raters in two products.
            counts = weights * ((m_e / (lik_e @ weights)) @ lik_e) + self.alpha - 1.0
            new = np.maximum(counts, 0.0) / np.maximum(counts, 0.0).sum()
            done = float(np.abs(new - weights).max()) < 1e-9
            weights = new
            if done:
                break
        post = lik * weights[None, :]
        post /= post.sum(axis=1, keepdims=True)
        return weights, np.where(self.estimated[:, None], post, self.held)

    def run(
        self,
        theta: NDArray[np.float64],
        weight: NDArray[np.float64],
        pop: NDArray[np.float64],
        m: NDArray[np.float64],
        max_iter: int,
        tol: float,
    ) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64], NDArray[np.float64], int, bool]:
        """Alternate from ``theta``, the cell weights ``weight`` and the population ``pop`` until no
        cell's weight moves more than ``tol``; returns the board, the cell weights, the raters'
        posteriors over the grid, the population, the rounds and whether it settled."""
        tau = np.where(self.estimated[:, None], 0.0, self.held)
        mc = m[self.c_rater]
        for it in range(1, max_iter + 1):
            theta, hessian = self.board(theta, mc * weight)
            per_cell, ll = self.loglik_grid(self.held_out_gaps(theta, hessian, mc * weight))
            pop, tau = self.population(ll, m, pop)
            new = self.cell_weights(per_cell, ll, pop)
            moved = float(np.abs(new - weight).max()) if new.size else 0.0
            weight = new
            if moved < tol:
                theta, _ = self.board(theta, mc * weight)
                return theta, weight, tau, pop, it, True
        theta, _ = self.board(theta, mc * weight)
        return theta, weight, tau, pop, max_iter, False


def _dirichlet_alpha() -> NDArray[np.float64]:
    """Dirichlet prior on the grid weights worth ``PRIOR_RATERS`` raters, spread as Beta(PRIOR_A,
    PRIOR_B) over the grid: it leans towards reliable raters, and otherwise hardly matters once
    there are more than a few raters."""
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
    max_iter: int = 200,
    tol: float = 1e-6,
    confidence: float = 0.95,
) -> CrowdFit:
    """Fit the reliability-weighted board and the reliabilities by alternating (see the module
    docstring), starting at the raw fit ``raw`` (fitted on the same votes, ignoring raters: its
    components, centre, reference and prior are reused so the two views are on one scale)."""
    if cells.n_competitors != raw.scores.shape[0]:
        raise ValueError("cells and raw fit disagree on the number of competitors")
    estimated = cells.overlap >= MIN_OVERLAP
    fitter = _Reweighted(cells, estimated, raw.params.prior_games, raw.components)
    theta, cell_weight, tau, pop, iters, converged = fitter.run(
        raw.theta_raw.copy(), np.ones(cells.n_cells), _start_weights(), np.ones(cells.n_raters), max_iter, tol
    )
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
        weight=np.where(estimated, tau @ RHO, 1.0),
        cell_weight=cell_weight,
        posterior=tau,
        estimated=estimated,
        weights=pop,
        components=raw.components,
        iterations=iters,
        converged=converged,
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
    """Intervals of the scores: percentile intervals from the bootstrap over raters (``samples`` rounds x
    n; ``not_converged`` counts rounds that stopped at the iteration limit), or normal ones from the
    sandwich clustered by rater (``method`` "rater_sandwich", no samples, ``se`` the standard errors in
    score points)."""

    lower: NDArray[np.float64]
    upper: NDArray[np.float64]
    samples: NDArray[np.float64]
    rounds: int
    confidence: float
    not_converged: int
    method: str = "rater_bootstrap"
    se: NDArray[np.float64] | None = None


def crowd_bootstrap(
    cells: CrowdCells,
    fit: CrowdFit,
    *,
    rounds: int = 100,
    confidence: float = 0.95,
    seed: int | np.random.SeedSequence = 0,
    max_iter: int = 100,
    tol: float = 1e-4,
) -> CrowdIntervals:
    """Bootstrap over raters: each round draws the R raters with replacement (multinomial counts),
    counts each rater as often as it was drawn (its votes in the board, its share of the population)
    and reruns the alternating fit from the full-data one, reliabilities included (a drawn rater is
    held out of the board it is judged against with all its copies). The same votes and seed give
    the same output (round r draws from its own spawned generator)."""
    if not 0.0 < confidence < 1.0:
        raise ValueError("confidence must lie strictly between 0 and 1")
    if rounds < 1:
        raise ValueError("rounds must be >= 1")
    n = cells.n_competitors
    r = cells.n_raters
    theta = np.empty((rounds, n))
    not_converged = 0
    fitter = _Reweighted(cells, fit.estimated, fit.prior_games, fit.components)  # the matrices are built once
    for k, g in enumerate(_round_generators(seed, rounds)):
        m = np.bincount(g.integers(0, r, r), minlength=r).astype(np.float64)
        th, _, _, _, _, ok = fitter.run(
            fit.theta_raw.copy(), fit.cell_weight.copy(), fit.weights.copy(), m, max_iter, tol
        )
        not_converged += int(not ok)
        theta[k] = th
    samples = SCALE * normalise(theta, fit.components, fit.reference, fit.centre) + BASE
    lower, upper = percentile_bounds(samples, confidence)
    return CrowdIntervals(lower, upper, samples, rounds, confidence, not_converged)


def crowd_sandwich(cells: CrowdCells, fit: CrowdFit, *, confidence: float = 0.95) -> CrowdIntervals:
    """Normal intervals of the scores from the sandwich clustered by rater: the analytic counterpart of
    ``crowd_bootstrap``, for boards where rerunning the alternating fit every round costs too much.

    The scores solve the weighted Bradley-Terry estimating equation ``sum_c v_c (w_lo - tot p) (e_lo -
    e_hi) = prior terms`` with the cell weights ``v_c`` (``fit.cell_weight``) held at their estimates.
    Bread: its negative Jacobian ``H`` (the weighted Laplacian plus the prior), as the fit's Newton
    steps use it. Meat: ``sum_r U_r U_r^T`` with ``U_r`` rater ``r``'s summed score (a rater's votes move
    together, as the bootstrap over raters resamples them), times ``R / (R - 1)`` for the few-clusters
    bias (CR1). ``cov = H^-1 M H^-1`` (with no prior the pseudo-inverse along each component's constant
    vector), normalised as the scores are; ``score +- z SCALE sqrt(diag)``.

    What it leaves out: the spread of the weights themselves (each is estimated from the rater's other
    votes). The bootstrap reruns that estimation; against it the sandwich's standard errors are compared
    in ``tests/ranking/test_crowd_sandwich.py`` (within 20% on a campaign with unreliable raters)."""
    if not 0.0 < confidence < 1.0:
        raise ValueError("confidence must lie strictly between 0 and 1")
    n = cells.n_competitors
    r = cells.n_raters
    theta = fit.theta_raw
    v = fit.cell_weight
    d = theta[cells.lo] - theta[cells.hi]
    p = expit(d)
    tot = cells.w_lo + cells.w_hi
    s = v * (cells.w_lo - tot * p)
    size = r * n
    scores = (
        weighted_bincount(cells.rater * n + cells.lo, s, minlength=size)
        - weighted_bincount(cells.rater * n + cells.hi, s, minlength=size)
    ).reshape(r, n)
    meat = scores.T @ scores * (r / (r - 1) if r > 1 else 1.0)
    bread = laplacian(n, cells.lo, cells.hi, v * tot * p * (1.0 - p))
    if fit.prior_games > 0:
        p0 = expit(theta)
        bread[np.diag_indices(n)] += fit.prior_games * p0 * (1.0 - p0)
        bread_inv = np.linalg.inv(bread)
    else:
        j = _null_projector(fit.components)
        bread_inv = np.linalg.inv(bread + j) - j
    cov = bread_inv @ meat @ bread_inv
    nm = normalisation_matrix(fit.components, fit.reference, fit.centre)
    se = SCALE * np.sqrt(np.clip(np.diag(nm @ cov @ nm.T), 0.0, None))
    z = float(norm.ppf(0.5 + confidence / 2.0))
    return CrowdIntervals(
        fit.scores - z * se, fit.scores + z * se, np.zeros((0, n)), 0, confidence, 0, method="rater_sandwich", se=se
    )
