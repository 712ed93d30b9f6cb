"""Position and pair-frequency effects: Bradley-Terry on votes kept in the orientation they were shown.

Everything else in this package folds a pair's votes onto ``lo < hi`` (``aggregate.canonical_pairs``): the
fit cannot see which side a competitor was shown on. Here the votes are grouped by *ordered* pair
``(left, right)`` (``oriented_counts``), which is what two questions need.

**Position (a home advantage for the left side).** ``d = theta_left - theta_right + h``; with ties counted
half a win, ``P(left wins) = sigmoid(d)``; under Davidson's tie model ``P(left) : P(right) : P(tie) =
e^{d/2} : e^{-d/2} : nu``. ``h`` is on the scores' natural-log scale: ``SCALE * h`` score points, and two
equally strong competitors split their votes ``sigmoid(h) : 1 - sigmoid(h)`` in favour of the left side.
Fitted jointly with the strengths by the package's damped Newton (the same virtual-tie prior of one game
on each strength, and one on ``h``, so a record where the left side won every vote keeps a finite
estimate); its interval is the **profile likelihood** interval of ``h`` (``profile.profile_bounds``, the
strengths refitted at every point), with the boundary rule for a side the profile cannot close.

``h`` is *not estimable* when the sides are confounded with the strengths: exactly when some potential
``phi`` over the competitors has ``phi_left - phi_right = 1`` for every shown ordered pair (then
``theta + t phi, h - t`` fits the votes equally well for every ``t``). No pair shown both ways is
necessary for that; it is also sufficient on a tree of pairs (each shown one way), while a cycle of pairs
shown with more pairs one way round than the other identifies ``h`` again (``position_confounded``). It is
not estimable either when no counted vote is decisive (all ties): no vote then says which side wins.

**Pair frequency.** A pair shown far more often than the others dominates a Bradley-Terry fit wherever
the model does not hold exactly (a pair-specific effect: one model is good at exactly what the other is
bad at). Each unordered pair's votes get the weight ``w = c_bar / c_pair`` (``c_bar`` the mean count over
the pairs between shown competitors, ``c_pair`` the pair's counted votes; a pair with a competitor hidden
for too few votes keeps ``w = 1``), trimmed at ``WEIGHT_TRIM`` and rescaled so the weights of the votes sum
to the votes: every pair then counts as if it had been shown equally often,
which is the estimand of a balanced design. The weighted fit is a pseudo-likelihood, so its intervals
are **sandwich** intervals built from the per-vote scores with the squared weights (the robust covariance
of a weighted estimating equation); ``effective_votes`` (Kish: ``(sum w)^2 / sum w^2``) says how much
information the weights cost. Sides the votes cannot bound stay open (the win digraph does not depend on
the weights), and a record the sandwich cannot see (one-sided, thin) gets at least the width of the
unweighted profile interval, as in the board's other views.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike, NDArray
from scipy.sparse.csgraph import breadth_first_order, connected_components
from scipy.special import expit
from scipy.stats import norm

from .aggregate import BOTH_BAD, LEFT_WINS, RIGHT_WINS, TIE, Cells, aggregate_cells, validate_battles, weighted_bincount
from .bradley_terry import BASE, SCALE, BothBad, BTResult, fit_bradley_terry, normalisation_matrix
from .intervals import boundary_intervals, sandwich_intervals
from .newton import damped_newton
from .profile import profile_bounds
from .ranks import RankRanges, rank_ranges

__all__ = [
    "CONFOUNDED_REASON",
    "FitSide",
    "NO_DECISIVE_REASON",
    "WEIGHT_TRIM",
    "OrientedCounts",
    "OrientedFit",
    "PairFrequencyResult",
    "PositionCounts",
    "PositionResult",
    "fit_oriented",
    "fit_pair_frequency",
    "fit_position",
    "oriented_counts",
    "pair_counts",
    "position_confounded",
    "position_counts",
]

TieModel = Literal["half", "davidson"]

# A pair shown under a tenth of the mean is up-weighted at most tenfold: one vote of a rare pair must not
# count as a hundred (weight trimming; the trimmed pairs are counted in the result).
WEIGHT_TRIM = 10.0
# The fraction of the fitted prior kept in the likelihood whose profile bounds h (as for the levels:
# ``intervals.PROFILE_PRIOR_FRACTION``; the prior keeps the estimate finite but is not evidence).
PROFILE_PRIOR_FRACTION = 0.01

CONFOUNDED_REASON = (
    "not estimable: the sides are confounded with the strengths (every pair was shown in one orientation only, "
    "and no cycle of pairs tells a side advantage from a difference in strength)"
)
NO_DECISIVE_REASON = "not estimable: no counted vote was decisive (all ties), so no vote says which side wins"


@dataclass(frozen=True)
class OrientedCounts:
    """Votes per ordered pair ``(left, right)``, one row per pair shown in that orientation: (weighted)
    left wins, right wins and ties (both-bad counted as a tie, or dropped), and the sums of the squared
    weights (``*_sq``; equal to the counts when every vote weighs 1) for the sandwich."""

    n_competitors: int
    left: NDArray[np.int64]
    right: NDArray[np.int64]
    wins_left: NDArray[np.float64]
    wins_right: NDArray[np.float64]
    ties: NDArray[np.float64]
    wins_left_sq: NDArray[np.float64]
    wins_right_sq: NDArray[np.float64]
    ties_sq: NDArray[np.float64]

    @property
    def n_rows(self) -> int:
        return int(self.left.shape[0])

    @property
    def total(self) -> NDArray[np.float64]:
        out: NDArray[np.float64] = self.wins_left + self.wins_right + self.ties
        return out

    def weighted(self, weight: NDArray[np.float64]) -> OrientedCounts:
        """Every vote of row ``k`` counted ``weight[k]`` times (sums scale by w, squares by w^2)."""
        w2 = weight * weight
        return OrientedCounts(
            self.n_competitors,
            self.left,
            self.right,
            self.wins_left * weight,
            self.wins_right * weight,
            self.ties * weight,
            self.wins_left_sq * w2,
            self.wins_right_sq * w2,
            self.ties_sq * w2,
        )

    def battle_arrays(self) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64], NDArray[np.float64]]:
        """``(a, b, outcome, weight)``: one row per (ordered pair, outcome) with its summed weight, for the
        package's unordered fits (``aggregate_cells``); ties come back as TIE."""
        a = np.concatenate([self.left] * 3)
        b = np.concatenate([self.right] * 3)
        outcome = np.repeat(np.array([LEFT_WINS, RIGHT_WINS, TIE], dtype=np.int64), self.n_rows)
        weight = np.concatenate([self.wins_left, self.wins_right, self.ties])
        keep = weight > 0
        return a[keep], b[keep], outcome[keep], weight[keep]


def oriented_counts(
    a: ArrayLike,
    b: ArrayLike,
    outcome: ArrayLike,
    *,
    n_competitors: int | None = None,
    count: ArrayLike | None = None,
    both_bad: BothBad = "tie",
) -> OrientedCounts:
    """Group votes (``a`` shown left, ``b`` right; ``count``: each row's multiplicity when already grouped)
    by ordered pair, keeping the orientation. Linear in the rows."""
    bt = validate_battles(a, b, outcome, n_competitors=n_competitors)
    n = bt.n_competitors
    c = np.ones(bt.a.shape[0]) if count is None else np.asarray(count, dtype=np.float64).ravel()
    if c.shape[0] != bt.a.shape[0]:
        raise ValueError("count must have one entry per row")
    if both_bad not in ("tie", "drop"):
        raise ValueError("both_bad must be 'tie' or 'drop'")
    cls = np.where(bt.outcome == BOTH_BAD, TIE if both_bad == "tie" else -1, bt.outcome)
    used = (cls >= 0) & (c > 0)
    key = bt.a[used] * n + bt.b[used]
    uniq, row = np.unique(key, return_inverse=True)
    m = int(uniq.shape[0])
    sums = [weighted_bincount(row, np.where(cls[used] == k, c[used], 0.0), minlength=m) for k in range(3)]
    return OrientedCounts(
        n,
        (uniq // n).astype(np.int64),
        (uniq % n).astype(np.int64),
        sums[0],
        sums[1],
        sums[2],
        sums[0].copy(),
        sums[1].copy(),
        sums[2].copy(),
    )


def pair_counts(
    oc: OrientedCounts,
) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.float64], NDArray[np.int64]]:
    """Unordered pairs ``(lo, hi)`` with their counted votes, and each oriented row's pair index."""
    n = oc.n_competitors
    lo = np.minimum(oc.left, oc.right)
    hi = np.maximum(oc.left, oc.right)
    uniq, pair = np.unique(lo * n + hi, return_inverse=True)
    count = weighted_bincount(pair, oc.total, minlength=int(uniq.shape[0]))
    return (uniq // n).astype(np.int64), (uniq % n).astype(np.int64), count, pair.astype(np.int64)


def position_confounded(oc: OrientedCounts) -> bool:
    """True when ``h`` is not identified: a potential ``phi`` with ``phi_left - phi_right = 1`` on every row
    exists (then the column of ``h`` lies in the span of the strengths' columns). Built by one
    breadth-first pass per component of the comparison graph, then checked on every row."""
    n = oc.n_competitors
    if oc.n_rows == 0:
        return True
    # phi_u - phi_v = sign for an edge stored at [u, v]; a pair shown both ways gives both +1 and -1 at
    # [u, v], which the sum of duplicates turns into 0 (no potential can satisfy it: caught by the check).
    rows = np.concatenate([oc.left, oc.right])
    cols = np.concatenate([oc.right, oc.left])
    sign = sp.csr_matrix((np.concatenate([np.ones(oc.n_rows), -np.ones(oc.n_rows)]), (rows, cols)), shape=(n, n))
    graph = sp.csr_matrix((np.ones(2 * oc.n_rows), (rows, cols)), shape=(n, n))
    n_comp, comp = connected_components(graph, directed=False)
    phi = np.zeros(n)
    for c in range(n_comp):
        root = int(np.flatnonzero(comp == c)[0])
        order, pred = breadth_first_order(graph, root, directed=False, return_predecessors=True)
        for v in order[1:]:
            u = int(pred[v])
            phi[v] = phi[u] - float(sign[u, v])
    return bool(np.allclose(phi[oc.left] - phi[oc.right], 1.0))


@dataclass(frozen=True)
class OrientedLikelihood:
    """Log-likelihood of ``x = (theta (n), [h], [eta = log nu])`` on oriented rows, with the virtual-tie
    prior of ``prior`` games on each strength and on ``h`` (``eta`` unpenalised, as in ``davidson``)."""

    oc: OrientedCounts
    ties: TieModel
    with_h: bool
    prior: float

    @property
    def n(self) -> int:
        return self.oc.n_competitors

    @property
    def h_index(self) -> int | None:
        return self.n if self.with_h else None

    @property
    def eta_index(self) -> int | None:
        return self.n + int(self.with_h) if self.ties == "davidson" else None

    @property
    def dim(self) -> int:
        return self.n + int(self.with_h) + int(self.ties == "davidson")

    def _d(self, x: NDArray[np.float64]) -> NDArray[np.float64]:
        d: NDArray[np.float64] = x[self.oc.left] - x[self.oc.right]
        if self.with_h:
            d = d + x[self.n]
        return d

    def _prior(self, x: NDArray[np.float64]) -> NDArray[np.float64]:
        """The penalised coordinates: the strengths, and h."""
        return x[: self.n + int(self.with_h)]

    def _parts(
        self, x: NDArray[np.float64]
    ) -> tuple[float, NDArray[np.float64], NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
        """Value, and per row: dL/dd, -d2L/dd2, -d2L/dd deta; and (Davidson) the tie probability."""
        oc = self.oc
        d = self._d(x)
        tot = oc.total
        if self.ties == "half":
            p = expit(d)
            y = oc.wins_left + 0.5 * oc.ties
            sp_ = np.maximum(d, 0.0) + np.log1p(np.exp(-np.abs(d)))
            value = float(y @ d - tot @ sp_)
            return value, y - tot * p, tot * p * (1.0 - p), np.zeros_like(d), np.zeros_like(d)
        eta = float(x[self.eta_index])
        z = np.stack([0.5 * d, -0.5 * d, np.full_like(d, eta)])
        top = z.max(axis=0)
        lse = top + np.log(np.exp(z - top).sum(axis=0))
        q = np.exp(z - lse)
        diff = q[0] - q[1]
        value = float((oc.wins_left - oc.wins_right) @ (0.5 * d) + oc.ties.sum() * eta - tot @ lse)
        g_d = 0.5 * (oc.wins_left - oc.wins_right) - 0.5 * tot * diff
        h_dd = tot * (0.25 * (q[0] + q[1]) - 0.25 * diff * diff)
        h_de = -0.5 * tot * q[2] * diff
        return value, g_d, h_dd, h_de, q[2]

    def value(self, x: NDArray[np.float64]) -> float:
        v = self._parts(x)[0]
        t = self._prior(x)
        return v + self.prior * float((0.5 * t - np.logaddexp(0.0, t)).sum())

    def objective(self, x: NDArray[np.float64]) -> tuple[float, NDArray[np.float64], NDArray[np.float64]]:
        value, g_d, h_dd, h_de, q_tie = self._parts(x)
        g = self._spread(g_d)
        hess = self.assemble(h_dd, h_de, float(self.oc.total @ (q_tie - q_tie**2)))
        if self.eta_index is not None:
            g[self.eta_index] = float(self.oc.ties.sum() - self.oc.total @ q_tie)
        t = self._prior(x)
        p0 = expit(t)
        k = t.shape[0]
        g[:k] += self.prior * (0.5 - p0)
        hess[np.arange(k), np.arange(k)] += self.prior * p0 * (1.0 - p0)
        return value + self.prior * float((0.5 * t - np.logaddexp(0.0, t)).sum()), g, hess

    def _spread(self, per_row: NDArray[np.float64]) -> NDArray[np.float64]:
        """A per-row derivative in d as a gradient over x (d = theta_l - theta_r [+ h])."""
        n, oc = self.n, self.oc
        g = np.zeros(self.dim)
        g[:n] = weighted_bincount(oc.left, per_row, minlength=n) - weighted_bincount(oc.right, per_row, minlength=n)
        if self.with_h:
            g[n] = float(per_row.sum())
        return g

    def assemble(self, a_dd: NDArray[np.float64], a_de: NDArray[np.float64], a_ee: float) -> NDArray[np.float64]:
        """Sum over rows of ``a_dd grad(d) grad(d)^T + a_de (grad(d) e_eta^T + e_eta grad(d)^T)`` plus
        ``a_ee e_eta e_eta^T``: the shape of both the information and the sandwich's meat. The strengths'
        block is a graph Laplacian (one bincount over the rows: a pair shown both ways adds up); the h and
        eta rows are signed sums per competitor."""
        n, oc, dim = self.n, self.oc, self.dim
        out = np.zeros((dim, dim))
        w = weighted_bincount(oc.left * n + oc.right, a_dd, minlength=n * n).reshape(n, n)
        w = w + w.T
        out[:n, :n] = np.diag(w.sum(axis=1)) - w
        e = self.eta_index
        if self.with_h:
            col = weighted_bincount(oc.left, a_dd, minlength=n) - weighted_bincount(oc.right, a_dd, minlength=n)
            out[:n, n] = out[n, :n] = col
            out[n, n] = float(a_dd.sum())
            if e is not None:
                out[n, e] = out[e, n] = float(a_de.sum())
        if e is not None:
            col = weighted_bincount(oc.left, a_de, minlength=n) - weighted_bincount(oc.right, a_de, minlength=n)
            out[:n, e] = out[e, :n] = col
            out[e, e] = a_ee
        return out

    def meat(self, x: NDArray[np.float64]) -> NDArray[np.float64]:
        """Sum over votes of (weight x score)(weight x score)^T: the sandwich's middle, exact for
        independent votes (the votes of one (row, outcome) share their score)."""
        oc = self.oc
        d = self._d(x)
        squares = (oc.wins_left_sq, oc.wins_right_sq, oc.ties_sq)
        if self.ties == "half":
            p = expit(d)
            s_d = [1.0 - p, -p, 0.5 - p]
            m_dd = sum(w * s * s for w, s in zip(squares, s_d, strict=True))
            return self.assemble(np.asarray(m_dd, dtype=np.float64), np.zeros_like(d), 0.0)
        _, _, _, _, q_tie = self._parts(x)
        eta = float(x[self.eta_index])
        z = np.stack([0.5 * d, -0.5 * d, np.full_like(d, eta)])
        q = np.exp(z - z.max(axis=0))
        q = q / q.sum(axis=0)
        mean_d = 0.5 * (q[0] - q[1])
        s_d = [0.5 - mean_d, -0.5 - mean_d, -mean_d]
        s_e = [-q_tie, -q_tie, 1.0 - q_tie]
        m_dd = sum(w * s * s for w, s in zip(squares, s_d, strict=True))
        m_de = sum(w * s * t for w, s, t in zip(squares, s_d, s_e, strict=True))
        m_ee = float(sum((w * t * t).sum() for w, t in zip(squares, s_e, strict=True)))
        return self.assemble(np.asarray(m_dd, dtype=np.float64), np.asarray(m_de, dtype=np.float64), m_ee)


@dataclass(frozen=True)
class OrientedFit:
    x: NDArray[np.float64]
    theta: NDArray[np.float64]  # raw log-strengths (not normalised)
    h: float | None
    likelihood: OrientedLikelihood
    information: NDArray[np.float64]  # negative Hessian at x (prior included)
    converged: bool
    iterations: int


def fit_oriented(
    oc: OrientedCounts, *, ties: TieModel = "half", position: bool = False, prior_games: float = 1.0
) -> OrientedFit:
    """Maximise the oriented likelihood (``position``: with the left-side term ``h``)."""
    if prior_games <= 0:
        raise ValueError("prior_games must be > 0 (it keeps one-sided records finite)")
    lik = OrientedLikelihood(oc, ties, position, float(prior_games))
    x, iterations, converged = damped_newton(
        np.zeros(lik.dim), lik.objective, lik.value, max_iter=200, tol=1e-9, line_search_above=1e-2
    )
    _, _, info = lik.objective(x)
    return OrientedFit(
        x=x,
        theta=x[: oc.n_competitors].copy(),
        h=float(x[oc.n_competitors]) if position else None,
        likelihood=lik,
        information=info,
        converged=converged,
        iterations=iterations,
    )


def _unordered(oc: OrientedCounts, both_bad: BothBad, reference: int | None) -> tuple[BTResult, Cells]:
    """The board's half-win Bradley-Terry fit of the same votes with the sides folded (components, the
    centre, open sides and who needs the profile come from it), and its cells. ``oc`` unweighted: whole
    counts."""
    a, b, outcome, weight = oc.battle_arrays()
    cells = aggregate_cells(a, b, outcome, n_competitors=oc.n_competitors, count=np.rint(weight))
    return fit_bradley_terry(cells, both_bad=both_bad, reference=reference), cells


@dataclass(frozen=True)
class PositionCounts:
    """What the votes say about the sides without a model: (weighted) left wins, right wins, ties; the
    unordered pairs shown, those shown both ways, and the votes of those."""

    wins_left: float
    wins_right: float
    ties: float
    pairs: int
    pairs_both_ways: int
    votes_in_pairs_both_ways: float


@dataclass(frozen=True)
class PositionResult:
    """``h`` (natural log-odds of the left side at equal strength) with its profile interval, or the reason
    it is not estimable; the strengths fitted with and without it, on the board's published scale."""

    estimable: bool
    reason: str | None
    h: float | None
    lower: float | None  # None: an open side (or not estimable)
    upper: float | None
    lower_open: bool
    upper_open: bool
    scores_adjusted: NDArray[np.float64] | None
    scores_plain: NDArray[np.float64] | None
    components: NDArray[np.int64] | None
    counts: PositionCounts
    converged: bool


def position_counts(oc: OrientedCounts) -> PositionCounts:
    """The sides' record without a model (``PositionCounts``)."""
    lo, _, _, pair = pair_counts(oc)
    ways = np.bincount(pair, minlength=lo.shape[0])
    return PositionCounts(
        wins_left=float(oc.wins_left.sum()),
        wins_right=float(oc.wins_right.sum()),
        ties=float(oc.ties.sum()),
        pairs=int(lo.shape[0]),
        pairs_both_ways=int((ways == 2).sum()),
        votes_in_pairs_both_ways=float(oc.total[ways[pair] == 2].sum()),
    )


def fit_position(
    oc: OrientedCounts,
    *,
    ties: TieModel = "half",
    both_bad: BothBad = "tie",
    confidence: float = 0.95,
    reference: int | None = None,
    prior_games: float = 1.0,
) -> PositionResult:
    """The left-side advantage ``h`` with its profile-likelihood interval, and the scores adjusted for it
    (normalised as the board's: per component, on its centre or the reference). ``both_bad`` only labels
    how ``oc`` was built (the unordered fit that supplies components and centre reads the same rows)."""
    counts = position_counts(oc)
    wl, wr, wt = counts.wins_left, counts.wins_right, counts.ties

    def missing(reason: str) -> PositionResult:
        return PositionResult(False, reason, None, None, None, False, False, None, None, None, counts, converged=True)

    if oc.n_rows == 0:
        return missing("not estimable: no counted votes")
    if wl + wr == 0:
        return missing(NO_DECISIVE_REASON)
    if position_confounded(oc):
        return missing(CONFOUNDED_REASON)
    model: TieModel = ties if (ties == "half" or wt > 0) else "half"
    fit = fit_oriented(oc, ties=model, position=True, prior_games=prior_games)
    plain = fit_oriented(oc, ties=model, position=False, prior_games=prior_games)
    base, _ = _unordered(oc, both_bad, reference)
    nm = normalisation_matrix(base.components, reference, base.bounds.centre)
    # The profile of the likelihood itself (a hundredth of the prior), from its own maximum.
    lik = OrientedLikelihood(oc, model, True, prior_games * PROFILE_PRIOR_FRACTION)
    x_hat, _, _ = damped_newton(fit.x, lik.objective, lik.value, max_iter=200, tol=1e-9)
    a = np.zeros(lik.dim)
    a[oc.n_competitors] = 1.0
    _, _, info = lik.objective(x_hat)
    se = float(np.sqrt(max(np.linalg.inv(info)[oc.n_competitors, oc.n_competitors], 1e-12)))
    lower, upper = profile_bounds(lik, x_hat, a, confidence=confidence, scale_hint=se)
    if np.isinf(lower) != np.isinf(upper):
        # One side open: the finite one follows the boundary rule (profile.deviance_cutoff).
        lower, upper = profile_bounds(
            lik,
            x_hat,
            a,
            confidence=confidence,
            scale_hint=se,
            need_lower=not np.isinf(lower),
            need_upper=not np.isinf(upper),
            one_sided=True,
        )
    assert fit.h is not None
    return PositionResult(
        estimable=True,
        reason=None,
        h=fit.h,
        lower=None if np.isinf(lower) else float(lower),
        upper=None if np.isinf(upper) else float(upper),
        lower_open=bool(np.isinf(lower)),
        upper_open=bool(np.isinf(upper)),
        scores_adjusted=SCALE * (nm @ fit.theta) + BASE,
        scores_plain=SCALE * (nm @ plain.theta) + BASE,
        components=base.components,
        converged=fit.converged and plain.converged,
        counts=counts,
    )


@dataclass(frozen=True)
class FitSide:
    """One column of the pair-frequency comparison: scores with intervals and rank ranges."""

    scores: NDArray[np.float64]
    lower: NDArray[np.float64]  # -inf: open
    upper: NDArray[np.float64]  # +inf: open
    ranks: RankRanges
    converged: bool


@dataclass(frozen=True)
class PairFrequencyResult:
    weighted: FitSide
    unweighted: FitSide
    components: NDArray[np.int64]
    profiled: NDArray[np.bool_]
    pair_lo: NDArray[np.int64]
    pair_hi: NDArray[np.int64]
    pair_count: NDArray[np.float64]
    pair_weight: NDArray[np.float64]  # per vote of the pair, after trimming and rescaling
    mean_count: float
    trimmed: int
    effective_votes: float
    votes: float


def _side(
    oc: OrientedCounts,
    model: TieModel,
    nm: NDArray[np.float64],
    base: BTResult,
    widen_lower: NDArray[np.float64],
    widen_upper: NDArray[np.float64],
    shown: NDArray[np.bool_],
    z: float,
    prior_games: float,
) -> FitSide:
    n = oc.n_competitors
    fit = fit_oriented(oc, ties=model, prior_games=prior_games)
    bread = np.linalg.inv(fit.information)
    cov = (bread @ fit.likelihood.meat(fit.x) @ bread)[:n, :n]
    cov_norm = nm @ cov @ nm.T
    scores = SCALE * (nm @ fit.theta) + BASE
    se = SCALE * np.sqrt(np.clip(np.diag(cov_norm), 0.0, None))
    need = base.bounds.needs_profile & shown
    lower = np.where(need, np.minimum(scores - z * se, scores - widen_lower), scores - z * se)
    upper = np.where(need, np.maximum(scores + z * se, scores + widen_upper), scores + z * se)
    lower = np.where(base.bounds.open_lower, -np.inf, lower)
    upper = np.where(base.bounds.open_upper, np.inf, upper)
    best = np.zeros(n, dtype=np.int64)
    worst = np.zeros(n, dtype=np.int64)
    for c in np.unique(base.components[shown]):
        mask = shown & (base.components == c)
        r = rank_ranges(lower, upper, mask)
        best[mask], worst[mask] = r.best[mask], r.worst[mask]
    return FitSide(scores, lower, upper, RankRanges(best, worst, shown), fit.converged)


def fit_pair_frequency(
    oc: OrientedCounts,
    *,
    shown: NDArray[np.bool_],
    ties: TieModel = "half",
    both_bad: BothBad = "tie",
    confidence: float = 0.95,
    reference: int | None = None,
    trim: float = WEIGHT_TRIM,
    prior_games: float = 1.0,
) -> PairFrequencyResult:
    """The board refitted with every unordered pair weighted inversely to how often it was shown, beside
    the same fit unweighted (same tie model, same sandwich intervals, same normalisation), with rank
    ranges among ``shown`` within each component. See the module docstring for the weights."""
    if oc.n_rows == 0:
        raise ValueError("no counted votes")
    lo, hi, count, pair = pair_counts(oc)
    # Balanced among the pairs of shown competitors; a pair with a hidden competitor (a newcomer's handful
    # of votes) keeps its votes at the weight of a pair of mean count rather than being blown up.
    balanced = shown[lo] & shown[hi]
    if not balanced.any():
        balanced = np.ones(lo.shape[0], dtype=bool)
    mean_count = float(count[balanced].mean())
    raw = np.where(balanced, mean_count / count, 1.0)
    trimmed = int((raw > trim).sum())
    per_pair = np.minimum(raw, trim)
    votes = float(count.sum())
    per_pair = per_pair * votes / float(per_pair @ count)  # the weights of the votes sum to the votes
    row_weight = per_pair[pair]
    weighted = oc.weighted(row_weight)
    effective = float(votes**2 / (per_pair**2 @ count))
    # Davidson's tie parameter needs ties and decisive votes both (all ties: it diverges, the information is
    # singular); without either, the half-win fit, which then gives the same scores.
    decisive = float(oc.wins_left.sum() + oc.wins_right.sum())
    model: TieModel = ties if (ties == "half" or (float(oc.ties.sum()) > 0 and decisive > 0)) else "half"
    base, cells = _unordered(oc, both_bad, reference)
    nm = normalisation_matrix(base.components, reference, base.bounds.centre)
    z = float(norm.ppf(0.5 + confidence / 2.0))
    # The unweighted profile interval's distances from its estimate: the least width a record the sandwich
    # cannot see gets (as in the style and reliability views).
    raw_iv = boundary_intervals(
        cells,
        base,
        *_sandwich_bounds(cells, base, confidence),
        confidence=confidence,
        only=shown,
    )
    with np.errstate(invalid="ignore"):
        widen_lower = np.nan_to_num(base.scores - raw_iv.lower, posinf=0.0, nan=0.0)
        widen_upper = np.nan_to_num(raw_iv.upper - base.scores, posinf=0.0, nan=0.0)
    sides = [
        _side(counts, model, nm, base, widen_lower, widen_upper, shown, z, prior_games) for counts in (weighted, oc)
    ]
    return PairFrequencyResult(
        weighted=sides[0],
        unweighted=sides[1],
        components=base.components,
        profiled=base.bounds.needs_profile & shown,
        pair_lo=lo,
        pair_hi=hi,
        pair_count=count,
        pair_weight=per_pair,
        mean_count=mean_count,
        trimmed=trimmed,
        effective_votes=effective,
        votes=votes,
    )


def _sandwich_bounds(cells: Cells, fit: BTResult, confidence: float) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    iv = sandwich_intervals(cells, fit, confidence=confidence)
    return iv.lower, iv.upper


def left_win_probability(h: float | None) -> float | None:
    """``sigmoid(h)``: the share of the votes between two equally strong competitors the left side takes
    (ties half), or ``None``."""
    return None if h is None else float(expit(h))
