"""Agreement between raters on shared items: raw agreement, Cohen's kappa, Fleiss' kappa and
Krippendorff's alpha (nominal), with intervals.

Input convention: one row per vote, ``item`` (an integer id of the thing rated: one answer pair shown to
several raters), ``rater`` (an integer id) and ``category`` (a nominal code ``0..n_categories-1``; for
Arena's votes LEFT_WINS, RIGHT_WINS, TIE, BOTH_BAD with sides normalised per item). A rater counts once
per item: a repeat vote of the same rater on the same item is dropped (the first one counts) and
counted in ``Ratings.n_repeats``. Items rated by one rater carry no information on agreement and are
left out of every coefficient (Krippendorff: "unpairable values").

Honesty rules shared by every coefficient here:

- **Not estimable.** Without an item rated by two or more raters (for Cohen: without a common item)
  there is no coefficient; the result has ``value=None`` and a ``reason``, never a number.
- **Undefined.** When every pairable vote falls in one category, chance agreement is 1 (expected
  disagreement 0) and kappa/alpha are 0/0: ``value=None`` with that reason (the observed agreement,
  1.0, is still reported).
- **Bootstrap over items.** Intervals that are not asymptotic resample *items* with replacement
  (multinomial weights over the items' count patterns, which is the same thing, since items with the
  same counts are interchangeable; seeded: the same data and seed give the same interval) and
  take the (B+1)q order statistics of the replicates, as the leaderboard's bootstrap does. Replicates
  in which the coefficient is undefined are dropped and counted (``bootstrap_undefined``); when more
  than half of them are, no interval is given.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike, NDArray
from scipy.stats import norm

NOT_ESTIMABLE_REASON = "no item was rated by two or more raters: agreement is not estimable"
NO_COMMON_ITEMS_REASON = "the two raters have no item in common: kappa is not estimable"
ONE_CATEGORY_REASON = (
    "every vote falls in one category, so chance agreement is 1 (expected disagreement 0) and the "
    "coefficient is undefined (0/0); the observed agreement is perfect"
)
BOOTSTRAP_UNDEFINED_REASON = "the coefficient is undefined in over half of the bootstrap replicates"
SINGLE_ITEM_REASON = "one item cannot be resampled: no bootstrap interval"

# Bootstrap weights are drawn in blocks of at most this many (rounds x patterns) entries.
_BLOCK_ELEMENTS = 1 << 20


@dataclass(frozen=True)
class Ratings:
    """Validated votes: compact item and rater indices (``items``/``raters`` hold the original ids,
    sorted), one vote per (item, rater) and the per-item category counts."""

    n_categories: int
    item: NDArray[np.int64]  # compact index into ``items``, one per kept vote
    rater: NDArray[np.int64]  # compact index into ``raters``
    category: NDArray[np.int64]
    items: NDArray[np.int64]
    raters: NDArray[np.int64]
    counts: NDArray[np.float64]  # n_items x n_categories: raters per category per item
    n_repeats: int

    @property
    def n_per_item(self) -> NDArray[np.float64]:
        out: NDArray[np.float64] = self.counts.sum(axis=1)
        return out


@dataclass(frozen=True)
class Coefficient:
    """One chance-corrected agreement coefficient with its interval.

    ``value`` is None when the coefficient is not estimable or undefined (``reason`` says which);
    ``lower``/``upper`` are None when there is no interval (``interval_reason``). ``observed`` and
    ``expected`` are the observed and chance agreement (1 − the disagreements, for alpha). ``se``
    is the asymptotic standard error where one is used, ``se_null`` the one under "no agreement beyond
    chance" with ``z``/``p_value`` testing it (Cohen; Fleiss with a fixed number of raters per item).
    """

    name: str
    value: float | None
    lower: float | None = None
    upper: float | None = None
    confidence: float = 0.95
    interval_method: str = ""
    reason: str | None = None
    interval_reason: str | None = None
    observed: float | None = None
    expected: float | None = None
    se: float | None = None
    se_null: float | None = None
    z: float | None = None
    p_value: float | None = None
    n_items: int = 0
    n_values: int = 0
    bootstrap_undefined: int = 0
    extra: dict[str, object] = field(default_factory=dict)


@dataclass(frozen=True)
class RawAgreement:
    """Observed (raw) agreement.

    Per item ``i`` with ``n_i >= 2`` raters: the share of its rater pairs that agree,
    ``P_i = sum_k n_ik (n_ik - 1) / (n_i (n_i - 1))`` (NaN for items with fewer than two raters).
    ``overall`` is the mean of ``P_i`` over those items (Fleiss' P-bar); ``overall_pairs`` weights by
    pairs (agreeing pairs / all pairs). Per rater: over the items they share with others, the agreeing
    (rater, other rater) pairs out of all such pairs; ``rater_items`` the number of those items.
    """

    per_item: NDArray[np.float64]
    overall: float | None
    overall_pairs: float | None
    n_items: int
    rater_agreeing: NDArray[np.float64]
    rater_pairs: NDArray[np.float64]
    rater_items: NDArray[np.int64]
    reason: str | None = None

    @property
    def rater_share(self) -> NDArray[np.float64]:
        with np.errstate(invalid="ignore", divide="ignore"):
            out: NDArray[np.float64] = np.where(self.rater_pairs > 0, self.rater_agreeing / self.rater_pairs, np.nan)
        return out


def _z(confidence: float) -> float:
    if not 0.0 < confidence < 1.0:
        raise ValueError("confidence must lie strictly between 0 and 1")
    return float(norm.ppf(0.5 + confidence / 2.0))


def _integers(name: str, values: ArrayLike) -> NDArray[np.int64]:
    array = np.asarray(values)
    if array.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional")
    if array.size == 0:
        return np.zeros(0, dtype=np.int64)
    if array.dtype.kind == "f":
        if not np.all(np.isfinite(array)) or np.any(array != np.round(array)):
            raise ValueError(f"{name} must hold whole numbers")
    elif array.dtype.kind not in "iub":
        raise ValueError(f"{name} must hold integers")
    return array.astype(np.int64)


def ratings(item: ArrayLike, rater: ArrayLike, category: ArrayLike, *, n_categories: int = 4) -> Ratings:
    """Validate votes and reduce them to one vote per (item, rater) and per-item category counts."""
    if n_categories < 2:
        raise ValueError("n_categories must be at least 2")
    it = _integers("item", item)
    ra = _integers("rater", rater)
    ca = _integers("category", category)
    if not (it.size == ra.size == ca.size):
        raise ValueError("item, rater and category must have the same length")
    if ca.size and (ca.min() < 0 or ca.max() >= n_categories):
        raise ValueError(f"category codes must lie in 0..{n_categories - 1}")
    items, item_index = np.unique(it, return_inverse=True)
    raters, rater_index = np.unique(ra, return_inverse=True)
    item_index = item_index.astype(np.int64)
    rater_index = rater_index.astype(np.int64)
    # First vote per (item, rater): np.unique returns the first occurrence of each key.
    key = item_index * max(len(raters), 1) + rater_index
    _, first = np.unique(key, return_index=True)
    first = np.sort(first)
    n_repeats = int(it.size - first.size)
    item_index, rater_index, ca = item_index[first], rater_index[first], ca[first]
    counts = np.zeros((len(items), n_categories), dtype=np.float64)
    np.add.at(counts, (item_index, ca), 1.0)
    return Ratings(
        n_categories=n_categories,
        item=item_index,
        rater=rater_index,
        category=ca,
        items=items.astype(np.int64),
        raters=raters.astype(np.int64),
        counts=counts,
        n_repeats=n_repeats,
    )


def _as_counts(counts: ArrayLike) -> NDArray[np.float64]:
    c = np.asarray(counts, dtype=np.float64)
    if c.ndim != 2 or c.shape[1] < 2:
        raise ValueError("counts must be an items x categories matrix with at least two categories")
    if not np.all(np.isfinite(c)) or np.any(c < 0) or np.any(c != np.round(c)):
        raise ValueError("counts must be non-negative whole numbers")
    return c


# --------------------------------------------------------------------------------------------------
# Raw agreement


def raw_agreement(data: Ratings) -> RawAgreement:
    """Observed agreement per item, overall and per rater (see ``RawAgreement``)."""
    counts = data.counts
    n = counts.sum(axis=1)
    pairable = n >= 2
    agreeing_pairs = (counts * (counts - 1.0)).sum(axis=1)  # ordered agreeing pairs per item
    all_pairs = n * (n - 1.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        per_item = np.where(pairable, agreeing_pairs / all_pairs, np.nan)
    n_raters = len(data.raters)
    # Rater r on item i agrees with (n_i,c(r) - 1) of the (n_i - 1) others.
    same = counts[data.item, data.category] - 1.0
    others = n[data.item] - 1.0
    rater_agreeing = np.bincount(data.rater, weights=same, minlength=n_raters).astype(np.float64)
    rater_pairs = np.bincount(data.rater, weights=others, minlength=n_raters).astype(np.float64)
    rater_items = np.bincount(data.rater, weights=(others > 0).astype(np.float64), minlength=n_raters)
    n_items = int(pairable.sum())
    if n_items == 0:
        return RawAgreement(
            per_item=per_item,
            overall=None,
            overall_pairs=None,
            n_items=0,
            rater_agreeing=rater_agreeing,
            rater_pairs=rater_pairs,
            rater_items=rater_items.astype(np.int64),
            reason=NOT_ESTIMABLE_REASON,
        )
    return RawAgreement(
        per_item=per_item,
        overall=float(np.mean(per_item[pairable])),
        overall_pairs=float(agreeing_pairs[pairable].sum() / all_pairs[pairable].sum()),
        n_items=n_items,
        rater_agreeing=rater_agreeing,
        rater_pairs=rater_pairs,
        rater_items=rater_items.astype(np.int64),
    )


# --------------------------------------------------------------------------------------------------
# Bootstrap over items


def _percentile_interval(
    replicates: NDArray[np.float64], confidence: float
) -> tuple[float | None, float | None, int, str | None]:
    """(B+1)q order statistics of the defined replicates; (None, None) when over half are undefined."""
    defined = replicates[np.isfinite(replicates)]
    undefined = int(replicates.size - defined.size)
    if defined.size == 0 or undefined * 2 > replicates.size:
        return None, None, undefined, BOOTSTRAP_UNDEFINED_REASON
    ordered = np.sort(defined)
    b = ordered.size
    tail = (1.0 - confidence) / 2.0
    lo = int(np.clip(np.floor((b + 1) * tail) - 1, 0, b - 1))
    hi = int(np.clip(np.ceil((b + 1) * (1.0 - tail)) - 1, 0, b - 1))
    return float(ordered[lo]), float(ordered[hi]), undefined, None


# --------------------------------------------------------------------------------------------------
# Cohen's kappa


def _cohen_from_table(table: NDArray[np.float64]) -> tuple[float, float, float]:
    """(kappa, p_o, p_e) of a k x k table (kappa NaN when p_e == 1)."""
    total = table.sum()
    p = table / total
    rows, cols = p.sum(axis=1), p.sum(axis=0)
    p_o = float(np.trace(p))
    p_e = float(rows @ cols)
    kappa = (p_o - p_e) / (1.0 - p_e) if p_e < 1.0 - 1e-12 else float("nan")
    return kappa, p_o, p_e


def cohen_kappa_table(
    table: ArrayLike,
    *,
    confidence: float = 0.95,
    bootstrap: int = 0,
    seed: int = 0,
) -> Coefficient:
    """Cohen's kappa of a k x k table (rows: rater A's category, columns: rater B's) with intervals.

    ``kappa = (p_o - p_e) / (1 - p_e)`` with ``p_o = sum_k p_kk`` and ``p_e = sum_k p_k. p_.k``. The
    standard error is the large-sample one of Fleiss, Cohen & Everitt (1969)::

        var = [ sum_k p_kk (1 - (p_k. + p_.k)(1 - kappa))^2
                + (1 - kappa)^2 sum_{j != k} p_jk (p_.j + p_k.)^2
                - (kappa - p_e (1 - kappa))^2 ] / (N (1 - p_e)^2)

    and the default interval is ``kappa +- z se`` clipped to [-1, 1] (what SAS reports as ASE);
    ``se_null``/``z``/``p_value`` test kappa = 0 with the null variance
    ``[p_e + p_e^2 - sum_k p_k. p_.k (p_k. + p_.k)] / (N (1 - p_e)^2)``. With ``bootstrap > 0`` the
    interval is instead the percentile interval of that many item bootstrap replicates (the table's
    items resampled with replacement).
    """
    t = np.asarray(table, dtype=np.float64)
    if t.ndim != 2 or t.shape[0] != t.shape[1] or t.shape[0] < 2:
        raise ValueError("table must be a square k x k matrix with k >= 2")
    if not np.all(np.isfinite(t)) or np.any(t < 0):
        raise ValueError("table must hold non-negative counts")
    z_crit = _z(confidence)
    n_items = float(t.sum())
    if n_items <= 0:
        return Coefficient(name="cohen_kappa", value=None, reason=NO_COMMON_ITEMS_REASON, confidence=confidence)
    kappa, p_o, p_e = _cohen_from_table(t)
    if not np.isfinite(kappa):
        return Coefficient(
            name="cohen_kappa",
            value=None,
            reason=ONE_CATEGORY_REASON,
            observed=p_o,
            expected=p_e,
            confidence=confidence,
            n_items=int(round(n_items)),
            n_values=int(round(2 * n_items)),
        )
    p = t / n_items
    rows, cols = p.sum(axis=1), p.sum(axis=0)
    diag = np.diag(p)
    term1 = float(np.sum(diag * (1.0 - (rows + cols) * (1.0 - kappa)) ** 2))
    off = p.copy()
    np.fill_diagonal(off, 0.0)
    # (p_.j + p_k.) for cell (j, k): column total of j plus row total of k.
    weights = (cols[:, None] + rows[None, :]) ** 2
    term2 = (1.0 - kappa) ** 2 * float(np.sum(off * weights))
    term3 = (kappa - p_e * (1.0 - kappa)) ** 2
    var = max(term1 + term2 - term3, 0.0) / (n_items * (1.0 - p_e) ** 2)
    se = float(np.sqrt(var))
    var0 = (p_e + p_e**2 - float(np.sum(rows * cols * (rows + cols)))) / (n_items * (1.0 - p_e) ** 2)
    se0 = float(np.sqrt(max(var0, 0.0)))
    z = kappa / se0 if se0 > 0 else None
    p_value = float(2.0 * norm.sf(abs(z))) if z is not None else None
    undefined = 0
    interval_reason: str | None = None
    if bootstrap > 0:
        method = f"item bootstrap percentile, {bootstrap} rounds (seed {seed})"
        k = t.shape[0]
        cells = t.reshape(-1)
        if n_items < 2:
            lower = upper = None
            interval_reason = SINGLE_ITEM_REASON
        else:
            rng = np.random.default_rng(seed)
            probs = cells / cells.sum()
            draws = rng.multinomial(int(round(n_items)), probs, size=bootstrap).astype(np.float64)
            reps = np.array([_cohen_from_table(d.reshape(k, k))[0] for d in draws])
            lower, upper, undefined, interval_reason = _percentile_interval(reps, confidence)
    else:
        method = "asymptotic normal (Fleiss, Cohen & Everitt 1969 standard error)"
        lower = max(-1.0, kappa - z_crit * se)
        upper = min(1.0, kappa + z_crit * se)
    return Coefficient(
        name="cohen_kappa",
        value=float(kappa),
        lower=lower,
        upper=upper,
        confidence=confidence,
        interval_method=method,
        interval_reason=interval_reason,
        observed=p_o,
        expected=p_e,
        se=se,
        se_null=se0,
        z=z,
        p_value=p_value,
        n_items=int(round(n_items)),
        n_values=int(round(2 * n_items)),
        bootstrap_undefined=undefined,
    )


def cohen_table(data: Ratings, rater_a: int, rater_b: int) -> NDArray[np.float64]:
    """The k x k table of two raters (original rater ids) over their common items."""
    k = data.n_categories
    table = np.zeros((k, k), dtype=np.float64)
    found_a = np.flatnonzero(data.raters == rater_a)
    found_b = np.flatnonzero(data.raters == rater_b)
    if found_a.size == 0 or found_b.size == 0:
        return table
    ia, ib = int(found_a[0]), int(found_b[0])
    n_items = len(data.items)
    cat_a = np.full(n_items, -1, dtype=np.int64)
    cat_b = np.full(n_items, -1, dtype=np.int64)
    mask_a, mask_b = data.rater == ia, data.rater == ib
    cat_a[data.item[mask_a]] = data.category[mask_a]
    cat_b[data.item[mask_b]] = data.category[mask_b]
    common = (cat_a >= 0) & (cat_b >= 0)
    np.add.at(table, (cat_a[common], cat_b[common]), 1.0)
    return table


def cohen_kappa(
    data: Ratings,
    rater_a: int,
    rater_b: int,
    *,
    confidence: float = 0.95,
    bootstrap: int = 0,
    seed: int = 0,
) -> Coefficient:
    """Cohen's kappa of two raters (original ids) on their common items; see ``cohen_kappa_table``."""
    return cohen_kappa_table(cohen_table(data, rater_a, rater_b), confidence=confidence, bootstrap=bootstrap, seed=seed)


@dataclass(frozen=True)
class RaterPair:
    rater_a: int
    rater_b: int
    kappa: Coefficient


def pairwise_cohen(
    data: Ratings, *, min_common: int = 10, confidence: float = 0.95, max_pairs: int = 500
) -> list[RaterPair]:
    """Cohen's kappa for every pair of raters with at least ``min_common`` common items (the pairs with
    the most common items first, at most ``max_pairs``), asymptotic intervals."""
    n_raters = len(data.raters)
    if n_raters < 2:
        return []
    # Co-rated item counts: R^T R for the (sparse) item x rater incidence; upper triangle only.
    incidence = sp.csr_matrix((np.ones(data.item.size), (data.item, data.rater)), shape=(len(data.items), n_raters))
    common = sp.triu(incidence.T @ incidence, k=1).tocoo()
    shared = common.data
    keep = np.flatnonzero(shared >= max(min_common, 1))
    keep = keep[np.lexsort((common.col[keep], common.row[keep], -shared[keep]))][:max_pairs]
    out = []
    for index in keep:
        a, b = int(data.raters[common.row[index]]), int(data.raters[common.col[index]])
        out.append(RaterPair(a, b, cohen_kappa(data, a, b, confidence=confidence)))
    return out


# --------------------------------------------------------------------------------------------------
# Fleiss' kappa


def _fleiss_point(counts: NDArray[np.float64]) -> tuple[float, float, float]:
    """(kappa, P-bar, P_e) for pairable items (n_i >= 2); kappa NaN when P_e == 1."""
    kappa, p_bar, p_e = _fleiss_reps(counts, np.ones((1, counts.shape[0])))
    return float(kappa[0]), float(p_bar[0]), float(p_e[0])


def _fleiss_reps(
    counts: NDArray[np.float64], w: NDArray[np.float64]
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """Fleiss' kappa, P-bar and P_e for each row of item weights ``w`` (rounds x items)."""
    n = counts.sum(axis=1)
    p_i = (counts * (counts - 1.0)).sum(axis=1) / (n * (n - 1.0))
    p_bar = (w @ p_i) / w.sum(axis=1)
    p_j = (w @ counts) / (w @ n)[:, None]
    p_e = (p_j**2).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        kappa = np.where(p_e < 1.0 - 1e-12, (p_bar - p_e) / (1.0 - p_e), np.nan)
    return kappa, p_bar, p_e


def fleiss_kappa(
    counts: ArrayLike | Ratings, *, confidence: float = 0.95, bootstrap: int = 1000, seed: int = 0
) -> Coefficient:
    """Fleiss' kappa from an items x categories count matrix (or ``Ratings``).

    ``P_i = sum_j n_ij (n_ij - 1) / (n_i (n_i - 1))``, ``P-bar = mean_i P_i``,
    ``p_j = sum_i n_ij / sum_i n_i``, ``P_e = sum_j p_j^2``, ``kappa = (P-bar - P_e) / (1 - P_e)``, over
    the items with ``n_i >= 2``. With a fixed number ``n`` of raters per item this is Fleiss (1971);
    with a varying number it is the usual generalisation (each item's agreement is the share of its
    own rater pairs that agree, items weighted equally, category shares pooled over all votes) —
    ``extra["raters_per_item"]`` says "fixed" or "varying". Fleiss' analytic variance is the one
    under kappa = 0 (Fleiss, Nee & Landis 1979) and holds for fixed n only: it is reported as
    ``se_null``/``z``/``p_value`` in that case. The interval is an item bootstrap (percentile),
    since no analytic non-null variance is in Fleiss' paper.
    """
    c = counts.counts if isinstance(counts, Ratings) else _as_counts(counts)
    _z(confidence)  # validates; the interval is a bootstrap one
    n = c.sum(axis=1)
    c = c[n >= 2]
    n = n[n >= 2]
    if c.shape[0] == 0:
        return Coefficient(name="fleiss_kappa", value=None, reason=NOT_ESTIMABLE_REASON, confidence=confidence)
    fixed = bool(np.all(n == n[0]))
    kappa, p_bar, p_e = _fleiss_point(c)
    base = Coefficient(
        name="fleiss_kappa",
        value=None,
        confidence=confidence,
        observed=p_bar,
        expected=p_e,
        n_items=int(c.shape[0]),
        n_values=int(n.sum()),
        extra={"raters_per_item": "fixed" if fixed else "varying"},
    )
    if not np.isfinite(kappa):
        return replace(base, reason=ONE_CATEGORY_REASON)
    se0 = z = p_value = None
    if fixed:
        m = float(n[0])
        p_j = c.sum(axis=0) / n.sum()
        pq = p_j * (1.0 - p_j)
        s = float(pq.sum())
        var0 = 2.0 / (c.shape[0] * m * (m - 1.0)) * (s**2 - float(np.sum(pq * (1.0 - 2.0 * p_j)))) / s**2
        se0 = float(np.sqrt(max(var0, 0.0)))
        z = kappa / se0 if se0 > 0 else None
        p_value = float(2.0 * norm.sf(abs(z))) if z is not None else None
    lower, upper, undefined, interval_reason = _item_bootstrap(
        c, lambda cc, w: _fleiss_reps(cc, w)[0], bootstrap=bootstrap, seed=seed, confidence=confidence
    )
    return replace(
        base,
        value=float(kappa),
        lower=lower,
        upper=upper,
        interval_method=f"item bootstrap percentile, {bootstrap} rounds (seed {seed})",
        interval_reason=interval_reason,
        se_null=se0,
        z=z,
        p_value=p_value,
        bootstrap_undefined=undefined,
    )


def _item_bootstrap(
    counts: NDArray[np.float64],
    statistic: Callable[[NDArray[np.float64], NDArray[np.float64]], NDArray[np.float64]],
    *,
    bootstrap: int,
    seed: int,
    confidence: float,
) -> tuple[float | None, float | None, int, str | None]:
    """Percentile interval of ``statistic(counts, weights)`` over item bootstrap replicates."""
    if bootstrap <= 0:
        return None, None, 0, "no bootstrap rounds requested"
    n_items = counts.shape[0]
    if n_items < 2:
        return None, None, 0, SINGLE_ITEM_REASON
    # Items with the same category counts are interchangeable, so resampling items is resampling their
    # count *patterns* with the patterns' frequencies: a multinomial over a few hundred patterns at
    # most (for up to 5 raters an item and 4 categories, 125), not over every item.
    patterns, frequency = np.unique(counts, axis=0, return_counts=True)
    rng = np.random.default_rng(seed)
    reps = np.empty(bootstrap, dtype=np.float64)
    block = max(1, min(bootstrap, _BLOCK_ELEMENTS // max(len(patterns), 1)))
    for done in range(0, bootstrap, block):
        rounds = min(block, bootstrap - done)
        weights = rng.multinomial(n_items, frequency / n_items, size=rounds).astype(np.float64)
        reps[done : done + rounds] = statistic(patterns, weights)
    return _percentile_interval(reps, confidence)


# --------------------------------------------------------------------------------------------------
# Krippendorff's alpha (nominal)


def _alpha_point(counts: NDArray[np.float64]) -> tuple[float, float, float]:
    """(alpha, D_o, D_e) for pairable units (m_u >= 2); alpha NaN when D_e == 0."""
    alpha, d_o, d_e = _alpha_reps(counts, np.ones((1, counts.shape[0])))
    return float(alpha[0]), float(d_o[0]), float(d_e[0])


def _alpha_reps(
    counts: NDArray[np.float64], w: NDArray[np.float64]
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """Alpha, D_o and D_e for each row of unit weights ``w`` (rounds x units)."""
    m = counts.sum(axis=1)
    # Coincidences o_ck = sum_u n_uc (n_uk - [c = k]) / (m_u - 1); only the off-diagonal total is needed:
    # sum_{c != k} o_ck for one unit is (m_u^2 - sum_c n_uc^2) / (m_u - 1).
    disagree_u = (m**2 - (counts**2).sum(axis=1)) / (m - 1.0)
    total = w @ m  # n, the pairable values
    d_o = (w @ disagree_u) / total
    n_c = w @ counts
    with np.errstate(invalid="ignore", divide="ignore"):
        d_e = np.where(total > 1.0, (total**2 - (n_c**2).sum(axis=1)) / (total * (total - 1.0)), 0.0)
        alpha = np.where(d_e > 1e-12, 1.0 - d_o / d_e, np.nan)
    return alpha, d_o, d_e


def krippendorff_alpha(
    counts: ArrayLike | Ratings, *, confidence: float = 0.95, bootstrap: int = 1000, seed: int = 0
) -> Coefficient:
    """Krippendorff's alpha for nominal data from a units x categories count matrix (or ``Ratings``).

    Missing data and a varying number of raters per unit are native: only pairable values (units
    with ``m_u >= 2`` values) count. With the coincidence matrix
    ``o_ck = sum_u n_uc (n_uk - [c = k]) / (m_u - 1)``, ``n_c = sum_k o_ck`` and ``n = sum_c n_c``:
    ``D_o = sum_{c != k} o_ck / n``, ``D_e = sum_{c != k} n_c n_k / (n (n - 1))`` and
    ``alpha = 1 - D_o / D_e`` (Krippendorff 2011). ``observed``/``expected`` report ``1 - D_o`` and
    ``1 - D_e``. The interval is a plain bootstrap over units (units resampled with replacement,
    alpha recomputed, percentiles) — not Krippendorff's own bootstrap, which resamples pairable
    values from the coincidence matrix.
    """
    c = counts.counts if isinstance(counts, Ratings) else _as_counts(counts)
    _z(confidence)
    m = c.sum(axis=1)
    c = c[m >= 2]
    m = m[m >= 2]
    if c.shape[0] == 0:
        return Coefficient(name="krippendorff_alpha", value=None, reason=NOT_ESTIMABLE_REASON, confidence=confidence)
    alpha, d_o, d_e = _alpha_point(c)
    base = Coefficient(
        name="krippendorff_alpha",
        value=None,
        confidence=confidence,
        observed=1.0 - d_o,
        expected=1.0 - d_e,
        n_items=int(c.shape[0]),
        n_values=int(m.sum()),
    )
    if not np.isfinite(alpha):
        return replace(base, reason=ONE_CATEGORY_REASON)
    lower, upper, undefined, interval_reason = _item_bootstrap(
        c, lambda cc, w: _alpha_reps(cc, w)[0], bootstrap=bootstrap, seed=seed, confidence=confidence
    )
    return replace(
        base,
        value=float(alpha),
        lower=lower,
        upper=upper,
        interval_method=f"unit (item) bootstrap percentile, {bootstrap} rounds (seed {seed})",
        interval_reason=interval_reason,
        bootstrap_undefined=undefined,
    )


# --------------------------------------------------------------------------------------------------
# Everything at once


@dataclass(frozen=True)
class AgreementReport:
    raw: RawAgreement
    fleiss: Coefficient
    alpha: Coefficient
    pairs: list[RaterPair]
    n_items: int  # items with >= 2 raters
    n_repeats: int


def agreement_report(
    data: Ratings,
    *,
    confidence: float = 0.95,
    bootstrap: int = 1000,
    seed: int = 0,
    min_common: int = 10,
) -> AgreementReport:
    """Raw agreement, Fleiss' kappa, Krippendorff's alpha and pairwise Cohen's kappa of one set of votes."""
    raw = raw_agreement(data)
    return AgreementReport(
        raw=raw,
        fleiss=fleiss_kappa(data, confidence=confidence, bootstrap=bootstrap, seed=seed),
        alpha=krippendorff_alpha(data, confidence=confidence, bootstrap=bootstrap, seed=seed),
        pairs=pairwise_cohen(data, min_common=min_common, confidence=confidence),
        n_items=raw.n_items,
        n_repeats=data.n_repeats,
    )
