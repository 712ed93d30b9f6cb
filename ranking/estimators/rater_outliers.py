"""Outlier raters: a sequential test per rater against the consensus of the other raters, and gold
accuracy with a Wilson interval.

**The e-process.** Each of a rater's votes on a pair (a, b) is compared with the *consensus* of the
other raters on that pair: ``p``, the probability that the pair's lower-id competitor wins a decisive
vote, estimated from every *other* rater's votes on the pair (leave-the-rater-out). The null
hypothesis is "this rater votes like the consensus": given the past, the rater's vote ``x`` (1 when
the lower id won, 0 when it lost) has mean ``p*``, the consensus' true probability. The alternative
"with probability eps the rater votes for the consensus' weaker side" gives the likelihood ratio

    e(eps) = 1 + lambda (p - x),   lambda = eps (2p - 1) / (p (1 - p))

(1 - eps (2p - 1)/p when the rater sides with the consensus, 1 + eps (2p - 1)/(1 - p) when against).
A random voter is this alternative with eps = 1/2, an always-the-weaker-side adversary with eps = 1.
The test statistic is the mixture ``M_t = mean_eps prod_{s <= t} e_s(eps)`` over a fixed grid of eps
(``EPSILONS``, up to 0.9 so that every factor stays >= 0.1) and the rater is flagged at the first vote
where ``M_t >= 1/alpha`` over their whole history (not a sliding window: restarting or sliding would
spend alpha again at every start).

**Validity.** With the true ``p*`` each factor has conditional mean exactly 1, so every product, and
their average, is a non-negative martingale with mean 1, and Ville's inequality gives
``P(sup_t M_t >= 1/alpha) <= alpha`` for an honest rater, whenever the rater is looked at, however often.
``p*`` is not known; the estimate is *shrunk toward 1/2*: the posterior mean under a Beta(prior, prior)
prior, pulled a further ``margin_sd`` posterior standard deviations toward 1/2 (not past it) and
capped at ``[1 - max_p, max_p]``. For any ``p`` between 1/2 and ``p*`` (same side, not beyond), the
factor's mean under the null is ``1 + lambda (p - p*) <= 1`` (lambda has the sign of ``p - 1/2``), so the
product is a *super*martingale and Ville still holds: shrinkage toward 1/2 costs power, never validity.
What remains is the chance that the estimate overshoots ``p*`` or lands on the wrong side; the margin
makes that rare, and the honest-rater simulations (tests/ranking/test_rater_outliers.py) measure the
false-flag rate with an estimated consensus, thin pairs included. A pair without other votes gives
``p = 1/2`` and a factor of exactly 1: no evidence either way.

**Ties.** ``ties="skip"`` (default): a tie or "both bad" carries no direction; its factor is 1 and the
consensus uses the other raters' decisive votes only. A rater who only ever votes "tie" is therefore not
caught here (gold battles catch them). ``ties="half"``: a tie scores 1/2 in both the vote and the
consensus; the factor ``1 + lambda (p - x)`` is still non-negative for x in [0, 1] and has mean 1 when
``E[x] = p*``, so validity carries over, but a rater who ties more often than the others is then
flagged as drifting toward 1/2.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.special import logsumexp

from .aggregate import BOTH_BAD, LEFT_WINS, RIGHT_WINS, TIE
from .agreement import _integers
from .pairwise import wilson_interval

EPSILONS: tuple[float, ...] = (0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 0.9)
METHOD = (
    "e-process per rater against the leave-the-rater-out consensus of each pair: the mixture over "
    "eps in {0.05 .. 0.9} of likelihood ratios of 'votes for the weaker side with probability eps' vs "
    "'votes like the consensus', consensus shrunk toward 1/2; flagged once it reaches 1/alpha over "
    "the rater's whole history (Ville's inequality: false-flag rate <= alpha for an honest rater)"
)


@dataclass(frozen=True)
class RaterOutliers:
    """Per rater (``raters``, sorted ids): votes, informative votes (decisive on a pair with a
    consensus), the final and the largest e-value (natural logs), whether and when they were flagged.

    ``votes_to_flag`` is the number of the rater's votes up to and including the one where the e-value
    first reached ``threshold`` (0 when never); ``flag_row`` is that vote's row in the input (-1).
    ``consensus`` is the ``p`` used for each input row (NaN for ties under ``ties="skip"``).
    """

    raters: NDArray[np.int64]
    n_votes: NDArray[np.int64]
    n_informative: NDArray[np.int64]
    log_e: NDArray[np.float64]
    log_e_max: NDArray[np.float64]
    flagged: NDArray[np.bool_]
    votes_to_flag: NDArray[np.int64]
    flag_row: NDArray[np.int64]
    consensus: NDArray[np.float64]
    threshold: float
    alpha: float
    method: str = METHOD


def shrunk_consensus(
    score: ArrayLike,
    count: ArrayLike,
    *,
    prior: float = 2.0,
    margin_sd: float = 1.0,
    max_p: float = 0.95,
) -> NDArray[np.float64]:
    """The consensus probability used by the test, from ``score`` (wins of the lower id, ties half when
    counted) out of ``count`` votes: the Beta(prior, prior) posterior mean pulled ``margin_sd``
    posterior standard deviations toward 1/2 (never past it) and capped at ``[1 - max_p, max_p]``."""
    if prior <= 0 or margin_sd < 0 or not 0.5 <= max_p < 1.0:
        raise ValueError("prior must be > 0, margin_sd >= 0 and max_p in [0.5, 1)")
    s = np.asarray(score, dtype=np.float64)
    n = np.asarray(count, dtype=np.float64)
    mean = (s + prior) / (n + 2.0 * prior)
    sd = np.sqrt(mean * (1.0 - mean) / (n + 2.0 * prior + 1.0))
    gap = np.clip(np.abs(mean - 0.5) - margin_sd * sd, 0.0, max_p - 0.5)
    out: NDArray[np.float64] = 0.5 + np.sign(mean - 0.5) * gap
    return out


def log_factors(p: ArrayLike, x: ArrayLike, epsilons: tuple[float, ...] = EPSILONS) -> NDArray[np.float64]:
    """``log e(eps)`` for each eps (rows) and vote (columns); exactly 0 where ``p == 1/2``."""
    pp = np.asarray(p, dtype=np.float64)
    xx = np.asarray(x, dtype=np.float64)
    eps = np.asarray(epsilons, dtype=np.float64)
    if eps.size == 0 or np.any(eps <= 0) or np.any(eps >= 1):
        raise ValueError("epsilons must lie strictly between 0 and 1")
    lam = eps[:, None] * (2.0 * pp - 1.0) / (pp * (1.0 - pp))
    out: NDArray[np.float64] = np.log1p(lam * (pp - xx))
    return out


def rater_outliers(
    rater: ArrayLike,
    a: ArrayLike,
    b: ArrayLike,
    outcome: ArrayLike,
    *,
    alpha: float = 0.01,
    ties: Literal["skip", "half"] = "skip",
    prior: float = 2.0,
    margin_sd: float = 1.0,
    max_p: float = 0.95,
    epsilons: tuple[float, ...] = EPSILONS,
) -> RaterOutliers:
    """Run the e-process for every rater. Rows are votes *in log order* (the order of each rater's
    votes is the order of the test); ``a``/``b`` the competitors shown left/right, ``outcome`` the
    package's codes (LEFT_WINS, RIGHT_WINS, TIE, BOTH_BAD)."""
    if not 0.0 < alpha < 1.0:
        raise ValueError("alpha must lie strictly between 0 and 1")
    if ties not in ("skip", "half"):
        raise ValueError("ties must be 'skip' or 'half'")
    # Fractional or non-finite ids are refused, not truncated (a cast would make 1.5 rater 1).
    r = _integers("rater", rater)
    left = _integers("a", a)
    right = _integers("b", b)
    out_code = _integers("outcome", outcome)
    if not (r.shape == left.shape == right.shape == out_code.shape):
        raise ValueError("rater, a, b and outcome must be of one length")
    if out_code.size and (out_code.min() < LEFT_WINS or out_code.max() > BOTH_BAD):
        raise ValueError("outcome codes must be LEFT_WINS, RIGHT_WINS, TIE or BOTH_BAD")
    if np.any(left == right):
        raise ValueError("a vote compares two different competitors")
    n_rows = r.size
    if n_rows == 0:
        none_i = np.zeros(0, dtype=np.int64)
        none_f = np.zeros(0, dtype=np.float64)
        return RaterOutliers(
            raters=none_i,
            n_votes=none_i,
            n_informative=none_i,
            log_e=none_f,
            log_e_max=none_f,
            flagged=np.zeros(0, dtype=bool),
            votes_to_flag=none_i,
            flag_row=none_i,
            consensus=none_f,
            threshold=1.0 / alpha,
            alpha=alpha,
        )
    lo = np.minimum(left, right)
    hi = np.maximum(left, right)
    lo_won = np.where(left < right, out_code == LEFT_WINS, out_code == RIGHT_WINS)
    decisive = (out_code == LEFT_WINS) | (out_code == RIGHT_WINS)
    tie = (out_code == TIE) | (out_code == BOTH_BAD)
    if ties == "skip":
        counted = decisive
        x = np.where(lo_won, 1.0, 0.0)
    else:
        counted = decisive | tie
        x = np.where(decisive, np.where(lo_won, 1.0, 0.0), 0.5)
    raters, rater_index = np.unique(r, return_inverse=True)
    rater_index = rater_index.astype(np.int64)
    competitors, codes = np.unique(np.concatenate([lo, hi]), return_inverse=True)
    k = len(competitors)
    _, pair_index = np.unique(codes[:n_rows].astype(np.int64) * k + codes[n_rows:], return_inverse=True)
    pair_index = np.asarray(pair_index, dtype=np.int64).reshape(-1)
    weight = counted.astype(np.float64)
    n_pairs = int(pair_index.max()) + 1
    pair_score = np.bincount(pair_index, weights=x * weight, minlength=n_pairs)
    pair_count = np.bincount(pair_index, weights=weight, minlength=n_pairs)
    # The rater's own votes on the pair, to leave out.
    _, own_index = np.unique(rater_index * n_pairs + pair_index, return_inverse=True)
    own_index = own_index.astype(np.int64).reshape(-1)
    own_score = np.bincount(own_index, weights=x * weight)
    own_count = np.bincount(own_index, weights=weight)
    others_score = pair_score[pair_index] - own_score[own_index]
    others_count = pair_count[pair_index] - own_count[own_index]
    p = shrunk_consensus(others_score, others_count, prior=prior, margin_sd=margin_sd, max_p=max_p)
    p = np.where(counted, p, 0.5)
    consensus = np.where(counted, p, np.nan)
    log_e = log_factors(p, x, epsilons)  # (G, rows); 0 where p == 1/2 (ties skipped, no consensus)
    informative = counted & (p != 0.5)

    # Each rater's votes in log order; running sums per rater via a grouped cumulative sum.
    order = np.lexsort((np.arange(n_rows), rater_index))
    sorted_rater = rater_index[order]
    running = np.cumsum(log_e[:, order], axis=1)
    n_raters = len(raters)
    n_votes = np.bincount(rater_index, minlength=n_raters).astype(np.int64)
    starts = np.concatenate([[0], np.cumsum(n_votes)[:-1]]).astype(np.int64)
    before = np.where(starts > 0, running[:, np.maximum(starts - 1, 0)], 0.0)
    running -= before[:, sorted_rater]
    log_m = logsumexp(running, axis=0) - np.log(len(epsilons))
    log_threshold = float(np.log(1.0 / alpha))
    crossed = log_m >= log_threshold
    position = np.arange(n_rows) - starts[sorted_rater]  # 0-based index within the rater's votes
    first_cross = np.full(n_raters, -1, dtype=np.int64)
    first_row = np.full(n_raters, -1, dtype=np.int64)
    crossing = np.flatnonzero(crossed)
    if crossing.size:
        # The first crossing per rater: positions are increasing within a rater's block.
        who = sorted_rater[crossing]
        first_of = np.unique(who, return_index=True)[1]
        first_cross[who[first_of]] = position[crossing[first_of]]
        first_row[who[first_of]] = order[crossing[first_of]]
    ends = starts + n_votes - 1
    log_final = log_m[ends]
    log_max = np.full(n_raters, -np.inf)
    np.maximum.at(log_max, sorted_rater, log_m)
    return RaterOutliers(
        raters=raters.astype(np.int64),
        n_votes=n_votes,
        n_informative=np.bincount(rater_index, weights=informative.astype(np.float64), minlength=n_raters).astype(
            np.int64
        ),
        log_e=np.asarray(log_final, dtype=np.float64),
        log_e_max=log_max,
        flagged=first_cross >= 0,
        votes_to_flag=np.where(first_cross >= 0, first_cross + 1, 0).astype(np.int64),
        flag_row=first_row,
        consensus=consensus,
        threshold=1.0 / alpha,
        alpha=alpha,
    )


@dataclass(frozen=True)
class GoldAccuracy:
    """Per rater (``raters``, sorted ids): gold votes, correct ones, the share and its Wilson interval
    (NaN without gold votes)."""

    raters: NDArray[np.int64]
    n: NDArray[np.int64]
    correct: NDArray[np.int64]
    accuracy: NDArray[np.float64]
    lower: NDArray[np.float64]
    upper: NDArray[np.float64]
    confidence: float


def gold_accuracy(rater: ArrayLike, correct: ArrayLike, *, confidence: float = 0.95) -> GoldAccuracy:
    """Counted gold accuracy per rater: the share of gold votes with the known answer, with the
    Wilson score interval (never outside [0, 1], near-nominal for small counts)."""
    r = np.asarray(rater, dtype=np.int64)
    ok = np.asarray(correct, dtype=bool)
    if r.shape != ok.shape or r.ndim != 1:
        raise ValueError("rater and correct must be one-dimensional and of one length")
    raters, index = np.unique(r, return_inverse=True)
    n = np.bincount(index, minlength=len(raters)).astype(np.int64)
    hits = np.bincount(index, weights=ok.astype(np.float64), minlength=len(raters)).astype(np.int64)
    with np.errstate(invalid="ignore", divide="ignore"):
        share = np.where(n > 0, hits / np.maximum(n, 1), np.nan)
    lower, upper = wilson_interval(hits, n, confidence=confidence)
    return GoldAccuracy(
        raters=raters.astype(np.int64),
        n=n,
        correct=hits,
        accuracy=share.astype(np.float64),
        lower=lower,
        upper=upper,
        confidence=confidence,
    )
