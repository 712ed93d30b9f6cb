"""Per-rater figures from the vote log: the quality report (agreement on shared items, the outlier test, gold
accuracy: ``rater_quality``) and the managers' dashboard's per-rater reports (pace, decision time,
agreement, gold accuracy, flags: ``rater_reports``). The figures from the log are cached per state of the
log (``log_cache``); gold accuracy, flags and names are read afresh. The dashboard's figures are defined
by SQL aggregates over the vote log (``_rater_figures_sql``, the path elsewhere than PostgreSQL); on
PostgreSQL they are computed in numpy from one packed read of the log (``dashboard_log``,
``rater_figures_of_arrays``): the same numbers."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
from django.contrib.auth.models import User
from django.core.cache import cache
from django.db import connection, transaction
from django.db.models import QuerySet
from numpy.typing import NDArray

from battles.models import Battle, Campaign, Vote
from battles.selectors import gold_counts, raters_named
from raters.models import FLAG_IN_FORCE, RaterFlag

from .. import estimators as est
from ..quality import quality_report
from .arrays import _packed_columns, vote_arrays, vote_items
from .log_cache import (
    OnLog,
    _cached_on_log,
    _log_key,
    _log_snapshot,
    _on_log_cached,
    _on_log_compute,
    _on_log_entry,
    _on_log_store,
)
from .statistics import _percentiles

# Item-bootstrap rounds for the agreement intervals (seed 0: the same log gives the same intervals).
QUALITY_BOOTSTRAP_ROUNDS = 1000


def rater_quality(*, campaign: Campaign, alpha: float = 0.01, min_common: int = 10) -> dict[str, Any]:
    """Agreement on shared items (overall and per pool of the campaign) and the outlier test per rater,
    from every vote in the campaign's log (read-only; nothing is excluded, the flagged raters
    included: they are what this measures). Items are shared battles (``vote_items``). Computed from the
    log and cached until it grows (``_cached_on_log``: the pools' members and the parameters are part of
    the key); gold accuracy is read afresh (a gold item's verdict is the manager's, not the log's)."""
    pools = [
        (pool.pk, pool.name, sorted(member.pk for member in pool.members.all()))
        for pool in campaign.rater_pools.prefetch_related("members").order_by("name", "pk")
    ]

    def compute() -> dict[str, Any]:
        votes = vote_arrays(campaign_id=campaign.pk)
        items = vote_items(campaign_id=campaign.pk, vote_id=votes.vote_id)
        return quality_report(
            vote_id=votes.vote_id,
            rater=votes.rater,
            item=items,
            left=votes.left,
            right=votes.right,
            outcome=votes.outcome,
            pools=pools,
            alpha=alpha,
            min_common=min_common,
            bootstrap=QUALITY_BOOTSTRAP_ROUNDS,
        )

    report = copy.deepcopy(
        _cached_on_log(campaign.pk, "rater-quality", [pools, alpha, min_common, QUALITY_BOOTSTRAP_ROUNDS], compute)
    )
    _gold_accuracy_add(report, gold_counts(campaign=campaign))
    return {"campaign_id": campaign.pk, **report}


def _gold_accuracy_add(report: dict[str, Any], gold: dict[int, Any]) -> None:
    """Per rater of the report, ``gold_accuracy``: correct / answered gold votes with its 95% Wilson
    interval, and the attention checks answered and failed. Gold votes are not in the ranked arrays, so
    a rater who has voted on gold battles only gets a row of their own (no votes, nothing to agree on)."""
    known = {row["rater_id"] for row in report["raters"]}
    for rater_id in sorted(set(gold) - known):
        report["raters"].append(
            {
                "rater_id": rater_id,
                "votes": 0,
                "items": 0,
                "shared_items": 0,
                "agreement": None,
                "agreeing_pairs": 0,
                "pairs": 0,
                "informative_votes": 0,
                "e_value": None,
                "e_value_max": None,
                "flagged": False,
                "votes_to_flag": None,
                "flag_vote_id": None,
            }
        )
    report["raters"].sort(key=lambda row: row["rater_id"])
    for row in report["raters"]:
        rater_id = row["rater_id"]
        counts = gold.get(rater_id)
        answered = counts.gold_answered if counts else 0
        correct = counts.gold_correct if counts else 0
        lower, upper = est.wilson_interval(np.array([correct]), np.array([answered]))
        row["gold_accuracy"] = {
            "answered": answered,
            "correct": correct,
            "accuracy": correct / answered if answered else None,
            "lower": float(lower[0]) if answered else None,
            "upper": float(upper[0]) if answered else None,
            "attention_answered": counts.attention_answered if counts else 0,
            "attention_failed": counts.attention_failed if counts else 0,
        }


# A rater's pause longer than this ends a working session: the gap is not counted as active time.
SESSION_GAP_S = 30 * 60


@dataclass(frozen=True)
class RaterReport:
    rater_id: int
    name: str
    battles: int  # votes cast in the campaign, gold ones included
    median_decision_s: float | None
    active_hours: float
    battles_per_hour: float | None
    first_vote_at: datetime | None
    last_vote_at: datetime | None
    gold_answered: int
    gold_correct: int
    gold_accuracy: float | None
    gold_lower: float | None
    gold_upper: float | None
    attention_answered: int
    attention_failed: int
    agreement: float | None  # share of agreeing (rater, other rater) pairs on shared items
    agreement_items: int
    agreement_pairs: int
    flagged: bool
    flag_reason: str


def _sort_memory() -> None:
    """Within the caller's transaction: room for the per-rater sorts of a million-vote log in memory (the
    default 4 MB spills them to disk, several times slower)."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL work_mem = '128MB'")


def _gap_seconds_sql() -> str:
    if connection.vendor == "postgresql":
        return "EXTRACT(EPOCH FROM (created_at - prev))"
    return "(julianday(created_at) - julianday(prev)) * 86400.0"


def _rater_activity(campaign: Campaign) -> dict[int, tuple[int, float, Any, Any]]:
    """Per rater: (battles, active seconds, first vote, last vote). Active time: the votes in time order;
    a vote within ``SESSION_GAP_S`` of the rater's previous one adds the gap (reading and deciding since
    then), one that starts a session adds its own decision time (the time its battle was on screen)."""
    gap = _gap_seconds_sql()
    sql = (
        f"WITH v AS (SELECT rater_id, created_at, decision_ms, LAG(created_at) OVER "
        f"(PARTITION BY rater_id ORDER BY created_at, id) AS prev FROM {Vote._meta.db_table} "
        "WHERE campaign_id = %s) "
        f"SELECT rater_id, COUNT(*), SUM(CASE WHEN prev IS NOT NULL AND {gap} <= {SESSION_GAP_S} THEN {gap} "
        "ELSE decision_ms / 1000.0 END), MIN(created_at), MAX(created_at) FROM v GROUP BY rater_id"
    )
    with transaction.atomic(), connection.cursor() as cursor:
        _sort_memory()
        cursor.execute(sql, [campaign.pk])
        rows = cursor.fetchall()
    out = {}
    for rater_id, n, seconds, first, last in rows:
        if connection.vendor != "postgresql" and isinstance(first, str):
            first, last = datetime.fromisoformat(first), datetime.fromisoformat(last)
        out[int(rater_id)] = (int(n), float(seconds or 0.0), first, last)
    return out


def _rater_agreement(campaign: Campaign) -> dict[int, tuple[int, int, int]]:
    """Per rater: (agreeing pairs, pairs, shared items) on the items of ``ranking.quality`` (a shared
    battle's copies are one item, ``COALESCE(item_key, battle id)``, as ``vote_items`` reads them; the
    verdict with sides normalised by competitor id, since copies draw their sides afresh; a rater's first
    vote per item; gold votes left out) — the same numbers as the rater-quality report's
    ``agreeing_pairs``, ``pairs`` and ``shared_items``, grouped in SQL."""
    table, battles = Vote._meta.db_table, Battle._meta.db_table
    category = (
        "CASE WHEN v.left_id > v.right_id AND v.choice = 'left' THEN 'right' "
        "WHEN v.left_id > v.right_id AND v.choice = 'right' THEN 'left' ELSE v.choice END"
    )
    item = "COALESCE(b.item_key, b.id)"
    # Window counts rather than joins back to per-item tallies: the two counts share one sort (item, then
    # category), and the result is grouped once per rater.
    sql = (
        f"WITH x AS (SELECT v.rater_id, {item} AS item, {category} AS cat, "
        f"ROW_NUMBER() OVER (PARTITION BY v.rater_id, {item} ORDER BY v.id) AS rn "
        f"FROM {table} v JOIN {battles} b ON b.id = v.battle_id WHERE v.campaign_id = %s AND v.source <> 'gold'), "
        "f AS (SELECT rater_id, COUNT(*) OVER (PARTITION BY item, cat) AS n, "
        "COUNT(*) OVER (PARTITION BY item) AS m FROM x WHERE rn = 1) "
        "SELECT rater_id, SUM(n - 1), SUM(m - 1), SUM(CASE WHEN m > 1 THEN 1 ELSE 0 END) FROM f GROUP BY rater_id"
    )
    with transaction.atomic(), connection.cursor() as cursor:
        _sort_memory()
        cursor.execute(sql, [campaign.pk])
        return {int(r): (int(a), int(p), int(i)) for r, a, p, i in cursor.fetchall()}


def _median_decision_s(campaign: Campaign) -> dict[int, float]:
    params = [campaign.pk]
    if connection.vendor == "postgresql":
        # PostgreSQL's own aggregate sorts each rater's values apart (faster than one window over the log).
        with transaction.atomic(), connection.cursor() as cursor:
            _sort_memory()
            cursor.execute(
                "SELECT rater_id, percentile_cont(0.5) WITHIN GROUP (ORDER BY decision_ms) "
                f"FROM {Vote._meta.db_table} WHERE campaign_id = %s GROUP BY rater_id",
                params,
            )
            return {int(k): round(float(v) / 1000.0, 3) for k, v in cursor.fetchall()}
    values = f"SELECT rater_id, decision_ms FROM {Vote._meta.db_table} WHERE campaign_id = %s"
    found = _percentiles(values, params, "rater_id", "decision_ms")
    return {int(k): round(v.p50 / 1000.0, 3) for k, v in found.items() if v.p50 is not None}


def raters_of(*, campaign: Campaign) -> QuerySet[User]:
    """The users who voted in the campaign, by id (the rater report's pages)."""
    voters = Vote.objects.filter(campaign=campaign).values("rater_id")
    return User.objects.filter(pk__in=voters).order_by("id")


# The per-rater figures of the whole log (activity, medians, agreement: several sorts of the log) are one
# cached entry per campaign: the dashboard, the CSV and every page of the API read the same one.
RATER_FIGURES = "rater-figures"

RaterFigures = tuple[dict[int, tuple[int, float, Any, Any]], dict[int, float], dict[int, tuple[int, int, int]]]


@dataclass(frozen=True)
class RaterReports:
    """Rater reports and the state of the log their figures from the log were computed at. Gold accuracy,
    attention checks, flags and names are read afresh each time; battles, medians, pace and agreement are
    as of ``as_of``, ``votes_behind`` votes ago (0: the log as it stands)."""

    reports: list[RaterReport]
    as_of: datetime  # when the figures from the log were computed
    as_of_votes: int  # votes in the log they stand on
    votes_behind: int  # votes cast since
    refreshing: bool  # a worker is computing the current figures

    @property
    def fresh(self) -> bool:
        return self.votes_behind == 0


def _rater_figures_from_log(campaign: Campaign) -> RaterFigures:
    if connection.vendor == "postgresql":
        return rater_figures_of_arrays(_rater_log_packed(campaign.pk))
    return _rater_figures_sql(campaign)


def _rater_figures_sql(campaign: Campaign) -> RaterFigures:
    """The per-rater figures grouped in SQL (the definitions; elsewhere than PostgreSQL, the figures)."""
    activity = _rater_activity(campaign)
    if not activity:
        return {}, {}, {}
    return activity, _median_decision_s(campaign), _rater_agreement(campaign)


def rater_figures_cached(
    *, campaign: Campaign, mark: list[Any] | None = None
) -> tuple[OnLog[RaterFigures] | None, list[Any]]:
    """The campaign's per-rater figures cached for the log as it stands, else the latest ones computed on
    an earlier state of it (older mark), else None; with the log's current mark (``_on_log_cached``;
    ``mark``: the log's, known already, e.g. ``log_mark_of(dashboard_log(...))``)."""
    return _on_log_cached(campaign.pk, RATER_FIGURES, [], mark)


def rater_figures_at(*, campaign: Campaign, mark: list[Any]) -> OnLog[RaterFigures] | None:
    """The per-rater figures cached for the log at ``mark`` exactly (a cache read, no SQL)."""
    return _on_log_entry(cache.get(_log_key(RATER_FIGURES, campaign.pk, [], mark)))


def rater_figures_compute(*, campaign: Campaign, log: dict[str, NDArray[Any]] | None = None) -> OnLog[RaterFigures]:
    """The per-rater figures of the log as it stands, computed now (one snapshot of the log) and cached
    under its state and as the campaign's latest. On PostgreSQL from ``log`` (``dashboard_log``: the view
    read it already), else from a read of it now."""
    if connection.vendor != "postgresql":
        return _on_log_compute(campaign.pk, RATER_FIGURES, [], lambda: _rater_figures_sql(campaign))
    # The log's mark from the same read as the figures (the votes, the largest id and its time): one scan.
    if log is None:
        with _log_snapshot():
            log = _rater_log_packed(campaign.pk)
    return _on_log_store(campaign.pk, RATER_FIGURES, [], rater_figures_of_arrays(log), log_mark_of(log))


def dashboard_log(*, campaign_id: int) -> dict[str, NDArray[Any]] | None:
    """The campaign's log as the dashboard reads it (``_rater_log_packed``), in one snapshot; None elsewhere
    than PostgreSQL (the dashboard's selectors then group in SQL)."""
    if connection.vendor != "postgresql":
        return None
    with _log_snapshot():
        return _rater_log_packed(campaign_id)


def log_mark_of(log: dict[str, NDArray[Any]]) -> list[Any]:
    """``log_cache._log_mark`` of the log read by ``_rater_log_packed``."""
    if log["id"].shape[0] == 0:
        return [0, 0, ""]
    last = int(np.argmax(log["id"]))
    at = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=int(log["at_us"][last]))
    return [int(log["id"].shape[0]), int(log["id"][last]), at.isoformat()]


def rater_figures_viewed(*, campaign_id: int) -> bool:
    """Whether the campaign's per-rater figures were computed within ``LOG_LATEST_S`` (someone looks at
    them: worth keeping current)."""
    return cache.get(_log_key(RATER_FIGURES, campaign_id, [], None)) is not None


def rater_reports_of(
    *,
    campaign: Campaign,
    figures: OnLog[RaterFigures],
    log_votes: int,
    refreshing: bool = False,
    rater_ids: list[int] | None = None,
) -> RaterReports:
    """One report per rater in ``figures`` (or per given rater among them), by rater id, with gold
    accuracy, flags and names read afresh; ``log_votes``: the votes in the log now."""
    activity, medians, agreement = figures.value
    ids = sorted(activity) if rater_ids is None else sorted(set(activity) & set(rater_ids))
    gold = gold_counts(campaign=campaign)
    flags = dict(
        RaterFlag.objects.filter(FLAG_IN_FORCE, organization_id=campaign.organization_id, rater_id__in=ids)
        .order_by("created_at")
        .values_list("rater_id", "reason")
    )
    names = raters_named(organization_id=campaign.organization_id, user_ids=ids)
    out = []
    for rater_id in ids:
        n, seconds, first, last = activity[rater_id]
        hours = seconds / 3600.0
        counts = gold.get(rater_id)
        answered = counts.gold_answered if counts else 0
        correct = counts.gold_correct if counts else 0
        if answered:
            lower, upper = est.wilson_interval(np.array([correct]), np.array([answered]))
            bounds: tuple[float | None, float | None] = (float(lower[0]), float(upper[0]))
        else:
            bounds = (None, None)
        agreeing, pairs, items = agreement.get(rater_id, (0, 0, 0))
        out.append(
            RaterReport(
                rater_id=rater_id,
                name=names.get(rater_id, f"rater {rater_id}"),
                battles=n,
                median_decision_s=medians.get(rater_id),
                active_hours=round(hours, 4),
                battles_per_hour=round(n / hours, 2) if hours > 0 else None,
                first_vote_at=first,
                last_vote_at=last,
                gold_answered=answered,
                gold_correct=correct,
                gold_accuracy=correct / answered if answered else None,
                gold_lower=bounds[0],
                gold_upper=bounds[1],
                attention_answered=counts.attention_answered if counts else 0,
                attention_failed=counts.attention_failed if counts else 0,
                agreement=agreeing / pairs if pairs else None,
                agreement_items=items,
                agreement_pairs=pairs,
                flagged=rater_id in flags,
                flag_reason=flags.get(rater_id, ""),
            )
        )
    return RaterReports(
        reports=out,
        as_of=figures.computed_at,
        as_of_votes=figures.votes,
        votes_behind=max(0, log_votes - figures.votes),
        refreshing=refreshing,
    )


def rater_reports(*, campaign: Campaign, rater_ids: list[int] | None = None) -> list[RaterReport]:
    """One report per rater who voted in the campaign (or per given rater among them), by rater id, for
    the log as it stands: the figures from the log cached for its state, else computed now (and cached).
    Gold accuracy, flags and names are read afresh. (What may serve older figures while a worker
    refreshes them is ``ranking.services.rater_reports_serve``.)"""
    figures, mark = rater_figures_cached(campaign=campaign)
    if figures is None or figures.mark != mark:
        figures = rater_figures_compute(campaign=campaign)
    return rater_reports_of(campaign=campaign, figures=figures, log_votes=figures.votes, rater_ids=rater_ids).reports


# --- The same figures from one packed read of the log, grouped in numpy (PostgreSQL) ----------------------
# At a million votes the SQL above sorts the log three times (about 23 s); one packed read of the few
# columns they need and numpy's sorts give the same numbers in about a second (benchmarks/dashboard.py).

_CATEGORY_SQL = (
    "CASE WHEN v.left_id > v.right_id AND v.choice = 'left' THEN 1 WHEN v.left_id > v.right_id AND v.choice = 'right' "
    "THEN 0 ELSE (CASE v.choice WHEN 'left' THEN 0 WHEN 'right' THEN 1 WHEN 'tie' THEN 2 ELSE 3 END) END"
)


# timestamptz_send's microseconds count from 2000-01-01 UTC.
_PG_EPOCH_US = 946_684_800 * 1_000_000


def _rater_log_packed(campaign_id: int) -> dict[str, NDArray[Any]]:
    """Every vote of the campaign (gold ones too) as arrays: id, rater, time (integer microseconds since the
    epoch, as PostgreSQL stores it: exact), decision time, whether gold and its pair (lower competitor id
    first: the dashboard's counts, ``dashboard_counts_of``); one scan of the log. Then, under
    ``shared``, the votes on shared battles only (gold ones aside), with their item (a dense code of
    ``item_key``) and verdict with sides normalised by competitor id (0 the lower id wins, 1 the higher, 2 tie,
    3 both bad): the copies of shared battles (an ``item_key``) and the battles they copy (whose id is a
    copy's key). A battle has one vote, so any other item has one vote and adds nothing to agreement. The
    partial index on ``item_key`` finds them."""
    c = int(campaign_id)
    sql = (
        f"SELECT id, rater_id::int4, created_at, decision_ms::int4, source = 'gold', LEAST(left_id, right_id)::int4, "
        f"GREATEST(left_id, right_id)::int4 FROM {Vote._meta.db_table} WHERE campaign_id = {c}"
    )
    fields = [("id", ">i8"), ("rater", ">i4"), ("at_us", "timestamptz"), ("decision_ms", ">i4"), ("gold", "?")]
    fields += [("lo", ">i4"), ("hi", ">i4")]
    columns = _packed_columns(sql, fields, hashed=True)
    columns["at_us"] = columns["at_us"] + _PG_EPOCH_US
    battles, votes = Battle._meta.db_table, Vote._meta.db_table
    columns_sql = f"SELECT v.id, v.rater_id::int4, ({_CATEGORY_SQL})::int2, COALESCE(b.item_key, b.id)"
    keys = f"SELECT DISTINCT item_key FROM {battles} WHERE campaign_id = {c} AND item_key IS NOT NULL"
    # The copies (an item_key) and the battles whose id copies name (no item_key of their own): every vote
    # whose item another vote may share.
    shared = (
        f"{columns_sql} FROM {battles} b JOIN {votes} v ON v.battle_id = b.id WHERE b.campaign_id = {c} "
        f"AND b.item_key IS NOT NULL AND v.source <> 'gold' UNION ALL "
        f"{columns_sql} FROM ({keys}) k JOIN {battles} b ON b.id = k.item_key AND b.item_key IS NULL "
        f"JOIN {votes} v ON v.battle_id = b.id WHERE b.campaign_id = {c} AND v.source <> 'gold'"
    )
    on_items = _packed_columns(shared, [("id", ">i8"), ("rater", ">i4"), ("cat", ">i2"), ("item", "|V16")], hashed=True)
    halves = on_items.pop("item").view(np.int64).reshape(-1, 2)
    order = np.lexsort((halves[:, 1], halves[:, 0]))
    new_item = np.ones(order.shape[0], dtype=bool)
    new_item[1:] = np.any(halves[order][1:] != halves[order][:-1], axis=1)
    item = np.empty(order.shape[0], dtype=np.int64)
    item[order] = np.cumsum(new_item) - 1
    on_items["item"] = item
    columns.update({f"shared_{name}": values for name, values in on_items.items()})
    return columns


def _starts(keys: NDArray[Any]) -> NDArray[np.bool_]:
    """Where a run of equal (sorted) keys starts."""
    first = np.ones(keys.shape[0], dtype=bool)
    first[1:] = keys[1:] != keys[:-1]
    return first


def rater_figures_of_arrays(log: dict[str, NDArray[Any]]) -> RaterFigures:
    """The per-rater figures (``_rater_activity``, ``_median_decision_s``, ``_rater_agreement``: the same
    definitions, the same numbers) of a log read by ``_rater_log_packed``."""
    rater = log["rater"].astype(np.int64)
    if rater.shape[0] == 0:
        return {}, {}, {}
    at_us, vote_id, decision_ms = log["at_us"].astype(np.int64), log["id"].astype(np.int64), log["decision_ms"]
    # Activity: each rater's votes by (time, id); a gap within a session counts, a session's first vote its own
    # decision time. Integer microseconds throughout, so the sums are exact, as PostgreSQL's numeric ones.
    order = np.lexsort((vote_id, at_us, rater))
    r, t, d = rater[order], at_us[order], decision_ms[order].astype(np.int64)
    first = _starts(r)
    gap = np.zeros_like(t)
    gap[1:] = t[1:] - t[:-1]
    within = ~first & (gap <= SESSION_GAP_S * 1_000_000)
    active_us = np.where(within, gap, d * 1000)
    starts = np.flatnonzero(first)
    ends = np.append(starts[1:], r.shape[0]) - 1
    raters = r[starts]
    totals = np.add.reduceat(active_us, starts)
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    activity = {
        int(k): (
            int(n),
            int(total) / 1_000_000,
            epoch + timedelta(microseconds=int(lo)),
            epoch + timedelta(microseconds=int(hi)),
        )
        for k, n, total, lo, hi in zip(raters, ends - starts + 1, totals, t[starts], t[ends], strict=True)
    }
    # Median decision time: percentile_cont(0.5), the mean of the two middle values of an even count.
    # One sort of one int64 key (rater above, decision time below: both non-negative and under 2**31).
    order = np.argsort((rater << 32) | decision_ms.astype(np.int64))
    values = decision_ms[order].astype(np.float64)
    counts = ends - starts + 1  # the same runs of raters (the same sort key first)
    low, high = values[starts + (counts - 1) // 2], values[starts + counts // 2]
    medians = {int(k): round(float((a + b) / 2.0) / 1000.0, 3) for k, a, b in zip(raters, low, high, strict=True)}
    agreement = _agreement_of_arrays(
        log["shared_rater"].astype(np.int64), log["shared_id"], log["shared_item"], log["shared_cat"]
    )
    # A rater whose votes (gold aside) are all on items of their own agrees on nothing: (0, 0, 0), as in SQL.
    for k in np.unique(rater[~log["gold"].astype(bool)]).tolist():
        agreement.setdefault(int(k), (0, 0, 0))
    return activity, medians, dict(sorted(agreement.items()))


def _agreement_of_arrays(
    rater: NDArray[np.int64], vote_id: NDArray[np.int64], item: NDArray[np.int64], cat: NDArray[Any]
) -> dict[int, tuple[int, int, int]]:
    """``_rater_agreement`` in numpy, over the votes on shared items: each rater's first vote per item; per vote
    the votes of its item with the same verdict (n) and all of them (m); per rater sum(n - 1), sum(m - 1) and
    the items shared (m > 1)."""
    if rater.shape[0] == 0:
        return {}
    cat = cat.astype(np.int64)
    order = np.lexsort((vote_id, item, rater))
    rater, item, cat = rater[order], item[order], cat[order]
    firsts = _starts(rater) | _starts(item)
    rater, item, cat = rater[firsts], item[firsts], cat[firsts]
    _, item_code = np.unique(item, return_inverse=True)
    m = np.bincount(item_code)[item_code]
    n = np.bincount(item_code * 4 + cat)[item_code * 4 + cat]
    raters, code = np.unique(rater, return_inverse=True)
    agreeing = np.bincount(code, weights=n - 1).astype(np.int64)
    pairs = np.bincount(code, weights=m - 1).astype(np.int64)
    shared = np.bincount(code, weights=(m > 1)).astype(np.int64)
    return {int(k): (int(a), int(p), int(s)) for k, a, p, s in zip(raters, agreeing, pairs, shared, strict=True)}
