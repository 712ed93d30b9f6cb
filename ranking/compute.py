"""From the kept votes of one campaign (and category) to the numbers a leaderboard shows.

Pure numpy on top of ``ranking.estimators``; no Django. The result is plain JSON-able data that a
snapshot stores as is, so what the page and the API show is exactly what was computed."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace
from typing import Any, Literal, cast

import numpy as np
from numpy.typing import NDArray

from . import estimators as est
from .board_pairwise import (
    MAX_DIFFERENCE_COMPETITORS,
    RANK_RANGES,
    bound,
    pairwise_block,
    pairwise_expand,
    simultaneous_differences,
)
from .estimators.agreement import cohen_kappa_table
from .policy import STYLE_FEATURES, VoteArrays

Interval = Literal["auto", "bootstrap", "cluster_bootstrap", "sandwich"]


@dataclass(frozen=True)
class Method:
    both_bad: Literal["tie", "drop"] = "tie"
    rounds: int = 100
    seed: int = 0
    confidence: float = 0.95
    min_votes: int = 30
    # "auto": the cluster bootstrap when prompts repeat (``estimators.clustering``), else the plain one;
    # board_compute resolves it per board and records the choice in extra.interval_choice.
    interval: Interval = "bootstrap"
    # Style control refits a logistic model on every row (its features are continuous, so rows do not
    # collapse into cells); its analytic interval keeps a full recompute of a million votes in seconds.
    style_interval: Interval = "sandwich"
    anchor: int | None = None  # a competitor id pinned at 1000; None: geometric mean of strengths 1
    # "half": a tie is half a win each side; "davidson": Davidson's model with an estimated tie parameter
    # (raw view only; the style view keeps half a win).
    ties: Literal["half", "davidson"] = "half"

    def as_dict(self, *, view: str) -> dict[str, Any]:
        return {
            **asdict(self),
            "estimator": {
                "raw": "Bradley-Terry",
                "style": "Bradley-Terry with style control",
                "reliability": "reliability-weighted Bradley-Terry (a reliability per rater, estimated held out)",
            }.get(view, view),
            "ties": "Davidson's tie model (tie parameter estimated, Wald intervals from the prior-regularised "
            "information; differences from the same covariance; profile likelihood where a record is one-sided, "
            "thin or all ties)"
            if self.ties == "davidson" and view == "raw"
            else "half a win each side",
            "confidence_pct": round(self.confidence * 100),
            "interval": {"raw": self.interval, "style": self.style_interval, "reliability": "rater_bootstrap"}.get(
                view, self.interval
            ),
            "anchor": f"competitor {self.anchor} at 1000"
            if self.anchor is not None
            else "geometric mean of strengths at 1000",
            "style_features": list(STYLE_FEATURES) if view == "style" else [],
            "boundary": "a competitor whose record is one-sided, thin (under 5 wins or losses) or all ties gets the "
            "union with its profile-likelihood interval; a side the votes cannot bound is open, and the other side of "
            "such a record is where the record's probability is 2.5% (-log 0.025 = 3.69, not chi2/2 = 1.92)",
            "pairwise_correction": "Holm",
            "sequential": est.CONFIDENCE_SEQUENCE_METHOD,
            **({"reliability": RELIABILITY_METHOD} if view == "reliability" else {}),
        }


# Each rater-bootstrap round reruns the alternating fit over every (rater, pair) cell; past this many
# cell-rounds a board gets fewer rounds than the campaign's (never under RELIABILITY_MIN_ROUNDS): 100 rounds
# up to 50,000 cells, 10 from 500,000. Deterministic in the data (the same votes, the same rounds).
RELIABILITY_CELL_ROUNDS = 5_000_000
RELIABILITY_MIN_ROUNDS = 10
# Boards with more (rater, pair) cells than this get the sandwich clustered by rater (``est.crowd_sandwich``)
# instead of the rater bootstrap: a round costs a whole alternating fit (0.1-1 s at 1,000-50,000 cells, so
# 100 rounds took most of a ten-million-vote recompute), the sandwich one pass. On simulated campaigns
# the sandwich covered 0.95-0.98 (30 and 12 raters; honest, random and adversarial raters) where the
# rater bootstrap covered 0.87-0.91 (tests/ranking/test_crowd.py, docs/statistics/reliability-weighted.md).
RELIABILITY_BOOTSTRAP_CELLS = 1_000

RELIABILITY_METHOD: dict[str, Any] = {
    "model": "P(rater r reports i over j) = rho_r sigmoid(theta_i - theta_j) + (1 - rho_r) / 2: with probability "
    "rho_r the rater reports the model's preference, otherwise a coin flip; eta_r = (1 + rho_r) / 2 in [0.5, 1] is "
    "the probability of agreeing with it (crowd Bradley-Terry, Chen et al. 2013, without the flip side: a rater "
    "worse than chance counts as random)",
    "estimation": "alternating: scores from the raw view's Bradley-Terry fit with each vote counted its rater's "
    "weight (the posterior mean of rho_r, from the rater's votes on its other pairs); eta_r from the rater's votes "
    "against the board fitted without that rater (one Newton step), on the grid 0.5, 0.525, ..., 1 with its "
    "distribution over the raters estimated (empirical Bayes); equal weights give plain Bradley-Terry; ties half "
    "a win each side",
    "prior": f"Dirichlet on the grid weights worth {est.crowd.PRIOR_RATERS:g} rater, spread as Beta("
    f"{est.crowd.PRIOR_A:g}, {est.crowd.PRIOR_B:g}) (favours reliable raters)",
    "identifiability": f"eta_r is estimated for a rater with at least {est.crowd.MIN_OVERLAP} counted votes on pairs "
    "another rater also voted on, else held at 1 (the vote counts as in the raw view); the view needs at least "
    f"{est.crowd.MIN_RATERS} raters with an estimated eta",
    "intervals": "scores: percentile bootstrap over raters (a rater's votes are resampled together; the campaign's "
    "rounds, capped at 5,000,000 / the number of (rater, pair) cells and at least 10: extra.bootstrap_rounds) up "
    f"to {RELIABILITY_BOOTSTRAP_CELLS:,} (rater, pair) cells; above, normal intervals from the sandwich clustered "
    "by rater with the cell weights held at their estimates, CR1-corrected (extra.reliability_interval); "
    "eta_r: 95% credible interval of its posterior over the grid, with the scores at their estimate",
}


@dataclass(frozen=True)
class Board:
    rows: list[dict[str, Any]]
    # The pairwise section: what is said about the family as JSON, and every pair's grids stored compactly
    # (``PairwiseGrids.encode``; empty when there are none). ``pairwise_full`` joins them as the API gives them.
    pairwise: dict[str, Any]
    extra: dict[str, Any]
    pairwise_arrays: bytes = b""

    def pairwise_full(self) -> dict[str, Any]:
        return pairwise_expand(self.pairwise, self.pairwise_arrays)


# Up to this many possible keys between the smallest and the largest competitor id, codes come from
# a lookup table indexed by the key (one gather per vote); above it from a binary search.
_LOOKUP_SPAN = 1 << 22


def competitor_codes(
    left: NDArray[np.int64],
    right: NDArray[np.int64],
    competitor_ids: NDArray[np.int64],
    *,
    dtype: type[np.signedinteger[Any]] = np.int64,
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Map the log's competitor primary keys to 0..n-1 in the order of ``competitor_ids`` (sorted,
    unique), checking on the way that every one is there (``searchsorted`` alone would map a stranger
    silently onto a neighbour). Keys span a few thousand values in practice, so a table from key to
    code makes each vote one gather; a sparse set of keys is binary-searched instead. ``dtype``: the
    codes' integer type (int32 halves them where the caller's arithmetic on them stays in range)."""
    if np.any(np.diff(competitor_ids) <= 0):
        raise ValueError("competitor_ids must be sorted and unique")
    n = int(competitor_ids.shape[0])
    stranger = ValueError("a vote names a competitor that is not in competitor_ids")
    sides = []
    for side in (left, right):
        side = np.asarray(side)
        if side.dtype.kind not in "iu":
            if side.size and not bool(np.all(np.isfinite(side)) and np.all(side == np.round(side))):
                raise ValueError("competitor ids must be whole numbers (got a fractional or non-finite value)")
            side = side.astype(np.int64)
        sides.append(side)
    left, right = sides
    out = []
    if n and int(competitor_ids[-1]) - int(competitor_ids[0]) < _LOOKUP_SPAN:
        first = int(competitor_ids[0])
        table = np.full(int(competitor_ids[-1]) - first + 1, -1, dtype=dtype)
        table[competitor_ids - first] = np.arange(n, dtype=dtype)
        for side in (left, right):
            # In int64 whatever the column's width (a log's int32 ids less a larger first id must not wrap).
            offset = np.subtract(side, first, dtype=np.int64)
            if side.size and (int(offset.min()) < 0 or int(offset.max()) >= table.shape[0]):
                raise stranger
            codes = table[offset]
            if side.size and int(codes.min()) < 0:
                raise stranger
            out.append(codes)
        return out[0], out[1]
    for side in (left, right):
        pos = np.searchsorted(competitor_ids, side)
        if side.size and (n == 0 or np.any(competitor_ids[np.minimum(pos, n - 1)] != side)):
            raise stranger
        out.append(pos.astype(dtype, copy=False))
    return out[0], out[1]


def dense_index(
    votes: VoteArrays, competitor_ids: NDArray[np.int64], *, dtype: type[np.signedinteger[Any]] = np.int64
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """The votes' competitors as 0..n-1 in the order of ``competitor_ids`` (``competitor_codes``)."""
    return competitor_codes(votes.left, votes.right, competitor_ids, dtype=dtype)


def _counts(
    a: NDArray[np.int64],
    b: NDArray[np.int64],
    outcome: NDArray[np.int64],
    n: int,
    count: NDArray[np.int64] | None = None,
) -> dict[str, NDArray[np.float64]]:
    """Votes, wins, ties and both-bad per competitor (``count``: each row's votes, grouped rows)."""

    def tally(side: NDArray[np.int64], mask: NDArray[np.bool_]) -> NDArray[np.float64]:
        return np.bincount(side[mask], None if count is None else count[mask], minlength=n).astype(np.float64)

    def both(mask: NDArray[np.bool_]) -> NDArray[np.float64]:
        return tally(a, mask) + tally(b, mask)

    wins = tally(a, outcome == est.LEFT_WINS) + tally(b, outcome == est.RIGHT_WINS)
    return {
        "votes": both(np.ones_like(outcome, dtype=bool)),
        "wins": wins.astype(np.float64),
        "ties": both(outcome == est.TIE),
        "both_bad": both(outcome == est.BOTH_BAD),
    }


def _intervals(
    cells: est.Cells, fit: est.BTResult, method: Method, shown: NDArray[np.bool_]
) -> tuple[est.BoundaryIntervals, NDArray[np.float64] | None]:
    """Bootstrap (or sandwich) intervals, made honest at the boundary (``boundary_intervals``);
    also the bootstrap samples (rounds x n) for difference intervals, when there are any."""
    samples = None
    if method.interval == "sandwich":
        base = est.sandwich_intervals(cells, fit, confidence=method.confidence)
    elif method.interval == "cluster_bootstrap":
        base = est.cluster_bootstrap_intervals(
            cells, fit, rounds=method.rounds, confidence=method.confidence, seed=method.seed
        )
        samples = base.samples
    else:
        base = est.bootstrap_intervals(cells, fit, rounds=method.rounds, confidence=method.confidence, seed=method.seed)
        samples = base.samples
    return est.boundary_intervals(cells, fit, base.lower, base.upper, confidence=method.confidence, only=shown), samples


def board_compute(
    votes: VoteArrays,
    competitor_ids: NDArray[np.int64],
    labels: dict[int, str],
    method: Method,
    *,
    view: Literal["raw", "style", "reliability"] = "raw",
    per_vote: VoteArrays | None = None,
    prompts: VoteArrays | None = None,
) -> Board:
    """Scores with intervals and rank ranges for every competitor with enough votes; the others are
    listed as hidden, with their vote counts only. An interval side the votes cannot bound is open:
    ``lower``/``upper`` is null and ``lower_open``/``upper_open`` is true.

    ``votes`` may be grouped rows (``VoteArrays.count``, ``VoteLog.counted``): the counts, the raw view
    and the pairwise tables read only those. The style and reliability views fit each vote: they read
    ``per_vote`` (the same votes one by one, or a sample of them: ``VoteLog.sample``), which defaults to
    ``votes`` when those are one per row. ``prompts``: the same votes counted per prompt
    (``VoteLog.prompts``), for the interval's choice when ``votes`` are grouped without prompts."""
    n = int(competitor_ids.shape[0])
    if per_vote is None and votes.count is None:
        per_vote = votes
    if view in ("style", "reliability") and (per_vote is None or per_vote.count is not None):
        raise ValueError(f"the {view} view fits each vote: pass the votes one by one (per_vote)")
    # int32 codes (half of int64 at ten million votes): read only by the counts and the cells, which key in int64.
    a, b = dense_index(votes, competitor_ids, dtype=np.int32 if n <= np.iinfo(np.int32).max else np.int64)
    counts = _counts(a, b, votes.outcome, n, votes.count)
    if len(votes) == 0 or n < 2:
        return Board(
            rows=[_row_counts(i, competitor_ids, labels, counts, method) for i in range(n)],
            pairwise={},
            extra={"components": 0},
        )
    extra: dict[str, Any] = {}
    if view != "reliability":
        method, extra["interval_choice"] = _interval_choice(method, votes, view, prompts)
    # Only the raw view resamples prompts through these cells (the style view's bootstrap by prompt reads
    # ``per_vote``); the others fit and bound the raw board on them, which clusters do not change.
    by_prompt = view == "raw" and method.interval == "cluster_bootstrap"
    if by_prompt and votes.count is not None and bool((votes.prompt < 0).any()):
        raise ValueError("the bootstrap by prompt needs the votes grouped by prompt (VoteLog.by_prompt)")
    cells = est.aggregate_cells(
        a, b, votes.outcome, n_competitors=n, cluster=votes.prompt if by_prompt else None, count=votes.count
    )
    del a, b  # one code a vote (160 MB at ten million votes): the board reads its cells from here on
    # The threshold counts the votes that enter the fit: under the "drop" rule both-bad votes do not.
    decided = counts["votes"] - (counts["both_bad"] if method.both_bad == "drop" else 0)
    shown = est.shown_mask(decided, method.min_votes)
    differences = None
    simultaneous = None
    profiled = np.zeros(n, dtype=bool)
    interval_method = "rater_bootstrap"
    if (
        view == "raw"
        and method.ties == "davidson"
        and bool(
            (votes.outcome == est.TIE).any() or (method.both_bad == "tie" and (votes.outcome == est.BOTH_BAD).any())
        )
    ):
        dav = est.fit_davidson(
            cells, both_bad=method.both_bad, reference=_anchor(method, competitor_ids), confidence=method.confidence
        )
        dav_iv = est.davidson_boundary_intervals(dav, confidence=method.confidence, only=shown)
        scores, lower, upper, components = dav.scores, dav_iv.lower, dav_iv.upper, dav.components
        profiled = dav_iv.profiled
        idx = np.flatnonzero(shown)
        if 2 <= idx.shape[0] <= MAX_DIFFERENCE_COMPETITORS:
            differences = est.davidson_difference_intervals(cells, dav, idx, confidence=method.confidence)
            simultaneous = simultaneous_differences(
                differences, components, method, covariance=dav.covariance[:n, :n][np.ix_(idx, idx)]
            )
        extra["interval_choice"]["note"] = "Davidson's tie model has Wald intervals (fisher): the setting is not used"
        extra["tie_parameter"] = {
            "nu": round(dav.nu, 4),
            "lower": round(dav.nu_lower, 4),
            # Every vote a tie: nu runs off (no decisive vote bounds it) and its upper bound is not a number.
            "upper": round(dav.nu_upper, 4) if math.isfinite(dav.nu_upper) else None,
            "tie_probability_at_equal_strength": round(dav.tie_probability_at_equal_strength, 4),
            "model": "Davidson: P(tie) = nu sqrt(pi_i pi_j) / (pi_i + pi_j + nu sqrt(pi_i pi_j))",
        }
        extra["centre"] = [int(competitor_ids[i]) for i in np.flatnonzero(dav.bounds.centre & shown)]
        extra["normalisation"] = dav.params.normalisation
    elif view == "raw":
        fit = est.fit_bradley_terry(cells, both_bad=method.both_bad, reference=_anchor(method, competitor_ids))
        iv, samples = _intervals(cells, fit, method, shown)
        scores, lower, upper, components = fit.scores, iv.lower, iv.upper, fit.components
        profiled = iv.profiled
        idx = np.flatnonzero(shown)
        if 2 <= idx.shape[0] <= MAX_DIFFERENCE_COMPETITORS:
            differences = est.difference_intervals(cells, fit, idx, confidence=method.confidence, samples=samples)
            covariance = None if samples is not None else est.bt_covariance(cells, fit)[1][np.ix_(idx, idx)]
            simultaneous = simultaneous_differences(
                differences, components, method, samples=samples, covariance=covariance
            )
        extra["centre"] = [int(competitor_ids[i]) for i in np.flatnonzero(fit.bounds.centre & shown)]
        extra["normalisation"] = fit.params.normalisation
    elif view == "reliability":
        assert per_vote is not None
        rel = _reliability_fit(per_vote, n, method, competitor_ids, cells, shown)
        extra.update(rel["extra"])
        if rel["withheld"]:
            extra["reliability_withheld"] = rel["withheld"]
            extra["components"] = 0
            rows = [_row_counts(i, competitor_ids, labels, counts, method) for i in range(n)]
            return Board(rows=rows, pairwise={}, extra=extra)
        scores, lower, upper, components = rel["scores"], rel["lower"], rel["upper"], rel["components"]
        profiled = rel["profiled"]
        interval_method = rel["interval_method"]
    else:
        assert per_vote is not None
        style = _style_fit(per_vote, n, method, competitor_ids, cells, shown)
        extra["style_checks"] = style["checks"]
        if style["withheld"]:
            extra["style_withheld"] = style["withheld"]
            extra["components"] = 0
            rows = [_row_counts(i, competitor_ids, labels, counts, method) for i in range(n)]
            return Board(rows=rows, pairwise={}, extra=extra)
        scores, lower, upper, components = style["scores"], style["lower"], style["upper"], style["components"]
        profiled = style["profiled"]
        extra["style_coefficients"] = style["coefficients"]
        extra["style_normalisation"] = style["normalisation"]
    ranks = _rank_ranges_by_component(lower, upper, shown, components)
    extra["components"] = int(np.unique(components[shown]).shape[0])
    extra["rank_ranges"] = RANK_RANGES
    rank_simultaneous: dict[int, tuple[int, int]] = {}
    if simultaneous is not None and differences is not None:
        same = components[differences.idx][:, None] == components[differences.idx][None, :]
        best, worst = est.rank_ranges_from_differences(simultaneous.lower, same)
        rank_simultaneous = {int(i): (int(best[k]), int(worst[k])) for k, i in enumerate(differences.idx)}
    rows = []
    order = np.lexsort((-counts["votes"], -np.where(shown, scores, -np.inf)))
    for i in order:
        row = _row_counts(int(i), competitor_ids, labels, counts, method)
        row["hidden"] = not bool(shown[i])
        row["component"] = int(components[i])
        if shown[i]:
            row.update(
                {
                    "score": round(float(scores[i]), 2),
                    "lower": bound(lower[i]),
                    "upper": bound(upper[i]),
                    "lower_open": bool(np.isneginf(lower[i])),
                    "upper_open": bool(np.isposinf(upper[i])),
                    "interval_method": "profile likelihood"
                    if profiled[i]
                    else "fisher"
                    if "tie_parameter" in extra
                    else {"raw": method.interval, "style": method.style_interval}.get(view, interval_method),
                    "rank_best": int(ranks.best[i]),
                    "rank_worst": int(ranks.worst[i]),
                }
            )
            if int(i) in rank_simultaneous:
                row["rank_simultaneous"] = list(rank_simultaneous[int(i)])
        rows.append(row)
    pairwise, grids = pairwise_block(cells, method, shown, competitor_ids, differences, components, simultaneous)
    return Board(rows=rows, pairwise=pairwise, extra=extra, pairwise_arrays=grids.encode())


def _interval_choice(
    method: Method, votes: VoteArrays, view: str, prompts: VoteArrays | None = None
) -> tuple[Method, dict[str, Any]]:
    """The campaign's interval setting resolved for this board ("auto": by how much prompts repeat,
    ``estimators.clustering``), and the record of the choice for ``extra.interval_choice``. Votes grouped
    without prompts (``prompt`` -1) are read through their counts per prompt (``prompts``)."""
    if prompts is not None:
        # The same votes counted per (category, prompt): the same design effect from a few rows a prompt.
        votes = prompts
    elif votes.count is not None and bool((votes.prompt < 0).any()):
        raise ValueError("the interval's choice needs the votes per prompt (VoteLog.prompts)")
    if view == "style":
        choice = est.choose_interval(method.style_interval, votes.prompt, plain="sandwich", count=votes.count)
        return replace(method, style_interval=cast(Interval, choice.chosen)), choice.as_dict()
    choice = est.choose_interval(method.interval, votes.prompt, plain="bootstrap", count=votes.count)
    return replace(method, interval=cast(Interval, choice.chosen)), choice.as_dict()


def _rank_ranges_by_component(
    lower: NDArray[np.float64], upper: NDArray[np.float64], shown: NDArray[np.bool_], components: NDArray[np.int64]
) -> est.RankRanges:
    """Rank ranges within each connected group of the comparison graph: scores of competitors that
    were never (even indirectly) compared say nothing about their order."""
    best = np.zeros(shown.shape[0], dtype=np.int64)
    worst = np.zeros(shown.shape[0], dtype=np.int64)
    for component in np.unique(components[shown]):
        mask = shown & (components == component)
        ranks = est.rank_ranges(lower, upper, mask)
        best[mask], worst[mask] = ranks.best[mask], ranks.worst[mask]
    return est.RankRanges(best=best, worst=worst, shown=shown)


def _row_counts(
    i: int,
    competitor_ids: NDArray[np.int64],
    labels: dict[int, str],
    counts: dict[str, NDArray[np.float64]],
    method: Method,
) -> dict[str, Any]:
    """Votes, wins, ties and rates of one competitor. Win rate counts ties as half; under the "drop"
    rule both-bad battles are left out of it, under "tie" they count as ties."""
    votes = float(counts["votes"][i])
    ties = counts["ties"][i] + (counts["both_bad"][i] if method.both_bad == "tie" else 0)
    decided = votes - (counts["both_bad"][i] if method.both_bad == "drop" else 0)
    return {
        "competitor_id": int(competitor_ids[i]),
        "label": labels.get(int(competitor_ids[i]), ""),
        "votes": int(votes),
        "counted": int(decided),
        "wins": int(counts["wins"][i]),
        "ties": int(counts["ties"][i]),
        "both_bad": int(counts["both_bad"][i]),
        "win_rate": round(float((counts["wins"][i] + 0.5 * ties) / decided), 4) if decided else None,
        "tie_rate": round(float(counts["ties"][i] / votes), 4) if votes else None,
        "both_bad_rate": round(float(counts["both_bad"][i] / votes), 4) if votes else None,
        "hidden": True,
        "component": -1,
    }


def _anchor(method: Method, competitor_ids: NDArray[np.int64]) -> int | None:
    if method.anchor is None:
        return None
    position = int(np.searchsorted(competitor_ids, method.anchor))
    if position >= competitor_ids.shape[0] or competitor_ids[position] != method.anchor:
        raise ValueError(f"anchor competitor {method.anchor} is not in this campaign")
    return position


def _style_fit(
    votes: VoteArrays,
    n: int,
    method: Method,
    competitor_ids: NDArray[np.int64],
    cells: est.Cells,
    shown: NDArray[np.bool_],
) -> dict[str, Any]:
    """The style-controlled view, or the reason it is withheld.

    Identifiability first (``style_checks``): aliased or collinear features are dropped and named; with
    none left, or when the fit separates (a style gap predicts the winner), or when any shown competitor
    other than the anchor would get a zero-width interval, the view is withheld with the reason. Sides
    the votes cannot bound are open exactly as in the raw view (the win digraph does not depend on the
    features); a competitor needing the profile gets at least the width of its raw profile interval."""
    cluster = method.style_interval == "cluster_bootstrap"
    reference = _anchor(method, competitor_ids)
    a, b = dense_index(votes, competitor_ids)
    full = est.style_design(
        a,
        b,
        votes.outcome,
        votes.style_left,
        votes.style_right,
        n_competitors=n,
        both_bad=method.both_bad,
        cluster=votes.prompt if cluster else None,
        feature_names=STYLE_FEATURES,
    )
    checks = est.style_checks(full)
    report: dict[str, Any] = {
        "kept": [full.features.names[k] for k in checks.kept],
        "dropped": [{"feature": name, "reason": reason} for name, reason in checks.dropped],
        "within_pair_share": [round(v, 6) for v in checks.within_pair],
        "condition": round(checks.condition, 2) if np.isfinite(checks.condition) else None,
    }
    out: dict[str, Any] = {"checks": report, "withheld": None}
    if not checks.identified:
        out["withheld"] = est.ALIASED_REASON
        return out
    design = est.style_subset(full, checks.kept)
    raw = est.fit_bradley_terry(cells, both_bad=method.both_bad, reference=reference)
    fit = est.fit_style(design, reference=reference, centre=raw.bounds.centre, start=raw.theta_raw)
    report.update({"converged": fit.converged, "separated": fit.separated, "iterations": fit.iterations})
    if fit.separated or not fit.converged:
        out["withheld"] = (
            "a style gap predicts the winner (almost) perfectly, so the style coefficients have no finite estimate"
            if fit.separated
            else "the style-controlled fit did not converge"
        )
        return out
    # The sandwich is computed only when it is the interval shown (the bootstrap's rounds replace it).
    if method.style_interval == "sandwich":
        intervals = est.style_sandwich_intervals(design, fit, confidence=method.confidence)
    else:
        intervals = est.style_bootstrap_intervals(
            design,
            fit,
            rounds=method.rounds,
            confidence=method.confidence,
            scheme="cluster" if cluster else "multinomial",
            seed=method.seed,
        )
    need = raw.bounds.needs_profile & shown
    lower, upper = _raw_boundary(cells, raw, method, shown, fit.scores, intervals.scores.lower, intervals.scores.upper)
    not_anchor = shown.copy()
    if reference is not None:
        not_anchor[reference] = False
    if np.any((upper - lower)[not_anchor] < ZERO_WIDTH):
        out["withheld"] = "the style-controlled fit is not identified here (an interval of zero width)"
        return out
    out.update(
        {
            "scores": fit.scores,
            "lower": lower,
            "upper": upper,
            "profiled": need,
            "components": fit.components,
            "coefficients": [
                {
                    "feature": name,
                    "coef": round(float(fit.coef[k]), 4),
                    "lower": round(float(intervals.coef_lower[k]), 4),
                    "upper": round(float(intervals.coef_upper[k]), 4),
                }
                for k, name in enumerate(fit.feature_names)
            ],
            "normalisation": {
                "rule": "per feature: (left - right) / (left + right), 0 when both are 0, divided by its standard "
                "deviation over the battles; not centred",
                "mean": [round(float(v), 6) for v in fit.feature_mean],
                "std": [round(float(v), 6) for v in fit.feature_std],
            },
        }
    )
    return out


def _raw_boundary(
    cells: est.Cells,
    raw: est.BTResult,
    method: Method,
    shown: NDArray[np.bool_],
    scores: NDArray[np.float64],
    lower: NDArray[np.float64],
    upper: NDArray[np.float64],
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """A view's intervals made honest at the boundary from the raw fit, as the style and reliability views do
    (the win digraph does not depend on the features or on who voted): sides the votes cannot bound are open,
    and a shown competitor that needs the profile gets at least the width of its raw profile interval (the raw
    sandwich interval united with the profile one, ``boundary_intervals``) around the view's score. The raw
    sandwich covariance and the profiles are computed only when some shown competitor needs them."""
    need = raw.bounds.needs_profile & shown
    if need.any():
        raw_base = est.sandwich_intervals(cells, raw, confidence=method.confidence)
        raw_iv = est.boundary_intervals(
            cells, raw, raw_base.lower, raw_base.upper, confidence=method.confidence, only=shown
        )
        with np.errstate(invalid="ignore"):
            lower = np.where(need, np.minimum(lower, scores - (raw.scores - raw_iv.lower)), lower)
            upper = np.where(need, np.maximum(upper, scores + (raw_iv.upper - raw.scores)), upper)
    lower = np.where(raw.bounds.open_lower, -np.inf, lower)
    upper = np.where(raw.bounds.open_upper, np.inf, upper)
    return lower, upper


# Each rater-bootstrap round reruns the alternating fit over every (rater, pair) cell; past this many
# cell-rounds a board gets fewer rounds than the campaign's (never under RELIABILITY_MIN_ROUNDS): 100 rounds
# up to 50,000 cells, 10 from 500,000. With the view's sample (policy.RELIABILITY_MAX votes, so at most
# 50,000 cells) every board keeps 100 rounds at any size: fewer would make its intervals rough.
# Deterministic in the data (the same votes, the same rounds).
RELIABILITY_CELL_ROUNDS = 5_000_000
RELIABILITY_MIN_ROUNDS = 10


def reliability_rounds(rounds: int, n_cells: int) -> int:
    return min(rounds, max(RELIABILITY_MIN_ROUNDS, RELIABILITY_CELL_ROUNDS // max(n_cells, 1)))


def _reliability_fit(
    votes: VoteArrays,
    n: int,
    method: Method,
    competitor_ids: NDArray[np.int64],
    cells: est.Cells,
    shown: NDArray[np.bool_],
) -> dict[str, Any]:
    """The reliability-weighted view (crowd Bradley-Terry), or the reason it is withheld, with the
    per-rater reliabilities either way. Open sides and the profile widening carry over from the raw
    view, as in the style view (the win digraph does not depend on who voted)."""
    reference = _anchor(method, competitor_ids)
    raw = est.fit_bradley_terry(cells, both_bad=method.both_bad, reference=reference)
    a, b = dense_index(votes, competitor_ids)
    crowd_cells = est.crowd_cells(a, b, votes.outcome, votes.rater, n_competitors=n, both_bad=method.both_bad)
    fit = est.fit_crowd_bt(crowd_cells, raw, confidence=method.confidence)
    raters = [
        {
            "rater_id": int(crowd_cells.rater_ids[r]),
            "eta": round(float(fit.eta[r]), 4),
            "weight": round(float(fit.weight[r]), 4),
            "lower": round(float(fit.eta_lower[r]), 4) if fit.estimated[r] else None,
            "upper": round(float(fit.eta_upper[r]), 4) if fit.estimated[r] else None,
            "votes": int(round(float(crowd_cells.votes[r]))),
            "shared_votes": int(round(float(crowd_cells.overlap[r]))),
            "estimated": bool(fit.estimated[r]),
        }
        for r in np.argsort(fit.eta, kind="stable")
    ]
    report: dict[str, Any] = {
        "raters": raters,
        "raters_estimated": int(fit.estimated.sum()),
        "raters_held": int((~fit.estimated).sum()),
        "reliability_converged": fit.converged,
        "reliability_iterations": fit.iterations,
        "reliability_distribution": {
            "grid": [round(float(g), 4) for g in est.crowd.GRID],
            "weights": [round(float(w), 4) for w in fit.weights],
        },
    }
    out: dict[str, Any] = {"extra": report, "withheld": None}
    if crowd_cells.n_raters < est.crowd.MIN_RATERS or not fit.identified:
        out["withheld"] = (
            f"reliability is identified only by comparing raters on the same pairs, and fewer than "
            f"{est.crowd.MIN_RATERS} raters have {est.crowd.MIN_OVERLAP} or more votes on pairs another rater also "
            "voted on"
        )
        return out
    report["unreliable_vote_share"] = round(est.crowd.unreliable_share(crowd_cells, fit), 4)
    if report["unreliable_vote_share"] > 0.5:
        out["withheld"] = (
            "the fit finds most votes unreliable, which contradicts the view's assumption that most raters are "
            "reliable (a consistent minority may have been taken for the reliable raters)"
        )
        return out
    if crowd_cells.n_cells > RELIABILITY_BOOTSTRAP_CELLS:
        boot = est.crowd_sandwich(crowd_cells, fit, confidence=method.confidence)
        report["reliability_interval"] = {
            "chosen": boot.method,
            "reason": f"{crowd_cells.n_cells:,} (rater, pair) cells, over {RELIABILITY_BOOTSTRAP_CELLS:,}: the "
            "sandwich clustered by rater, not the rater bootstrap (each of whose rounds reruns the whole fit)",
        }
    else:
        rounds = reliability_rounds(method.rounds, crowd_cells.n_cells)
        boot = est.crowd_bootstrap(crowd_cells, fit, rounds=rounds, confidence=method.confidence, seed=method.seed)
        report["reliability_interval"] = {
            "chosen": boot.method,
            "reason": f"{crowd_cells.n_cells:,} (rater, pair) cells, at most {RELIABILITY_BOOTSTRAP_CELLS:,}",
        }
        report["bootstrap_rounds"] = rounds
        report["bootstrap_rounds_not_converged"] = boot.not_converged
    out["interval_method"] = boot.method
    need = raw.bounds.needs_profile & shown
    lower, upper = _raw_boundary(cells, raw, method, shown, fit.scores, boot.lower, boot.upper)
    report["centre"] = [int(competitor_ids[i]) for i in np.flatnonzero(raw.bounds.centre & shown)]
    report["normalisation"] = raw.params.normalisation
    out.update({"scores": fit.scores, "lower": lower, "upper": upper, "profiled": need, "components": fit.components})
    return out


def per_vote_note(used: int, kept: int) -> dict[str, Any]:
    """What a view fitted on a sample of the board's votes says about it (``extra.per_vote_sample``)."""
    return {
        "votes": used,
        "of": kept,
        "rule": "a deterministic sample of the kept votes (a hash of the vote id, policy.sample_mask): the view fits "
        "each vote, and reads at most policy.PER_VOTE_MAX of a campaign's (the reliability view "
        "policy.RELIABILITY_MAX); the counts, which competitors are shown and the open sides come from every vote",
        "interval_widening": round(math.sqrt(kept / used), 2) if used else None,
        "note": "intervals are the sample's: about sqrt(of / votes) wider than all the votes would give",
    }


# An interval narrower than this (score points) for a competitor that is not the anchor is a sign the
# fit is not identified; such a view is withheld rather than published with a false certainty.
ZERO_WIDTH = 0.01


def elo_compute(
    votes: VoteArrays, competitor_ids: NDArray[np.int64], labels: dict[int, str], method: Method
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The live view: online Elo in log order, with its two warning flags and its spread over random
    orders of the same votes (``est.elo_order_spread``, whose parameters come second); both-bad follows
    the snapshot's rule (a tie, or skipped)."""
    if votes.count is not None:
        raise ValueError("Elo replays the votes in log order: pass them one by one")
    a, b = dense_index(votes, competitor_ids)
    rule: dict[str, Any] = {
        "n_competitors": int(competitor_ids.shape[0]),
        "both_bad": "skip" if method.both_bad == "drop" else "tie",
    }
    result = est.online_elo(a, b, votes.outcome, **rule)
    spread = est.elo_order_spread(a, b, votes.outcome, seed=method.seed, **rule)
    rows = [
        {
            "competitor_id": int(cid),
            "label": labels.get(int(cid), ""),
            "rating": round(float(result.ratings[i]), 1),
            "comparisons": int(result.comparisons[i]),
            "few_comparisons": bool(result.few_comparisons[i]),
            "unstable": bool(result.unstable[i]),
            "order_sd": round(float(spread.sd[i]), 1),
            "order_min": round(float(spread.low[i]), 1),
            "order_max": round(float(spread.high[i]), 1),
        }
        for i, cid in enumerate(competitor_ids)
    ]
    return sorted(rows, key=lambda r: -r["rating"]), dict(spread.params)


# --- Judges: calibration against the human votes, and a golden run's candidate-against-baseline check ---

CHOICE_CODES = ("left", "right", "tie", "both_bad")


def calibration_compute(
    human: NDArray[np.int64], judge: NDArray[np.int64], *, confidence: float = 0.95
) -> dict[str, Any]:
    """Agreement of a judge with the human votes on the same battles (codes 0..3 of CHOICE_CODES): raw
    agreement with its Wilson interval, Cohen's kappa (with the Fleiss-Cohen-Everitt interval) on the
    4 x 4 table (rows human, columns judge) and the gate its interval supports (``est.GATE_RULE``)."""
    n = int(human.shape[0])
    table = np.zeros((4, 4), dtype=np.float64)
    np.add.at(table, (human, judge), 1.0)
    out: dict[str, Any] = {"battles": n, "table": table.astype(int).tolist(), "agreement": None}
    out.update(agreement_lower=None, agreement_upper=None, kappa=None, kappa_lower=None, kappa_upper=None)
    out["kappa_note"] = ""
    if n:
        agree = float(np.trace(table))
        lo, hi = est.wilson_interval(agree, n, confidence=confidence)
        out.update(
            agreement=round(agree / n, 4), agreement_lower=round(float(lo), 4), agreement_upper=round(float(hi), 4)
        )
        kappa = cohen_kappa_table(table, confidence=confidence)
        if kappa.value is None:
            out["kappa_note"] = (kappa.reason or "")[:300]
        else:
            out.update(
                kappa=round(kappa.value, 4),
                kappa_lower=None if kappa.lower is None else round(kappa.lower, 4),
                kappa_upper=None if kappa.upper is None else round(kappa.upper, 4),
            )
    else:
        out["kappa_note"] = "no battle has both a human vote and a verdict of this judge"
    out["gate"] = est.calibration_gate(float(np.trace(table)), n)
    return out


def head_to_head_check(*, wins: int, losses: int, ties: int, confidence: float) -> dict[str, Any]:
    """Does the candidate beat the baseline? Its share of the judged pairs (a tie or both-bad verdict half
    each) must exceed one half with the one-sided Wilson lower bound at ``confidence``."""
    n = wins + losses + ties
    share = (wins + ties / 2) / n if n else None
    lower = None
    if n:
        lo, _ = est.wilson_interval(wins + ties / 2, n, confidence=2 * confidence - 1)
        lower = round(float(lo), 4)
    return {
        "pairs": n,
        "wins": wins,
        "losses": losses,
        "ties": ties,
        "share": None if share is None else round(share, 4),
        "lower_bound": lower,
        "confidence": confidence,
        "beats": lower is not None and lower > 0.5,
        "rule": "one-sided Wilson lower bound of the candidate's share (ties half) above 0.5",
    }
