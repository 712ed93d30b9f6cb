"""Bradley-Terry fitted on aggregated (pair, outcome) cells.

Model: ``P(i beats j) = s_i / (s_i + s_j) = sigmoid(theta_i - theta_j)`` with ``theta = ln s``.
Published scores are ``400 * log10(s) + 1000 = SCALE * theta + BASE`` with ``SCALE = 400 / ln 10``,
so a 400-point gap means 10:1 odds, as on the familiar Elo scale.

Why these choices:

* **Cells, not battles.** The likelihood only depends on how much each side of each pair won, so
  the fit runs on per-pair sums derived from the cells (see ``aggregate.py``).
* **Ties count as half a win each side** (a fractional-target logistic likelihood). This keeps the
  estimator a proper maximiser of a concave function and pulls the two sides toward each other,
  which is exactly what a tie says. ``both_bad`` is either counted as a tie (default) or dropped;
  the choice is returned in ``params`` so every published snapshot records it.
* **Newton with the Laplacian structure.** The negative Hessian of the BT log-likelihood is the
  graph Laplacian of the comparison graph with edge weights ``n_ij p_ij (1 - p_ij)``; with a few
  hundred competitors it is a small dense matrix, and Newton (``newton.damped_newton``, shared by
  every fit) converges in a handful of steps. Bootstrap rounds reuse its Cholesky factor
  (``intervals._RoundSolver``).
* **A small stated prior** (``prior_games``): every competitor plays that many virtual *tied* games
  against a virtual opponent of log-strength 0. Without it a competitor that never won (or never
  lost) has its maximum-likelihood score at minus (plus) infinity. One virtual game moves a
  competitor with 500 real battles by well under 1% of its gap to the mean, so it only matters
  where the data cannot decide. ``prior_games=0`` gives the plain MLE (used in the closed-form
  tests); then identifiability comes from fixing the mean of each component, not from a ridge.
* **Disconnected comparison graphs** are detected; scores are normalised within each connected
  component (geometric mean strength 1, i.e. mean score 1000), and are only comparable inside one.
  With ``reference`` given, that competitor is pinned to exactly 1000 in its component instead.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Literal

import numpy as np
import scipy.sparse as sp
from numpy.typing import NDArray

from .aggregate import BOTH_BAD, LEFT_WINS, RIGHT_WINS, Cells, weighted_bincount
from .graph import Boundedness, boundedness, components
from .newton import damped_newton
from .profile import BTLikelihood

SCALE: float = 400.0 / float(np.log(10.0))
BASE: float = 1000.0

BothBad = Literal["tie", "drop"]

# Up to this many possible pairs (n * n: 4,096 competitors) the cells' pairs are numbered through a table.
_DENSE_PAIRS = 1 << 24

# Newton steps larger than this (in log-strength) are checked by a line search.
_LINE_SEARCH_ABOVE = 1e-2


@dataclass(frozen=True)
class PairDesign:
    """Unique competitor pairs of a set of cells and how cells map onto them.

    ``cell_y`` is the lo side's share of a win for each cell (1, 0 or 0.5); ``cell_used`` is False
    for both_bad cells when they are dropped. ``inc_t`` (n x P) is the signed incidence matrix
    transposed (+1 at lo, -1 at hi): ``inc_t @ r`` turns per-pair residuals into a gradient.
    """

    n_competitors: int
    lo: NDArray[np.int64]
    hi: NDArray[np.int64]
    cell_pair: NDArray[np.int64]
    cell_y: NDArray[np.float64]
    cell_used: NDArray[np.bool_]
    inc_t: sp.csr_matrix
    absinc_t: sp.csr_matrix

    @property
    def n_pairs(self) -> int:
        return int(self.lo.shape[0])

    def pair_wins(self, cell_weight: NDArray[np.float64]) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """Per-pair (lo wins, hi wins), ties split half/half, from one vector of cell weights."""
        cw = np.where(self.cell_used, cell_weight, 0.0)
        p = self.n_pairs
        lo_share = cw * self.cell_y
        w_lo = weighted_bincount(self.cell_pair, lo_share, minlength=p)
        # cw - cw * y is cw * (1 - y) exactly for y in {0, 0.5, 1} (and cw >= 0), written over cw: two arrays the
        # size of the cells at a time, not four (ten million cells by prompt at ten million votes).
        cw -= lo_share
        del lo_share
        w_hi = weighted_bincount(self.cell_pair, cw, minlength=p)
        return w_lo, w_hi


def pair_design(cells: Cells, both_bad: BothBad = "tie") -> PairDesign:
    """Build the pair-level view of ``cells`` for the given both_bad policy."""
    if both_bad not in ("tie", "drop"):
        raise ValueError("both_bad must be 'tie' or 'drop'")
    n = cells.n_competitors
    pair_key = cells.lo * n
    pair_key += cells.hi
    if n * n <= _DENSE_PAIRS:
        # ``np.unique``'s sorted pairs and inverse in linear time: one pass over the cells (ten million cells
        # by prompt at ten million votes, read by every estimator of the raw board), no sort; each cell's key
        # becomes its pair's number in place.
        present = np.bincount(pair_key, minlength=n * n) > 0
        uniq = np.flatnonzero(present)
        cell_pair = np.take(np.cumsum(present) - 1, pair_key, out=pair_key, mode="clip")
    else:
        uniq, cell_pair = np.unique(pair_key, return_inverse=True)
        del pair_key
    lo = (uniq // n).astype(np.int64)
    hi = (uniq % n).astype(np.int64)
    # The lo side's share of a win: 1 for a win, 0 for a loss, 0.5 for a tie and for both_bad (when it counts).
    y = np.full(cells.n_cells, 0.5)
    y[cells.outcome == LEFT_WINS] = 1.0
    y[cells.outcome == RIGHT_WINS] = 0.0
    used = np.ones(cells.n_cells, dtype=bool) if both_bad == "tie" else cells.outcome != BOTH_BAD
    p = lo.shape[0]
    rows = np.concatenate([lo, hi])
    cols = np.concatenate([np.arange(p), np.arange(p)])
    inc_t = sp.csr_matrix((np.concatenate([np.ones(p), -np.ones(p)]), (rows, cols)), shape=(n, p))
    absinc_t = sp.csr_matrix((np.ones(2 * p), (rows, cols)), shape=(n, p))
    return PairDesign(n, lo, hi, cell_pair.astype(np.int64, copy=False), y, used, inc_t, absinc_t)


@dataclass(frozen=True)
class FitParams:
    """Every modelling choice of a fit, recorded with each snapshot (``as_dict`` for JSON)."""

    model: str
    both_bad: BothBad
    prior_games: float
    reference: int | None
    normalisation: str
    ties: str = "half_win_each"
    scale: str = "400*log10(strength)+1000"
    features: tuple[str, ...] = ()
    coef_penalty: float = 0.0
    feature_normalisation: str = ""

    def as_dict(self) -> dict[str, object]:
        out = asdict(self)
        out["features"] = list(self.features)
        return out


def _normalisation_label(reference: int | None, bounds: Boundedness) -> str:
    if reference is not None:
        return "reference"
    if bounds.open_upper.any() or bounds.open_lower.any():
        return "geometric_mean_of_strongly_connected_majority_per_component"
    return "geometric_mean_per_component"


@dataclass(frozen=True)
class BTResult:
    """A Bradley-Terry fit.

    ``scores`` are on the 400*log10 + 1000 scale, normalised per component; ``log_strength`` is the
    same in natural-log units (``scores = SCALE * log_strength + BASE``). ``theta_raw`` is the
    optimum before normalisation (bootstrap rounds warm-start from it). ``battles`` is the weighted
    number of battles each competitor has in the fit. ``params`` records every modelling choice.
    """

    scores: NDArray[np.float64]
    log_strength: NDArray[np.float64]
    components: NDArray[np.int64]
    n_components: int
    battles: NDArray[np.float64]
    theta_raw: NDArray[np.float64]
    iterations: int
    converged: bool
    params: FitParams
    bounds: Boundedness

    @property
    def connected(self) -> bool:
        return self.n_components == 1


def comparison_components(design: PairDesign, pair_total: NDArray[np.float64]) -> tuple[int, NDArray[np.int64]]:
    """Connected components of the comparison graph (edges: pairs with positive weight)."""
    return components(design.n_competitors, design.lo, design.hi, pair_total)


def normalisation_matrix(
    components: NDArray[np.int64], reference: int | None = None, centre: NDArray[np.bool_] | None = None
) -> NDArray[np.float64]:
    """Linear map from raw to published log-strengths: subtract the mean of the component's centre
    members (all members by default), or the reference.

    Returned as a matrix so the sandwich covariance can be pushed through it exactly.
    """
    n = components.shape[0]
    c = np.ones(n, dtype=bool) if centre is None else centre
    same = (components[:, None] == components[None, :]) & c[None, :]
    size = same.sum(axis=1)
    norm = np.eye(n) - same / np.maximum(size, 1)[:, None]
    if reference is not None:
        members = components == components[reference]
        norm[members] -= norm[reference]
    out: NDArray[np.float64] = norm
    return out


def normalise(
    theta: NDArray[np.float64],
    components: NDArray[np.int64],
    reference: int | None = None,
    centre: NDArray[np.bool_] | None = None,
) -> NDArray[np.float64]:
    """Normalise raw log-strengths (shape ``(..., n)``) per component; see ``normalisation_matrix``.
    One matrix product over the rounds (``theta @ M.T`` with the sparse-structured ``M``)."""
    n_comp = int(components.max()) + 1 if components.size else 0
    c = np.ones(components.shape[0], dtype=bool) if centre is None else centre
    size = np.maximum(np.bincount(components[c], minlength=n_comp), 1).astype(np.float64)
    flat = theta.reshape(-1, theta.shape[-1])
    # Per-component sums of the centre members for every row at once: flat @ indicator (n x k).
    indicator = np.zeros((components.shape[0], max(n_comp, 1)))
    indicator[np.flatnonzero(c), components[c]] = 1.0
    sums = flat @ indicator
    out = flat - (sums / size)[:, components]
    if reference is not None:
        members = components == components[reference]
        out[:, members] -= out[:, [reference]]
    return out.reshape(theta.shape)


def one_class(cells: Cells, design: PairDesign) -> NDArray[np.bool_]:
    """Competitors all of whose counted votes fell in one class from their side (won, lost, tied)."""
    n = cells.n_competitors
    used = design.cell_used & (cells.weight > 0)
    classes = np.zeros((n, 3), dtype=bool)
    # One class and side at a time, each a mask over the cells (not copies of the used cells' columns: ten
    # million cells by prompt at ten million votes).
    for code, (y_lo, y_hi) in enumerate(((1.0, 0.0), (0.0, 1.0), (0.5, 0.5))):
        classes[cells.lo[used & (design.cell_y == y_lo)], code] = True
        classes[cells.hi[used & (design.cell_y == y_hi)], code] = True
    single: NDArray[np.bool_] = classes.sum(axis=1) == 1
    return single


def _null_projector(components: NDArray[np.int64]) -> NDArray[np.float64]:
    """J = sum over components of 1_c 1_c^T / |c|: fills the Laplacian's null space, not a ridge."""
    same = components[:, None] == components[None, :]
    projector: NDArray[np.float64] = same / same.sum(axis=1)[:, None]
    return projector


def softplus(x: NDArray[np.float64]) -> NDArray[np.float64]:
    """log(1 + e^x) without overflow (several times faster than np.logaddexp(0, x))."""
    return np.maximum(x, 0.0) + np.log1p(np.exp(-np.abs(x)))


def sigmoid(x: NDArray[np.float64], *, out: NDArray[np.float64] | None = None) -> NDArray[np.float64]:
    """1 / (1 + e^-x), as ``scipy.special.expit`` to a few units in the last place, in about a third of its
    time (one vectorised exp and a reciprocal, in place): the hot loops of the bootstrap rounds call it once
    per pass. Where e^-x overflows (x < -709) the result is 0, where expit gives a subnormal. ``out`` (may be
    ``x`` itself) receives the result."""
    out = np.negative(x, out=out)
    with np.errstate(over="ignore"):
        np.exp(out, out=out)
    out += 1.0
    np.reciprocal(out, out=out)
    return out


def fit_bradley_terry(
    cells: Cells,
    *,
    both_bad: BothBad = "tie",
    prior_games: float = 1.0,
    reference: int | None = None,
    max_iter: int = 100,
    tol: float = 1e-5,
) -> BTResult:
    """Fit weighted Bradley-Terry on aggregated cells (see the module docstring for the choices).

    ``prior_games``: virtual tied games per competitor against log-strength 0 (0 = plain MLE; then
    a competitor that never lost or never won has no finite MLE, Newton stops at ``max_iter`` with
    ``converged=False`` and a very large score - keep the default prior for publishing).
    ``reference``: competitor pinned to exactly 1000 within its component (default: geometric mean
    of each component is 1, i.e. mean score 1000).
    """
    if prior_games < 0:
        raise ValueError("prior_games must be >= 0")
    n = cells.n_competitors
    if reference is not None and not 0 <= reference < n:
        raise ValueError("reference must be a competitor id")
    design = pair_design(cells, both_bad)
    w_lo, w_hi = design.pair_wins(cells.weight)
    n_comp, comps = comparison_components(design, w_lo + w_hi)
    bounds = boundedness(n, design.lo, design.hi, w_lo, w_hi, comps, one_class(cells, design), reference)
    null_proj = _null_projector(comps) if prior_games == 0 else None
    lik = BTLikelihood(n, design.lo, design.hi, w_lo, w_hi, float(prior_games), null_proj)
    theta_raw, iters, converged = damped_newton(
        np.zeros(n), lik.objective, lik.value, max_iter=max_iter, tol=tol, line_search_above=_LINE_SEARCH_ABOVE
    )
    log_strength = normalise(theta_raw, comps, reference, bounds.centre)
    tot = w_lo + w_hi
    battles = weighted_bincount(design.lo, tot, minlength=n) + weighted_bincount(design.hi, tot, minlength=n)
    params = FitParams(
        model="bradley_terry",
        both_bad=both_bad,
        prior_games=float(prior_games),
        reference=reference,
        normalisation=_normalisation_label(reference, bounds),
    )
    return BTResult(
        scores=SCALE * log_strength + BASE,
        log_strength=log_strength,
        components=comps,
        n_components=n_comp,
        battles=battles,
        theta_raw=theta_raw,
        iterations=iters,
        converged=converged,
        params=params,
        bounds=bounds,
    )
