"""The factorisations behind the ratio estimator (``ratio.py``): a Cholesky factor of a reduced weighted
Laplacian with a tiny ridge, escalated on failure, dense (LAPACK) or sparse (SuperLU in symmetric mode),
and the ill-conditioning flag (``ratio.py``'s docstring, *Loss and solve*)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.linalg as la
import scipy.sparse as sp
import scipy.sparse.linalg as spla
from numpy.typing import NDArray

RIDGE = 1e-12
RIDGE_DOMINATED = 1e3

__all__ = ["RIDGE", "RIDGE_DOMINATED", "factor_reduced", "factor_reduced_sparse", "laplacian_sparse"]


@dataclass
class _Factor:
    """Cholesky factor of a reduced Laplacian (rows/cols ``free``), or a pseudo-inverse fallback."""

    n: int
    free: NDArray[np.int64]
    cho: tuple[NDArray[np.float64], bool] | None
    pinv: NDArray[np.float64] | None
    ridge: float
    reasons: list[str]
    lu: Any = None  # a sparse symmetric factor (scipy SuperLU, diagonal pivots) above SPARSE_ABOVE

    def solve(self, rhs: NDArray[np.float64]) -> NDArray[np.float64]:
        """``C rhs`` with ``C`` the reduced inverse padded with zeros at the pinned nodes."""
        out = np.zeros(rhs.shape)
        if self.free.size == 0:
            return out
        sub = rhs[self.free]
        if self.lu is not None:
            out[self.free] = self.lu.solve(np.ascontiguousarray(sub))
        elif self.cho is not None:
            out[self.free] = la.cho_solve(self.cho, sub, check_finite=False)
        else:
            assert self.pinv is not None
            out[self.free] = self.pinv @ sub
        return out

    def inverse(self) -> NDArray[np.float64]:
        """The padded reduced inverse ``C`` (n x n)."""
        out = np.zeros((self.n, self.n))
        if self.free.size == 0:
            return out
        if self.lu is not None:
            sub = self.lu.solve(np.eye(self.free.size))
        elif self.cho is not None:
            sub = la.cho_solve(self.cho, np.eye(self.free.size), check_finite=False)
        else:
            assert self.pinv is not None
            sub = self.pinv
        out[np.ix_(self.free, self.free)] = sub
        return out


def factor_reduced(mat: NDArray[np.float64], free: NDArray[np.int64], n: int) -> _Factor:
    """Cholesky of ``mat`` (the reduced Laplacian on ``free``) with a tiny ridge, escalated on failure."""
    size = mat.shape[0]
    if size == 0:
        return _Factor(n, free, None, np.zeros((0, 0)), 0.0, [])
    top = float(np.max(np.abs(np.diag(mat)))) if np.all(np.isfinite(mat)) else np.inf
    scale = top if np.isfinite(top) and top > 0 else 1.0
    ridge = RIDGE * scale
    reasons: list[str] = []
    eye = np.eye(size)
    for _ in range(5):
        try:
            if not np.all(np.isfinite(mat)):
                raise la.LinAlgError("non-finite weights")
            c, lower = la.cho_factor(mat + ridge * eye, lower=True, check_finite=False)
        except la.LinAlgError:
            reasons.append(f"Cholesky failed with ridge {ridge:.3g}; ridge escalated")
            ridge *= 1e3
            continue
        pivots = np.diag(c) ** 2
        if not np.all(np.isfinite(pivots)):
            reasons.append(f"Cholesky gave non-finite pivots with ridge {ridge:.3g}; ridge escalated")
            ridge *= 1e3
            continue
        if float(pivots.min()) < RIDGE_DOMINATED * ridge:
            reasons.append(
                f"ill-conditioned: smallest Cholesky pivot {float(pivots.min()):.3g} is within "
                f"{RIDGE_DOMINATED:g}x of the ridge {ridge:.3g} (the ridge, not the data, sets that direction)"
            )
        return _Factor(n, free, (c, lower), None, ridge, reasons)
    clean = np.where(np.isfinite(mat), mat, 0.0)
    reasons.append("Cholesky failed at every ridge; eigen-decomposition pseudo-inverse used")
    vals, vecs = np.linalg.eigh(clean)
    keep = vals > 1e-12 * max(float(np.abs(vals).max()), 1e-300)
    inv = (vecs[:, keep] / vals[keep]) @ vecs[:, keep].T
    return _Factor(n, free, None, inv, ridge, reasons)


def laplacian_sparse(n: int, lo: NDArray[np.int64], hi: NDArray[np.int64], w: NDArray[np.float64]) -> sp.csc_matrix:
    off = sp.coo_matrix((np.r_[-w, -w], (np.r_[lo, hi], np.r_[hi, lo])), shape=(n, n))
    diag = sp.diags(np.bincount(lo, w, minlength=n) + np.bincount(hi, w, minlength=n))
    return (off + diag).tocsc()


def factor_reduced_sparse(mat: sp.csc_matrix, free: NDArray[np.int64], n: int) -> _Factor:
    """The sparse counterpart of ``factor_reduced``: a symmetric factorisation ``L D L^T`` (SuperLU in
    symmetric mode with diagonal pivots only and a minimum-degree ordering, so it is a Cholesky factor
    up to scaling: the pivots ``D`` are positive exactly when the matrix is positive definite), with
    the same ridge, the same escalation and the same ill-conditioning flag. If every ridge fails, the
    dense path (and its pseudo-inverse fallback) takes over."""
    size = mat.shape[0]
    if size == 0:
        return _Factor(n, free, None, np.zeros((0, 0)), 0.0, [])
    diag = mat.diagonal()
    finite = bool(np.all(np.isfinite(mat.data)))
    top = float(np.max(np.abs(diag))) if finite else np.inf
    ridge = RIDGE * (top if np.isfinite(top) and top > 0 else 1.0)
    reasons: list[str] = []
    eye = sp.identity(size, format="csc")
    for _ in range(5) if finite else ():
        try:
            lu = spla.splu(
                (mat + ridge * eye).tocsc(),
                permc_spec="MMD_AT_PLUS_A",
                diag_pivot_thresh=0.0,
                options={"SymmetricMode": True},
            )
        except RuntimeError:
            reasons.append(f"sparse Cholesky failed with ridge {ridge:.3g}; ridge escalated")
            ridge *= 1e3
            continue
        pivots = lu.U.diagonal()
        if not np.all(np.isfinite(pivots)) or float(pivots.min()) <= 0.0:
            reasons.append(f"sparse Cholesky met a non-positive pivot with ridge {ridge:.3g}; ridge escalated")
            ridge *= 1e3
            continue
        if float(pivots.min()) < RIDGE_DOMINATED * ridge:
            reasons.append(
                f"ill-conditioned: smallest Cholesky pivot {float(pivots.min()):.3g} is within "
                f"{RIDGE_DOMINATED:g}x of the ridge {ridge:.3g} (the ridge, not the data, sets that direction)"
            )
        return _Factor(n, free, None, None, ridge, reasons, lu=lu)
    dense = factor_reduced(mat.toarray(), free, n)
    dense.reasons[:0] = [*reasons, "sparse factorisation failed at every ridge; dense path used"]
    return dense
