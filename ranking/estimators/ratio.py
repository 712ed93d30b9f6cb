"""Attribute boards from ratio judgements: a robust least-squares fit on the comparison graph.

Model. Entity ``i`` has a log-attribute ``s_i``. A judgement ``(i, j, r)`` says "``i`` has about
``exp(r)`` times the attribute of ``j``": ``r = s_i - s_j + noise``. Only differences are identified,
so each connected component of the comparison graph is pinned at one node (its lowest index) and
shifted afterwards so that its smallest score is zero.

Fusion. Every judgement is folded onto the edge ``(lo, hi)``, ``lo < hi``, with its sign
(``y = s_lo - s_hi``); both presentation orders land on the same edge. An edge with ``m``
observations has value ``mean(y)`` and precision ``w = m / v``, where the per-observation variance
``v`` is the edge's repeat spread shrunk to a prior: ``v = (d0 * tau2 + SS) / (d0 + m - 1)``
(``SS`` the sum of squared deviations, ``d0 = 8`` pseudo degrees of freedom: with 2 the
noisy per-edge weights of two-observation edges overstated the precision, sd 8% short of Monte Carlo), floored at
``variance_floor``. ``tau2`` is the within-edge variance pooled over every edge with repeats when
they give at least ``5`` degrees of freedom, else ``prior_variance`` (0.25, a log-ratio sd of 0.5).
So an edge seen once gets ``v = tau2``. Stated confidence is recorded per edge, never a weight.

Loss and solve. Scores minimise ``sum_e rho_k(u_e / sigma)`` with ``u_e = sqrt(w_e) * (y_e - s_lo +
s_hi)``, ``rho_k`` Huber's loss (``k = 1.5``) and ``sigma = 1.4826 * median(|u|) / sqrt(1 - mean
leverage)``: the MAD taken about zero, not about the median, since the sign of an edge is a
labelling choice and a centre would make the fit depend on the entities' names. With under
``MIN_DF`` residual degrees of freedom the variance model is trusted: ``sigma = 1``.
Iteratively reweighted least squares from the plain weighted fit: each step solves
``L_a s = b`` with ``a_e = w_e * min(1, k sigma / |u_e|)``, ``L_a`` the weighted graph Laplacian
reduced by the pinned nodes, through a Cholesky factor (``scipy.linalg.cho_factor``) with a ridge of
``1e-12 * max(diag)``. The first ``SCALE_STEPS`` (5) steps re-estimate ``sigma``; then it is held
(the M-estimate given that preliminary scale) and the steps become Newton steps on the Huber
objective (Hessian: the Laplacian of the inlier edges, a halving line search; an IRLS step when the
inlier edges do not span the components). Plain IRLS contracts by about a half per step here (30+
factorisations to 1e-10); Newton stops in 2-3 once the inlier set settles. A failed factorisation
escalates the ridge (x1000, up to four times, then an eigen-decomposition pseudo-inverse); that, a
pivot within ``1e3`` of the ridge (the ridge, not the data, sets that direction), more than one
component (scores across components are not comparable; an entity never compared is a component)
or IRLS not converging marks the fit *degraded*, with the reasons.

Intervals. ``cov(s) = phi * L_a^+`` with the dispersion ``phi = sigma**2`` (1 with under ``MIN_DF``
residual degrees of freedom), from the inverse of the reduced Laplacian, reported as the standard
deviation of each score relative to its component's mean (``P C P``, ``C`` the reduced inverse padded
with zeros at the pinned nodes, ``P`` the centring per component). Exact up to ``exact_limit`` (256)
entities; above, ``diag(P C P)`` by Hutchinson's diagonal estimator ``mean_k z_k * (P C P z_k)`` with
seeded Rademacher probes (deterministic given the seed).

Per-entity noise and the ladder's end (``ratio_noise``; ``noise="entity"``, the default, and
``censor_at``). With per-entity noise the reported ``std`` is the Huber sandwich under the model "an
answer about (i, j) has variance a_i + a_j" (each a_i estimated from the residuals, shrunk toward the
pooled level), widened to Student's t for the noise estimate's degrees of freedom; ``model_std`` keeps
``phi * P C P`` for the design. The weights of the solve stay pooled (per-entity weights from 8 calls
an entity cost more precision than they gained). Answers at the ladder's end are interval-censored,
refitted by Fisher scoring until the scores settle.

Diagnostics. The cyclic share of the judgement flow: the Hodge decomposition of the edge flow ``y``
(precision-weighted inner product) into its gradient part (the plain weighted least-squares fit) and
the cyclic remainder; ``share = ||cyclic||^2_w / ||y||^2_w``. Leave-one-out studentised residuals of
the final weighted least squares (weights ``a`` held fixed): leverage ``h_e = a_e R_e`` with ``R_e``
the effective resistance of the edge in ``L_a``; the leave-one-out prediction error ``r_e / (1 -
h_e)`` divided by its sd ``sqrt(phi (1/w_e + R_e / (1 - h_e)))``; ``|t| > 3`` flags a comparison the
fit overrode; a bridge (``h_e = 1``) has no leave-one-out prediction (NaN). ``R_e`` is exact up to
``exact_limit`` entities, above it a seeded Johnson-Lindenstrauss sketch (Spielman-Srivastava).

Determinism. Observations are sorted canonically (edge, value, confidence) before any sum, so the
same accepted observations in any order and orientation give byte-identical output
(``RatioFit.canonical_bytes``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike, NDArray

from . import ratio_noise
from .graph import components as graph_components
from .graph import laplacian
from .ratio_factor import _Factor, factor_reduced, factor_reduced_sparse, laplacian_sparse

HUBER_K = 1.5
MAD_TO_SD = 1.4826
EXACT_LIMIT = 256
FLAG_T = 3.0
# Residual degrees of freedom (edges - entities + components) below which the scale is not estimated.
MIN_DF = 10
PRIOR_VARIANCE = 0.25
PRIOR_DF = 8.0
VARIANCE_FLOOR = 0.01
MIN_POOLED_DF = 5
# Reduced systems above this size are factorised sparse (below it, dense LAPACK is as fast and the
# figures measured on it stand).
SPARSE_ABOVE = 2000
PROBES = 128
SIGMA_FLOOR = 1e-3
# IRLS steps that re-estimate the scale; after them it is held (the M-estimate given that scale).
SCALE_STEPS = 5


@dataclass(frozen=True)
class Edges:
    """Fused edges, sorted by ``(lo, hi)``; ``y`` estimates ``s_lo - s_hi``."""

    lo: NDArray[np.int64]
    hi: NDArray[np.int64]
    y: NDArray[np.float64]
    n_obs: NDArray[np.int64]
    variance: NDArray[np.float64]  # per-observation variance used
    weight: NDArray[np.float64]  # precision of the fused value, n_obs / variance (sum of info / variance)
    confidence: NDArray[np.float64]  # mean stated confidence (NaN when none was stated); recorded only
    pooled_variance: float
    pooled_from_repeats: bool
    # Per edge, the answers at the ladder's end (censored; ``ratio_noise``); None when none was looked for.
    n_censored: NDArray[np.int64] | None = None


def _as_ids(x: ArrayLike, name: str) -> NDArray[np.int64]:
    arr = np.asarray(x)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional")
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        farr = arr.astype(np.float64)
        if not np.all(np.isfinite(farr)) or not np.all(farr == np.round(farr)):
            raise ValueError(f"{name} must hold integer entity ids")
    return arr.astype(np.int64)


def fuse_observations(
    n_entities: int,
    i: ArrayLike,
    j: ArrayLike,
    log_ratio: ArrayLike,
    confidence: ArrayLike | None = None,
    *,
    prior_variance: float = PRIOR_VARIANCE,
    prior_df: float = PRIOR_DF,
    variance_floor: float = VARIANCE_FLOOR,
    info: ArrayLike | None = None,
    spread: ArrayLike | None = None,
) -> Edges:
    """Fold the judgements onto canonical edges and fuse repeats by precision (module docstring). With
    ``info`` (per observation, in (0, 1]; an answer at the ladder's end, ``ratio_noise``) each observation
    counts by its information: the edge's value is the info-weighted mean and its precision ``sum(info) /
    v``; ``spread`` (the answers themselves, when ``log_ratio`` holds working values) sets the repeat
    spread."""
    a, b = _as_ids(i, "i"), _as_ids(j, "j")
    r = np.asarray(log_ratio, dtype=np.float64)
    if not (a.shape == b.shape == r.shape):
        raise ValueError("i, j and log_ratio must have the same length")
    conf = np.full(r.shape, np.nan) if confidence is None else np.asarray(confidence, dtype=np.float64)
    if conf.shape != r.shape:
        raise ValueError("confidence must have the same length as log_ratio")
    if a.size and (a.min() < 0 or b.min() < 0 or a.max() >= n_entities or b.max() >= n_entities):
        raise ValueError("entity ids must lie in [0, n_entities)")
    if np.any(a == b):
        raise ValueError("an entity cannot be compared with itself")
    if not np.all(np.isfinite(r)):
        raise ValueError("log ratios must be finite")
    if not (prior_variance > 0 and variance_floor > 0 and prior_df > 0):
        raise ValueError("prior_variance, prior_df and variance_floor must be positive")
    lo, hi = np.minimum(a, b), np.maximum(a, b)
    y = np.where(a < b, r, -r) + 0.0  # + 0.0 turns -0.0 into 0.0
    conf = conf + 0.0
    factor = np.ones(r.shape) if info is None else np.asarray(info, dtype=np.float64)
    raw = y if spread is None else np.where(a < b, np.asarray(spread, dtype=np.float64), -np.asarray(spread)) + 0.0
    order = np.lexsort((factor, conf, y, hi, lo))
    lo, hi, y, conf, factor, raw = lo[order], hi[order], y[order], conf[order], factor[order], raw[order]
    if y.size == 0:
        empty_i, empty_f = np.zeros(0, np.int64), np.zeros(0)
        return Edges(empty_i, empty_i, empty_f, empty_i, empty_f, empty_f, empty_f, prior_variance, False)
    key = lo * n_entities + hi
    starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
    m = np.diff(np.r_[starts, key.size]).astype(np.int64)
    group = np.repeat(np.arange(starts.size), m)
    info_sum = np.add.reduceat(factor, starts)
    mean = np.add.reduceat(factor * y, starts) / info_sum
    raw_mean = np.add.reduceat(raw, starts) / m
    ss = np.add.reduceat((raw - raw_mean[group]) ** 2, starts)
    repeat_df = int((m - 1).sum())
    pooled_from_repeats = repeat_df >= MIN_POOLED_DF
    tau2 = max(float(ss.sum()) / repeat_df, variance_floor) if pooled_from_repeats else prior_variance
    variance = np.maximum((prior_df * tau2 + ss) / (prior_df + m - 1), variance_floor)
    has_conf = np.isfinite(conf)
    conf_n = np.add.reduceat(has_conf.astype(np.float64), starts)
    conf_sum = np.add.reduceat(np.where(has_conf, conf, 0.0), starts)
    with np.errstate(invalid="ignore", divide="ignore"):
        conf_mean = np.where(conf_n > 0, conf_sum / np.maximum(conf_n, 1.0), np.nan)
    return Edges(
        lo=lo[starts],
        hi=hi[starts],
        y=mean,
        n_obs=m,
        variance=variance,
        weight=info_sum / variance,
        confidence=conf_mean,
        pooled_variance=float(tau2),
        pooled_from_repeats=pooled_from_repeats,
        n_censored=None if info is None else np.add.reduceat((factor < 1.0).astype(np.int64), starts),
    )


def factor_laplacian(
    n: int, lo: NDArray[np.int64], hi: NDArray[np.int64], w: NDArray[np.float64], free: NDArray[np.int64]
) -> _Factor:
    """The factor of the weighted Laplacian reduced to ``free``: dense up to ``SPARSE_ABOVE`` free
    nodes, sparse above (a board of 10,000 entities at 8 calls each has 40,000 edges: a dense
    10,000 x 10,000 matrix would be 800 MB a copy, and each factorisation minutes on two cores)."""
    if free.size <= SPARSE_ABOVE:
        return factor_reduced(laplacian(n, lo, hi, w)[np.ix_(free, free)], free, n)
    return factor_reduced_sparse(laplacian_sparse(n, lo, hi, w)[free][:, free].tocsc(), free, n)


@dataclass(frozen=True)
class RatioFit:
    """Scores (natural-log attribute, each component's minimum at zero) and everything about the fit."""

    n_entities: int
    scores: NDArray[np.float64]
    std: NDArray[np.float64]  # sd of each score relative to its component's mean; inf if unobserved
    component: NDArray[np.int64]
    n_components: int
    pinned: NDArray[np.int64]
    observed: NDArray[np.bool_]
    n_comparisons: NDArray[np.int64]  # observations touching each entity
    edges: Edges
    residual: NDArray[np.float64]  # y - (s_lo - s_hi), per edge
    huber_weight: NDArray[np.float64]  # final IRLS factor in [0, 1]
    scale: float  # sigma, the robust residual scale in standardised units
    dispersion: float  # phi
    residual_df: int
    cyclic_share: float
    leverage: NDArray[np.float64]
    loo_t: NDArray[np.float64]
    overridden: NDArray[np.bool_]
    iterations: int
    converged: bool
    degraded: bool
    degraded_reasons: tuple[str, ...]
    ridge: float
    std_method: str  # "exact" or "hutchinson"
    probes: int
    seed: int
    method: dict[str, object] = field(default_factory=dict)
    # Each entity's noise share (an observation of (i, j) has variance a_i + a_j); None when pooled.
    entity_variance: NDArray[np.float64] | None = None
    # The model-based sd (one noise level, no Student-t widening): what the design plans with; ``std``
    # is the interval's. Equal to ``std`` with pooled noise.
    model_std: NDArray[np.float64] | None = field(default=None, compare=False)
    _meat: NDArray[np.float64] | None = field(default=None, repr=False, compare=False)
    _factor: _Factor | None = field(default=None, repr=False, compare=False)
    _cov: NDArray[np.float64] | None = field(default=None, repr=False, compare=False)
    _sketch: NDArray[np.float64] | None = field(default=None, repr=False, compare=False)

    def canonical_bytes(self) -> bytes:
        """Every numeric output as bytes, in a fixed order: equal for the same accepted observations."""
        parts = [
            self.scores,
            self.std,
            self.component,
            self.pinned,
            self.edges.lo,
            self.edges.hi,
            self.edges.y,
            self.edges.weight,
            self.edges.confidence,
            self.residual,
            self.huber_weight,
            self.leverage,
            self.loo_t,
            np.array([self.scale, self.dispersion, self.cyclic_share, self.ridge]),
            np.array([self.iterations, int(self.degraded), self.n_components]),
        ]
        return b"".join(np.ascontiguousarray(p).tobytes() for p in parts)

    def resistance(self, a: ArrayLike, b: ArrayLike) -> NDArray[np.float64]:
        """Effective resistance ``(e_a - e_b)^T L_a^+ (e_a - e_b)`` of pairs (inf across components):
        exact from the covariance up to ``exact_limit`` entities, else from the sketch."""
        aa, bb = np.atleast_1d(np.asarray(a, dtype=np.int64)), np.atleast_1d(np.asarray(b, dtype=np.int64))
        if self._cov is not None:
            c = self._cov
            out = c[aa, aa] + c[bb, bb] - 2 * c[aa, bb]
        elif self._sketch is not None:
            out = ((self._sketch[aa] - self._sketch[bb]) ** 2).sum(axis=1)
        else:
            out = np.full(aa.shape, np.inf)
        out = np.maximum(out, 0.0)
        return np.where(self.component[aa] == self.component[bb], out, np.inf)

    def difference_sd(self, a: int, b: int) -> float:
        """Exact sd of ``s_a - s_b`` (two triangular solves); inf across components."""
        if self.component[a] != self.component[b] or self._factor is None:
            return float("inf")
        rhs = np.zeros(self.n_entities)
        rhs[a], rhs[b] = 1.0, -1.0
        x = self._factor.solve(rhs)
        if self._meat is not None:  # the sandwich (ratio_noise)
            e = self.edges
            return float(np.sqrt(max(float(np.sum(self._meat * (x[e.lo] - x[e.hi]) ** 2)), 0.0)))
        return float(np.sqrt(max(self.dispersion * (x[a] - x[b]), 0.0)))


def _divergence(n: int, lo: NDArray[np.int64], hi: NDArray[np.int64], flow: NDArray[np.float64]) -> NDArray[np.float64]:
    """``B^T flow`` with ``b_e = e_lo - e_hi``."""
    out = np.asarray(np.bincount(lo, flow, minlength=n) - np.bincount(hi, flow, minlength=n), dtype=np.float64)
    return out


def _solve_scores(
    n: int,
    lo: NDArray[np.int64],
    hi: NDArray[np.int64],
    y: NDArray[np.float64],
    a: NDArray[np.float64],
    free: NDArray[np.int64],
) -> tuple[NDArray[np.float64], _Factor]:
    """Weighted least squares ``min sum a_e (y_e - s_lo + s_hi)^2`` with the pinned nodes at 0."""
    fac = factor_laplacian(n, lo, hi, a, free)
    rhs = _divergence(n, lo, hi, a * y)
    return fac.solve(rhs), fac


def _centre_per_component(
    x: NDArray[np.float64], comp: NDArray[np.int64], sizes: NDArray[np.float64]
) -> NDArray[np.float64]:
    """Subtract each component's mean from the rows of ``x`` (1-D or 2-D, rows = entities)."""
    if x.ndim == 1:
        return x - (np.bincount(comp, x, minlength=sizes.size) / sizes)[comp]
    indicator = sp.csr_matrix((np.ones(comp.size), (comp, np.arange(comp.size))), shape=(sizes.size, comp.size))
    sums = np.asarray(indicator @ x)
    return x - (sums / sizes[:, None])[comp]


@dataclass(frozen=True)
class Posterior:
    """``diag``: the diagonal of ``P C P`` (unit dispersion); ``resistance``: per edge."""

    diag: NDArray[np.float64]
    resistance: NDArray[np.float64]
    cov: NDArray[np.float64] | None
    sketch: NDArray[np.float64] | None


def posterior(
    fac: _Factor,
    comp: NDArray[np.int64],
    lo: NDArray[np.int64],
    hi: NDArray[np.int64],
    a: NDArray[np.float64],
    *,
    exact: bool,
    probes: int = PROBES,
    seed: int = 0,
) -> Posterior:
    """Score variances (centred per component) and edge resistances from the factor of ``L_a``:
    exact from the inverse, or Hutchinson's diagonal estimator and a Johnson-Lindenstrauss sketch."""
    n, n_edges = fac.n, lo.size
    sizes = np.bincount(comp).astype(np.float64)
    if exact:
        c = fac.inverse()
        rows = c.sum(axis=1)  # C is block-diagonal by component
        tot = np.bincount(comp, rows, minlength=sizes.size)
        diag = np.diag(c) - 2 * rows / sizes[comp] + (tot / sizes**2)[comp]
        resist = c[lo, lo] + c[hi, hi] - 2 * c[lo, hi] if n_edges else np.zeros(0)
        return Posterior(diag, resist, c, None)
    rng = np.random.default_rng(seed)
    z = rng.choice(np.array([-1.0, 1.0]), size=(n, probes))
    az = _centre_per_component(fac.solve(_centre_per_component(z, comp, sizes)), comp, sizes)
    diag = np.mean(z * az, axis=1)
    # Johnson-Lindenstrauss sketch of L^+ B^T A^(1/2): R_e ~ ||Y[lo] - Y[hi]||^2.
    q = rng.choice(np.array([-1.0, 1.0]), size=(n_edges, probes)) * (np.sqrt(a) / np.sqrt(probes))[:, None]
    edge_ids = np.arange(n_edges)
    incidence_t = sp.csr_matrix(
        (np.r_[np.ones(n_edges), -np.ones(n_edges)], (np.r_[lo, hi], np.r_[edge_ids, edge_ids])),
        shape=(n, n_edges),
    )
    sketch = fac.solve(np.asarray(incidence_t @ q))
    resist = ((sketch[lo] - sketch[hi]) ** 2).sum(axis=1) if n_edges else np.zeros(0)
    return Posterior(diag, resist, None, sketch)


@dataclass(frozen=True)
class _Robust:
    """The robust solve on fused edges (before the intervals)."""

    s: NDArray[np.float64]
    sigma: float
    omega: NDArray[np.float64]
    converged: bool
    iterations: int
    reasons: list[str]
    k_comp: int
    comp: NDArray[np.int64]
    pinned: NDArray[np.int64]
    free: NDArray[np.int64]
    df: int
    cyclic_share: float
    fac: _Factor


def _robust_solve(n: int, edges: Edges, *, huber_k: float, max_iter: int, tol: float) -> _Robust:
    """Huber M-estimate of the scores on the fused edges (module docstring: loss and solve)."""
    lo, hi, y, w = edges.lo, edges.hi, edges.y, edges.weight
    n_edges = int(y.size)
    k_comp, comp = graph_components(n, lo, hi, w)
    # Pinned: the lowest index of each component (labels are numbered by first appearance).
    pinned = np.unique(comp, return_index=True)[1].astype(np.int64)
    free_mask = np.ones(n, dtype=bool)
    free_mask[pinned] = False
    free = np.flatnonzero(free_mask).astype(np.int64)
    observed = (np.bincount(lo, minlength=n) + np.bincount(hi, minlength=n)) > 0
    df = n_edges - (n - k_comp)
    mean_leverage = (n - k_comp) / n_edges if n_edges else 0.0
    reasons: list[str] = []
    if k_comp > 1:
        reasons.append(
            f"{k_comp} components ({int((~observed).sum())} entities never compared): "
            "scores across components are not comparable"
        )

    s_ls, fac = _solve_scores(n, lo, hi, y, w, free)
    reasons.extend(fac.reasons)
    # Hodge: gradient part = the plain weighted least-squares flow; the rest is cyclic.
    flow_norm = float(np.sum(w * y * y))
    cyclic = y - (s_ls[lo] - s_ls[hi])
    cyclic_share = float(np.sum(w * cyclic * cyclic)) / flow_norm if flow_norm > 0 else 0.0

    sqrt_w = np.sqrt(w)
    s = s_ls
    sigma = 1.0
    converged, iterations = False, 0

    def huber_value(x: NDArray[np.float64]) -> float:
        v = (y - (x[lo] - x[hi])) * sqrt_w / sigma
        av = np.abs(v)
        return float(np.sum(np.where(av <= huber_k, 0.5 * v * v, huber_k * av - 0.5 * huber_k**2)))

    for it in range(1, max_iter + 1):
        iterations = it
        r_now = y - (s[lo] - s[hi])
        u = r_now * sqrt_w
        if df >= MIN_DF and it <= SCALE_STEPS:
            mad = float(np.median(np.abs(u)))  # about zero: an edge's sign is a labelling choice
            sigma = max(MAD_TO_SD * mad / np.sqrt(1.0 - mean_leverage), SIGMA_FLOOR)
        au = np.abs(u)
        omega = np.where(au <= huber_k * sigma, 1.0, huber_k * sigma / np.maximum(au, 1e-300))
        s_new: NDArray[np.float64] | None = None
        if it > SCALE_STEPS:
            # Newton on the Huber objective at the held scale: the Hessian is the Laplacian of the
            # inlier edges (finite termination once the inlier set settles), with a halving line search.
            inlier = au <= huber_k * sigma
            if graph_components(n, lo, hi, w * inlier)[0] == k_comp:
                force = np.where(inlier, w * r_now, sqrt_w * huber_k * sigma * np.sign(u))
                rhs = _divergence(n, lo, hi, force)
                newton = factor_laplacian(n, lo, hi, w * inlier, free)
                if not newton.reasons:
                    delta = newton.solve(rhs)
                    f0, t = huber_value(s), 1.0
                    for _ in range(40):
                        if huber_value(s + t * delta) <= f0 + 1e-12 * (1.0 + abs(f0)):
                            break
                        t *= 0.5
                    s_new = s + t * delta
        if s_new is None:  # an IRLS step
            s_new = _solve_scores(n, lo, hi, y, w * omega, free)[0]
        step = float(np.max(np.abs(s_new - s))) if n else 0.0
        s = s_new
        if it > SCALE_STEPS and step <= tol * (1.0 + float(np.max(np.abs(s)))):
            converged = True
            break
    if not converged:
        reasons.append(f"IRLS did not converge in {max_iter} iterations")
    u = (y - (s[lo] - s[hi])) * sqrt_w
    omega = np.where(np.abs(u) <= huber_k * sigma, 1.0, huber_k * sigma / np.maximum(np.abs(u), 1e-300))
    return _Robust(
        s, float(sigma), omega, converged, iterations, reasons, k_comp, comp, pinned, free, df, cyclic_share, fac
    )


def fit_ratio(
    n_entities: int,
    i: ArrayLike,
    j: ArrayLike,
    log_ratio: ArrayLike,
    confidence: ArrayLike | None = None,
    *,
    huber_k: float = HUBER_K,
    prior_variance: float = PRIOR_VARIANCE,
    variance_floor: float = VARIANCE_FLOOR,
    exact_limit: int = EXACT_LIMIT,
    probes: int = PROBES,
    seed: int = 0,
    max_iter: int = 200,
    tol: float = 1e-10,
    flag_t: float = FLAG_T,
    noise: str = "entity",
    censor_at: float | None = None,
) -> RatioFit:
    """Fit an attribute board from ratio judgements ``(i, j, log_ratio)`` (see the module docstring).
    ``noise="entity"`` estimates each entity's noise share (``ratio_noise``), ``"pooled"`` assumes one
    level for every edge; ``censor_at`` (the ladder's end in log units, e.g. ``ratio_noise.LADDER_END``)
    treats answers there as censored; None: none is."""
    n = int(n_entities)
    if n < 1:
        raise ValueError("a board needs at least one entity")
    if noise not in ("entity", "pooled"):
        raise ValueError('noise must be "entity" or "pooled"')
    fuse_kw = {"prior_variance": prior_variance, "variance_floor": variance_floor}
    edges = fuse_observations(n, i, j, log_ratio, confidence, **fuse_kw)  # validates the input
    # Observations in canonical orientation and order (lo < hi, y estimates s_lo - s_hi): every
    # per-observation step below is then independent of how the caller listed them.
    a_in, b_in = _as_ids(i, "i"), _as_ids(j, "j")
    r_in = np.asarray(log_ratio, dtype=np.float64)
    c_in = np.full(r_in.shape, np.nan) if confidence is None else np.asarray(confidence, dtype=np.float64) + 0.0
    o_lo, o_hi = np.minimum(a_in, b_in), np.maximum(a_in, b_in)
    o_y = np.where(a_in < b_in, r_in, -r_in) + 0.0
    order = np.lexsort((c_in, o_y, o_hi, o_lo))
    o_lo, o_hi, o_y, o_c = o_lo[order], o_hi[order], o_y[order], c_in[order]
    side = ratio_noise.censored_side(o_y, censor_at)
    rob = _robust_solve(n, edges, huber_k=huber_k, max_iter=max_iter, tol=tol)
    rounds, last_step = 0, 0.0
    entity_var: NDArray[np.float64] | None = None
    pooled_noise = float("nan")
    edge_of = np.searchsorted(edges.lo * n + edges.hi, o_lo * n + o_hi)
    if side.any():
        # The censored likelihood: answers at the ladder's end replaced under the current fit,
        # refitted until the scores settle (ratio_noise).
        for round_no in range(1, ratio_noise.ROUNDS + 1):
            rounds = round_no
            phi = rob.sigma**2 if rob.df >= MIN_DF else 1.0
            mu = rob.s[o_lo] - rob.s[o_hi]
            value, _, info = ratio_noise.censored_moments(
                o_y, side, mu, phi * edges.variance[edge_of], censor_at or 0.0
            )
            # Fisher scoring: the working value mu + (E - mu) / info at weight info (plain EM, the
            # conditional mean at full weight, crept at 0.9 per round).
            working = mu + (value - mu) / info
            edges = fuse_observations(n, o_lo, o_hi, working, o_c, **fuse_kw, info=info, spread=o_y)
            previous = rob.s
            rob = _robust_solve(n, edges, huber_k=huber_k, max_iter=max_iter, tol=tol)
            last_step = float(np.max(np.abs(rob.s - previous)))
            if last_step <= ratio_noise.ROUND_TOL * (1.0 + float(np.max(np.abs(rob.s)))):
                break
    if o_y.size and noise == "entity":
        # Each entity's noise share from the final fit's residuals, for the intervals (ratio_noise).
        phi = rob.sigma**2 if rob.df >= MIN_DF else 1.0
        var_o = phi * edges.variance[edge_of]
        _, sq, info = ratio_noise.censored_moments(o_y, side, rob.s[o_lo] - rob.s[o_hi], var_o, censor_at or 0.0)
        h_o = ratio_noise.observation_leverage(n, rob.k_comp, o_lo, o_hi, info * rob.omega[edge_of] / var_o)
        entity_var, pooled_noise = ratio_noise.entity_variances(n, o_lo, o_hi, sq / (1.0 - h_o), floor=variance_floor)
    reasons = list(rob.reasons)
    if last_step > ratio_noise.ROUND_UNSETTLED:
        # Flat stretches of the censored likelihood (an entity above all its partners by 26x) settle
        # slowly; a last step under ROUND_UNSETTLED (log units) moves no ratio by 1%.
        reasons.append(f"the ladder-end rounds had not settled after {rounds} rounds (last step {last_step:.3g})")
    return _assemble(
        n,
        edges,
        rob,
        reasons,
        huber_k=huber_k,
        exact_limit=exact_limit,
        probes=probes,
        seed=seed,
        flag_t=flag_t,
        method={
            "prior_variance": prior_variance,
            "variance_floor": variance_floor,
            "noise": noise,
            "noise_prior_obs": ratio_noise.ENTITY_PRIOR_OBS,
            "pooled_noise": pooled_noise if np.isfinite(pooled_noise) else None,
            "censor_at": censor_at,
            "censored": int((side != 0).sum()),
            "rounds": rounds,
            "round_step": last_step,
        },
        entity_variance=entity_var,
    )


def _assemble(
    n: int,
    edges: Edges,
    rob: _Robust,
    reasons: list[str],
    *,
    huber_k: float,
    exact_limit: int,
    probes: int,
    seed: int,
    flag_t: float,
    method: dict[str, object],
    entity_variance: NDArray[np.float64] | None,
) -> RatioFit:
    """The intervals and diagnostics of a solve (module docstring: intervals, diagnostics)."""
    lo, hi, y = edges.lo, edges.hi, edges.y
    s, omega, sigma, comp, k_comp, free = rob.s, rob.omega, rob.sigma, rob.comp, rob.k_comp, rob.free
    n_comparisons = (np.bincount(lo, edges.n_obs, minlength=n) + np.bincount(hi, edges.n_obs, minlength=n)).astype(
        np.int64
    )
    observed = n_comparisons > 0
    # The intervals' precision: an answer at the ladder's end says less than its weight in the solve.
    a = edges.weight * omega
    fac = _solve_scores(n, lo, hi, y, a, free)[1]
    for reason in fac.reasons:
        if reason not in reasons:
            reasons.append(reason)
    residual = y - (s[lo] - s[hi])
    phi = sigma**2 if rob.df >= MIN_DF else 1.0

    post = posterior(fac, comp, lo, hi, a, exact=n <= exact_limit, probes=probes, seed=seed)
    diag, resist, cov, sketch = post.diag, post.resistance, post.cov, post.sketch
    std_method, used_probes = ("exact", 0) if cov is not None else ("hutchinson", probes)
    model_std = np.where(observed, np.sqrt(phi * np.maximum(diag, 0.0)), np.inf)
    meat: NDArray[np.float64] | None = None
    if entity_variance is not None and lo.size:
        # The Huber sandwich under the per-entity noise model (ratio_noise): the bread is the expected
        # Hessian, the meat the expected squared score; scale and shape both from the entity model.
        rho = (entity_variance[lo] + entity_variance[hi]) / edges.variance
        bread, meat = ratio_noise.huber_sandwich(edges.weight, rho, huber_k * sigma)
        meat = meat * ratio_noise.t_inflation(n_comparisons, lo, hi)
        fac = factor_laplacian(n, lo, hi, bread, free)
        sizes = np.bincount(comp).astype(np.float64)
        diag = ratio_noise.sandwich_diag(
            fac.solve,
            lambda x: _centre_per_component(x, comp, sizes),
            fac.inverse() if cov is not None else None,
            n,
            lo,
            hi,
            meat,
            probes=probes,
            seed=seed,
        )
    # The sandwich is in absolute units (the entity model sets the scale); the model-based P C P in units
    # of the dispersion.
    std = np.sqrt((1.0 if meat is not None else phi) * np.maximum(diag, 0.0))
    std = np.where(observed, std, np.inf)

    leverage = np.clip(a * resist, 0.0, 1.0)
    bridge = leverage >= 1.0 - 1e-8
    with np.errstate(divide="ignore", invalid="ignore"):
        one_minus = np.where(bridge, np.nan, 1.0 - leverage)
        loo_error = residual / one_minus
        loo_sd = np.sqrt(phi * (1.0 / edges.weight + resist / one_minus))
        loo_t = loo_error / loo_sd
    overridden = np.abs(np.nan_to_num(loo_t, nan=0.0)) > flag_t

    # Each component shifted so its minimum is zero.
    comp_min = np.full(k_comp, np.inf)
    np.minimum.at(comp_min, comp, s)
    scores = s - comp_min[comp] + 0.0

    return RatioFit(
        n_entities=n,
        scores=scores,
        std=std,
        component=comp,
        n_components=k_comp,
        pinned=rob.pinned,
        observed=observed,
        n_comparisons=n_comparisons,
        edges=edges,
        residual=residual,
        huber_weight=omega,
        scale=float(sigma),
        dispersion=float(phi),
        residual_df=int(rob.df),
        cyclic_share=rob.cyclic_share,
        leverage=leverage,
        loo_t=loo_t,
        overridden=overridden,
        iterations=rob.iterations,
        converged=rob.converged,
        degraded=bool(reasons),
        degraded_reasons=tuple(reasons),
        ridge=float(fac.ridge),
        std_method=std_method,
        probes=used_probes,
        seed=int(seed),
        method={
            "model": "log-ratio r = s_i - s_j + noise; scores in natural-log units, min zero per component",
            "loss": f"huber k={huber_k}, scale 1.4826*MAD of standardised edge residuals",
            **method,
            "pooled_variance": edges.pooled_variance,
            "pooled_from_repeats": edges.pooled_from_repeats,
            "std": std_method,
            "exact_limit": exact_limit,
            "flag_t": flag_t,
            "confidence": "recorded per edge, not used as a weight",
        },
        entity_variance=entity_variance,
        model_std=model_std,
        _meat=meat,
        _factor=fac,
        _cov=cov,
        _sketch=sketch,
    )
