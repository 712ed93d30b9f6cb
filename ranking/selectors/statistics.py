"""Campaign statistics over a time window (the v1 API): votes per day, exclusions by rule, output tokens,
latency, finish reasons, answer wall seconds and exposure, each an SQL aggregate; the percentile SQL is shared
with the dashboard."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import numpy as np
from django.db import connection
from django.db.models import Avg, Count, F, Sum
from django.db.models.functions import TruncDate

from battles.models import Battle, Campaign, Vote

from ..policy import ExclusionPolicy
from .arrays import exclusion_policy_for, vote_arrays
from .leaderboards import competitor_names


@dataclass(frozen=True)
class Percentiles:
    count: int
    mean: float | None
    p50: float | None
    p95: float | None


def _window(since: datetime | None, until: datetime | None) -> tuple[str, list[Any]]:
    sql, params = "", []
    if since is not None:
        sql += " AND created_at >= %s"
        params.append(connection.ops.adapt_datetimefield_value(since))
    if until is not None:
        sql += " AND created_at < %s"
        params.append(connection.ops.adapt_datetimefield_value(until))
    return sql, params


def _sides_sql(campaign_id: int, since: datetime | None, until: datetime | None) -> tuple[str, list[Any]]:
    """Both sides of every vote in the window as rows (side, competitor, tokens, latency, finish reason):
    the unit the per-competitor statistics count."""
    table = Vote._meta.db_table
    where, params = _window(since, until)
    sql = (
        f"SELECT 'left' AS side, left_id AS competitor_id, left_tokens AS tokens, left_latency_s AS latency_s, "
        f"left_finish_reason AS finish_reason FROM {table} WHERE campaign_id = %s{where} "
        f"UNION ALL SELECT 'right', right_id, right_tokens, right_latency_s, right_finish_reason "
        f"FROM {table} WHERE campaign_id = %s{where}"
    )
    return sql, [campaign_id, *params, campaign_id, *params]


# Percentiles as PostgreSQL's percentile_cont computes them (linear between the two nearest ranks),
# written with window functions and integer arithmetic, which SQLite has too: the values are sorted
# once per group by the database, and only two rows per percentile and group come back.
_PERCENTILES = (50, 95)


def _percentiles(sides: str, params: list[Any], key: str, value: str) -> dict[Any, Percentiles]:
    picks = ", ".join(
        f"MIN(CASE WHEN rn = (cnt - 1) * {p} / 100 + 1 THEN v END), MIN(CASE WHEN rn = (cnt - 1) * {p} / 100 + 2 "
        f"THEN v END)"
        for p in _PERCENTILES
    )
    sql = (
        f"WITH sides AS ({sides}), ranked AS (SELECT {key} AS k, {value} AS v, "
        f"ROW_NUMBER() OVER (PARTITION BY {key} ORDER BY {value}) AS rn, COUNT(*) OVER (PARTITION BY {key}) AS cnt "
        f"FROM sides) SELECT k, COUNT(*), AVG(v), {picks} FROM ranked GROUP BY k ORDER BY k"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        fetched = cursor.fetchall()
    out = {}
    for k, count, mean, *values in fetched:
        found = []
        for index, p in enumerate(_PERCENTILES):
            low, high = values[2 * index], values[2 * index + 1]
            frac = ((count - 1) * p % 100) / 100
            low = float(low)
            found.append(round(low + frac * (float(high) - low) if high is not None else low, 4))
        out[k] = Percentiles(count=int(count), mean=round(float(mean), 4), p50=found[0], p95=found[1])
    return out


def _as_dict(stats: Percentiles) -> dict[str, Any]:
    return {"count": stats.count, "mean": stats.mean, "p50": stats.p50, "p95": stats.p95}


def exclusions_in_window(
    *, campaign: Campaign, since: datetime | None = None, until: datetime | None = None
) -> dict[str, int]:
    """How many votes of the window each rule of the campaign's current exclusion policy leaves out,
    counted as a recompute counts them: the caps over the whole log in order, only the tally limited
    to the window (a vote may break several rules; ``total`` counts each once)."""
    votes = vote_arrays(campaign_id=campaign.pk)
    policy = exclusion_policy_for(campaign)
    rules = policy.rules(votes)
    within = np.ones(len(votes), dtype=bool)
    if since is not None or until is not None:
        window = Vote.objects.filter(campaign=campaign)
        if since is not None:
            window = window.filter(created_at__gte=since)
        if until is not None:
            window = window.filter(created_at__lt=until)
        ids = np.asarray(window.values_list("id", flat=True), dtype=np.int64)
        within = np.isin(votes.vote_id, ids)
    _, counts = ExclusionPolicy._count(rules, within)
    return counts


def campaign_statistics(
    *, campaign: Campaign, since: datetime | None = None, until: datetime | None = None
) -> dict[str, Any]:
    """Votes per day, exclusions by rule, output tokens, latency, finish reasons, answer wall seconds per
    vote and exposure, for the votes with ``since <= created_at < until``. Every number is an SQL
    aggregate (the exclusions use the policy's arrays, as a recompute does)."""
    votes = Vote.objects.filter(campaign=campaign)
    if since is not None:
        votes = votes.filter(created_at__gte=since)
    if until is not None:
        votes = votes.filter(created_at__lt=until)
    per_day = [
        {"day": row["day"], "votes": row["votes"]}
        for row in votes.annotate(day=TruncDate("created_at", tzinfo=UTC))
        .values("day")
        .annotate(votes=Count("id"))
        .order_by("day")
    ]
    serving = votes.aggregate(
        n=Count("id"),
        total=Sum(F("left_latency_s") + F("right_latency_s")),
        mean=Avg(F("left_latency_s") + F("right_latency_s")),
    )
    n_votes = int(serving["n"] or 0)
    sides, params = _sides_sql(campaign.pk, since, until)
    tokens_side = _percentiles(sides, params, "side", "tokens")
    tokens_competitor = _percentiles(sides, params, "competitor_id", "tokens")
    latency_competitor = _percentiles(sides, params, "competitor_id", "latency_s")
    with connection.cursor() as cursor:
        cursor.execute(
            f"WITH sides AS ({sides}) SELECT competitor_id, finish_reason, COUNT(*) FROM sides "
            "GROUP BY competitor_id, finish_reason ORDER BY competitor_id, finish_reason",
            params,
        )
        finish_rows = cursor.fetchall()
    finish: dict[int, dict[str, int]] = {}
    for cid, reason, count in finish_rows:
        finish.setdefault(int(cid), {})[reason] = int(count)
    battles = Battle.objects.filter(campaign=campaign, shown_at__isnull=False)
    if since is not None:
        battles = battles.filter(shown_at__gte=since)
    if until is not None:
        battles = battles.filter(shown_at__lt=until)
    served: dict[int, int] = {}
    for side in ("left", "right"):
        for cid, count in battles.values_list(f"{side}_id").annotate(n=Count("id")).order_by():
            served[cid] = served.get(cid, 0) + count
    names = competitor_names(campaign=campaign)
    competitors = []
    for cid, name in sorted(names.items()):
        tokens = tokens_competitor.get(cid)
        latency = latency_competitor.get(cid)
        reasons = finish.get(cid, {})
        sides_voted = sum(reasons.values())
        competitors.append(
            {
                "competitor_id": cid,
                "model": name["model"],
                "version": name["version"],
                "retired": not name["active"],
                "battles_served": served.get(cid, 0),
                "battles_voted": sides_voted,
                "vote_share": round(sides_voted / (2 * n_votes), 4) if n_votes else None,
                "tokens": _as_dict(tokens) if tokens else None,
                "latency_s": _as_dict(latency) if latency else None,
                "finish_reasons": {
                    reason: {"count": count, "share": round(count / sides_voted, 4)}
                    for reason, count in sorted(reasons.items())
                },
            }
        )
    return {
        "since": since,
        "until": until,
        "votes": n_votes,
        "votes_per_day": per_day,
        "policy": exclusion_policy_for(campaign).as_dict(),
        "excluded": exclusions_in_window(campaign=campaign, since=since, until=until),
        "tokens_by_side": {side: _as_dict(tokens_side[side]) for side in ("left", "right") if side in tokens_side},
        "answer_wall_seconds": {
            "total": round(float(serving["total"] or 0.0), 3),
            "mean_per_vote": round(float(serving["mean"]), 4) if serving["mean"] is not None else None,
        },
        "competitors": competitors,
    }
