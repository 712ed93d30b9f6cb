"""The managers' dashboard: per-day series, pair coverage, decision times and the cadence check (its
per-rater reports: ``raters``). Each selector is an SQL aggregate over the vote log (grouped in the
database; what comes back is one row per day, pair, bin or rater): the API's and other databases' path. On
PostgreSQL the page reads the log once instead (``raters.dashboard_log``, packed, from a covering index) and
counts it in numpy (``dashboard_counts_of``): the same numbers, one scan."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any

import numpy as np
from django.db import connection
from django.db.models import Count
from django.db.models.functions import TruncDate
from numpy.typing import NDArray

from battles.models import Battle, Campaign, Competitor, Vote

from .leaderboards import competitor_names
from .raters import _PG_EPOCH_US, dashboard_log
from .statistics import _window

# Decision-time histogram bins, in seconds (the last is open-ended): fine where raters decide, coarse after.
DECISION_BINS_S = (0, 1, 2, 3, 5, 8, 12, 20, 30, 60, 120, 300)
CADENCE_WINDOW_DAYS = 7
# timestamptz_send's day 0.
_PG_EPOCH_DAY = date(2000, 1, 1)


def day_series(*, campaign: Campaign) -> tuple[list[tuple[date, int]], list[tuple[date, int]]]:
    """(UTC day, votes) and (UTC day, distinct raters who voted) for every day with a vote, gold votes
    included (they are work the raters did): one scan of the log, hash-grouped by (day, rater) in
    PostgreSQL (a few thousand rows back; no sort of the log, as ``COUNT(DISTINCT)`` per day would need)."""
    if connection.vendor == "postgresql":
        sql = (
            "SELECT (created_at AT TIME ZONE 'UTC')::date, rater_id, COUNT(*) "
            f"FROM {Vote._meta.db_table} WHERE campaign_id = %s GROUP BY 1, 2"
        )
        with connection.cursor() as cursor:
            cursor.execute(sql, [campaign.pk])
            rows = [(day, int(n)) for day, _, n in cursor.fetchall()]
    else:
        found = (
            Vote.objects.filter(campaign=campaign)
            .annotate(day=TruncDate("created_at", tzinfo=UTC))
            .values("day", "rater_id")
            .annotate(n=Count("id"))
        )
        rows = [(row["day"], int(row["n"])) for row in found]
    votes: dict[date, int] = {}
    raters: dict[date, int] = {}
    for day, n in rows:
        votes[day] = votes.get(day, 0) + n
        raters[day] = raters.get(day, 0) + 1
    return sorted(votes.items()), sorted(raters.items())


def votes_per_day(*, campaign: Campaign) -> list[tuple[date, int]]:
    """(UTC day, votes) for every day with a vote, gold votes included (they are work the raters did)."""
    return day_series(campaign=campaign)[0]


def active_raters_per_day(*, campaign: Campaign) -> list[tuple[date, int]]:
    """(UTC day, distinct raters who voted that day)."""
    return day_series(campaign=campaign)[1]


_LO = "CASE WHEN left_id < right_id THEN left_id ELSE right_id END"
_HI = "CASE WHEN left_id < right_id THEN right_id ELSE left_id END"


def pair_coverage(*, campaign: Campaign, since: datetime | None = None) -> dict[tuple[int, int], int]:
    """Voted battles per unordered pair (lower id first), gold battles left out (they are no pair)."""
    where, params = _window(since, None)
    sql = (
        f"SELECT {_LO}, {_HI}, COUNT(*) FROM {Vote._meta.db_table} WHERE campaign_id = %s AND source <> 'gold'"
        f"{where} GROUP BY 1, 2"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [campaign.pk, *params])
        return {(int(lo), int(hi)): int(n) for lo, hi, n in cursor.fetchall()}


def _bin_sql() -> str:
    edges = DECISION_BINS_S
    cases = " ".join(f"WHEN decision_ms < {int(edge * 1000)} THEN {i - 1}" for i, edge in enumerate(edges) if i > 0)
    return f"CASE {cases} ELSE {len(edges) - 1} END"


def _histogram(counts: dict[int, int]) -> list[tuple[float, float | None, int]]:
    edges = DECISION_BINS_S
    return [
        (float(edges[i]), float(edges[i + 1]) if i + 1 < len(edges) else None, counts.get(i, 0))
        for i in range(len(edges))
    ]


def decision_time_histogram(*, campaign: Campaign) -> list[tuple[float, float | None, int]]:
    """(from s, to s or None for the open last bin, votes) over the bins of ``DECISION_BINS_S``."""
    sql = f"SELECT {_bin_sql()} AS bin, COUNT(*) FROM {Vote._meta.db_table} WHERE campaign_id = %s GROUP BY 1"
    with connection.cursor() as cursor:
        cursor.execute(sql, [campaign.pk])
        counts = {int(b): int(n) for b, n in cursor.fetchall()}
    return _histogram(counts)


@dataclass(frozen=True)
class DashboardCounts:
    """The dashboard's counts of the log, from one scan (``dashboard_counts``)."""

    votes_per_day: list[tuple[date, int]]  # as ``day_series``
    raters_per_day: list[tuple[date, int]]
    histogram: list[tuple[float, float | None, int]]  # as ``decision_time_histogram``
    coverage: dict[tuple[int, int], int]  # as ``pair_coverage``
    votes: int  # every vote, gold ones included
    gold: int


def dashboard_counts(*, campaign: Campaign, log: dict[str, NDArray[Any]] | None = None) -> DashboardCounts:
    """``day_series``, ``decision_time_histogram``, ``pair_coverage`` and the log's votes (gold ones said
    apart), the same numbers, from one packed read of the log on PostgreSQL (``dashboard_log``: an index-only
    scan of its covering index, migration ranking 0017) counted in numpy, where the separate selectors scan the log four
    times (``log``: that read, made already). Elsewhere, those selectors."""
    if log is not None:
        return dashboard_counts_of(log)
    if connection.vendor != "postgresql":
        votes, raters = day_series(campaign=campaign)
        total = Vote.objects.filter(campaign=campaign).count()
        gold = Vote.objects.filter(campaign=campaign, source=Battle.Source.GOLD).count()
        return DashboardCounts(
            votes, raters, decision_time_histogram(campaign=campaign), pair_coverage(campaign=campaign), total, gold
        )
    found = dashboard_log(campaign_id=campaign.pk)
    assert found is not None  # PostgreSQL
    return dashboard_counts_of(found)


def dashboard_counts_of(log: dict[str, NDArray[Any]]) -> DashboardCounts:
    """``dashboard_counts`` of a log read by ``dashboard_log`` (PostgreSQL), counted in numpy."""
    at = log["at_us"] - _PG_EPOCH_US
    # UTC days: timestamptz_send counts microseconds from 2000-01-01 UTC, a midnight.
    day = np.floor_divide(at, 86_400 * 1_000_000)
    keys, n = np.unique((day << 32) | log["rater"].astype(np.int64), return_counts=True)
    days, first = np.unique(keys >> 32, return_index=True)
    per_day = np.add.reduceat(n, first) if n.size else n
    raters = np.diff(np.append(first, keys.shape[0]))
    dates = [_PG_EPOCH_DAY + timedelta(days=int(d)) for d in days]
    edges_ms = np.asarray([int(edge * 1000) for edge in DECISION_BINS_S[1:]], dtype=np.int64)
    bins = np.bincount(np.searchsorted(edges_ms, log["decision_ms"], side="right"), minlength=len(DECISION_BINS_S))
    ranked = ~log["gold"]
    pairs, pair_n = np.unique(
        (log["lo"][ranked].astype(np.int64) << 32) | log["hi"][ranked].astype(np.int64), return_counts=True
    )
    gold = int(np.count_nonzero(log["gold"]))
    return DashboardCounts(
        votes_per_day=[(d, int(k)) for d, k in zip(dates, per_day, strict=True)],
        raters_per_day=[(d, int(k)) for d, k in zip(dates, raters, strict=True)],
        histogram=_histogram({i: int(k) for i, k in enumerate(bins)}),
        coverage={(int(p >> 32), int(p & 0xFFFFFFFF)): int(k) for p, k in zip(pairs, pair_n, strict=True)},
        votes=int(log["id"].shape[0]),
        gold=gold,
    )


@dataclass(frozen=True)
class CadencePair:
    a: int
    b: int
    a_label: str
    b_label: str
    votes: int


@dataclass(frozen=True)
class Cadence:
    threshold: int
    window_days: int
    since: datetime
    active_competitors: int
    pairs: int  # pairs of active competitors
    stale: list[CadencePair]  # the pairs under the threshold, fewest votes first
    voted: bool = True  # any vote outside gold battles yet: a campaign with none is not stale, it has no votes


def competitor_labels(*, campaign: Campaign) -> dict[int, str]:
    return {
        cid: f"{name['model']} {name['version']}".strip() for cid, name in competitor_names(campaign=campaign).items()
    }


def cadence(*, campaign: Campaign, now: datetime | None = None) -> Cadence:
    """Pairs of the campaign's active competitors (gold pseudo-competitors aside) with fewer than the
    campaign's ``cadence_threshold`` new votes in the last 7 days: a stalled queue leaves a board stale
    while it still looks current. Counted in SQL per pair; the pairs with none are filled in here."""
    since = (now or datetime.now(UTC)) - timedelta(days=CADENCE_WINDOW_DAYS)
    active = sorted(Competitor.objects.filter(campaign=campaign, active=True, gold=False).values_list("pk", flat=True))
    counts = pair_coverage(campaign=campaign, since=since)
    labels = competitor_labels(campaign=campaign)
    stale = [
        CadencePair(a, b, labels.get(a, str(a)), labels.get(b, str(b)), counts.get((a, b), 0))
        for i, a in enumerate(active)
        for b in active[i + 1 :]
        if counts.get((a, b), 0) < campaign.cadence_threshold
    ]
    stale.sort(key=lambda p: (p.votes, p.a, p.b))
    n = len(active)
    voted = bool(counts) or Vote.objects.filter(campaign=campaign).exclude(source=Battle.Source.GOLD).exists()
    return Cadence(
        voted=voted,
        threshold=campaign.cadence_threshold,
        window_days=CADENCE_WINDOW_DAYS,
        since=since,
        active_competitors=n,
        pairs=n * (n - 1) // 2,
        stale=stale,
    )
