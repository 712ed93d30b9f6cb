"""How good a leaderboard is, and whether one board can stand in for another (numpy/scipy only).

**Separability.** The share of pairs of placed competitors (in the same connected group of the comparison
graph) whose score intervals do not overlap. Non-overlap of two marginal intervals at 95% is a stricter test
than a 95% difference interval, so the share is a floor on the pairs the board tells apart.

**Comparison of board B against reference board A**, over the competitors both place:

- Kendall's tau-b of the two score orders, with the Fieller-Hartley-Pearson interval (Fisher's z of tau with
  variance 0.437 / (n - 4)); it needs five shared competitors.
- *Agreement with confidence*: among the pairs A resolves (intervals apart, same group), the share B orders
  the same way by its scores, with a Wilson interval (pairs treated as independent, which they are not
  quite: the interval is indicative). ``confirmed``: B resolves the pair the same way too; ``contradicted``:
  B resolves it the other way.
- *Pair-rank Brier score*: for each pair A resolves (i above j), B's probability that i ranks above j,
  ``p = Phi((s_i - s_j) / sqrt(se_i^2 + se_j^2))`` with each se read from B's own interval (half its width
  over z; an open side: the closed side's distance to the score over z; both sides open: p = 1/2), scored
  as ``mean((1 - p)^2)``. 0 is perfect; 0.25 is what a board that says nothing (p = 1/2) scores; the skill
  ``1 - Brier / 0.25`` is positive when B carries information about A's order.
- A verdict: B "can stand in" for A only when A resolves at least ``MIN_RESOLVED`` pairs, B contradicts
  none of them, and the lower end of the agreement's interval is at least ``STAND_IN_AGREEMENT``.

**Cyclic share (Hodge decomposition).** The pairwise log-odds flow ``y_ij = log((w_ij + 1/2) / (w_ji + 1/2))``
over the decisive votes (``w_ij`` i's wins over j; ties are left out: counted as half a win they would bend a
transitive model, since the logit of ``tie share / 2 + (1 - tie share) p`` is not additive in the strengths,
and read as cycles) on the comparison graph, weighted by its precision ``n_ij q(1 - q)`` (``q`` the rate of a
first weighted least-squares fit, weighted by each pair's own smoothed rate), splits into a gradient part
(the weighted least-squares scores: what any one-dimensional ranking can express) and a cyclic remainder
(curl and harmonic parts together, which only cycles such as rock-paper-scissors make).
``share = ||cyclic||^2_w / ||y||^2_w``. Counting noise alone leaves some cyclic flow: under a transitive
model the cyclic energy weighted by the final fit's rates is approximately chi-square with
``edges - (n - components)`` degrees of freedom, which gives a p-value for "more cycles than noise".

**Top-k error of a ratio board.** The probability that the reported top-k set (the k highest scores) is not
the true one, under the fit's own approximate posterior ``N(scores, cov)``: draws of the scores are
``s + C B^T D^(1/2) z`` (``C`` the factor's reduced inverse, ``B`` the incidence matrix, ``D`` the edges'
precision times the dispersion, or the sandwich's meat under per-entity noise, ``z`` standard normal), whose
covariance is exactly the one the intervals are read from. The share of draws whose top-k set differs from
the reported one estimates the error, with its Monte Carlo standard error; each entity's share of draws in
the top k comes with it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy.stats import chi2, kendalltau, norm

from .aggregate import BOTH_BAD, LEFT_WINS, RIGHT_WINS, TIE, Cells
from .graph import components as graph_components
from .pairwise import wilson_interval
from .ratio import RatioFit, factor_laplacian

MIN_RESOLVED = 10
STAND_IN_AGREEMENT = 0.9
TAU_MIN_SHARED = 5
# The comparison reads pairs as n x n grids: past this many shared competitors it says so instead.
MAX_COMPARED = 3000
# Fieller, Hartley and Pearson (1957): var(atanh(tau)) ~ 0.437 / (n - 4) for Kendall's tau.
TAU_Z_VARIANCE = 0.437


@dataclass(frozen=True)
class BoardScores:
    """The placed competitors of one board: ids, scores, interval bounds (+-inf where open), groups."""

    ids: NDArray[np.int64]
    score: NDArray[np.float64]
    lower: NDArray[np.float64]
    upper: NDArray[np.float64]
    component: NDArray[np.int64]


def board_scores(rows: Sequence[Mapping[str, Any]]) -> BoardScores:
    """From stored leaderboard rows (``competitor_id``, ``score``, ``lower``/``upper`` with ``*_open``,
    ``component``); hidden rows and rows without a score are left out."""
    placed = [r for r in rows if not r.get("hidden") and r.get("score") is not None]

    def side(r: Mapping[str, Any], key: str, open_value: float) -> float:
        value = r.get(key)
        return open_value if value is None or r.get(f"{key}_open") else float(value)

    return BoardScores(
        ids=np.array([int(r["competitor_id"]) for r in placed], dtype=np.int64),
        score=np.array([float(r["score"]) for r in placed], dtype=np.float64),
        lower=np.array([side(r, "lower", -math.inf) for r in placed], dtype=np.float64),
        upper=np.array([side(r, "upper", math.inf) for r in placed], dtype=np.float64),
        component=np.array([int(r.get("component", 0)) for r in placed], dtype=np.int64),
    )


def _num(value: float, digits: int = 4) -> float | None:
    return round(float(value), digits) if math.isfinite(value) else None


def _apart(lower: NDArray[np.float64], upper: NDArray[np.float64]) -> NDArray[np.bool_]:
    """``apart[i, j]``: i's interval lies wholly above j's."""
    return lower[:, None] > upper[None, :]


def separability(board: BoardScores) -> dict[str, Any]:
    """Share of comparable pairs (both placed, same group) whose intervals do not overlap. Sorted counting, so
    a board of thousands of competitors costs n log n, not an n x n matrix: i's interval lies above j's exactly
    when ``upper_j < lower_i``, and at most one of a pair can lie above the other."""
    n = int(board.ids.size)
    groups, sizes = np.unique(board.component, return_counts=True)
    pairs = int(np.sum(sizes * (sizes - 1) // 2))
    count = 0
    for group in groups:
        mine = board.component == group
        uppers = np.sort(board.upper[mine])
        count += int(np.searchsorted(uppers, board.lower[mine], side="left").sum())
    out: dict[str, Any] = {
        "competitors": n,
        "pairs": pairs,
        "separated": count,
        "share": round(count / pairs, 4) if pairs else None,
        "across_groups": n * (n - 1) // 2 - pairs,
        "definition": "share of pairs of placed competitors in the same group whose score intervals do not overlap",
    }
    if not pairs:
        out["reason"] = (
            "fewer than two placed competitors" if n < 2 else "no two placed competitors share a comparison group"
        )
    return out


def _se(board: BoardScores, z: float) -> NDArray[np.float64]:
    """Per competitor, an se read from its interval (inf when both sides are open)."""
    below = board.score - board.lower
    above = board.upper - board.score
    both = np.isfinite(below) & np.isfinite(above)
    one = np.where(np.isfinite(below), below, above)
    half = np.where(both, (board.upper - board.lower) / 2.0, one)
    return np.asarray(half / z, dtype=np.float64)


def _tau(x: NDArray[np.float64], y: NDArray[np.float64], confidence: float) -> dict[str, Any]:
    n = int(x.size)
    if n < 2:
        return {"value": None, "lower": None, "upper": None, "reason": "fewer than two shared competitors"}
    if np.ptp(x) == 0 or np.ptp(y) == 0:
        return {
            "value": None,
            "lower": None,
            "upper": None,
            "reason": "one board gives every shared competitor one score",
        }
    tau = float(kendalltau(x, y).statistic)
    out: dict[str, Any] = {"value": round(tau, 4), "lower": None, "upper": None}
    if n < TAU_MIN_SHARED:
        out["reason"] = f"an interval needs {TAU_MIN_SHARED} shared competitors"
        return out
    z = float(norm.ppf(0.5 + confidence / 2.0))
    centre = math.atanh(max(min(tau, 1 - 1e-12), -1 + 1e-12))
    half = z * math.sqrt(TAU_Z_VARIANCE / (n - 4))
    out["lower"], out["upper"] = round(math.tanh(centre - half), 4), round(math.tanh(centre + half), 4)
    out["interval"] = "Fieller-Hartley-Pearson: atanh(tau) +- z sqrt(0.437 / (n - 4))"
    return out


def board_comparison(
    reference: BoardScores, candidate: BoardScores, *, confidence: float = 0.95, names: tuple[str, str] = ("A", "B")
) -> dict[str, Any]:
    """Candidate board B against reference board A over the competitors both place (module docstring)."""
    name_a, name_b = names
    shared_ids = np.intersect1d(reference.ids, candidate.ids)
    pos_a = {int(c): k for k, c in enumerate(reference.ids)}
    pos_b = {int(c): k for k, c in enumerate(candidate.ids)}
    ia = np.array([pos_a[int(c)] for c in shared_ids], dtype=np.int64)
    ib = np.array([pos_b[int(c)] for c in shared_ids], dtype=np.int64)
    n = int(shared_ids.size)
    z = float(norm.ppf(0.5 + confidence / 2.0))
    out: dict[str, Any] = {
        "reference": name_a,
        "candidate": name_b,
        "shared": n,
        "only_reference": int(reference.ids.size - n),
        "only_candidate": int(candidate.ids.size - n),
        "confidence": confidence,
        "kendall_tau": _tau(reference.score[ia], candidate.score[ib], confidence),
    }
    if n > MAX_COMPARED:
        reason = f"more than {MAX_COMPARED} shared competitors: the pairs were not compared"
        return {
            **out,
            "resolved_by_reference": None,
            "agreement": {"agree": None, "share": None, "lower": None, "upper": None},
            "confirmed": None,
            "contradicted": None,
            "brier": {"score": None, "skill": None, "uninformed": 0.25, "reason": reason},
            "verdict": f"Cannot tell: {reason}.",
            "stands_in": None,
        }
    a_apart = _apart(reference.lower[ia], reference.upper[ia])
    a_same = reference.component[ia][:, None] == reference.component[ia][None, :]
    resolved = a_apart & a_same  # (i, j): A puts i above j with confidence
    ri, rj = np.nonzero(resolved)
    m = int(ri.size)
    sb, lb, ub = candidate.score[ib], candidate.lower[ib], candidate.upper[ib]
    b_same = candidate.component[ib][:, None] == candidate.component[ib][None, :]
    agree = sb[ri] > sb[rj]
    b_apart = _apart(lb, ub) & b_same
    confirmed = b_apart[ri, rj]
    contradicted = b_apart[rj, ri]
    out["resolved_by_reference"] = m
    out["agreement"] = {"agree": int(agree.sum()), "share": None, "lower": None, "upper": None}
    out["confirmed"] = int(confirmed.sum())
    out["contradicted"] = int(contradicted.sum())
    se = _se(BoardScores(candidate.ids[ib], sb, lb, ub, candidate.component[ib]), z)
    if m:
        lo_w, hi_w = wilson_interval(int(agree.sum()), m, confidence=confidence)
        out["agreement"].update(
            share=round(float(agree.mean()), 4), lower=round(float(lo_w), 4), upper=round(float(hi_w), 4)
        )
        sd = np.sqrt(se[ri] ** 2 + se[rj] ** 2)
        with np.errstate(invalid="ignore", divide="ignore"):
            p = np.where(np.isfinite(sd) & (sd > 0), norm.cdf((sb[ri] - sb[rj]) / sd), np.nan)
        # sd 0 (a point interval) decides by the scores; both open: B says nothing (1/2).
        p = np.where(np.isnan(p), np.where(np.isfinite(sd), (np.sign(sb[ri] - sb[rj]) + 1) / 2, 0.5), p)
        brier = float(np.mean((1.0 - p) ** 2))
        out["brier"] = {
            "score": round(brier, 4),
            "skill": round(1.0 - brier / 0.25, 4),
            "uninformed": 0.25,
            "definition": f"mean over the pairs {name_a} resolves of (1 - p)^2, p = {name_b}'s probability that "
            f"the pair ranks as {name_a} has it: Phi(score difference / sqrt(se_i^2 + se_j^2)), each se from "
            f"{name_b}'s interval",
        }
    else:
        out["brier"] = {"score": None, "skill": None, "uninformed": 0.25, "reason": f"{name_a} resolves no pair"}
    out["verdict"], out["stands_in"] = _verdict(out, name_a, name_b)
    return out


def _verdict(c: Mapping[str, Any], name_a: str, name_b: str) -> tuple[str, bool | None]:
    m, agreement = c["resolved_by_reference"], c["agreement"]
    if c["shared"] < 2:
        return f"Cannot tell: {name_a} and {name_b} place fewer than two competitors in common.", None
    if c["contradicted"]:
        return (
            f"{name_b} cannot stand in for {name_a}: it confidently reverses {c['contradicted']} of the {m} pairs "
            f"{name_a} resolves.",
            False,
        )
    if m < MIN_RESOLVED:
        return (
            f"Cannot tell yet: {name_a} resolves {m} pair(s) with confidence; the verdict needs {MIN_RESOLVED}.",
            None,
        )
    pct = round(100 * agreement["share"])
    low = round(100 * agreement["lower"])
    if agreement["lower"] >= STAND_IN_AGREEMENT:
        return (
            f"{name_b} can stand in for {name_a}: it orders {pct}% of the {m} pairs {name_a} resolves the same way "
            f"(at least {low}% at {round(100 * c['confidence'])}% confidence) and reverses none with confidence.",
            True,
        )
    if agreement["upper"] < STAND_IN_AGREEMENT:
        return (
            f"{name_b} cannot stand in for {name_a}: it orders only {pct}% of the {m} pairs {name_a} resolves the "
            f"same way (at most {round(100 * agreement['upper'])}%).",
            False,
        )
    return (
        f"Not yet: {name_b} orders {pct}% of the {m} pairs {name_a} resolves the same way, but the evidence does not "
        f"put that above {round(100 * STAND_IN_AGREEMENT)}% (at least {low}%).",
        None,
    )


def pair_records(
    cells: Cells, *, both_bad: str = "tie"
) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """Per pair (lo < hi): decisive wins of lo and of hi, and the ties (both-bad too under the "tie" rule)."""
    n = cells.n_competitors
    w = cells.weight
    half = (cells.outcome == TIE) | ((cells.outcome == BOTH_BAD) & (both_bad == "tie"))
    win_lo = np.where(cells.outcome == LEFT_WINS, w, 0.0)
    win_hi = np.where(cells.outcome == RIGHT_WINS, w, 0.0)
    lo = np.minimum(cells.lo, cells.hi)
    hi = np.maximum(cells.lo, cells.hi)
    swap = cells.lo > cells.hi
    win_lo, win_hi = np.where(swap, win_hi, win_lo), np.where(swap, win_lo, win_hi)
    key, inverse = np.unique(lo * n + hi, return_inverse=True)
    a = np.bincount(inverse, win_lo, minlength=key.size).astype(np.float64)
    b = np.bincount(inverse, win_hi, minlength=key.size).astype(np.float64)
    t = np.bincount(inverse, np.where(half, w, 0.0), minlength=key.size).astype(np.float64)
    keep = (a + b + t) > 0
    return (key[keep] // n).astype(np.int64), (key[keep] % n).astype(np.int64), a[keep], b[keep], t[keep]


def cyclic_share(
    n: int,
    lo: NDArray[np.int64],
    hi: NDArray[np.int64],
    wins_lo: NDArray[np.float64],
    wins_hi: NDArray[np.float64],
    ties: NDArray[np.float64] | None = None,
) -> dict[str, Any]:
    """Hodge decomposition of the pairwise log-odds flow of the decisive votes (module docstring). One entry
    per pair: ``wins_*`` the decisive wins of each side; ``ties`` (optional) are only counted, as left out."""
    lo, hi = np.asarray(lo, dtype=np.int64), np.asarray(hi, dtype=np.int64)
    wl, wh = np.asarray(wins_lo, dtype=np.float64), np.asarray(wins_hi, dtype=np.float64)
    ties_left_out = 0.0 if ties is None else float(np.sum(ties))
    total = wl + wh
    keep = total > 0
    lo, hi, wl, wh, total = lo[keep], hi[keep], wl[keep], wh[keep], total[keep]
    edges = int(lo.size)
    base: dict[str, Any] = {
        "pairs": edges,
        "ties_left_out": round(ties_left_out, 1),
        "competitors": int(np.unique(np.concatenate([lo, hi])).size) if edges else 0,
        "definition": "Hodge decomposition of the pairwise log-odds flow log((w_ij + 1/2) / (w_ji + 1/2)), "
        "over the decisive votes, weighted by n_ij q(1 - q) with q the transitive fit's rate (one refit): share = "
        "weighted cyclic (curl + harmonic) energy / total energy",
    }
    if edges < 3:
        return {**base, "share": None, "reason": "a cycle needs at least three compared pairs"}
    y = np.log((wl + 0.5) / (wh + 0.5))
    p = (wl + 0.5) / (total + 1.0)
    w = total * p * (1.0 - p)
    _, comp = graph_components(n, lo, hi, w)
    used = np.zeros(n, dtype=bool)
    used[lo], used[hi] = True, True
    pinned = np.unique(comp, return_index=True)[1]
    free = np.setdiff1d(np.flatnonzero(used), pinned).astype(np.int64)

    def gradient(weight: NDArray[np.float64]) -> NDArray[np.float64]:
        rhs = np.bincount(lo, weight * y, minlength=n) - np.bincount(hi, weight * y, minlength=n)
        s = factor_laplacian(n, lo, hi, weight, free).solve(rhs.astype(np.float64))
        return np.asarray(s[lo] - s[hi], dtype=np.float64)

    def fitted(d: NDArray[np.float64]) -> NDArray[np.float64]:
        q = 1.0 / (1.0 + np.exp(-d))
        return np.asarray(total * q * (1.0 - q), dtype=np.float64)

    # The precision read from each pair's own smoothed rate is noisiest where the rate is: one refit with the
    # precision of the fitted (transitive) rates, and the chi-square statistic weighted by the refit's own,
    # keep the noise reference close to calibrated: of Bradley-Terry boards of 8 competitors with 70 decisive votes a
    # pair, 6% pass p < 0.05 (1.7% without the refit); with 5-40 votes a pair, 3-4% (the smoothing shrinks y).
    w = fitted(gradient(w))
    d = gradient(w)
    cyclic = y - d
    energy = float(np.sum(w * y * y))
    cyc = float(np.sum(w * cyclic * cyclic))
    statistic = float(np.sum(fitted(d) * cyclic * cyclic))
    groups = int(np.unique(comp[used]).size)
    df = edges - (int(used.sum()) - groups)
    out = {
        **base,
        "share": round(cyc / energy, 4) if energy > 0 else None,
        "cyclic_energy": round(cyc, 4),
        "total_energy": round(energy, 4),
        "degrees_of_freedom": int(df),
        "groups": groups,
    }
    if energy <= 0:
        out["reason"] = "every compared pair is even: there is no flow to decompose"
    if df <= 0:
        out["p_value"] = None
        out["p_value_reason"] = "the comparison graph has no cycle (a tree): the flow is all gradient"
    else:
        out["chi_square"] = round(statistic, 4)
        out["p_value"] = _num(float(chi2.sf(statistic, df)), 6)
        out["noise_share"] = round(min(1.0, df / energy), 4) if energy > 0 else None
    return out


TOP_K_DRAWS = 2000
# Draws times entities per run: a board of 10,000 entities gets 500 draws (se at most 0.022).
TOP_K_DRAW_CELLS = 5_000_000
_DRAW_CHUNK = 250


def top_k_draws(n_entities: int) -> int:
    """Draws for a board of this size: ``TOP_K_DRAWS``, fewer on a large board (at least 200)."""
    return int(min(TOP_K_DRAWS, max(200, TOP_K_DRAW_CELLS // max(n_entities, 1))))


def top_k_error(fit: RatioFit, top_k: int, *, draws: int = TOP_K_DRAWS, seed: int = 0) -> dict[str, Any]:
    """P(the reported top-k set is wrong) under the fit's posterior (module docstring). Deterministic for a
    seed; the draws are made in chunks, so memory stays at ``entities x 250`` numbers."""
    n = fit.n_entities
    base: dict[str, Any] = {"k": int(top_k), "draws": 0, "probability": None, "se": None}
    if not 1 <= top_k < n:
        return {**base, "reason": f"top k must lie between 1 and {n - 1} (the entities less one)"}
    if fit.n_components > 1:
        return {**base, "reason": f"{fit.n_components} comparison groups: scores across groups are not comparable"}
    factor = fit._factor
    edges = fit.edges
    if factor is None or edges.lo.size == 0:
        return {**base, "reason": "no comparisons: nothing to draw from"}
    lo, hi = edges.lo, edges.hi
    if fit._meat is not None:
        scale = np.sqrt(np.maximum(fit._meat, 0.0))
    else:
        scale = np.sqrt(fit.dispersion * np.maximum(edges.weight * fit.huber_weight, 0.0))
    order = np.lexsort((np.arange(n), -fit.scores))
    reported = np.zeros(n, dtype=bool)
    reported[order[:top_k]] = True
    rng = np.random.default_rng(seed)
    wrong = 0
    inside = np.zeros(n, dtype=np.int64)
    done = 0
    while done < draws:
        m = min(_DRAW_CHUNK, draws - done)
        flow = rng.standard_normal((lo.size, m)) * scale[:, None]
        rhs = np.zeros((n, m))
        np.add.at(rhs, lo, flow)
        np.add.at(rhs, hi, -flow)
        sample = fit.scores[:, None] + factor.solve(rhs)
        # The k-th largest of each draw; entities at or above it form the draw's top k.
        top = np.argpartition(-sample, top_k - 1, axis=0)[:top_k]
        member = np.zeros((n, m), dtype=bool)
        member[top, np.arange(m)[None, :]] = True
        inside += member.sum(axis=1)
        wrong += int((member != reported[:, None]).any(axis=0).sum())
        done += m
    p = wrong / draws
    boundary_in, boundary_out = int(order[top_k - 1]), int(order[top_k])
    return {
        **base,
        "draws": int(draws),
        "seed": int(seed),
        "probability": round(p, 4),
        "se": round(float(np.sqrt(max(p * (1 - p), 1.0 / draws) / draws)), 4),
        "in_top_k": [round(float(v), 4) for v in inside / draws],
        "boundary": [boundary_in, boundary_out],
        "definition": "share of draws from the fit's normal posterior whose k highest scores are not the reported "
        "top-k set",
    }
