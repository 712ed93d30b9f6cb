"""The one damped Newton method of the package.

Every fit here maximises a concave function (Bradley-Terry, style control, Davidson, a profile point
on an affine slice), so one routine serves them all: the step solves ``H delta = g`` (``H`` the
negative Hessian) through a Cholesky factor, and is halved until the function does not drop. Far
from the optimum a full step can overshoot; once steps are tiny the quadratic model is exact to
O(step^3) and the check would only compare rounding noise, so it is skipped below
``line_search_above``. Newton converges quadratically, so a last step of size s leaves an error of
order s^2.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import scipy.linalg as la
from numpy.typing import NDArray

# f(x), gradient, negative Hessian (positive definite for the strictly concave fits here)
Objective = Callable[[NDArray[np.float64]], tuple[float, NDArray[np.float64], NDArray[np.float64]]]
Value = Callable[[NDArray[np.float64]], float]


def _solve(h: NDArray[np.float64], rhs: NDArray[np.float64]) -> tuple[NDArray[np.float64], object]:
    try:
        factor = la.cho_factor(h, lower=False, check_finite=False)
        return la.cho_solve(factor, rhs, check_finite=False), factor
    except la.LinAlgError:
        # Numerically semi-definite (a strength driven far out with no prior): least squares.
        solution: NDArray[np.float64] = np.asarray(np.linalg.lstsq(h, rhs, rcond=None)[0], dtype=np.float64)
        return solution, None


def damped_newton(
    x0: NDArray[np.float64],
    objective: Objective,
    value: Value,
    *,
    constraint: NDArray[np.float64] | None = None,
    max_iter: int = 100,
    tol: float = 1e-10,
    line_search_above: float = 0.0,
) -> tuple[NDArray[np.float64], int, bool]:
    """Maximise a concave ``f`` from ``x0``; returns ``(x, iterations, converged)``.

    With ``constraint`` = a, the step stays in ``a . x = const`` (``x0`` must be feasible): it solves
    the KKT system through two solves with the same factor. Converged when the last step's largest
    entry is <= ``tol``.
    """
    x = np.array(x0, dtype=np.float64, copy=True)
    for it in range(1, max_iter + 1):
        f0, g, h = objective(x)
        h = h + 1e-12 * np.eye(h.shape[0])
        delta, factor = _solve(h, g)
        if constraint is not None:
            ha = (
                la.cho_solve(factor, constraint, check_finite=False)
                if factor is not None
                else np.linalg.lstsq(h, constraint, rcond=None)[0]
            )
            delta = delta - ha * (constraint @ delta) / (constraint @ ha)
        size = float(np.abs(delta).max()) if delta.size else 0.0
        step = 1.0
        if size > line_search_above:
            if not np.isfinite(f0):
                f0 = value(x)  # objectives may return NaN for f when computing it costs a full pass
            for _ in range(50):
                if value(x + step * delta) >= f0 - 1e-12 * (1.0 + abs(f0)):
                    break
                step *= 0.5
        x = x + step * delta
        if step * size <= tol:
            return x, it, True
    return x, max_iter, False


# Gradient at x; ``it`` is the iteration (0 at the start point, where callers may reuse cached terms).
Gradient = Callable[[NDArray[np.float64], int], NDArray[np.float64]]


def fixed_hessian_solve(
    x0: NDArray[np.float64],
    gradient: Gradient,
    factor: tuple[NDArray[np.float64], bool],
    *,
    tol: float,
    max_iter: int = 60,
    contraction: float = 0.7,
    depth: int = 3,
) -> tuple[NDArray[np.float64] | None, int]:
    """Maximise a concave ``f`` near ``x0`` by iterating ``x += H0^-1 g(x)`` with one Cholesky
    ``factor`` of a fixed negative Hessian ``H0`` (that of a nearby problem: the full data, for a
    bootstrap round), Anderson-accelerated (depth ``depth``: each new point combines the last few so
    that their residuals cancel as well as a least-squares fit allows, which roughly halves the
    iterations of the plain map at the same cost per step).

    The plain map converges linearly at the rate ``||I - H0^-1 H||``; each step costs one gradient and
    two triangular solves, where a Newton step builds and factorises the Hessian. Returns
    ``(x, iterations)`` once the point ``x + delta`` is within about ``tol`` of the maximum (largest entry):
    a step of at most ``tol`` (``damped_newton``'s rule), or, from the third step on, a step whose
    a-posteriori bound ``rho / (1 - rho) * |delta|`` is at most ``tol``, ``rho`` the larger of the last two
    observed contraction ratios (at most 1/2); for a contraction with rate ``rho`` the distance from
    ``x + delta`` to the fixed point is at most that bound (Banach), which saves the pass that would only
    confirm a step already far below ``tol``. With Anderson's mixing the ratios estimate the rate rather than
    bound it: on random quadratics the point was within 1.7 x ``tol`` (``tests/ranking/test_round_solver.py``
    holds it to 2 x; the plain map, ``depth=0``, to 1 x). Returns ``(None, iterations)`` when the steps stop
    shrinking by ``contraction``: the caller then falls back to ``damped_newton``, so the answer never depends
    on the shortcut."""
    x = x0.copy()
    xs: list[NDArray[np.float64]] = []
    fs: list[NDArray[np.float64]] = []
    previous = np.inf
    ratios: list[float] = []
    for it in range(max_iter):
        delta = la.cho_solve(factor, gradient(x, it), check_finite=False)
        size = float(np.abs(delta).max())
        if np.isfinite(previous) and previous > 0:
            ratios.append(size / previous)
        rho = max(ratios[-2:]) if len(ratios) >= 2 else 1.0
        if size <= tol or (rho <= 0.5 and rho / (1.0 - rho) * size <= tol):
            out: NDArray[np.float64] = x + delta
            return out, it + 1
        if size > contraction * previous and it >= 2:
            return None, it + 1
        previous = size
        xs.append(x.copy())
        fs.append(delta)
        if len(xs) > depth + 1:
            xs.pop(0)
            fs.pop(0)
        if len(xs) > 1:
            df = np.stack([fs[k + 1] - fs[k] for k in range(len(fs) - 1)], axis=1)
            dx = np.stack([xs[k + 1] - xs[k] for k in range(len(xs) - 1)], axis=1)
            gamma = np.linalg.lstsq(df, delta, rcond=None)[0]
            x = x + delta - (dx + df) @ gamma
        else:
            x = x + delta
    return None, max_iter


# Gradients of several problems at their points (rows): ``active`` says which of the problems they are (indices
# into the first call's rows, increasing); ``it`` the iteration, shared by all.
Gradients = Callable[[NDArray[np.float64], int, NDArray[np.int64]], NDArray[np.float64]]


def fixed_hessian_solve_many(
    x0: NDArray[np.float64],
    gradients: Gradients,
    inverse: NDArray[np.float64],
    *,
    tol: float,
    max_iter: int = 60,
    contraction: float = 0.7,
) -> list[tuple[NDArray[np.float64] | None, int]]:
    """``fixed_hessian_solve`` without Anderson's mixing (``depth=0``) for several problems at once, one row of
    ``x0`` each, with the inverse ``H0^-1`` of the fixed negative Hessian (symmetric): every iteration takes the
    gradients of the problems still running in one call (so a caller can compute them as one array operation
    over all of them) and their steps as one product with the inverse. Each problem stops, or stalls, by the same
    rules and at the same iteration as alone; returns ``(x, iterations)`` per problem, x None where it stalled.
    The bookkeeping is Python's per problem: a handful of problems, where a dozen small numpy calls an
    iteration would cost more than the passes they steer."""
    k = x0.shape[0]
    out: list[tuple[NDArray[np.float64] | None, int]] = [(None, max_iter)] * k
    x = np.array(x0, dtype=np.float64, copy=True)
    active = list(range(k))
    previous = [math.inf] * k  # per problem still running: the last step's size,
    last = [math.nan] * k  # the last ratio of step sizes,
    rho = [1.0] * k  # and the larger of the last two ratios (1 until there are two)
    for it in range(max_iter):
        if not active:
            break
        delta = gradients(x, it, np.array(active, dtype=np.int64)) @ inverse
        sizes = np.abs(delta).max(axis=1).tolist()
        going: list[int] = []
        for j, size in enumerate(sizes):
            before = previous[j]
            if math.isfinite(before) and before > 0:
                ratio = size / before
                if math.isfinite(last[j]):
                    rho[j] = max(last[j], ratio)
                last[j] = ratio
            r = rho[j]
            if size <= tol or (r <= 0.5 and r / (1.0 - r) * size <= tol):
                out[active[j]] = (x[j] + delta[j], it + 1)
            elif size > contraction * before and it >= 2:
                out[active[j]] = (None, it + 1)
            else:
                previous[j] = size
                going.append(j)
        if len(going) < len(active):
            x, delta = x[going], delta[going]
            active = [active[j] for j in going]
            previous, last, rho = ([v[j] for j in going] for v in (previous, last, rho))
        x += delta
    return out
