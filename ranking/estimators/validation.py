"""Held-out predictive validation: which model of the votes predicts *later* votes best.

The votes are split by time (their order, i.e. vote id): every candidate model is fitted on the first
``train_fraction`` (80%) and scored on the rest. Candidates cross

* three tie treatments: a tie as **half** a win each side (the board's default), **Davidson**'s model
  (ties modelled, their probability highest between equals) and ties **dropped**;
* with and without **style** covariates (``style.py``'s normalised style differences);
* a few **prior** strengths (``prior_games`` virtual tied games per competitor against the average).

Common footing. Each candidate gives a full forecast ``(P(left), P(right), P(tie))`` of every held-out
vote, so all are scored on the same votes and the same outcomes:

* Davidson: its own three probabilities.
* Dropped ties: the fit says nothing of ties, so ties happen at the training tie share ``tau`` whatever
  the pair, and decisive votes follow the fit: ``P(left) = (1 - tau) sigmoid(z)``.
* Half a win: the fractional-target fit estimates the *expected score* ``p = P(left) + P(tie) / 2``
  (``sigmoid(z)``); ties at the training share, capped where ``p`` is near 0 or 1 so that both decisive
  outcomes stay possible: ``P(tie) = min(tau, p, 1 - p)``, ``P(left) = p - P(tie) / 2``.

Scores: three-way log-loss, Brier and accuracy over every held-out vote (the primary reading: the
verdicts use its log-loss), and the same over decisive held-out votes only, with each model's forecast
conditioned on a decisive outcome (``P(left) / (P(left) + P(right))``), which compares the strengths
alone. A difference between two candidates comes with the standard error of the mean per-vote
difference of their losses (paired over the same held-out votes); the best is "distinguishable" only
when the interval of that difference excludes zero and the difference is at least ``MIN_DIFFERENCE``.

Competitors without a training vote (new in the held-out part) are predicted at the prior's centre, an
average competitor (every fit here has a prior, so its strength is defined and equal to 0); their
held-out votes are scored like any other and counted in ``unseen_votes``.

The difference interval is for the one pair best/runner-up chosen after looking at the scores; with many
close candidates the winner's margin is somewhat optimistic (the prior candidates are usually that close).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.special import expit
from scipy.stats import norm

from .aggregate import (
    BOTH_BAD,
    LEFT_WINS,
    RIGHT_WINS,
    TIE,
    Cells,
    aggregate_cells,
    validate_battles,
    weighted_bincount,
)
from .bradley_terry import BothBad, fit_bradley_terry
from .davidson import fit_davidson
from .newton import damped_newton
from .style import StyleDesign, _blocks, fit_style, style_checks, style_design, style_subset

TIE_TREATMENTS: tuple[str, ...] = ("half", "davidson", "drop")
PRIOR_GAMES: tuple[float, ...] = (0.1, 1.0, 10.0)
DEFAULT_PRIOR = 1.0
TRAIN_FRACTION = 0.8
# Below this many votes (after both_bad's rule) there is no verdict: a held-out part of 40 votes cannot
# tell models apart.
MIN_VOTES = 200
# Probabilities are clipped here before the log: a forecast of exactly 0 for what happened would make
# one vote's loss infinite.
_EPS = 1e-12

SPLIT_RULE = "time-ordered: fitted on the first {pct}% of the votes by vote id, scored on the last {rest}%"
FORECAST_RULES = {
    "davidson": "its own P(left), P(right), P(tie)",
    "drop": "ties at the training tie share whatever the pair; decisive votes by the fit",
    "half": "the fit's expected score p = P(left) + P(tie)/2, ties at the training share capped at min(p, 1 - p)",
}


@dataclass(frozen=True)
class Metrics:
    log_loss: float
    brier: float
    accuracy: float
    votes: int

    def as_dict(self) -> dict[str, Any]:
        return {
            "log_loss": round(self.log_loss, 5),
            "brier": round(self.brier, 5),
            "accuracy": round(self.accuracy, 4),
            "votes": self.votes,
        }


@dataclass(frozen=True)
class Candidate:
    """One model's held-out scores, or why it could not be fitted (``skipped``)."""

    name: str
    ties: str
    style: bool
    prior_games: float
    three_way: Metrics | None = None
    decisive: Metrics | None = None
    skipped: str | None = None
    # Per held-out vote losses (three-way; decisive votes only), for the paired comparisons.
    loss: NDArray[np.float64] | None = field(default=None, repr=False)
    decisive_loss: NDArray[np.float64] | None = field(default=None, repr=False)

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "ties": self.ties,
            "style": self.style,
            "prior_games": self.prior_games,
            "three_way": None if self.three_way is None else self.three_way.as_dict(),
            "decisive": None if self.decisive is None else self.decisive.as_dict(),
            "skipped": self.skipped,
        }


# A difference under this (nats a vote; 0.0000 as the page prints it) is never called distinguishable: where every
# held-out vote gives the same difference (every one a tie, say) its standard error is 0 and rounding noise would.
MIN_DIFFERENCE = 5e-5


@dataclass(frozen=True)
class Difference:
    """Mean per-vote loss of ``runner_up`` minus ``best`` (positive: best predicts better)."""

    difference: float
    se: float
    lower: float
    upper: float

    @property
    def distinguishable(self) -> bool:
        return self.lower > 0.0 and self.difference >= MIN_DIFFERENCE

    def as_dict(self) -> dict[str, Any]:
        return {
            "difference": round(self.difference, 5),
            "se": round(self.se, 5),
            "lower": round(self.lower, 5),
            "upper": round(self.upper, 5),
            "distinguishable": self.distinguishable,
        }


@dataclass(frozen=True)
class Comparison:
    """Which of a family of candidates predicts best (three-way log-loss), against the runner-up."""

    question: str
    candidates: tuple[str, ...]
    best: str | None
    runner_up: str | None
    three_way: Difference | None
    decisive: Difference | None
    verdict: str

    @property
    def distinguishable(self) -> bool:
        return self.three_way is not None and self.three_way.distinguishable

    def as_dict(self) -> dict[str, Any]:
        return {
            "question": self.question,
            "candidates": list(self.candidates),
            "best": self.best,
            "runner_up": self.runner_up,
            "three_way": None if self.three_way is None else self.three_way.as_dict(),
            "decisive": None if self.decisive is None else self.decisive.as_dict(),
            "distinguishable": self.distinguishable,
            "verdict": self.verdict,
        }


@dataclass(frozen=True)
class ValidationReport:
    votes: int
    train_votes: int
    test_votes: int
    test_decisive_votes: int
    train_tie_share: float | None
    unseen_competitors: int
    unseen_votes: int
    candidates: tuple[Candidate, ...]
    comparisons: tuple[Comparison, ...]
    reason: str | None
    train_fraction: float
    confidence: float

    def comparison(self, question: str) -> Comparison | None:
        return next((c for c in self.comparisons if c.question == question), None)

    def candidate(self, name: str) -> Candidate | None:
        return next((c for c in self.candidates if c.name == name), None)

    def as_dict(self) -> dict[str, Any]:
        pct = round(100 * self.train_fraction)
        return {
            "votes": self.votes,
            "train_votes": self.train_votes,
            "test_votes": self.test_votes,
            "test_decisive_votes": self.test_decisive_votes,
            "train_tie_share": None if self.train_tie_share is None else round(self.train_tie_share, 4),
            "unseen_competitors": self.unseen_competitors,
            "unseen_votes": self.unseen_votes,
            "split": SPLIT_RULE.format(pct=pct, rest=100 - pct),
            "forecasts": FORECAST_RULES,
            "confidence": self.confidence,
            "confidence_pct": round(100 * self.confidence),
            "candidates": [c.as_dict() for c in self.candidates],
            "comparisons": [c.as_dict() for c in self.comparisons],
            "reason": self.reason,
        }


def candidate_name(ties: str, style: bool, prior_games: float) -> str:
    return f"{ties}{'+style' if style else ''} prior {prior_games:g}"


# --- forecasts ---------------------------------------------------------------------------------------


def bt_forecast(z: NDArray[np.float64], ties: str, tau: float) -> NDArray[np.float64]:
    """``(m, 3)`` forecasts ``P(left), P(right), P(tie)`` of a Bradley-Terry fit with logit ``z`` (left
    minus right) under tie treatment ``half`` or ``drop`` (module docstring)."""
    p = expit(z)
    if ties == "drop":
        return np.stack([(1.0 - tau) * p, (1.0 - tau) * (1.0 - p), np.full_like(p, tau)], axis=1)
    if ties == "half":
        t = np.minimum(tau, np.minimum(p, 1.0 - p))
        return np.stack([p - t / 2.0, 1.0 - p - t / 2.0, t], axis=1)
    raise ValueError(f"unknown tie treatment {ties!r}")


def davidson_forecast(z: NDArray[np.float64], eta: float) -> NDArray[np.float64]:
    """``(m, 3)`` Davidson forecasts for logit ``z`` and ``eta = log nu``."""
    # Shifted by the largest of the three (|z|/2 or eta), as a softmax is, without scipy's per-call overhead.
    top = np.maximum(np.abs(z) / 2.0, eta)
    e = np.exp(np.stack([z / 2.0 - top, -z / 2.0 - top, eta - top], axis=1))
    out: NDArray[np.float64] = e / e.sum(axis=1, keepdims=True)
    return out


def simulate_half_win(
    rng: np.random.Generator,
    log_strength: ArrayLike,
    tie_share: float,
    a: NDArray[np.int64],
    b: NDArray[np.int64],
    extra_logit: NDArray[np.float64] | None = None,
) -> NDArray[np.int64]:
    """Outcomes for which "a tie is half a win" is the true model: the expected score of the left side is
    ``sigmoid(theta_a - theta_b)`` and ties happen at ``tie_share`` (capped at ``min(p, 1 - p)``), exactly
    the forecast ``bt_forecast(..., "half", tie_share)``."""
    theta = np.asarray(log_strength, dtype=np.float64)
    z = theta[a] - theta[b] + (0.0 if extra_logit is None else extra_logit)
    f = bt_forecast(z, "half", tie_share)
    u = rng.random(a.shape[0])
    return np.where(u < f[:, 0], LEFT_WINS, np.where(u < f[:, 0] + f[:, 1], RIGHT_WINS, TIE)).astype(np.int64)


def _metrics(f: NDArray[np.float64], outcome: NDArray[np.int64]) -> tuple[Metrics, NDArray[np.float64]]:
    """Three-way scores of forecasts ``f`` (m, 3) for outcomes coded LEFT_WINS/RIGHT_WINS/TIE (0, 1, 2)."""
    m = outcome.shape[0]
    loss = -np.log(np.clip(f[np.arange(m), outcome], _EPS, 1.0))
    onehot = np.zeros_like(f)
    onehot[np.arange(m), outcome] = 1.0
    brier = ((f - onehot) ** 2).sum(axis=1)
    accuracy = float((f.argmax(axis=1) == outcome).mean())
    return Metrics(float(loss.mean()), float(brier.mean()), accuracy, m), loss


def _decisive_metrics(
    f: NDArray[np.float64], outcome: NDArray[np.int64]
) -> tuple[Metrics | None, NDArray[np.float64] | None]:
    """Scores over decisive votes only, each forecast conditioned on a decisive outcome."""
    keep = outcome != TIE
    if not keep.any():
        return None, None
    q = f[keep, 0] / np.maximum(f[keep, 0] + f[keep, 1], _EPS)
    y = (outcome[keep] == LEFT_WINS).astype(np.float64)
    loss = -np.log(np.clip(np.where(y == 1.0, q, 1.0 - q), _EPS, 1.0))
    correct = np.where(q == 0.5, 0.5, (q > 0.5) == (y == 1.0))
    return Metrics(float(loss.mean()), float(((q - y) ** 2).mean()), float(correct.mean()), int(keep.sum())), loss


def _tie_rate(ties: str, z: NDArray[np.float64], outcome: NDArray[np.int64]) -> float:
    """The tie parameter ``tau`` of the half-win and drop forecasts, from the training votes (``z`` their
    fitted logits). Dropped ties: the training tie share. Half a win: the ``tau`` whose capped rates
    ``min(tau, p, 1 - p)`` add up to the training ties (the share itself would understate ``tau`` wherever the
    cap binds); the sum is increasing in ``tau``, so it is read off the sorted caps."""
    ties_n = float((outcome == TIE).sum())
    if ties == "drop" or ties_n == 0.0:
        return float(ties_n / max(outcome.shape[0], 1))
    p = expit(z)
    caps = np.sort(np.minimum(p, 1.0 - p))
    m = caps.shape[0]
    # With tau between caps[j-1] and caps[j]: sum = caps[:j].sum() + (m - j) tau; the first j whose tau stays
    # under caps[j] is the solution (the sum is continuous and increasing in tau). Beyond every cap: 0.5.
    below = np.concatenate([[0.0], np.cumsum(caps)[:-1]])
    tau = (ties_n - below) / (m - np.arange(m))
    fits = np.flatnonzero(tau <= caps)
    return float(np.clip(tau[fits[0]], 0.0, 0.5)) if fits.size else 0.5


def _style_x(
    left: NDArray[np.float64], right: NDArray[np.float64], kept: tuple[int, ...], std: NDArray[np.float64]
) -> NDArray[np.float64]:
    """Normalised style differences (left minus right) of votes on a fitted design's scale."""
    lf, rf = left[:, list(kept)], right[:, list(kept)]
    total = lf + rf
    out: NDArray[np.float64] = np.divide(lf - rf, total, out=np.zeros_like(total), where=total > 0) / std
    return out


# --- Davidson with style covariates (row-level; the cell fit of davidson.py has no covariates) --------


def fit_davidson_style(
    sd: StyleDesign, *, prior_games: float, tie_share: float, max_iter: int = 100
) -> tuple[NDArray[np.float64], NDArray[np.float64], float, bool]:
    """Davidson's model with ``z = theta_lo - theta_hi + beta . x`` on the rows of a style design whose
    ties carry ``y = 0.5``: ``(theta, beta, eta, converged)``, by the package's damped Newton. The
    information is the style fit's block structure (``style._blocks``) plus a row and column for eta."""
    n, f = sd.n_competitors, sd.n_features
    n_pairs = sd.pair_lo.shape[0]
    s = 2.0 * sd.y - 1.0  # +1 lo won, -1 hi won, 0 tie
    tie = (sd.y == 0.5).astype(np.float64)
    w = sd.weight

    def parts(v: NDArray[np.float64]) -> tuple[NDArray[np.float64], NDArray[np.float64], float]:
        theta, beta, eta = v[:n], v[n : n + f], float(v[n + f])
        z = (theta[sd.pair_lo] - theta[sd.pair_hi])[sd.pair] + sd.x @ beta
        return theta, z, eta

    def value(v: NDArray[np.float64]) -> float:
        theta, z, eta = parts(v)
        lse = np.logaddexp(np.logaddexp(z / 2.0, -z / 2.0), eta)
        ll = float(w @ (s * z / 2.0 + tie * eta - lse))
        return ll + prior_games * float((0.5 * theta - np.logaddexp(0.0, theta)).sum())

    def objective(v: NDArray[np.float64]) -> tuple[float, NDArray[np.float64], NDArray[np.float64]]:
        theta, z, eta = parts(v)
        q = davidson_forecast(z, eta)
        diff = q[:, 0] - q[:, 1]
        g_z = w * (s - diff) / 2.0
        h_zz = w * (q[:, 0] + q[:, 1] - diff * diff) / 4.0
        h_ze = -w * diff * q[:, 2] / 2.0
        p0 = expit(theta)
        grad = np.concatenate(
            [
                sd.inc_t @ weighted_bincount(sd.pair, g_z, n_pairs) + prior_games * (0.5 - p0),
                sd.x.T @ g_z,
                [float(w @ (tie - q[:, 2]))],
            ]
        )
        hess = np.zeros((n + f + 1, n + f + 1))
        hess[: n + f, : n + f] = _blocks(sd, sd.x, sd.pair, h_zz)
        hess[np.arange(n), np.arange(n)] += prior_games * p0 * (1.0 - p0)
        cross = np.concatenate([sd.inc_t @ weighted_bincount(sd.pair, h_ze, n_pairs), sd.x.T @ h_ze])
        hess[: n + f, n + f] = cross
        hess[n + f, : n + f] = cross
        hess[n + f, n + f] = float(w @ (q[:, 2] * (1.0 - q[:, 2])))
        return float("nan"), grad, hess  # f only when a line search needs it (one more pass over the rows)

    eta0 = float(np.log(max(2.0 * tie_share / max(1.0 - tie_share, 1e-9), 1e-6)))
    x0 = np.concatenate([np.zeros(n + f), [eta0]])
    v, _, converged = damped_newton(x0, objective, value, max_iter=max_iter, tol=1e-7, line_search_above=1e-2)
    return v[:n], v[n : n + f], float(v[n + f]), converged


# --- the comparison ----------------------------------------------------------------------------------


def _difference(best: NDArray[np.float64], other: NDArray[np.float64], z: float) -> Difference:
    d = other - best
    mean = float(d.mean())
    se = float(d.std(ddof=1) / np.sqrt(d.shape[0])) if d.shape[0] > 1 else float("inf")
    return Difference(mean, se, mean - z * se, mean + z * se)


def _compare(question: str, family: list[Candidate], z: float) -> Comparison:
    names = tuple(c.name for c in family)
    scored = sorted((c for c in family if c.three_way is not None), key=lambda c: c.three_way.log_loss)  # type: ignore[union-attr]
    if len(scored) < 2:
        reason = "fewer than two of these candidates could be fitted: nothing to compare"
        return Comparison(question, names, scored[0].name if scored else None, None, None, None, reason)
    best, second = scored[0], scored[1]
    assert best.loss is not None and second.loss is not None
    three = _difference(best.loss, second.loss, z)
    decisive = None
    if best.decisive_loss is not None and second.decisive_loss is not None and best.decisive_loss.shape[0] > 1:
        decisive = _difference(best.decisive_loss, second.decisive_loss, z)
    if three.distinguishable:
        verdict = f"{best.name} predicts the held-out votes best, distinguishably better than {second.name}"
    else:
        verdict = f"no clear winner: {best.name} scores best, but {second.name} is within the uncertainty"
    return Comparison(question, names, best.name, second.name, three, decisive, verdict)


def _fit_candidate(
    ties: str,
    style: bool,
    prior: float,
    *,
    train: tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64]],
    test: tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64]],
    n: int,
    tau: float,
    styles: tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]] | None,
    feature_names: tuple[str, ...] | None,
    cells_of: Callable[[bool], Cells],
) -> tuple[NDArray[np.float64] | None, str | None]:
    """The held-out forecasts of one candidate, or why it cannot be fitted (``cells_of(every)``: the training
    cells of every vote, or of the decisive ones, aggregated once for all the priors)."""
    a, b, o = train
    ta, tb, _ = test
    decisive = o != TIE
    if ties == "drop" and not decisive.any():
        return None, "no decisive votes in the training part: with ties dropped nothing is left to fit"
    if ties == "davidson" and decisive.all():
        return None, "no ties in the training part: Davidson's tie parameter would be 0"
    keep = decisive if ties == "drop" else np.ones(o.shape[0], dtype=bool)
    if not style:
        cells = cells_of(bool(keep.all()))
        if ties == "davidson":
            with np.errstate(over="ignore"):  # the tie parameter's interval, unused here, may overflow
                fit_d = fit_davidson(cells, prior_games=prior)
            theta_d = fit_d.x[:n]
            return davidson_forecast(theta_d[ta] - theta_d[tb], float(fit_d.x[n])), None
        fit = fit_bradley_terry(cells, prior_games=prior)
        theta_b = fit.theta_raw
        return bt_forecast(theta_b[ta] - theta_b[tb], ties, _tie_rate(ties, theta_b[a] - theta_b[b], o)), None
    assert styles is not None
    left, right, test_left, test_right = styles
    sd = style_design(a[keep], b[keep], o[keep], left[keep], right[keep], n_competitors=n, feature_names=feature_names)
    checks = style_checks(sd)
    if not checks.identified:
        return None, "no style feature can be told apart from the competitors in the training part"
    sd = style_subset(sd, checks.kept)
    # The held-out style differences on the training part's scale (its standard deviations).
    x_test = _style_x(test_left, test_right, checks.kept, sd.features.std)
    if ties == "davidson":
        theta, beta, eta, converged = fit_davidson_style(sd, prior_games=prior, tie_share=tau)
        if not converged or float(np.abs(beta).max(initial=0.0)) > 10.0:
            return None, "the fit did not converge (a style gap nearly always predicts the winner)"
        return davidson_forecast(theta[ta] - theta[tb] + x_test @ beta, eta), None
    fit_s = fit_style(sd, prior_games=prior)
    if fit_s.separated or not fit_s.converged:
        return None, "the fit did not converge (a style gap nearly always predicts the winner)"
    theta_s = fit_s.theta_raw
    z_train = theta_s[a] - theta_s[b] + _style_x(left, right, checks.kept, sd.features.std) @ fit_s.coef
    z = theta_s[ta] - theta_s[tb] + x_test @ fit_s.coef
    return bt_forecast(z, ties, _tie_rate(ties, z_train, o)), None


def validate_models(
    a: ArrayLike,
    b: ArrayLike,
    outcome: ArrayLike,
    *,
    n_competitors: int | None = None,
    left_style: ArrayLike | None = None,
    right_style: ArrayLike | None = None,
    feature_names: tuple[str, ...] | None = None,
    both_bad: BothBad = "tie",
    train_fraction: float = TRAIN_FRACTION,
    priors: tuple[float, ...] = PRIOR_GAMES,
    default_prior: float = DEFAULT_PRIOR,
    confidence: float = 0.95,
    min_votes: int = MIN_VOTES,
) -> ValidationReport:
    """Fit every candidate on the earlier votes and score it on the later ones (module docstring).

    The arrays are votes **in time order** (``a``/``b`` the left/right competitors as ``0..n-1``,
    outcomes LEFT_WINS, RIGHT_WINS, TIE, BOTH_BAD); ``left_style``/``right_style`` (votes x features) add
    the style candidates. ``both_bad`` is counted as a tie or dropped, as on the board."""
    if not 0.0 < train_fraction < 1.0:
        raise ValueError("train_fraction must lie strictly between 0 and 1")
    if not 0.0 < confidence < 1.0:
        raise ValueError("confidence must lie strictly between 0 and 1")
    if default_prior not in priors or min(priors) <= 0:
        raise ValueError("priors must be positive and include default_prior")
    if np.asarray(outcome).shape[0] == 0 and not n_competitors:
        # No votes and no competitors (a campaign not started): nothing to check the arrays against.
        va = vb = vo = np.zeros(0, dtype=np.int64)
        keep = np.zeros(0, dtype=bool)
        n = 0
    else:
        bt = validate_battles(a, b, outcome, n_competitors=n_competitors)
        n = bt.n_competitors
        keep = bt.outcome != BOTH_BAD if both_bad == "drop" else np.ones(bt.a.shape[0], dtype=bool)
        va, vb = bt.a[keep], bt.b[keep]
        vo = np.where(bt.outcome[keep] == BOTH_BAD, TIE, bt.outcome[keep]).astype(np.int64)
    m = int(vo.shape[0])
    k = int(np.floor(train_fraction * m))
    z = float(norm.ppf(0.5 + confidence / 2.0))

    def report(
        reason: str | None,
        candidates: tuple[Candidate, ...] = (),
        comparisons: tuple[Comparison, ...] = (),
        tau: float | None = None,
        unseen: tuple[int, int] = (0, 0),
    ) -> ValidationReport:
        return ValidationReport(
            votes=m,
            train_votes=k if reason is None else 0,
            test_votes=m - k if reason is None else 0,
            test_decisive_votes=int((vo[k:] != TIE).sum()) if reason is None else 0,
            train_tie_share=tau,
            unseen_competitors=unseen[0],
            unseen_votes=unseen[1],
            candidates=candidates,
            comparisons=comparisons,
            reason=reason,
            train_fraction=train_fraction,
            confidence=confidence,
        )

    if m < min_votes:
        return report(f"too few votes to validate: {m}, at least {min_votes} are needed")
    train = (va[:k], vb[:k], vo[:k])
    test = (va[k:], vb[k:], vo[k:])
    tau = float((train[2] == TIE).mean())
    seen = np.zeros(n, dtype=bool)
    seen[train[0]] = True
    seen[train[1]] = True
    new = ~seen[test[0]] | ~seen[test[1]]
    unseen_ids = np.union1d(test[0][~seen[test[0]]], test[1][~seen[test[1]]])
    styles = None
    if left_style is not None and right_style is not None:
        lf = np.asarray(left_style, dtype=np.float64)[keep]
        rf = np.asarray(right_style, dtype=np.float64)[keep]
        if lf.ndim == 1:
            lf, rf = lf[:, None], rf[:, None]
        styles = (lf[:k], rf[:k], lf[k:], rf[k:])

    @cache
    def cells_of(every: bool) -> Cells:
        use = slice(None) if every else train[2] != TIE
        return aggregate_cells(train[0][use], train[1][use], train[2][use], n_competitors=n)

    candidates: list[Candidate] = []
    for ties in TIE_TREATMENTS:
        for style in (False, True) if styles is not None else (False,):
            for prior in priors if not style else (default_prior,):
                name = candidate_name(ties, style, prior)
                f, why = _fit_candidate(
                    ties,
                    style,
                    prior,
                    train=train,
                    test=test,
                    n=n,
                    tau=tau,
                    styles=styles,
                    feature_names=feature_names,
                    cells_of=cells_of,
                )
                if f is None:
                    candidates.append(Candidate(name, ties, style, prior, skipped=why))
                    continue
                three, loss = _metrics(f, test[2])
                dec, dec_loss = _decisive_metrics(f, test[2])
                candidates.append(Candidate(name, ties, style, prior, three, dec, None, loss, dec_loss))

    def family(pred: Callable[[Candidate], bool]) -> list[Candidate]:
        return [c for c in candidates if pred(c)]

    comparisons = [_compare("ties", family(lambda c: not c.style and c.prior_games == default_prior), z)]
    first = next((c for c in candidates if c.name == comparisons[0].best), None)
    best_ties = first.ties if first is not None else "half"
    if styles is not None:
        comparisons.append(
            _compare("style", family(lambda c: c.ties == best_ties and c.prior_games == default_prior), z)
        )
    comparisons.append(_compare("prior", family(lambda c: c.ties == best_ties and not c.style), z))
    # The model as a whole (tie treatment and style) at the board's prior: the prior variants of one model are
    # nearly always within each other's noise, and the prior has its own question above.
    comparisons.append(_compare("model", family(lambda c: c.prior_games == default_prior), z))
    return report(None, tuple(candidates), tuple(comparisons), tau, (int(unseen_ids.shape[0]), int(new.sum())))
