"""Adaptive design for attribute boards: which pairs to judge next, and when to stop.

A proposed pair is judged in both presentation orders (two calls). The design never proposes a pair
that was refused, nor (by default) one already judged: the judge runs at temperature 0, so asking
again repeats the answer.

Batch. First, *forced exploration*: every entity with fewer than ``min_partners`` (2) distinct
partners is paired with entities spread across the current ranking (rank quantiles of a golden-ratio
sequence, each partner used once per batch while others remain), never a single hub (when every
spread partner is refused: any free one, then another thin entity); on a cold board
(fewer than two entities with enough partners) the thin entities are joined in a seeded ring. Then
the rest of the batch by *expected information gain* near the top-k boundary. One more judged pair
``(a, b)`` adds precision ``w_new = 2 / (phi tau2)`` (two judgements of variance ``phi tau2``) along ``b_ab =
e_a - e_b``; by Sherman-Morrison it lowers the variance of a contrast ``g`` by ``w_new (g^T C
b_ab)^2 / (1 + w_new R_ab)``, ``R_ab = b_ab^T C b_ab`` the effective resistance (``C = phi L^+``).
The contrasts are ``s_i - c``, ``c`` the boundary (the mean of the k-th and (k+1)-th entities'
scores), each weighted by its relevance ``p_i (1 - p_i) + explore`` where ``p_i = Phi((s_i - c) /
sd_i)`` is the probability that ``i`` is above the boundary and ``explore`` (0.05) keeps the rest
of the ranking measured. Greedy: the best pair is taken and ``C`` updated by the same rank-one
formula, so the batch spreads by itself. This needs the exact covariance (up to 256 entities) and
one component of judged entities; otherwise the gain is ``0.5 log(1 + w_new R_ab)`` weighted by
the sum of the two relevances, the relevance of each entity taken halved, resistances from the
sketch, pairs across components (infinite resistance, capped) first.
On 16 boards of 50 entities at 400 calls (top-10, sd 0.5, 5% wild): top-10 accuracy 0.950 with the
variance-reduction rule, 0.956 with the resistance-only rule, 0.913 with uniform random pairs; the
true log-strength lost from the chosen top 10: 0.048, 0.067, 0.114.

Stopping. After each batch the critical pair (the k-th and the (k+1)-th entity) is checked: it
*separates* when its gap exceeds ``z * inflation * sd(gap)`` (1.96 x 1.5; the inflation pays for
looking after every batch). The board stops early only when it separates on two consecutive checks
and the solve was not degraded (a degraded solve resets the count); otherwise it runs to budget.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy.special import ndtr
from scipy.stats import spearmanr

from .ratio import RatioFit, fit_ratio

GOLDEN = (np.sqrt(5.0) - 1.0) / 2.0
MIN_PARTNERS = 2
EXPLORE = 0.05
Z = 1.96
INFLATION = 1.5
RESISTANCE_CAP = 1e6
ALL_PAIRS_UP_TO = 200
CANDIDATES = 80


def _key(a: int, b: int) -> tuple[int, int]:
    return (a, b) if a < b else (b, a)


@dataclass(frozen=True)
class Proposal:
    pairs: NDArray[np.int64]  # (m, 2), each judged in both orders
    kind: tuple[str, ...]  # "explore" or "boundary", per pair
    gain: NDArray[np.float64]  # expected gain (nats, relevance-weighted); NaN for exploration


def ranking_order(fit: RatioFit) -> NDArray[np.int64]:
    """Entities from the highest score down (ties by index)."""
    return np.lexsort((np.arange(fit.n_entities), -fit.scores)).astype(np.int64)


def boundary(fit: RatioFit, top_k: int) -> tuple[int, int, float]:
    """The critical pair (k-th, (k+1)-th entity) and the boundary midway between their scores."""
    if not 1 <= top_k < fit.n_entities:
        raise ValueError("top_k must be between 1 and the number of entities - 1")
    order = ranking_order(fit)
    a, b = int(order[top_k - 1]), int(order[top_k])
    return a, b, 0.5 * float(fit.scores[a] + fit.scores[b])


def partners(fit: RatioFit) -> NDArray[np.int64]:
    """Distinct partners of each entity."""
    e = fit.edges
    return (np.bincount(e.lo, minlength=fit.n_entities) + np.bincount(e.hi, minlength=fit.n_entities)).astype(np.int64)


def propose_batch(
    fit: RatioFit,
    *,
    top_k: int,
    batch_size: int,
    refused: Iterable[tuple[int, int]] = (),
    seed: int = 0,
    min_partners: int = MIN_PARTNERS,
    explore: float = EXPLORE,
    allow_repeats: bool = False,
) -> Proposal:
    """The next batch of pairs (module docstring). Deterministic given the fit, the refusals and the seed."""
    n = fit.n_entities
    if batch_size < 1:
        raise ValueError("batch_size must be positive")
    rng = np.random.default_rng(seed)
    banned = {_key(int(a), int(b)) for a, b in refused}
    if not allow_repeats:
        banned |= {(int(a), int(b)) for a, b in zip(fit.edges.lo.tolist(), fit.edges.hi.tolist(), strict=True)}
    chosen: list[tuple[int, int]] = []
    kinds: list[str] = []
    gains: list[float] = []

    def free(a: int, b: int) -> bool:
        return a != b and _key(a, b) not in banned

    def take(a: int, b: int, kind: str, gain: float) -> None:
        banned.add(_key(a, b))
        chosen.append((a, b))
        kinds.append(kind)
        gains.append(gain)

    degree = partners(fit)
    thin = np.flatnonzero(degree < min_partners)
    order = ranking_order(fit)
    well = order[degree[order] >= min_partners]
    if thin.size:
        thin = thin[rng.permutation(thin.size)]
        if well.size < 2:
            # Cold board: a seeded ring through every entity (each gets two partners, one component).
            ring = rng.permutation(n)
            for t in range(n):
                a, b = int(ring[t]), int(ring[(t + 1) % n])
                if len(chosen) < batch_size and free(a, b) and (degree[a] < min_partners or degree[b] < min_partners):
                    take(a, b, "explore", float("nan"))
        else:
            used: set[int] = set()
            counter = 0
            offset = float(rng.random())
            for t in thin.tolist():
                need = min_partners - int(degree[t])
                for _ in range(need):
                    if len(chosen) >= batch_size:
                        break
                    # Rank quantiles from a golden-ratio sequence spread the partners over the ranking.
                    for _attempt in range(2 * well.size):
                        q = (offset + GOLDEN * counter) % 1.0
                        counter += 1
                        p = int(well[min(int(q * well.size), well.size - 1)])
                        if free(t, p) and (p not in used or len(used) >= well.size):
                            take(t, p, "explore", float("nan"))
                            used.add(p)
                            break
                    else:
                        # Every spread partner is refused or taken: any free one, then another thin entity.
                        fallback = [int(p) for p in np.r_[well, thin] if free(t, int(p))]
                        if fallback:
                            take(t, fallback[0], "explore", float("nan"))
                            used.add(fallback[0])
    remaining = batch_size - len(chosen)
    if remaining > 0 and n >= 2 and not _boundary_pairs_exact(fit, top_k, remaining, explore, free, take):
        _boundary_pairs(fit, top_k, remaining, explore, free, take)
    pairs = np.array(chosen, dtype=np.int64).reshape(-1, 2)
    return Proposal(pairs=pairs, kind=tuple(kinds), gain=np.array(gains, dtype=np.float64))


def _boundary_pairs_exact(
    fit: RatioFit,
    top_k: int,
    count: int,
    explore: float,
    free: Callable[[int, int], bool],
    take: Callable[[int, int, str, float], None],
) -> bool:
    """Greedy relevance-weighted variance reduction of the boundary contrasts ``s_i - c`` with the
    exact covariance, updated by Sherman-Morrison after each pick. False when it does not apply
    (no exact covariance, or the judged entities form more than one component)."""
    cov = fit._cov
    n = fit.n_entities
    if cov is None or np.unique(fit.component[fit.observed]).size != 1:
        return False
    ka, kb, c = boundary(fit, min(max(top_k, 1), n - 1))
    plan = fit.std if fit.model_std is None else fit.model_std
    sd = np.where(np.isfinite(plan) & (plan > 0), plan, 1e6)
    p = ndtr((fit.scores - c) / sd)
    relevance = p * (1.0 - p) + explore
    a, b = np.triu_indices(n, k=1)
    ok = np.array([free(int(x), int(y)) for x, y in zip(a.tolist(), b.tolist(), strict=True)], dtype=bool)
    ok &= fit.observed[a] | fit.observed[b]
    a, b = a[ok], b[ok]
    if a.size == 0:
        return True
    cmat = cov * fit.dispersion
    w_new = 2.0 / (fit.dispersion * fit.edges.pooled_variance)  # a new pair's precision, units of cmat
    alive = np.ones(a.size, dtype=bool)
    cols = np.arange(a.size)
    for _ in range(count):
        cb = cmat[:, a] - cmat[:, b]  # C (e_a - e_b), n x pairs
        resist = cb[a, cols] - cb[b, cols]
        contrast = cb - 0.5 * (cb[ka] + cb[kb])
        gain = w_new * (relevance[:, None] * contrast**2).sum(axis=0) / (1.0 + w_new * resist)
        gain = np.where(alive, gain, -np.inf)
        best = int(np.argmax(gain))
        if not np.isfinite(gain[best]):
            return True
        take(int(a[best]), int(b[best]), "boundary", float(gain[best]))
        alive[best] = False
        v = cb[:, best]
        cmat = cmat - w_new * np.outer(v, v) / (1.0 + w_new * resist[best])
    return True


def _boundary_pairs(
    fit: RatioFit,
    top_k: int,
    count: int,
    explore: float,
    free: Callable[[int, int], bool],
    take: Callable[[int, int, str, float], None],
) -> None:
    n = fit.n_entities
    k = min(max(top_k, 1), n - 1)
    _, _, c = boundary(fit, k)
    plan = fit.std if fit.model_std is None else fit.model_std
    sd = np.where(np.isfinite(plan) & (plan > 0), plan, 1e6)
    p = ndtr((fit.scores - c) / sd)
    relevance = p * (1.0 - p) + explore
    if n <= ALL_PAIRS_UP_TO:
        cand = np.arange(n)
    else:
        by_relevance = np.lexsort((np.arange(n), -relevance))[:CANDIDATES]
        by_sd = np.lexsort((np.arange(n), -sd))[:CANDIDATES]
        cand = np.unique(np.r_[by_relevance, by_sd])
    ia, ib = np.triu_indices(cand.size, k=1)
    a, b = cand[ia], cand[ib]
    resist = np.minimum(fit.resistance(a, b), RESISTANCE_CAP)
    w_new = 2.0 / fit.edges.pooled_variance
    info = 0.5 * np.log1p(w_new * resist)
    ok = np.array([free(int(x), int(y)) for x, y in zip(a.tolist(), b.tolist(), strict=True)], dtype=bool)
    rel = relevance.copy()
    for _ in range(count):
        score = np.where(ok, (rel[a] + rel[b]) * info, -np.inf)
        best = int(np.argmax(score))
        if not np.isfinite(score[best]):
            return
        x, y = int(a[best]), int(b[best])
        take(x, y, "boundary", float(score[best]))
        ok[best] = False
        rel[x] *= 0.5
        rel[y] *= 0.5


@dataclass(frozen=True)
class StopCheck:
    stop: bool
    reason: str  # "separated", "budget" or "continue"
    consecutive: int
    separated: bool
    critical: tuple[int, int]
    gap: float
    gap_sd: float


def check_stop(
    fit: RatioFit,
    *,
    top_k: int,
    spent: int,
    budget: int,
    consecutive: int = 0,
    z: float = Z,
    inflation: float = INFLATION,
) -> StopCheck:
    """One look: does the critical top-k pair separate under inflated bounds? (module docstring)"""
    a, b, _ = boundary(fit, top_k)
    gap = float(fit.scores[a] - fit.scores[b])
    gap_sd = fit.difference_sd(a, b)
    separated = (not fit.degraded) and np.isfinite(gap_sd) and gap > z * inflation * gap_sd
    run = consecutive + 1 if separated else 0
    if run >= 2:
        return StopCheck(True, "separated", run, True, (a, b), gap, gap_sd)
    if spent >= budget:
        return StopCheck(True, "budget", run, bool(separated), (a, b), gap, gap_sd)
    return StopCheck(False, "continue", run, bool(separated), (a, b), gap, gap_sd)


@dataclass(frozen=True)
class ScoreRow:
    entity: int
    rank: int
    score: float
    std: float
    z_score: float  # (score - boundary) / std: how many sds above the top-k boundary
    percentile: float  # share of the other entities ranked below, in percent
    lower: float
    upper: float
    in_top_k: bool
    stop_reason: str


def score_rows(fit: RatioFit, *, top_k: int, stop_reason: str, z: float = Z) -> list[ScoreRow]:
    """One row per entity, best first."""
    _, _, c = boundary(fit, top_k)
    order = ranking_order(fit)
    n = fit.n_entities
    rows = []
    for rank, e in enumerate(order.tolist(), start=1):
        s, sd = float(fit.scores[e]), float(fit.std[e])
        rows.append(
            ScoreRow(
                entity=e,
                rank=rank,
                score=s,
                std=sd,
                z_score=(s - c) / sd if sd > 0 else float("inf") * np.sign(s - c),
                percentile=100.0 * (n - rank) / (n - 1) if n > 1 else 100.0,
                lower=s - z * sd,
                upper=s + z * sd,
                in_top_k=rank <= top_k,
                stop_reason=stop_reason,
            )
        )
    return rows


def spearman(a: Iterable[float], b: Iterable[float]) -> float:
    """Spearman's rank correlation of two score lists over the same entities (NaN when undefined):
    the replication statistic of two runs (seeds or judges) of one board."""
    x, y = np.asarray(list(a), dtype=np.float64), np.asarray(list(b), dtype=np.float64)
    if x.size < 2 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return float("nan")
    return float(spearmanr(x, y).statistic)


# A judge for simulations: (i, j) -> the log-ratio "i has exp(r) times j", or None for a refusal.
Judge = Callable[[int, int], float | None]


@dataclass(frozen=True)
class BoardRun:
    fit: RatioFit
    stop: StopCheck
    rows: list[ScoreRow]
    calls: int
    refused: frozenset[tuple[int, int]]
    checks: int
    i: NDArray[np.int64]
    j: NDArray[np.int64]
    log_ratio: NDArray[np.float64]


def run_board(
    n_entities: int,
    judge: Judge,
    *,
    top_k: int,
    budget: int,
    batch_size: int,
    seed: int = 0,
    adaptive: bool = True,
    censor_at: float | None = None,
) -> BoardRun:
    """Run a board against a judge until the stopping rule or the budget (calls, two per pair).
    ``adaptive=False`` draws uniform random unjudged pairs instead (the comparison baseline, which
    also runs to budget). ``censor_at``: the judge's ladder end in log units (``fit_ratio``)."""
    rng = np.random.default_rng(seed)
    ii: list[int] = []
    jj: list[int] = []
    rr: list[float] = []
    refused: set[tuple[int, int]] = set()
    asked: set[tuple[int, int]] = set()
    consecutive, calls, checks = 0, 0, 0
    fit = fit_ratio(n_entities, ii, jj, rr, seed=seed, censor_at=censor_at)
    while True:
        checks += 1
        stop = check_stop(fit, top_k=top_k, spent=calls, budget=budget, consecutive=consecutive)
        if adaptive and stop.stop or not adaptive and calls >= budget:
            if not adaptive:
                stop = check_stop(fit, top_k=top_k, spent=calls, budget=budget, consecutive=0)
            break
        consecutive = stop.consecutive
        size = min(batch_size, max((budget - calls) // 2, 1))
        if adaptive:
            pairs = propose_batch(fit, top_k=top_k, batch_size=size, refused=refused, seed=seed + checks).pairs
        else:
            pairs = _uniform_pairs(rng, n_entities, size, asked | refused)
        if pairs.shape[0] == 0:
            stop = StopCheck(True, "exhausted", stop.consecutive, stop.separated, stop.critical, stop.gap, stop.gap_sd)
            break
        for a, b in pairs.tolist():
            asked.add(_key(a, b))
            answers = [(a, b, judge(a, b)), (b, a, judge(b, a))]
            calls += 2
            if any(r is None for _, _, r in answers):
                refused.add(_key(a, b))  # a refusal in either order: the pair is never proposed again
                continue
            for x, y, r in answers:
                assert r is not None
                ii.append(x)
                jj.append(y)
                rr.append(r)
        fit = fit_ratio(n_entities, ii, jj, rr, seed=seed, censor_at=censor_at)
    return BoardRun(
        fit=fit,
        stop=stop,
        rows=score_rows(fit, top_k=top_k, stop_reason=stop.reason),
        calls=calls,
        refused=frozenset(refused),
        checks=checks,
        i=np.array(ii, dtype=np.int64),
        j=np.array(jj, dtype=np.int64),
        log_ratio=np.array(rr, dtype=np.float64),
    )


def _uniform_pairs(rng: np.random.Generator, n: int, size: int, banned: set[tuple[int, int]]) -> NDArray[np.int64]:
    out: list[tuple[int, int]] = []
    seen = set(banned)
    for _ in range(50 * size):
        if len(out) >= size:
            break
        a, b = (int(x) for x in rng.choice(n, 2, replace=False))
        if _key(a, b) not in seen:
            seen.add(_key(a, b))
            out.append((a, b))
    return np.array(out, dtype=np.int64).reshape(-1, 2)
