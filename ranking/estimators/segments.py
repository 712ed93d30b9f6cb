"""Rater-segment boards: Bradley-Terry with a segment x model offset.

Raters are grouped by an attribute (expertise, language, occupation); segment ``s`` may rank the models
differently from the others. The joint model is

    P(i beats j | a rater of segment s) = sigmoid((theta_i + delta_si) - (theta_j + delta_sj))

``theta`` is the model's score across segments, ``delta_si`` its offset in segment ``s`` (logits; the
published scale multiplies by ``SCALE`` = 400 / ln 10). Ties count half a win each side, both_bad as a
tie or dropped, as in the plain fit.

Identifiability. The likelihood does not change when a constant is added to every offset of one segment,
nor when ``c_i`` moves from ``theta_i`` into every ``delta_si``. A ridge ``offset_prior / 2 * sum delta^2``
(a normal prior on each offset with sd ``1 / sqrt(offset_prior)`` logits) fixes both: at the maximum the
offsets of a segment sum to zero over the models, and a model's offsets sum to zero over the segments.
``theta`` has no prior (a prior pulling it toward 0 would push the offsets the other way); it is fixed by
its mean over each connected group of comparisons, as the plain fit with ``prior_games=0``, and published
centred (mean log-strength 0). With the default prior (sd 1 logit = 174 points) an offset is shrunk by
about 1 / (1 + information): some 4% where a model has a hundred votes in the segment (information about
25), 1% at four hundred. A model that won, or lost, every vote of a segment has no finite estimate there
(the prior alone would place it): that cell gets a reason instead of a number.

Intervals. Votes of one rater are not independent (one taste, one reading of the instructions), so the
covariance is the sandwich clustered by rater, ``H^-1 (sum_r g_r g_r') H^-1 * R / (R - 1)``, with ``H``
the penalised information and ``g_r`` rater r's score. A rater belongs to one segment. Each published
interval takes the larger of that variance and the model-based one (``H^-1``): the clustered variance is
the raters' empirical spread, zero where every vote is a tie.

Heterogeneity (does any segment rank the models differently?). The identified quantities are the double
contrasts ``(phi_si - phi_sk) - (phi_0i - phi_0k)`` of the segment scores ``phi = theta + delta`` (segment 0
the reference, model k the reference model), over the models estimable in every tested segment: q =
(S - 1)(K - 1) of them, zero for all under the null. Their cluster-robust Wald statistic W is referred
to Hotelling's T^2 with R clusters: ``F = W (R - q) / (q (R - 1))`` on (q, R - q) degrees of freedom,
which is defined only for R > q (fewer raters than contrasts: no test, a reason).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.linalg as la
import scipy.sparse as sp
from numpy.typing import ArrayLike, NDArray
from scipy.special import expit
from scipy.stats import f as f_dist

from .aggregate import BOTH_BAD, LEFT_WINS, RIGHT_WINS, validate_battles, weighted_bincount
from .bradley_terry import BothBad, _null_projector, normalisation_matrix, softplus
from .graph import components
from .newton import damped_newton
from .style import fit_style, style_checks, style_design, style_sandwich_intervals, style_subset

__all__ = [
    "Heterogeneity",
    "SegmentFit",
    "SegmentStyle",
    "fit_segment_styles",
    "fit_segments",
]

HETEROGENEITY_METHOD = (
    "cluster-robust Wald test (by rater) of the (S-1)(K-1) double contrasts of segment scores, "
    "Hotelling T^2 small-sample F on (q, R - q) degrees of freedom"
)


@dataclass(frozen=True)
class Heterogeneity:
    """The test that no segment ranks the models differently: ``p_value`` None with a ``reason``
    when it cannot be computed."""

    statistic: float | None
    f_statistic: float | None
    df: int
    df_denominator: int
    p_value: float | None
    raters: int
    segments: tuple[int, ...]
    models: tuple[int, ...]
    reason: str | None


@dataclass(frozen=True)
class SegmentFit:
    """The joint fit. Arrays are ``(S, N)`` for segment x model, ``(N,)`` for models; logits.

    ``estimable[s, i]``: model i has at least ``min_cell_votes`` votes in segment s and lies in the
    segment's largest connected group of comparisons (its offset and segment score mean something);
    ``cell_reason[s][i]`` says why not otherwise. ``segment_reason[s]``: why a whole segment is not
    estimable (None when it is)."""

    theta: NDArray[np.float64]
    theta_se: NDArray[np.float64]
    offset: NDArray[np.float64]
    offset_se: NDArray[np.float64]
    segment_theta: NDArray[np.float64]
    segment_se: NDArray[np.float64]
    cell_votes: NDArray[np.float64]
    segment_votes: NDArray[np.float64]
    segment_raters: NDArray[np.int64]
    estimable: NDArray[np.bool_]
    cell_reason: tuple[tuple[str | None, ...], ...]
    segment_reason: tuple[str | None, ...]
    heterogeneity: Heterogeneity
    offset_prior: float
    groups: int
    iterations: int
    converged: bool


def _oriented(
    a: ArrayLike, b: ArrayLike, outcome: ArrayLike, n: int, both_bad: BothBad
) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.float64], NDArray[np.bool_]]:
    bt = validate_battles(a, b, outcome, n_competitors=n)
    keep = np.ones(bt.a.shape[0], dtype=bool) if both_bad == "tie" else bt.outcome != BOTH_BAD
    y_left = np.where(bt.outcome == LEFT_WINS, 1.0, np.where(bt.outcome == RIGHT_WINS, 0.0, 0.5))
    swapped = bt.a > bt.b
    lo = np.where(swapped, bt.b, bt.a)
    hi = np.where(swapped, bt.a, bt.b)
    y = np.where(swapped, 1.0 - y_left, y_left)
    return lo, hi, y, keep


def _laplacian(n: int, lo: NDArray[np.int64], hi: NDArray[np.int64], w: NDArray[np.float64]) -> NDArray[np.float64]:
    """Dense weighted Laplacian of edges that may repeat (a pair in several segments): weights summed."""
    out = np.zeros((n, n))
    np.add.at(out, (lo, hi), -w)
    out += out.T
    out[np.diag_indices(n)] = np.bincount(lo, w, minlength=n) + np.bincount(hi, w, minlength=n)
    return out


def _design(lo: NDArray[np.int64], hi: NDArray[np.int64], seg: NDArray[np.int64], n: int, s: int) -> sp.csr_matrix:
    """One row per cell: +1 at theta_lo and delta_s,lo, -1 at theta_hi and delta_s,hi."""
    m = lo.shape[0]
    rows = np.repeat(np.arange(m), 4)
    cols = np.stack([lo, hi, n + seg * n + lo, n + seg * n + hi], axis=1).ravel()
    vals = np.tile(np.array([1.0, -1.0, 1.0, -1.0]), m)
    return sp.csr_matrix((vals, (rows, cols)), shape=(m, n * (s + 1)))


def fit_segments(
    a: ArrayLike,
    b: ArrayLike,
    outcome: ArrayLike,
    segment: ArrayLike,
    rater: ArrayLike,
    *,
    n_competitors: int,
    n_segments: int,
    both_bad: BothBad = "tie",
    offset_prior: float = 1.0,
    min_cell_votes: float = 30.0,
    min_segment_votes: float = 100.0,
    max_iter: int = 100,
    tol: float = 1e-8,
) -> SegmentFit:
    """The joint fit of scores and segment x model offsets (module docstring), their rater-clustered
    covariance and the heterogeneity test. ``segment`` codes 0..S-1 per vote (a vote outside every
    segment is not passed in), ``rater`` any non-negative id (the cluster)."""
    if both_bad not in ("tie", "drop"):
        raise ValueError("both_bad must be 'tie' or 'drop'")
    if offset_prior <= 0:
        raise ValueError("offset_prior must be > 0 (it identifies the offsets)")
    n, s = int(n_competitors), int(n_segments)
    if s < 1:
        raise ValueError("need at least one segment")
    lo, hi, y, keep = _oriented(a, b, outcome, n, both_bad)
    seg = np.asarray(segment, dtype=np.int64).ravel()
    rat = np.asarray(rater, dtype=np.int64).ravel()
    if seg.shape[0] != keep.shape[0] or rat.shape[0] != keep.shape[0]:
        raise ValueError("segment and rater need one entry per battle")
    if seg.size and (seg.min() < 0 or seg.max() >= s):
        raise ValueError(f"segment codes must lie in 0..{s - 1}")
    if rat.size and rat.min() < 0:
        raise ValueError("rater ids must be non-negative")
    lo, hi, y, seg, rat = lo[keep], hi[keep], y[keep], seg[keep], rat[keep]
    _, rater_code = np.unique(rat, return_inverse=True)
    rater_code = rater_code.astype(np.int64)
    n_raters = int(rater_code.max()) + 1 if rater_code.size else 0

    # Cells (rater, segment, pair): the sandwich groups them by rater; the fit reads them summed over the
    # raters, one (segment, pair) cell a row of its design.
    key = (rater_code * s + seg) * (n * n) + lo * n + hi
    uniq, inverse = np.unique(key, return_inverse=True)
    cnt = np.bincount(inverse, minlength=uniq.shape[0]).astype(np.float64)
    ysum = weighted_bincount(inverse, y, uniq.shape[0])
    c_pair = uniq % (n * n)
    c_lo, c_hi = c_pair // n, c_pair % n
    c_seg = (uniq // (n * n)) % s
    c_rater = uniq // (n * n * s)
    f_uniq, f_inverse = np.unique(c_seg * (n * n) + c_pair, return_inverse=True)
    f_cnt = weighted_bincount(f_inverse, cnt, f_uniq.shape[0])
    f_ysum = weighted_bincount(f_inverse, ysum, f_uniq.shape[0])
    f_pair = f_uniq % (n * n)
    f_lo, f_hi, f_seg = f_pair // n, f_pair % n, f_uniq // (n * n)
    x = _design(f_lo, f_hi, f_seg, n, s)
    xt = x.T.tocsr()
    size = n * (s + 1)
    penalty = np.concatenate([np.zeros(n), np.full(n * s, offset_prior)])
    # theta's null directions (a constant per connected group of comparisons) filled, not penalised: the
    # likelihood's gradient is orthogonal to them, so Newton from 0 stays centred.
    pair_all = weighted_bincount(c_pair, cnt, n * n)
    edges = np.flatnonzero(pair_all)
    n_groups, groups = components(n, edges // n, edges % n, pair_all[edges])
    null = np.zeros((size, size))
    null[:n, :n] = _null_projector(groups)

    def value(v: NDArray[np.float64]) -> float:
        z = x @ v
        return float(f_ysum @ z - f_cnt @ softplus(z)) - 0.5 * float(penalty @ (v * v))

    def information(v: NDArray[np.float64]) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        z = x @ v
        p = expit(z)
        grad = xt @ (f_ysum - f_cnt * p) - penalty * v
        w = f_cnt * p * (1.0 - p)
        # The negative Hessian by blocks, each a graph Laplacian: theta-theta of all the cells, and for
        # each segment theta-delta_s and delta_s-delta_s of its own (delta_s and delta_t never meet).
        hess = np.zeros((size, size))
        hess[:n, :n] = _laplacian(n, f_lo, f_hi, w)
        for k in range(s):
            mine = f_seg == k
            block = _laplacian(n, f_lo[mine], f_hi[mine], w[mine])
            at = slice(n + k * n, n + (k + 1) * n)
            hess[:n, at] = block
            hess[at, :n] = block
            hess[at, at] = block
        hess[np.diag_indices(size)] += penalty
        return grad, hess + null

    def objective(v: NDArray[np.float64]) -> tuple[float, NDArray[np.float64], NDArray[np.float64]]:
        grad, hess = information(v)
        return float("nan"), grad, hess

    v, iterations, converged = damped_newton(
        np.zeros(size), objective, value, max_iter=max_iter, tol=tol, line_search_above=1e-2
    )
    _, hess = information(v)
    h_inv = np.linalg.inv(hess) - null  # the pseudo-inverse on theta's null directions: (H + J)^-1 - J

    # Cluster-robust covariance h_inv M h_inv, M = sum_r g_r g_r' (g_r: rater r's score, the residuals of
    # their cells times the cells' rows), kept as a factor B' B (B = U h_inv, U' U = M) so that only what
    # is published is formed: U the raters' scores themselves when there are fewer raters than
    # parameters, else a Cholesky factor of M.
    x_cells = _design(c_lo, c_hi, c_seg, n, s)
    resid = ysum - cnt * expit(x_cells @ v)
    scores = sp.csr_matrix((resid, (c_rater, np.arange(uniq.shape[0]))), shape=(n_raters, uniq.shape[0])) @ x_cells
    if n_raters <= size:
        factor = np.asarray((scores @ h_inv).T)
    else:
        meat = (scores.T @ scores).toarray()
        meat[np.diag_indices(size)] += 1e-12 * max(float(meat.diagonal().max()), 1e-300)
        factor = (la.cholesky(meat, lower=False, check_finite=False) @ h_inv).T
    if n_raters > 1:
        factor *= np.sqrt(n_raters / (n_raters - 1))

    # Published gauge: a model's offsets summing to 0 over the segments (theta takes their mean), theta
    # centred per connected group, each segment's offsets centred over the models. The estimate is there
    # already at the maximum; the map makes the covariances agree (the model-based one is otherwise
    # dominated by directions only the ridge identifies).
    centre = normalisation_matrix(groups)

    def gauge(m: NDArray[np.float64]) -> NDArray[np.float64]:
        """The gauge map applied to the rows of ``m`` (size x k)."""
        th, de = m[:n], m[n:].reshape(s, n, -1)
        mean = de.mean(axis=0)
        th = centre @ (th + mean)
        de = de - mean[None]
        de = de - de.mean(axis=1, keepdims=True)
        return np.concatenate([th, de.reshape(s * n, -1)])

    v_pub = gauge(v[:, None])[:, 0]
    theta = v_pub[:n]
    offset = v_pub[n:].reshape(s, n)
    robust = gauge(factor)
    model = gauge(gauge(h_inv).T)
    idx = np.arange(n)
    # Each interval takes the larger of the clustered and the model-based variance: the clustered one is
    # the empirical spread of the raters' scores, which is zero when every vote is a tie (no residual),
    # and an interval of zero width there would claim a certainty the votes do not have.
    robust_var = np.einsum("ij,ij->i", robust, robust)
    model_var = np.diag(model).copy()
    var = np.maximum(robust_var, model_var)
    theta_se = np.sqrt(np.clip(var[:n], 0.0, None))
    offset_se = np.sqrt(np.clip(var[n:], 0.0, None)).reshape(s, n)
    robust_cross = np.einsum("ij,kij->ki", robust[:n], robust[n:].reshape(s, n, -1))
    model_cross = np.stack([model[idx, n + k * n + idx] for k in range(s)])
    seg_var = np.maximum(
        robust_var[:n][None, :] + robust_var[n:].reshape(s, n) + 2.0 * robust_cross,
        model_var[:n][None, :] + model_var[n:].reshape(s, n) + 2.0 * model_cross,
    )
    segment_theta = theta[None, :] + offset
    segment_se = np.sqrt(np.clip(seg_var, 0.0, None))

    # What each segment and each (segment, model) cell can say.
    cell_votes = np.zeros((s, n))
    np.add.at(cell_votes, (c_seg, c_lo), cnt)
    np.add.at(cell_votes, (c_seg, c_hi), cnt)
    cell_wins = np.zeros((s, n))  # ties half a win
    np.add.at(cell_wins, (c_seg, c_lo), ysum)
    np.add.at(cell_wins, (c_seg, c_hi), cnt - ysum)
    won_all = (cell_votes > 0) & (cell_wins >= cell_votes)
    lost_all = (cell_votes > 0) & (cell_wins <= 0)
    segment_votes = weighted_bincount(c_seg, cnt, s)
    segment_raters = np.array([np.unique(c_rater[c_seg == k]).shape[0] for k in range(s)], dtype=np.int64)
    estimable = np.zeros((s, n), dtype=bool)
    segment_reason: list[str | None] = []
    cell_reason: list[tuple[str | None, ...]] = []
    for k in range(s):
        # A one-sided record (every vote in the segment won, or every one lost) has no finite maximum: its
        # offset would be where the prior stops it, not a figure of the votes.
        one_sided = won_all[k] | lost_all[k]
        enough = (cell_votes[k] >= min_cell_votes) & ~one_sided
        reasons: list[str | None] = [
            None
            if enough[i]
            else f"too few votes in this segment ({int(cell_votes[k, i])} < {min_cell_votes:g})"
            if cell_votes[k, i] < min_cell_votes
            else f"one-sided record in this segment ({'won' if won_all[k, i] else 'lost'} every vote): the votes "
            "set no bound on its offset"
            for i in range(n)
        ]
        if segment_votes[k] < min_segment_votes:
            segment_reason.append(f"too few votes ({int(segment_votes[k])} < {min_segment_votes:g})")
            cell_reason.append(tuple(r or "the segment has too few votes" for r in reasons))
            continue
        if int(enough.sum()) < 2:
            segment_reason.append("fewer than two models with enough votes in this segment: nothing to rank")
            cell_reason.append(tuple(r or "alone in the segment" for r in reasons))
            continue
        in_seg = (c_seg == k) & enough[c_lo] & enough[c_hi]
        pair_w = weighted_bincount(c_pair[in_seg], cnt[in_seg], n * n)
        edges = np.flatnonzero(pair_w)
        _, labels = components(n, edges // n, edges % n, pair_w[edges])
        sizes = np.bincount(labels[enough], minlength=int(labels.max()) + 1)
        main = int(np.argmax(sizes))
        connected = enough & (labels == main)
        if int(connected.sum()) < 2:
            segment_reason.append("no two models with enough votes were compared in this segment")
            cell_reason.append(tuple(r or "not compared with another model here" for r in reasons))
            continue
        for i in np.flatnonzero(enough & ~connected):
            reasons[i] = "not compared, in this segment, with the segment's largest group of models"
        estimable[k] = connected
        segment_reason.append(None)
        cell_reason.append(tuple(reasons))

    heterogeneity = _heterogeneity(v, factor, h_inv, estimable, c_seg, c_rater, n, s)
    return SegmentFit(
        theta=theta,
        theta_se=theta_se,
        offset=offset,
        offset_se=offset_se,
        segment_theta=segment_theta,
        segment_se=segment_se,
        cell_votes=cell_votes,
        segment_votes=segment_votes,
        segment_raters=segment_raters,
        estimable=estimable,
        cell_reason=tuple(cell_reason),
        segment_reason=tuple(segment_reason),
        heterogeneity=heterogeneity,
        offset_prior=float(offset_prior),
        groups=n_groups,
        iterations=iterations,
        converged=converged,
    )


def _heterogeneity(
    v: NDArray[np.float64],
    factor: NDArray[np.float64],
    h_inv: NDArray[np.float64],
    estimable: NDArray[np.bool_],
    c_seg: NDArray[np.int64],
    c_rater: NDArray[np.int64],
    n: int,
    s: int,
) -> Heterogeneity:
    """``factor``: F with the clustered covariance F F' (size x m); ``h_inv`` the model-based one."""
    tested = [k for k in range(s) if estimable[k].any()]
    models = np.flatnonzero(estimable[tested].all(axis=0)) if tested else np.zeros(0, dtype=np.int64)
    raters = int(np.unique(c_rater[np.isin(c_seg, tested)]).shape[0]) if tested else 0

    def refused(reason: str, q: int = 0) -> Heterogeneity:
        return Heterogeneity(None, None, q, 0, None, raters, tuple(tested), tuple(int(i) for i in models), reason)

    if len(tested) < 2:
        return refused("fewer than two segments can be estimated: nothing to compare")
    if models.shape[0] < 2:
        return refused("fewer than two models have enough votes in every estimable segment")
    # phi_si = theta_i + delta_si; contrast (phi_si - phi_sk) - (phi_0i - phi_0k) = the same in delta, and
    # the same in any gauge.
    ref_seg, ref_model = tested[0], int(models[0])
    others = np.array(tested[1:], dtype=np.int64)
    rest = models[1:]

    def contrasts(m: NDArray[np.float64]) -> NDArray[np.float64]:
        d = m[n:].reshape(s, n, -1)
        out: NDArray[np.float64] = (d[others][:, rest] - d[others][:, [ref_model]]) - (
            d[ref_seg][rest] - d[ref_seg][[ref_model]]
        )[None]
        return out.reshape(others.shape[0] * rest.shape[0], -1)

    q = int(others.shape[0] * rest.shape[0])
    if raters <= q:
        return refused(
            f"too few raters ({raters}) for the {q} contrasts tested: the test needs more raters than contrasts", q
        )
    d = contrasts(v[:, None])[:, 0]
    c = contrasts(factor)
    gram = c @ c.T
    scale = float(np.abs(np.diag(gram)).max()) if q else 0.0
    model_scale = float(np.abs(np.diag(contrasts(contrasts(h_inv).T))).max()) if q else 0.0
    try:
        chol = la.cholesky(gram, lower=True, check_finite=False) if scale > 0 else None
    except la.LinAlgError:
        chol = None
    if chol is None or scale <= 1e-10 * model_scale or float(np.abs(np.diag(chol)).min()) ** 2 <= 1e-10 * scale:
        return refused(
            "the votes do not vary enough between raters to test (the contrasts' clustered covariance is "
            "singular: every vote a tie, say)",
            q,
        )
    w = float(np.sum(la.solve_triangular(chol, d, lower=True, check_finite=False) ** 2))
    f_stat = w * (raters - q) / (q * (raters - 1))
    p_value = float(f_dist.sf(f_stat, q, raters - q))
    return Heterogeneity(w, f_stat, q, raters - q, p_value, raters, tuple(tested), tuple(int(i) for i in models), None)


@dataclass(frozen=True)
class SegmentStyle:
    """Style coefficients fitted on one segment's votes (``coef`` None with a ``reason`` when not)."""

    names: tuple[str, ...]
    coef: NDArray[np.float64] | None
    lower: NDArray[np.float64] | None
    upper: NDArray[np.float64] | None
    dropped: tuple[tuple[str, str], ...]
    votes: int
    reason: str | None


def fit_segment_styles(
    a: ArrayLike,
    b: ArrayLike,
    outcome: ArrayLike,
    left_style: ArrayLike,
    right_style: ArrayLike,
    segment: ArrayLike,
    *,
    n_competitors: int,
    n_segments: int,
    both_bad: BothBad = "tie",
    min_votes: int = 100,
    feature_names: tuple[str, ...] | None = None,
    confidence: float = 0.95,
) -> list[SegmentStyle]:
    """The style control's coefficients per segment: ``fit_style`` on each segment's votes alone (after
    ``style_checks``), with sandwich intervals (by vote). A segment under ``min_votes`` votes, or whose
    coefficients cannot be identified or have no finite estimate, gets a reason instead."""
    seg = np.asarray(segment, dtype=np.int64).ravel()
    a_arr, b_arr, o_arr = (np.asarray(z, dtype=np.int64).ravel() for z in (a, b, outcome))
    ls, rs = np.asarray(left_style, dtype=np.float64), np.asarray(right_style, dtype=np.float64)
    out: list[SegmentStyle] = []
    for k in range(n_segments):
        rows = seg == k
        votes = int(rows.sum())
        names = feature_names or ()
        if votes < min_votes:
            out.append(SegmentStyle(names, None, None, None, (), votes, f"too few votes ({votes} < {min_votes})"))
            continue
        sd = style_design(
            a_arr[rows],
            b_arr[rows],
            o_arr[rows],
            ls[rows],
            rs[rows],
            n_competitors=n_competitors,
            both_bad=both_bad,
            feature_names=feature_names,
        )
        checks = style_checks(sd)
        names = sd.features.names
        if not checks.identified:
            out.append(SegmentStyle(names, None, None, None, checks.dropped, votes, "no style feature is identified"))
            continue
        kept = style_subset(sd, checks.kept)
        fit = fit_style(kept)
        if not fit.converged:
            reason = (
                "a style gap predicts the winner almost perfectly: no finite coefficient"
                if fit.separated
                else ("the fit did not converge")
            )
            out.append(SegmentStyle(kept.features.names, None, None, None, checks.dropped, votes, reason))
            continue
        iv = style_sandwich_intervals(kept, fit, confidence=confidence)
        out.append(
            SegmentStyle(kept.features.names, fit.coef, iv.coef_lower, iv.coef_upper, checks.dropped, votes, None)
        )
    return out
