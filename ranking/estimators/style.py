"""Style control: Bradley-Terry with answer-style covariates.

Raters prefer longer, better-formatted answers; a model can climb the plain leaderboard by style
alone. Style control fits

    P(left wins) = sigmoid(theta_a - theta_b + beta . x)

where ``x`` is the vector of *normalised style differences* between the two answers, and reports
``theta`` (scores "at equal style") next to ``beta`` (how much each style feature moves a vote).

Features (default names ``STYLE_FEATURES``): answer length in tokens, number of markdown headers,
list items and bold spans. Normalisation of feature f for one battle:

1. difference over sum, ``d = (l - r) / (l + r)``, and ``d = 0`` when both are 0 - bounded in
   [-1, 1], scale free (a 2x longer answer counts the same at 100 or 1,000 tokens), antisymmetric;
2. divided by the standard deviation of ``d`` over the battles (recorded in ``feature_std``), so a
   coefficient is "logit per one standard deviation of the style gap" and features are comparable.
   ``d`` is deliberately **not centred** (its mean is recorded in ``feature_mean`` for diagnostics):
   centring would add a constant to every left-side logit, i.e. smuggle in a position bias, and
   break the exact symmetry under swapping left and right.

Ties count as half a win each side (fractional target 0.5 in the logistic likelihood), both_bad as
a tie (default) or dropped, exactly as in the plain Bradley-Terry fit.

Solver. Rows cannot be collapsed into cells (the features are continuous), so every Newton step
makes one pass over the rows with ``np.bincount`` onto the unique pairs: the competitor block of
the Hessian is the weighted graph Laplacian of the comparison graph (N x N), the cross block is
``N x F`` and the feature block ``F x F``. The (N + F) system is solved densely. There is **no
penalty on the coefficients**: the only regularisation is the same small stated prior on the
competitors as in ``fit_bradley_terry`` (``prior_games`` virtual ties against log-strength 0), and
with ``prior_games=0`` identifiability comes from fixing each component's mean, not from a ridge.
(A widely used library's default L2 penalty applies to the *averaged* loss, which with a million
rows is a huge effective penalty and shrinks the length coefficient about tenfold.)
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike, NDArray
from scipy.special import expit
from scipy.stats import norm

from .aggregate import BOTH_BAD, N_OUTCOMES, validate_battles, weighted_bincount
from .bradley_terry import (
    BASE,
    SCALE,
    BothBad,
    FitParams,
    _null_projector,
    normalisation_matrix,
    normalise,
    softplus,
)
from .graph import components, laplacian
from .intervals import Intervals
from .newton import damped_newton

STYLE_FEATURES: tuple[str, ...] = ("tokens", "headers", "list_items", "bold")

# Steps larger than this (in logit units) are checked by a line search.
_LINE_SEARCH_ABOVE = 1e-2


@dataclass(frozen=True)
class StyleFeatures:
    """Normalised style differences ``x`` (battles x F, left minus right) and their statistics."""

    x: NDArray[np.float64]
    mean: NDArray[np.float64]
    std: NDArray[np.float64]
    names: tuple[str, ...]


def style_differences(left: ArrayLike, right: ArrayLike, *, names: tuple[str, ...] | None = None) -> StyleFeatures:
    """``(l - r) / (l + r)`` (0 when both are 0), divided by its std over battles, not centred.

    A feature with zero spread keeps scale 1 (its column is all zeros and its coefficient is 0).
    """
    d_t, _, mean, std, names = _differences_t(left, right, names)
    return StyleFeatures(d_t.T, mean, std, names)  # a view of the features x battles array


def _differences_t(
    left: ArrayLike, right: ArrayLike, names: tuple[str, ...] | None
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64], NDArray[np.float64], tuple[str, ...]]:
    """``style_differences`` with the normalised differences as features x battles (one contiguous row per
    feature: numpy's reductions and broadcasts over the rows of a battles x 4 matrix run an inner loop of four
    elements, several times slower), a spare array of their shape (arrays of megabytes cost as much to fault in
    fresh as to compute), their mean and std, and the names."""
    lf = np.asarray(left, dtype=np.float64)
    rf = np.asarray(right, dtype=np.float64)
    if lf.ndim == 1:
        lf, rf = lf[:, None], rf[:, None]
    if lf.shape != rf.shape:
        raise ValueError("left and right style matrices must have the same shape")
    if not (np.all(np.isfinite(lf)) and np.all(np.isfinite(rf))):
        raise ValueError("style counts must be finite (a NaN or infinite count would poison every coefficient)")
    if np.any(lf < 0) or np.any(rf < 0):
        raise ValueError("style counts must be non-negative")
    d = np.subtract(lf.T, rf.T, out=np.empty(lf.shape[::-1]))
    total = np.add(lf.T, rf.T, out=np.empty(lf.shape[::-1]))
    total[total == 0] = 1.0  # both counts 0 (they are non-negative), so l - r is 0 and stays 0
    d /= total
    mean = d.mean(axis=1) if d.shape[1] else np.zeros(d.shape[0])
    spare = np.subtract(d, mean[:, None], out=total)
    std = np.sqrt(np.einsum("ij,ij->i", spare, spare) / d.shape[1]) if d.shape[1] else np.ones(d.shape[0])
    std = np.where(std > 0, std, 1.0)
    if names is None:
        names = STYLE_FEATURES if d.shape[0] == len(STYLE_FEATURES) else tuple(f"f{i}" for i in range(d.shape[0]))
    if len(names) != d.shape[0]:
        raise ValueError("one name per style feature")
    d /= std[:, None]
    return d, spare, mean, std, tuple(names)


@dataclass(frozen=True)
class StyleDesign:
    """Row-level design for the style-controlled fit, oriented from the ``lo`` side of each pair.

    ``pair`` indexes the unique pairs ``(pair_lo, pair_hi)``; ``y`` is lo's share of the win
    (1, 0, 0.5); ``x`` the normalised style difference lo minus hi; ``weight`` the battle weight.
    Dropped both_bad battles are not in the rows. ``style_design`` sorts the rows by ``pair`` (the
    battles' order within a pair) and records each pair's first row in ``pair_start``: sums over a pair's
    rows are then one ``np.add.reduceat`` and a per-pair value reaches its rows by one ``np.repeat``
    (``_PairRows``); a design built otherwise (``pair_start`` None) may have its rows in any order.
    """

    n_competitors: int
    pair: NDArray[np.int64]
    y: NDArray[np.float64]
    x: NDArray[np.float64]
    weight: NDArray[np.float64]
    cluster: NDArray[np.int64] | None
    n_clusters: int
    pair_lo: NDArray[np.int64]
    pair_hi: NDArray[np.int64]
    inc_t: sp.csr_matrix
    features: StyleFeatures
    both_bad: BothBad
    pair_start: NDArray[np.int64] | None = None

    @property
    def n_rows(self) -> int:
        return int(self.y.shape[0])

    @property
    def n_features(self) -> int:
        return int(self.x.shape[1])


def style_design(
    a: ArrayLike,
    b: ArrayLike,
    outcome: ArrayLike,
    left_style: ArrayLike,
    right_style: ArrayLike,
    weight: ArrayLike | None = None,
    *,
    n_competitors: int | None = None,
    both_bad: BothBad = "tie",
    cluster: ArrayLike | None = None,
    feature_names: tuple[str, ...] | None = None,
) -> StyleDesign:
    """Validate battles, normalise style differences and orient every row from its pair's lo side."""
    if both_bad not in ("tie", "drop"):
        raise ValueError("both_bad must be 'tie' or 'drop'")
    bt = validate_battles(a, b, outcome, weight, n_competitors=n_competitors, cluster=cluster)
    n = bt.n_competitors
    keep = np.ones(bt.a.shape[0], dtype=bool) if both_bad == "tie" else bt.outcome != BOTH_BAD
    lf = np.asarray(left_style, dtype=np.float64)
    rf = np.asarray(right_style, dtype=np.float64)
    if lf.shape[0] != bt.a.shape[0]:
        raise ValueError("style matrices need one row per battle")
    a_k, b_k, o_k = bt.a, bt.b, bt.outcome
    if not keep.all():
        lf, rf = lf[keep], rf[keep]
        a_k, b_k, o_k = a_k[keep], b_k[keep], o_k[keep]
    d_t, spare, f_mean, f_std, names = _differences_t(lf, rf, feature_names)
    swapped = a_k > b_k
    lo = np.where(swapped, b_k, a_k)
    hi = np.where(swapped, a_k, b_k)
    # lo's share of the win by (swapped, outcome): left wins, right wins, tie, both bad (a tie here)
    share = np.array([[1.0, 0.0, 0.5, 0.5], [0.0, 1.0, 0.5, 0.5]])
    y = share.ravel()[swapped * N_OUTCOMES + o_k]
    key = lo * n + hi
    if n * n <= 1 << 24:
        # Dense relabelling: linear time, where np.unique would sort a million keys.
        present = np.bincount(key, minlength=n * n) > 0
        uniq = np.flatnonzero(present)
        pair = (np.cumsum(present) - 1)[key]
    else:
        uniq, pair = np.unique(key, return_inverse=True)
    p_lo, p_hi = uniq // n, uniq % n
    n_pairs = uniq.shape[0]
    # The rows sorted by pair (stable: the battles' order within a pair): a pair's rows are one contiguous run,
    # so the bootstrap rounds sum them per pair with one reduceat and spread per-pair values back with one
    # repeat (``_StyleRoundSolver``), where bincount and take cost several times more. A radix sort of 16-bit
    # keys (about 1 ms a 100,000 rows) where the pairs fit.
    order = np.argsort(pair.astype(np.uint16) if n_pairs <= 1 << 16 else pair, kind="stable")
    pair, y = pair[order], y[order]
    # The differences from lo's side (negated where the battle's left side is hi), in the rows' order.
    x_t = np.take(d_t, order, axis=1, out=spare, mode="clip")  # (the default mode buffers a given out)
    x_t *= np.where(swapped, -1.0, 1.0)[order]
    x = np.ascontiguousarray(x_t.T)
    feats = StyleFeatures(d_t.T, f_mean, f_std, names)
    rows = np.concatenate([p_lo, p_hi])
    cols = np.concatenate([np.arange(n_pairs)] * 2)
    vals = np.concatenate([np.ones(n_pairs), -np.ones(n_pairs)])
    inc_t = sp.csr_matrix((vals, (rows, cols)), shape=(n, n_pairs))
    w = np.ones(y.shape[0]) if bt.weight is None else bt.weight[keep][order]
    cl: NDArray[np.int64] | None = None
    n_cl = 0
    if bt.cluster is not None:
        _, inv = np.unique(bt.cluster[keep][order], return_inverse=True)
        cl = inv.astype(np.int64)
        n_cl = int(cl.max()) + 1 if cl.size else 0
    return StyleDesign(
        n_competitors=n,
        pair=pair.astype(np.int64, copy=False),
        y=y,
        x=x,
        weight=w,
        cluster=cl,
        n_clusters=n_cl,
        pair_lo=p_lo.astype(np.int64),
        pair_hi=p_hi.astype(np.int64),
        inc_t=inc_t,
        features=feats,
        both_bad=both_bad,
        pair_start=np.searchsorted(pair, np.arange(n_pairs)),
    )


class _PairRows:
    """Rows and the pairs they belong to: ``sums`` adds values over each pair's rows, ``spread`` gives each row
    its pair's value. Rows sorted by pair (``start``: each pair's first row, where its run begins; a pair
    without rows has an empty run) use ``np.add.reduceat`` and ``np.repeat``; others an index (``bincount``
    and a gather). The sorted route costs a fraction, and more than that where rows come sorted: bincount then
    adds each pair's rows one after the other into one bin, every add waiting for the last.

    ``start`` must be non-decreasing and within the rows (``_pair_rows`` makes it so)."""

    __slots__ = ("pair", "n_pairs", "start", "runs", "filled")

    def __init__(self, pair: NDArray[np.int64], n_pairs: int, start: NDArray[np.int64] | None = None) -> None:
        self.pair, self.n_pairs = pair, n_pairs
        self.start: NDArray[np.int64] | None = None
        self.runs: NDArray[np.int64] | None = None
        self.filled: NDArray[np.bool_] | None = None
        if start is None or n_pairs == 0 or len(pair) == 0:
            return
        runs = np.diff(start, append=len(pair))
        self.runs = runs
        if bool(runs.all()):
            self.start = start
        else:
            # reduceat needs increasing starts inside the rows: the pairs with rows, the others' sums are 0
            self.filled = runs > 0
            self.start = start[self.filled]

    def sums(self, v: NDArray[np.float64]) -> NDArray[np.float64]:
        """Sums over each pair's rows of ``v`` (rows, or rows x columns: one column of sums each)."""
        if self.start is not None:
            out: NDArray[np.float64] = np.add.reduceat(v, self.start, axis=0)
            if self.filled is None:
                return out
            full = np.zeros((self.n_pairs, *v.shape[1:]), dtype=out.dtype)
            full[self.filled] = out
            return full
        if v.ndim == 1:
            return weighted_bincount(self.pair, v, self.n_pairs)
        return np.stack([weighted_bincount(self.pair, v[:, j], self.n_pairs) for j in range(v.shape[1])], axis=1)

    def spread(self, per_pair: NDArray[np.float64]) -> NDArray[np.float64]:
        """Each row's value of its pair."""
        if self.runs is not None:
            return np.repeat(per_pair, self.runs, axis=0)
        return per_pair[self.pair]


def _pair_rows(sd: StyleDesign, rows: NDArray[np.int64] | None = None) -> _PairRows:
    """The design's rows (or those of ``rows``) and their pairs: by runs where the design records its pairs'
    runs (``pair_start``) and ``rows`` are increasing (a subset of sorted rows is sorted), else by index."""
    n_pairs = int(sd.pair_lo.shape[0])
    if rows is None:
        return _PairRows(sd.pair, n_pairs, sd.pair_start)
    pair = sd.pair[rows]
    if sd.pair_start is None or not bool(np.all(rows[1:] > rows[:-1])):
        return _PairRows(pair, n_pairs)
    return _PairRows(pair, n_pairs, np.searchsorted(rows, sd.pair_start))


@dataclass(frozen=True)
class StyleResult:
    """Style-controlled fit. ``scores``/``log_strength``/``components`` as in ``BTResult``;
    ``coef`` are the style coefficients (logit per std of the normalised difference) in the order
    of ``feature_names``; ``theta_raw``/``coef`` are the warm start for bootstrap rounds."""

    scores: NDArray[np.float64]
    log_strength: NDArray[np.float64]
    coef: NDArray[np.float64]
    feature_names: tuple[str, ...]
    feature_mean: NDArray[np.float64]
    feature_std: NDArray[np.float64]
    components: NDArray[np.int64]
    n_components: int
    battles: NDArray[np.float64]
    theta_raw: NDArray[np.float64]
    iterations: int
    converged: bool
    params: FitParams
    separated: bool = False
    centre: NDArray[np.bool_] | None = None


def _blocks(
    sd: StyleDesign, x: NDArray[np.float64], pair: NDArray[np.int64] | _PairRows, v: NDArray[np.float64]
) -> NDArray[np.float64]:
    """(N + F) square matrix with Laplacian(sum v per pair), cross ``inc_t @ (sum v x per pair)``
    and ``x' diag(v) x``: the shape of both the observed information and the sandwich meat. ``pair``: the
    rows' pairs (an index, or ``_PairRows``)."""
    n, f, n_pairs = sd.n_competitors, x.shape[1], sd.pair_lo.shape[0]
    pairs = pair if isinstance(pair, _PairRows) else _PairRows(pair, n_pairs)
    out = np.zeros((n + f, n + f))
    vp = pairs.sums(v)
    out[:n, :n] = laplacian(n, sd.pair_lo, sd.pair_hi, vp)
    vx = v[:, None] * x
    cross = np.asarray(sd.inc_t @ pairs.sums(vx))
    out[:n, n:] = cross
    out[n:, :n] = cross.T
    out[n:, n:] = x.T @ vx
    return out


def _loglik(
    sd: StyleDesign,
    x: NDArray[np.float64],
    pair: NDArray[np.int64] | _PairRows,
    y: NDArray[np.float64],
    w: NDArray[np.float64],
    theta: NDArray[np.float64],
    beta: NDArray[np.float64],
    prior: float,
) -> float:
    pairs = pair if isinstance(pair, _PairRows) else _PairRows(pair, int(sd.pair_lo.shape[0]))
    z = pairs.spread(theta[sd.pair_lo] - theta[sd.pair_hi]) + x @ beta
    ll = float(np.dot(w, y * z - softplus(z)))
    if prior > 0:
        ll += prior * float((0.5 * theta - softplus(theta)).sum())
    return ll


def _newton(
    sd: StyleDesign,
    w: NDArray[np.float64],
    theta0: NDArray[np.float64],
    beta0: NDArray[np.float64],
    *,
    prior: float,
    null_proj: NDArray[np.float64] | None,
    max_iter: int = 100,
    tol: float = 1e-5,
    rows: NDArray[np.int64] | None = None,
) -> tuple[NDArray[np.float64], NDArray[np.float64], int, bool]:
    """The package's damped Newton on the (N + F) system; ``rows`` restricts to rows with non-zero
    weight. The competitor block of the negative Hessian is the Laplacian (``_blocks``)."""
    x, y = sd.x, sd.y
    if rows is not None:
        x, y, w = x[rows], y[rows], w[rows]
    pairs = _pair_rows(sd, rows)
    n = sd.n_competitors
    size = n + x.shape[1]

    def value(v: NDArray[np.float64]) -> float:
        return _loglik(sd, x, pairs, y, w, v[:n], v[n:], prior)

    def objective(v: NDArray[np.float64]) -> tuple[float, NDArray[np.float64], NDArray[np.float64]]:
        theta, beta = v[:n], v[n:]
        z = pairs.spread(theta[sd.pair_lo] - theta[sd.pair_hi]) + x @ beta
        p = expit(z)
        r = w * (y - p)
        grad = np.concatenate([sd.inc_t @ pairs.sums(r), x.T @ r])
        hess = _blocks(sd, x, pairs, w * p * (1.0 - p))
        if prior > 0:
            p0 = expit(theta)
            grad[:n] += prior * (0.5 - p0)
            hess[np.arange(n), np.arange(n)] += prior * p0 * (1.0 - p0)
        if null_proj is not None:
            hess[:n, :n] += null_proj
        # A feature with no spread has an all-zero row; the tiny diagonal keeps the solve defined.
        hess[np.arange(size), np.arange(size)] += 1e-12
        return float("nan"), grad, hess  # f only when a line search needs it (one more pass over rows)

    out, iterations, converged = damped_newton(
        np.concatenate([theta0, beta0]),
        objective,
        value,
        max_iter=max_iter,
        tol=tol,
        line_search_above=_LINE_SEARCH_ABOVE,
    )
    return out[:n], out[n:], iterations, converged


def _components(sd: StyleDesign, w: NDArray[np.float64]) -> tuple[int, NDArray[np.int64]]:
    return components(sd.n_competitors, sd.pair_lo, sd.pair_hi, _pair_rows(sd).sums(w))


def fit_style(
    sd: StyleDesign,
    *,
    prior_games: float = 1.0,
    reference: int | None = None,
    centre: NDArray[np.bool_] | None = None,
    max_iter: int = 100,
    tol: float = 1e-5,
    start: NDArray[np.float64] | None = None,
) -> StyleResult:
    """Style-controlled Bradley-Terry (see the module docstring); damped Newton from ``start`` (the
    competitors' raw log-strengths, coefficients 0): the plain fit's ``theta_raw`` with the same prior is
    close to the optimum (style moves scores by tens of points, not hundreds), which saves the first, long
    steps and their line searches; from zero when None. The maximum is the same either way (to ``tol``).

    The coefficients are unpenalised, so on tiny or separable data (a style gap that always
    predicts the winner) a coefficient has no finite estimate; ``separated`` is then True and
    ``converged`` False (see ``_separated``). Run ``style_checks`` first to drop aliased features.
    """
    if prior_games < 0:
        raise ValueError("prior_games must be >= 0")
    n = sd.n_competitors
    if reference is not None and not 0 <= reference < n:
        raise ValueError("reference must be a competitor id")
    n_comp, comps = _components(sd, sd.weight)
    null_proj = _null_projector(comps) if prior_games == 0 else None
    if start is not None and (start.shape != (n,) or not np.all(np.isfinite(start))):
        raise ValueError("start must be one finite log-strength per competitor")
    theta, beta, iters, conv = _newton(
        sd,
        sd.weight,
        np.zeros(n) if start is None else start.astype(np.float64),
        np.zeros(sd.n_features),
        prior=prior_games,
        null_proj=null_proj,
        max_iter=max_iter,
        tol=tol,
    )
    separated = _separated(sd, theta, beta, prior_games)
    conv = conv and not separated
    log_strength = normalise(theta, comps, reference, centre)
    wp = _pair_rows(sd).sums(sd.weight)
    battles = weighted_bincount(sd.pair_lo, wp, minlength=n) + weighted_bincount(sd.pair_hi, wp, minlength=n)
    params = FitParams(
        model="bradley_terry_style_control",
        both_bad=sd.both_bad,
        prior_games=float(prior_games),
        reference=reference,
        normalisation="reference" if reference is not None else "geometric_mean_per_component",
        features=sd.features.names,
        coef_penalty=0.0,
        feature_normalisation="(l-r)/(l+r), 0 if both 0, divided by std over battles, not centred",
    )
    return StyleResult(
        scores=SCALE * log_strength + BASE,
        log_strength=log_strength,
        coef=beta,
        feature_names=sd.features.names,
        feature_mean=sd.features.mean,
        feature_std=sd.features.std,
        components=comps,
        n_components=n_comp,
        battles=battles,
        theta_raw=theta,
        iterations=iters,
        converged=conv,
        params=params,
        separated=separated,
        centre=centre,
    )


# Separation check: a fit whose coefficients can be doubled at a cost of under half a log-likelihood
# unit sits on a ridge that rises toward infinity, not at a maximum (at a finite maximum of a concave
# function any other point is strictly lower, by about b' H b / 2 for the doubling).
_SEPARATION_COEF = 3.0
_SEPARATION_LOGLIK = 0.5


def _separated(sd: StyleDesign, theta: NDArray[np.float64], beta: NDArray[np.float64], prior: float) -> bool:
    if beta.size == 0 or float(np.abs(beta).max()) <= _SEPARATION_COEF:
        return False
    pairs = _pair_rows(sd)
    f1 = _loglik(sd, sd.x, pairs, sd.y, sd.weight, theta, beta, prior)
    f2 = _loglik(sd, sd.x, pairs, sd.y, sd.weight, theta, 2.0 * beta, prior)
    return f2 > f1 - _SEPARATION_LOGLIK


# Identifiability thresholds: a feature whose within-pair spread is under WITHIN_PAIR_MIN of its total
# (weighted sums of squares) is a property of the pair, i.e. of the two competitors, not of the answers;
# a feature whose within-pair residual, after the features already kept, is under COLLINEAR_MIN of its
# own is (near) collinear with them.
WITHIN_PAIR_MIN = 1e-3
COLLINEAR_MIN = 1e-6
ALIASED_REASON = "the style of each competitor's answers does not vary enough to separate style from quality"


@dataclass(frozen=True)
class StyleChecks:
    """Which features can be estimated beside the competitor effects, and why the others cannot.

    ``kept`` are feature indices; ``dropped`` pairs a feature name with its reason; ``within_pair``
    is each feature's within-pair share of its weighted sum of squares (1 = all of it varies within
    pairs, 0 = constant per pair); ``condition`` the condition number of the kept features'
    within-pair Gram matrix."""

    kept: tuple[int, ...]
    dropped: tuple[tuple[str, str], ...]
    within_pair: tuple[float, ...]
    condition: float

    @property
    def identified(self) -> bool:
        return bool(self.kept)


def style_checks(sd: StyleDesign) -> StyleChecks:
    """Identifiability of the style coefficients before a fit.

    The competitor indicators explain everything that is constant within a pair (the two competitors
    are fixed there), so a coefficient is only identified by the feature's variation *within* pairs.
    Each feature is centred within its pair (weighted means, ``_PairRows``); features with almost no
    within-pair variation are aliased with the competitors; the rest are added greedily
    (Gram-Schmidt on the within-pair residuals), and one that adds (almost) nothing beside those already
    kept is collinear with them (two identical features: the second is dropped, naming the first).

    Everything comes from the weighted Gram matrices of the features and of their residuals (one product
    each): a residual's part beside the features kept is its Gram entry less its projection (the Schur
    complement, what Gram-Schmidt leaves), the condition number that of the kept residuals' Gram matrix.
    """
    w = sd.weight
    unit = bool(np.all(w == 1.0))
    pairs = _pair_rows(sd)
    wp = pairs.sums(w)[:, None]
    names = sd.features.names
    f = sd.n_features
    wx = sd.x if unit else w[:, None] * sd.x
    mean = np.divide(pairs.sums(wx), wp, out=np.zeros((wp.shape[0], f)), where=wp > 0)
    resid = sd.x - pairs.spread(mean)
    total = np.einsum("ij,ij->j", sd.x, wx)
    gram = resid.T @ (resid if unit else w[:, None] * resid)
    own = np.diag(gram).copy()
    share = np.divide(own, total, out=np.zeros(f), where=total > 0)
    kept: list[int] = []
    dropped: list[tuple[str, str]] = []
    for k in range(f):
        if total[k] == 0:
            dropped.append((names[k], "no variation: the feature is the same in both answers of every battle"))
            continue
        if share[k] < WITHIN_PAIR_MIN:
            dropped.append((names[k], ALIASED_REASON))
            continue
        left = own[k]
        if kept:
            g_kk = gram[np.ix_(kept, kept)]
            g_k = gram[kept, k]
            left = own[k] - float(g_k @ np.linalg.solve(g_kk, g_k))
        if left < COLLINEAR_MIN * own[k]:
            others = ", ".join(names[j] for j in kept)
            dropped.append((names[k], f"collinear with {others}"))
            continue
        kept.append(k)
    if kept:
        eig = np.linalg.eigvalsh(gram[np.ix_(kept, kept)])
        condition = float(eig.max() / eig.min()) if eig.min() > 0 else float("inf")
    else:
        condition = float("inf")
    return StyleChecks(tuple(kept), tuple(dropped), tuple(float(v) for v in share), condition)


def style_subset(sd: StyleDesign, keep: tuple[int, ...]) -> StyleDesign:
    """The design with only the features ``keep`` (same rows); the design itself when it keeps them all."""
    if tuple(keep) == tuple(range(sd.n_features)):
        return sd
    cols = list(keep)
    f = sd.features
    feats = StyleFeatures(f.x[:, cols], f.mean[cols], f.std[cols], tuple(f.names[k] for k in cols))
    return replace(sd, x=np.ascontiguousarray(sd.x[:, cols]), features=feats)


@dataclass(frozen=True)
class StyleIntervals:
    """Intervals for a style fit: ``scores`` (as for plain BT) and the coefficients."""

    scores: Intervals
    coef_lower: NDArray[np.float64]
    coef_upper: NDArray[np.float64]
    coef_se: NDArray[np.float64]
    coef_samples: NDArray[np.float64] | None = None


def style_covariance(sd: StyleDesign, fit: StyleResult) -> NDArray[np.float64]:
    """Sandwich covariance of ``(theta_raw, coef)``: ``H^-1 M H^-1``.

    ``M`` has the same block structure as ``H`` with ``w p (1-p)`` replaced by the squared per-row
    score ``w^2 (y - p)^2``. With ``prior_games == 0`` the competitor block is singular along each
    component's constant vector and the pseudo-inverse ``(H + J)^-1 - J`` is used.
    """
    n = sd.n_competitors
    prior = fit.params.prior_games
    theta = fit.theta_raw
    pairs = _pair_rows(sd)
    z = pairs.spread(theta[sd.pair_lo] - theta[sd.pair_hi]) + sd.x @ fit.coef
    p = expit(z)
    hess = _blocks(sd, sd.x, pairs, sd.weight * p * (1.0 - p))
    meat = _blocks(sd, sd.x, pairs, (sd.weight * (sd.y - p)) ** 2)
    size = hess.shape[0]
    if prior > 0:
        p0 = expit(theta)
        hess[np.arange(n), np.arange(n)] += prior * p0 * (1.0 - p0)
        hess[np.arange(size), np.arange(size)] += 1e-12
        h_inv = np.linalg.inv(hess)
    else:
        j = np.zeros_like(hess)
        j[:n, :n] = _null_projector(fit.components)
        hess[np.arange(size), np.arange(size)] += 1e-12
        h_inv = np.linalg.inv(hess + j) - j
    return h_inv @ meat @ h_inv


def style_sandwich_intervals(sd: StyleDesign, fit: StyleResult, *, confidence: float = 0.95) -> StyleIntervals:
    """Normal intervals for scores and coefficients from ``style_covariance``."""
    if not 0.0 < confidence < 1.0:
        raise ValueError("confidence must lie strictly between 0 and 1")
    n = sd.n_competitors
    cov = style_covariance(sd, fit)
    nm = normalisation_matrix(fit.components, fit.params.reference, fit.centre)
    cov_theta = nm @ cov[:n, :n] @ nm.T
    se = SCALE * np.sqrt(np.clip(np.diag(cov_theta), 0.0, None))
    coef_se = np.sqrt(np.clip(np.diag(cov)[n:], 0.0, None))
    z = float(norm.ppf(0.5 + confidence / 2.0))
    scores = Intervals(
        fit.scores - z * se, fit.scores + z * se, se, "sandwich", confidence, None, {"distribution": "normal"}
    )
    return StyleIntervals(scores, fit.coef - z * coef_se, fit.coef + z * coef_se, coef_se)
