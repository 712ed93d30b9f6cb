"""The managers' dashboard: per-day series, pair coverage, decision times and the cadence check (its
per-rater reports: ``raters``). Every figure is an SQL aggregate over the vote log (grouped in the
database; what comes back is one row per day, pair, bin or rater), so the page costs a few grouped scans
at a million votes."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db import connection
from django.db.models import Count
from django.db.models.functions import TruncDate

from battles.models import Battle, Campaign, Competitor, Vote

from .leaderboards import competitor_names
from .statistics import _window

# Decision-time histogram bins, in seconds (the last is open-ended): fine where raters decide, coarse after.
DECISION_BINS_S = (0, 1, 2, 3, 5, 8, 12, 20, 30, 60, 120, 300)
CADENCE_WINDOW_DAYS = 7


def _day_series(campaign: Campaign, measure: Count) -> list[tuple[Any, int]]:
    rows = (
        Vote.objects.filter(campaign=campaign)
        .annotate(day=TruncDate("created_at", tzinfo=UTC))
        .values("day")
        .annotate(n=measure)
        .order_by("day")
    )
    return [(row["day"], int(row["n"])) for row in rows]


def votes_per_day(*, campaign: Campaign) -> list[tuple[Any, int]]:
    """(UTC day, votes) for every day with a vote, gold votes included (they are work the raters did)."""
    return _day_series(campaign, Count("id"))


def active_raters_per_day(*, campaign: Campaign) -> list[tuple[Any, int]]:
    """(UTC day, distinct raters who voted that day)."""
    return _day_series(campaign, Count("rater_id", distinct=True))


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


def decision_time_histogram(*, campaign: Campaign) -> list[tuple[float, float | None, int]]:
    """(from s, to s or None for the open last bin, votes) over the bins of ``DECISION_BINS_S``."""
    edges = DECISION_BINS_S
    cases = " ".join(f"WHEN decision_ms < {int(edge * 1000)} THEN {i - 1}" for i, edge in enumerate(edges) if i > 0)
    sql = (
        f"SELECT CASE {cases} ELSE {len(edges) - 1} END AS bin, COUNT(*) FROM {Vote._meta.db_table} "
        "WHERE campaign_id = %s GROUP BY 1"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [campaign.pk])
        counts = {int(b): int(n) for b, n in cursor.fetchall()}
    return [
        (float(edges[i]), float(edges[i + 1]) if i + 1 < len(edges) else None, counts.get(i, 0))
        for i in range(len(edges))
    ]


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
