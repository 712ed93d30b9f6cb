"""Style control's bootstrap: the rounds that give a style-controlled board its intervals (``ranking.estimators.style``
builds the design and the fit; this module resamples it).

Each round redraws the votes (or the prompts, ``scheme="cluster"``) and refits scores and style coefficients. The
rounds run over every row of the design sorted by pair, the rows not drawn weighted 0, the per-row terms in float32 and
the pair sums by ``np.add.reduceat``; two rounds are solved together (``newton.fixed_hessian_solve_many``), each by its
own stop rule, with the full-data information's inverse; a round whose fixed-Hessian steps stall falls back to damped
Newton. ``solver="newton"`` solves every round by damped Newton (the reference ``benchmarks/ranking.py --style-board``
compares against).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Literal

import numpy as np
import scipy.linalg as la
from numpy.typing import NDArray
from scipy.special import expit

from .aggregate import weighted_bincount
from .bradley_terry import (
    BASE,
    SCALE,
    _null_projector,
    normalise,
)
from .intervals import Intervals, _round_generators, _seed_repr, percentile_bounds
from .newton import fixed_hessian_solve_many
from .style import (
    StyleDesign,
    StyleIntervals,
    StyleResult,
    _blocks,
    _newton,
    _pair_rows,
)

# Bootstrap rounds: the round's maximum to this tolerance (as ``_newton``'s default), by fixed-Hessian
# iterations with the full-data information (``newton.fixed_hessian_solve_many``). The plain map, without
# Anderson's mixing: a style round contracts at about 0.05 (tens of battles per pair), where mixing saves no
# pass (3.05 a round either way at 100,000 votes x 50) and costs a least-squares solve a step; and for the
# plain map the a-posteriori stop is a bound (``fixed_hessian_solve``).
_ROUND_TOL = 1e-5
_ROUND_MAX_ITER = 40


class _StyleRoundSolver:
    """Solves style bootstrap rounds with the inverse of the full-data information (from one Cholesky factor).

    A round reweights the rows (a battle drawn k times counts k times), so its optimum is close to the
    full fit and its information close to the full-data one ``H0``: iterating ``v += H0^-1 g(v)``
    (the plain map) converges in a few steps, each one pass over the rows for the gradient
    only, where a Newton step also rebuilds the (N + F) information (about twice the work of a
    gradient, and a line-search pass of log-likelihoods on top). A round whose steps stop contracting
    falls back to the damped Newton of the fit (``_newton``), so the result never depends on the
    shortcut.

    A pass reads every row, those drawn no time with weight 0: gathering the drawn ones (about 63%) costs
    more than the passes save. The rows are the design's, sorted by pair (``style_design``), so the
    log-strength differences reach the rows by one ``repeat`` of the per-pair values and the per-pair sums
    are one ``reduceat`` (bincount and take cost several times more). The per-row terms are float32 (the
    features, one contiguous row per feature, the target, the full fit's residual, the round's weights):
    half the memory traffic and twice the lanes of float64; the sums over pairs and the steps are float64.
    A round's answer moves by about 1e-7 in log-strength from float64's, a hundredth of the tolerance
    (``_ROUND_TOL``). Rounds are solved in batches (``solve_many``, ``round_batches``)."""

    def __init__(self, sd: StyleDesign, fit: StyleResult, null_proj: NDArray[np.float64] | None) -> None:
        self.sd = sd
        self.prior = fit.params.prior_games
        self.null_proj = null_proj
        self.v0 = np.concatenate([fit.theta_raw, fit.coef])
        n = sd.n_competitors
        self.n = n
        z0 = (fit.theta_raw[sd.pair_lo] - fit.theta_raw[sd.pair_hi])[sd.pair] + sd.x @ fit.coef
        p0 = expit(z0)
        h0 = _blocks(sd, sd.x, _pair_rows(sd), sd.weight * p0 * (1.0 - p0))
        if self.prior > 0:
            q0 = expit(fit.theta_raw)
            h0[np.arange(n), np.arange(n)] += self.prior * q0 * (1.0 - q0)
        if null_proj is not None:
            h0[:n, :n] += null_proj
        h0[np.diag_indices(h0.shape[0])] += 1e-12
        # A step is the gradient times H0's inverse: one product for a batch of rounds, where a triangular solve
        # costs the same and scipy's checks around it more (the inverse from the Cholesky factor, symmetric).
        size = h0.shape[0]
        self.inverse = la.cho_solve(la.cho_factor(h0, lower=False, check_finite=False), np.eye(size))
        self.inverse = 0.5 * (self.inverse + self.inverse.T)
        # Designs not built by ``style_design`` may be in any order: the solver then keeps its own copy sorted by
        # pair and reads each round's counts through the permutation.
        self.order = None if bool(np.all(sd.pair[1:] >= sd.pair[:-1])) else np.argsort(sd.pair, kind="stable")
        o = slice(None) if self.order is None else self.order
        pair = sd.pair[o]
        self.bounds = np.searchsorted(pair, np.arange(sd.pair_lo.shape[0]))  # each pair's first row
        self.runs = np.diff(self.bounds, append=pair.shape[0])  # and its number of rows (at least 1)
        self.x_t = np.ascontiguousarray(sd.x[o].T, dtype=np.float32)
        self.y = sd.y[o].astype(np.float32)
        self.e0 = (sd.y - p0)[o].astype(np.float32)
        self.weight = None if bool(np.all(sd.weight == 1.0)) else sd.weight[o].astype(np.float32)
        self.fallbacks = 0
        self.iterations = 0
        self._incidence: dict[int, tuple[NDArray[np.int64], NDArray[np.int64]]] = {}

    def incidence(self, per_pair: NDArray[np.float64]) -> NDArray[np.float64]:
        """``inc_t @ per_pair`` for each round's row of ``per_pair`` (lo side plus, hi side minus): two bincounts
        over all the rounds' pairs at once (each round's competitors offset by its row)."""
        k, n = per_pair.shape[0], self.n
        if k not in self._incidence:
            offset = (np.arange(k) * n)[:, None]
            self._incidence[k] = ((offset + self.sd.pair_lo).ravel(), (offset + self.sd.pair_hi).ravel())
        lo, hi = self._incidence[k]
        flat = per_pair.ravel()
        out = weighted_bincount(lo, flat, k * n) - weighted_bincount(hi, flat, k * n)
        return out.reshape(k, n)

    def gradients(self, v: NDArray[np.float64], batch: _RoundBatch, it: int) -> NDArray[np.float64]:
        """The gradients of the rounds of ``batch`` at the rows of ``v``, one round a row."""
        sd, n = self.sd, self.n
        theta = v[:, :n]
        if it == 0:
            r = batch.cw * self.e0  # every round starts at the full fit: the residuals are the fit's
        else:
            # sigmoid(z) = (1 + tanh(z / 2)) / 2, so r = cw (y - sigmoid(z)) = a - h tanh(z / 2) (``_RoundBatch``):
            # one tanh where the logistic takes an exp, an add and a divide, and no overflow to silence.
            half = 0.5 * v
            r = np.repeat(np.subtract(half[:, sd.pair_lo], half[:, sd.pair_hi], dtype=np.float32), self.runs, axis=1)
            r += half[:, n:].astype(np.float32) @ self.x_t
            np.tanh(r, out=r)
            r *= batch.h
            np.subtract(batch.a, r, out=r)
        g = np.empty(v.shape)
        g[:, :n] = self.incidence(np.add.reduceat(r, self.bounds, axis=1).astype(np.float64))
        g[:, n:] = r @ self.x_t.T
        if self.prior > 0:
            g[:, :n] -= (0.5 * self.prior) * np.tanh(0.5 * theta)  # prior (1/2 - sigmoid(theta))
        return g

    def solve(self, k: NDArray[np.int64]) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        return self.solve_many([k])[0]

    def solve_many(self, ks: list[NDArray[np.int64]]) -> list[tuple[NDArray[np.float64], NDArray[np.float64]]]:
        """Rounds of counts ``ks`` (one count per row of the design) solved together: each pass is one array
        operation over all of them (rounds x rows), so numpy's per-call cost is paid once for the batch, and the
        rounds' steps are one product with H0's inverse (``fixed_hessian_solve_many``: each round stops by its
        own rule, at the pass it would alone). Rounds that stall are solved by damped Newton on their rows drawn."""
        batch = _RoundBatch(self, ks)
        out = fixed_hessian_solve_many(
            np.tile(self.v0, (len(ks), 1)),
            lambda v, it, active: self.gradients(v, batch.only(active), it),
            self.inverse,
            tol=_ROUND_TOL,
            max_iter=_ROUND_MAX_ITER,
        )
        results = []
        for k, (v, iterations) in zip(ks, out, strict=True):
            self.iterations += iterations
            if v is not None:
                results.append((v[: self.n], v[self.n :]))
                continue
            self.fallbacks += 1
            sd = self.sd
            theta, beta, _, _ = _newton(
                sd,
                sd.weight * k,
                self.v0[: self.n],
                self.v0[self.n :],
                prior=self.prior,
                null_proj=self.null_proj,
                rows=np.flatnonzero(k),
            )
            results.append((theta, beta))
        return results


class _RoundBatch:
    """Rounds solved together: their rows' weights times counts (``cw``, rounds x rows, float32, in the solver's
    row order), and for the passes ``a = cw (y - 1/2)`` and ``h = cw / 2`` (the residual is ``a - h tanh(z/2)``);
    ``only`` keeps the rounds still running."""

    def __init__(self, solver: _StyleRoundSolver, ks: list[NDArray[np.int64]]) -> None:
        cw = np.empty((len(ks), solver.y.shape[0]), dtype=np.float32)
        for j, k in enumerate(ks):
            cw[j] = k if solver.order is None else k[solver.order]
        if solver.weight is not None:
            cw *= solver.weight
        self.cw = cw
        self.h = 0.5 * cw
        self.a = cw * solver.y
        self.a -= self.h
        self.rounds = np.arange(len(ks))

    def only(self, rounds: NDArray[np.int64]) -> _RoundBatch:
        if rounds.shape != self.rounds.shape:  # rounds stopped: drop their rows once
            keep = np.searchsorted(self.rounds, rounds)
            self.cw, self.h, self.a, self.rounds = self.cw[keep], self.h[keep], self.a[keep], rounds
        return self


# Rounds solved together (``_StyleRoundSolver.solve_many``): at most this many, and about this many rows x rounds
# at once (the batch's arrays, float32: some 16 bytes a row and round, 16 MB at 100,000 votes).
_ROUND_BATCH = 2
_ROUND_BATCH_CELLS = 1_000_000


def round_batches(rounds: int, rows: int) -> int:
    """The rounds a batch solves: at most ``_ROUND_BATCH`` and ``_ROUND_BATCH_CELLS`` row-rounds, and an even
    number of batches (the bootstrap runs them on two threads). From the data alone, never from the threads, so
    a bootstrap's samples do not depend on them."""
    most = max(1, min(_ROUND_BATCH, _ROUND_BATCH_CELLS // max(rows, 1)))
    batches = -(-rounds // most)
    batches += batches % 2 if rounds > 1 else 0
    return -(-rounds // batches)


def style_bootstrap_intervals(
    sd: StyleDesign,
    fit: StyleResult,
    *,
    rounds: int = 100,
    confidence: float = 0.95,
    scheme: Literal["multinomial", "poisson", "cluster"] = "multinomial",
    seed: int | np.random.SeedSequence = 0,
    workers: int = 2,
    solver: Literal["fixed_hessian", "newton"] = "fixed_hessian",
) -> StyleIntervals:
    """Percentile bootstrap for scores and coefficients.

    ``multinomial`` resamples battles (``bincount`` of m uniform draws: exactly multinomial),
    ``poisson`` gives each battle a Poisson(1) count, ``cluster`` resamples prompts (needs clusters).
    Each round is solved to the fit's tolerance from ``fit`` by fixed-Hessian iterations with the
    full-data information (``_StyleRoundSolver``; damped Newton where they stall), or with
    ``solver="newton"`` by damped Newton on the rows drawn at least once (the reference the tests and
    the benchmark compare with); rounds run on ``workers`` threads, each with its own generator, so
    output does not depend on ``workers``.
    """
    if not 0.0 < confidence < 1.0:
        raise ValueError("confidence must lie strictly between 0 and 1")
    if rounds < 1:
        raise ValueError("rounds must be >= 1")
    if scheme == "cluster" and sd.cluster is None:
        raise ValueError("scheme='cluster' needs a design built with cluster ids")
    if scheme not in ("multinomial", "poisson", "cluster"):
        raise ValueError("scheme must be 'multinomial', 'poisson' or 'cluster'")
    if solver not in ("fixed_hessian", "newton"):
        raise ValueError("solver must be 'fixed_hessian' or 'newton'")
    prior = fit.params.prior_games
    reference = fit.params.reference
    null_proj = _null_projector(fit.components) if prior == 0 else None
    m = sd.n_rows
    round_solver = _StyleRoundSolver(sd, fit, null_proj) if solver == "fixed_hessian" else None

    def draw(g: np.random.Generator) -> NDArray[np.int64]:
        """A round's count of each row."""
        k: NDArray[np.int64]
        if scheme == "multinomial":
            k = np.bincount(g.integers(0, m, m), minlength=m)
        elif scheme == "poisson":
            k = g.poisson(1.0, m)
        else:
            assert sd.cluster is not None
            c = sd.n_clusters
            k = np.bincount(g.integers(0, c, c), minlength=c)[sd.cluster]
        return k

    def one(g: np.random.Generator) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        k = draw(g)
        rows = np.flatnonzero(k)
        theta, beta, _, _ = _newton(
            sd, sd.weight * k, fit.theta_raw, fit.coef, prior=prior, null_proj=null_proj, rows=rows
        )
        return theta, beta

    gens = _round_generators(seed, rounds)
    if round_solver is not None:
        # Rounds in batches (``round_batches``), each drawn and solved in its worker thread.
        size = round_batches(rounds, m)
        batches = [gens[i : i + size] for i in range(0, rounds, size)]
        fixed: _StyleRoundSolver = round_solver

        def batch(gs: list[np.random.Generator]) -> list[tuple[NDArray[np.float64], NDArray[np.float64]]]:
            return fixed.solve_many([draw(g) for g in gs])

        if workers > 1 and len(batches) > 1:
            with ThreadPoolExecutor(max_workers=workers) as ex:
                out = [r for results in ex.map(batch, batches) for r in results]
        else:
            out = [r for gs in batches for r in batch(gs)]
    elif workers > 1 and rounds > 1:
        with ThreadPoolExecutor(max_workers=workers) as ex:
            out = list(ex.map(one, gens))
    else:
        out = [one(g) for g in gens]
    thetas = np.stack([o[0] for o in out])
    betas = np.stack([o[1] for o in out])
    samples = SCALE * normalise(thetas, fit.components, reference, fit.centre) + BASE
    lower, upper = percentile_bounds(samples, confidence)
    se = samples.std(axis=0, ddof=1) if rounds > 1 else np.zeros(samples.shape[1])
    params = {"rounds": rounds, "scheme": scheme, "seed": _seed_repr(seed), "resample": "rows"}
    scores = Intervals(lower, upper, se, "bootstrap", confidence, samples, params)
    c_lo, c_hi = percentile_bounds(betas, confidence)
    c_se = betas.std(axis=0, ddof=1) if rounds > 1 else np.zeros(betas.shape[1])
    return StyleIntervals(scores, c_lo, c_hi, c_se, betas)
