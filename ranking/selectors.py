"""Reads for rankings: the vote log straight into arrays, and the stored snapshots."""

from __future__ import annotations

import copy
import hashlib
import io
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Generic, Literal, TypeVar

import numpy as np
import pandas as pd
from django.contrib.auth.models import User
from django.core.cache import cache
from django.db import connection, transaction
from django.db.models import Avg, Count, F, Max, QuerySet, Sum
from django.db.models.functions import TruncDate
from numpy.typing import NDArray

from battles.exporting import VoteFilters
from battles.models import Battle, Campaign, Choice, Competitor, Judge, JudgeRun, JudgeVerdict, Prompt, Rubric, Vote
from battles.selectors import gold_counts, raters_named, vote_events, votes_filtered
from raters.authentication import ApiKeyPrincipal
from raters.models import FLAG_IN_FORCE, RaterFlag
from raters.selectors import organizations_viewable_by, organizations_writable_by
from raters.tenancy import organization_scope, scopes_disabled

from . import estimators as est
from .estimators.pairwise import wilson_interval
from .estimators.ratio import RatioFit, fit_ratio
from .estimators.ratio_design import spearman
from .models import (
    AttributeBoard,
    AttributeEntity,
    AttributeJudgement,
    AttributeRun,
    AttributeScore,
    BoardPublication,
    JudgeBoard,
    JudgeCalibration,
    LeaderboardSnapshot,
)
from .policy import STYLE_FEATURES, ExclusionPolicy, VoteArrays
from .quality import quality_report

T = TypeVar("T")
V = TypeVar("V")

_OUTCOME_SQL = "CASE choice WHEN 'left' THEN 0 WHEN 'right' THEN 1 WHEN 'tie' THEN 2 ELSE 3 END"


def _vote_sql(vendor: str) -> str:
    if vendor == "postgresql":

        def style(side: str, key: str) -> str:
            return f"COALESCE(({side}_style->>'{key}')::int, 0)"
    else:

        def style(side: str, key: str) -> str:
            return f"COALESCE(json_extract({side}_style, '$.{key}'), 0)"

    styles = ", ".join(style(side, key) for side in ("left", "right") for key in STYLE_FEATURES)
    identity = "CASE WHEN prompt_asks_identity OR answer_names_model THEN 1 ELSE 0 END"
    return (
        f"SELECT id, left_id, right_id, {_OUTCOME_SQL}, decision_ms, rater_id, prompt_hash, category, "
        f"{identity}, {styles} FROM battles_vote WHERE campaign_id = %s AND source <> 'gold' ORDER BY id"
    )


_COLUMNS = ["id", "left", "right", "outcome", "decision_ms", "rater", "prompt_hash", "category", "identity"] + [
    f"{side}_{key}" for side in ("left", "right") for key in STYLE_FEATURES
]


def _frame(campaign_id: int) -> pd.DataFrame:
    sql = _vote_sql(connection.vendor)
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            # COPY streams the rows as CSV in large chunks; parsing that with pandas is several times
            # faster than building a Python tuple per row, which matters at millions of votes.
            buffer = io.BytesIO()
            raw = cursor.cursor
            literal = sql.replace("%s", str(int(campaign_id)))
            with raw.copy(f"COPY ({literal}) TO STDOUT WITH (FORMAT csv)") as copy:
                for chunk in copy:
                    buffer.write(chunk)
            buffer.seek(0)
            if buffer.getbuffer().nbytes == 0:
                return pd.DataFrame(columns=_COLUMNS)
            return pd.read_csv(
                buffer, header=None, names=_COLUMNS, dtype={"prompt_hash": str, "category": str}, keep_default_na=False
            )
        cursor.execute(sql, [campaign_id])
        return pd.DataFrame.from_records(cursor.fetchall(), columns=_COLUMNS)


def vote_arrays(*, campaign_id: int) -> VoteArrays:
    frame = _frame(campaign_id)
    prompt_codes, _ = pd.factorize(frame["prompt_hash"].astype(str), sort=False)
    category_codes, categories = pd.factorize(frame["category"].astype(str), sort=True)

    def ints(name: str) -> NDArray[np.int64]:
        values: NDArray[np.int64] = frame[name].to_numpy(dtype=np.int64)
        return values

    return VoteArrays(
        vote_id=ints("id"),
        left=ints("left"),
        right=ints("right"),
        outcome=ints("outcome"),
        decision_ms=ints("decision_ms"),
        rater=ints("rater"),
        prompt=prompt_codes.astype(np.int64),
        category=category_codes.astype(np.int64),
        categories=tuple(str(c) for c in categories),
        identity=frame["identity"].to_numpy(dtype=np.int64).astype(bool),
        style_left=frame[[f"left_{k}" for k in STYLE_FEATURES]].to_numpy(dtype=np.float64),
        style_right=frame[[f"right_{k}" for k in STYLE_FEATURES]].to_numpy(dtype=np.float64),
    )


def vote_items(*, campaign_id: int, vote_id: NDArray[np.int64]) -> NDArray[np.int64]:
    """The item of each of these votes (``vote_arrays``' ids, in their order) as dense integer codes:
    a shared battle's copies have one ``item_key``, any other battle is its own item. Read by the
    agreement statistics only (the rankings' own read stays one table scan of the vote log)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT v.id, COALESCE(b.item_key, b.id) FROM battles_vote v JOIN battles_battle b ON b.id = v.battle_id "
            "WHERE v.campaign_id = %s AND v.source <> 'gold' ORDER BY v.id",
            [campaign_id],
        )
        rows = cursor.fetchall()
    if not rows:
        return np.zeros(0, dtype=np.int64)
    ids = np.fromiter((row[0] for row in rows), dtype=np.int64, count=len(rows))
    codes, _ = pd.factorize(pd.Series([str(row[1]) for row in rows]), sort=False)
    by_id = dict(zip(ids.tolist(), codes.tolist(), strict=True))
    return np.asarray([by_id[int(v)] for v in vote_id.tolist()], dtype=np.int64)


def exclusion_policy_for(campaign: Campaign) -> ExclusionPolicy:
    in_force = list(
        RaterFlag.objects.filter(FLAG_IN_FORCE, organization_id=campaign.organization_id).values_list("pk", "rater_id")
    )
    return ExclusionPolicy(
        min_decision_ms=campaign.min_decision_ms,
        exclude_identity_leaks=campaign.exclude_identity_leaks,
        prompt_hash_cap=campaign.prompt_hash_cap,
        rater_vote_cap=campaign.rater_vote_cap,
        flagged_raters=tuple(sorted({rater_id for _, rater_id in in_force})),
        flag_ids=tuple(sorted(pk for pk, _ in in_force)),
    )


def snapshot_latest(*, campaign: Campaign, category: str = "", view: str = "raw") -> LeaderboardSnapshot | None:
    return (
        LeaderboardSnapshot.objects.filter(campaign=campaign, category=category, view=view).order_by("-version").first()
    )


def snapshot_latest_id(*, campaign: Campaign, category: str = "", view: str = "raw") -> int | None:
    """The newest snapshot's id only: the API serves the serialized snapshot from a cache keyed by it,
    so the common read never loads the (large) JSON columns."""
    snapshot_id: int | None = (
        LeaderboardSnapshot.objects.filter(campaign=campaign, category=category, view=view)
        .order_by("-version")
        .values_list("pk", flat=True)
        .first()
    )
    return snapshot_id


def snapshot_history(*, campaign: Campaign, category: str = "", view: str = "raw") -> QuerySet[LeaderboardSnapshot]:
    return LeaderboardSnapshot.objects.filter(campaign=campaign, category=category, view=view).order_by("-version")


def snapshot_categories(*, campaign: Campaign) -> list[str]:
    """Categories of the newest recompute (overall first)."""
    version = LeaderboardSnapshot.objects.filter(campaign=campaign).aggregate(v=Max("version"))["v"]
    if version is None:
        return []
    cats = LeaderboardSnapshot.objects.filter(campaign=campaign, version=version).values_list("category", flat=True)
    return sorted(set(cats), key=lambda c: (c != "", c))


def current_intervals(campaign_id: int) -> dict[int, tuple[float, float]]:
    """Score intervals of the competitors the newest overall raw leaderboard shows, in its largest
    connected group: intervals of groups that never met cannot be compared, so the others count as not
    placed yet (and get the boost that connects them). A competitor with an open interval side (a
    one-sided record: the votes bound it on one side only) is not placed yet either. Active
    sampling's source (``battles.hooks``)."""
    rows = (
        LeaderboardSnapshot.objects.filter(campaign_id=campaign_id, category="", view=LeaderboardSnapshot.View.RAW)
        .order_by("-version")
        .values_list("rows", flat=True)
        .first()
    )
    shown = [row for row in rows or [] if not row["hidden"] and row["lower"] is not None and row["upper"] is not None]
    if not shown:
        return {}
    sizes: dict[int, int] = {}
    for row in shown:
        sizes[row["component"]] = sizes.get(row["component"], 0) + 1
    main = max(sizes, key=lambda c: (sizes[c], -c))
    return {row["competitor_id"]: (row["lower"], row["upper"]) for row in shown if row["component"] == main}


def campaigns_voted_in(*, organization_id: int, rater_id: int) -> list[int]:
    """Ids of the organisation's campaigns in which the rater has votes."""
    return list(
        Vote.objects.filter(organization_id=organization_id, rater_id=rater_id)
        .values_list("campaign_id", flat=True)
        .distinct()
        .order_by("campaign_id")
    )


# --- Typed leaderboard rows, pairwise tables, campaign statistics (the v1 API) -------------------------


def competitor_names(*, campaign: Campaign) -> dict[int, dict[str, Any]]:
    """Every competitor of the campaign (retired ones too): model (the endpoint's name, or an external
    model's, whose answers arrive as shadow battles), version and whether it still gets battles."""
    rows = Competitor.objects.filter(campaign=campaign).values_list(
        "pk", "endpoint__name", "external_model", "version_label", "active"
    )
    return {
        pk: {"model": endpoint_name or external, "version": version, "active": active}
        for pk, endpoint_name, external, version, active in rows
    }


SELECTION_NOTE = "the best of several variants of one family is favoured by selection"


def family_disclosure(*, campaign: Campaign) -> dict[str, Any]:
    """How many variants of each model family the campaign tested (retired ones included; not the gold
    pseudo-competitors), shown next to every board: the top score of a family that entered several
    variants is the best of several draws, favoured by selection. A competitor with no family counts as
    its own model name. ``notice`` is the sentence the pages show ("" when every family has one variant)."""
    groups: dict[str, list[Competitor]] = {}
    for competitor in Competitor.objects.filter(campaign=campaign, gold=False).select_related("endpoint"):
        groups.setdefault(competitor.family_name, []).append(competitor)
    families: list[dict[str, Any]] = [
        {
            "family": name,
            "variants": len(members),
            "retired": sum(1 for m in members if not m.active),
            "competitors": [m.pk for m in members],
        }
        for name, members in sorted(groups.items(), key=lambda item: (-len(item[1]), item[0]))
    ]
    several = [f for f in families if f["variants"] > 1]
    parts = [
        f"{f['variants']} variants of {f['family']} were tested here"
        + (f" ({f['retired']} retired)" if f["retired"] else "")
        for f in several
    ]
    notice = ("; ".join(parts) + f"; {SELECTION_NOTE}.") if parts else ""
    return {"families": families, "notice": notice[:1].upper() + notice[1:]}


def snapshot_rows(
    *, snapshot: LeaderboardSnapshot | JudgeBoard, names: dict[int, dict[str, Any]]
) -> list[dict[str, Any]]:
    """The snapshot's rows in its order, each with the competitor's model, version and ``retired`` flag
    and its losses (votes less wins, ties and both-bad); competitors of the campaign the snapshot
    does not know (added after it) follow as hidden rows without votes. Scores and bounds of hidden
    rows are null; an open interval side is null with ``*_open`` true."""
    out = []
    seen = set()
    for row in snapshot.rows:
        cid = int(row["competitor_id"])
        seen.add(cid)
        name = names.get(cid, {"model": "", "version": "", "active": False})
        out.append(
            {
                "competitor_id": cid,
                "label": row.get("label", ""),
                "model": name["model"],
                "version": name["version"],
                "retired": not name["active"],
                "hidden": bool(row.get("hidden", True)),
                "component": int(row.get("component", -1)),
                "score": row.get("score"),
                "lower": row.get("lower"),
                "upper": row.get("upper"),
                "lower_open": bool(row.get("lower_open", False)),
                "upper_open": bool(row.get("upper_open", False)),
                "interval_method": row.get("interval_method"),
                "rank_best": row.get("rank_best"),
                "rank_worst": row.get("rank_worst"),
                "votes": int(row["votes"]),
                "counted": int(row.get("counted", row["votes"])),
                "wins": int(row["wins"]),
                "ties": int(row["ties"]),
                "both_bad": int(row["both_bad"]),
                "losses": int(row["votes"]) - int(row["wins"]) - int(row["ties"]) - int(row["both_bad"]),
                "win_rate": row.get("win_rate"),
                "tie_rate": row.get("tie_rate"),
                "both_bad_rate": row.get("both_bad_rate"),
            }
        )
    for cid, name in sorted(names.items()):
        if cid in seen:
            continue
        out.append(
            {
                "competitor_id": cid,
                "label": f"{name['model']} {name['version']}",
                "model": name["model"],
                "version": name["version"],
                "retired": not name["active"],
                "hidden": True,
                "component": -1,
                "score": None,
                "lower": None,
                "upper": None,
                "lower_open": False,
                "upper_open": False,
                "interval_method": None,
                "rank_best": None,
                "rank_worst": None,
                "votes": 0,
                "counted": 0,
                "wins": 0,
                "ties": 0,
                "both_bad": 0,
                "losses": 0,
                "win_rate": None,
                "tie_rate": None,
                "both_bad_rate": None,
            }
        )
    return out


def _none_if_nan(value: float, digits: int = 4) -> float | None:
    return None if not np.isfinite(value) else round(float(value), digits)


def snapshot_pairwise(*, snapshot: LeaderboardSnapshot) -> dict[str, Any]:
    """Every pair that met in the votes the snapshot was computed from: battles, wins, ties, both-bad,
    losses, win rate with its Wilson interval and the exact binomial p (unadjusted; Holm-adjusted
    where the snapshot shows both competitors).

    The snapshot stores rates for its shown competitors only, not the counts, so the counts are
    recomputed from the vote log *as the snapshot saw it*: votes up to its ``last_vote_id``, under
    the exclusion policy it recorded (not today's), in its category. So the numbers match the
    snapshot even after new votes or a newly flagged rater."""
    votes = vote_arrays(campaign_id=snapshot.campaign_id)
    votes = votes.subset(votes.vote_id <= snapshot.last_vote_id)
    policy_data = dict(snapshot.policy)
    policy_data["flagged_raters"] = tuple(policy_data.get("flagged_raters", ()))
    policy_data["flag_ids"] = tuple(policy_data.get("flag_ids", ()))
    policy = ExclusionPolicy(**policy_data)
    keep, _ = policy.apply(votes)
    kept = votes.subset(keep)
    if snapshot.category:
        code = kept.categories.index(snapshot.category) if snapshot.category in kept.categories else -1
        kept = kept.subset(kept.category == code)
    competitor_ids = np.array(
        sorted(Competitor.objects.filter(campaign_id=snapshot.campaign_id, gold=False).values_list("pk", flat=True)),
        dtype=np.int64,
    )
    method = snapshot.method
    both_bad: Literal["tie", "drop"] = "drop" if method.get("both_bad") == "drop" else "tie"
    confidence = float(method.get("confidence", 0.95))
    stored = snapshot.pairwise or {}
    holm_ids = stored.get("competitor_ids", [])
    holm_at = {cid: k for k, cid in enumerate(holm_ids)}
    holm = stored.get("p_holm")
    pairs: list[dict[str, Any]] = []
    if len(kept) and competitor_ids.shape[0] >= 2:
        a = np.searchsorted(competitor_ids, kept.left)
        b = np.searchsorted(competitor_ids, kept.right)
        cells = est.aggregate_cells(a, b, kept.outcome, n_competitors=int(competitor_ids.shape[0]))
        table = est.pairwise_table(cells, both_bad=both_bad, confidence=confidence)
        rows, cols = np.nonzero(table.battles > 0)
        for i, j in zip(rows.tolist(), cols.tolist(), strict=True):
            if i == j:
                continue
            ci, cj = int(competitor_ids[i]), int(competitor_ids[j])
            p_holm = None
            if holm and ci in holm_at and cj in holm_at:
                p_holm = holm[holm_at[ci]][holm_at[cj]]
            pairs.append(
                {
                    "competitor_id": ci,
                    "opponent_id": cj,
                    "battles": int(table.battles[i, j]),
                    "wins": int(table.wins[i, j]),
                    "ties": int(table.ties[i, j]),
                    "both_bad": int(table.both_bad[i, j]),
                    "losses": int(table.wins[j, i]),
                    "win_rate": _none_if_nan(table.win_rate[i, j]),
                    "wilson_lower": _none_if_nan(table.wilson_lower[i, j]),
                    "wilson_upper": _none_if_nan(table.wilson_upper[i, j]),
                    "p_value": _none_if_nan(table.p_value[i, j], 6),
                    "p_holm": p_holm,
                }
            )
    return {
        "confidence": confidence,
        "both_bad": both_bad,
        "votes_used": len(kept),
        "pairs": pairs,
        "intransitive_triads": stored.get("intransitive_triads"),
        "correction": stored.get("correction", ""),
    }


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
    """Votes per day, exclusions by rule, output tokens, latency, finish reasons, serving seconds per
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
        "serving_seconds": {
            "total": round(float(serving["total"] or 0.0), 3),
            "mean_per_vote": round(float(serving["mean"]), 4) if serving["mean"] is not None else None,
        },
        "competitors": competitors,
    }


# --- Published boards ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class PublicBoard:
    """Everything a published board shows, read inside its organisation's scope and materialised, so
    that the page and the JSON render it with no scope open (the visitor has none)."""

    slug: str
    campaign_id: int
    campaign_name: str
    organization_name: str
    published_at: datetime
    show_prompts: bool
    category: str
    view: str
    categories: list[str]
    snapshot: dict[str, Any] | None  # version, created_at, votes, method, policy, excluded; no rows
    rows: list[dict[str, Any]]
    prompts: dict[str, Any] | None  # {"count", "offset", "limit", "results": [{"id", "category", "text"}]}
    families: dict[str, Any]  # ``family_disclosure``


PUBLIC_PROMPTS_PAGE = 100


def board_publication_by_slug(*, slug: str) -> BoardPublication | None:
    """The publication at ``slug``. The slug is the credential of an anonymous visitor, so this one
    lookup is made across tenants (like an API key's); everything else is read in the board's scope."""
    with scopes_disabled():
        return BoardPublication.objects.select_related("campaign", "organization").filter(slug=slug).first()


def public_board(*, slug: str, category: str = "", view: str = "raw", prompts_offset: int = 0) -> PublicBoard | None:
    """The published board at ``slug`` (None: unknown or unpublished): the newest snapshot of the
    selection, every competitor (retired ones marked), never a rater; the active pool prompts' texts
    (one page) only when the publication shows prompts."""
    publication = board_publication_by_slug(slug=slug)
    if publication is None:
        return None
    with organization_scope(publication.organization_id):
        campaign = publication.campaign
        # Not the stored matrices (megabytes at 200 competitors): a published board shows none of them.
        snapshot = snapshot_history(campaign=campaign, category=category, view=view).defer("pairwise").first()
        names = competitor_names(campaign=campaign)
        rows: list[dict[str, Any]] = []
        summary = None
        if snapshot is not None:
            rows = snapshot_rows(snapshot=snapshot, names=names)
            summary = {
                "version": snapshot.version,
                "created_at": snapshot.created_at,
                "votes_total": snapshot.votes_total,
                "votes_used": snapshot.votes_used,
                "method": snapshot.method,
                "policy": {k: v for k, v in snapshot.policy.items() if k not in ("flagged_raters", "flag_ids")},
                "flagged_raters": len(snapshot.policy.get("flagged_raters", [])),
                "excluded": snapshot.excluded,
                "components": snapshot.extra.get("components"),
            }
        prompts = None
        if publication.show_prompts:
            pool = Prompt.objects.filter(campaign=campaign, active=True, source=Prompt.Source.POOL).order_by("id")
            page = list(pool.values("id", "category", "text")[prompts_offset : prompts_offset + PUBLIC_PROMPTS_PAGE])
            prompts = {"count": pool.count(), "offset": prompts_offset, "limit": PUBLIC_PROMPTS_PAGE, "results": page}
        return PublicBoard(
            slug=publication.slug,
            campaign_id=campaign.pk,
            campaign_name=campaign.name,
            organization_name=publication.organization.name,
            published_at=publication.published_at,
            show_prompts=publication.show_prompts,
            category=category,
            view=view,
            categories=snapshot_categories(campaign=campaign),
            snapshot=summary,
            rows=rows,
            prompts=prompts,
            families=family_disclosure(campaign=campaign),
        )


# Item-bootstrap rounds for the agreement intervals (seed 0: the same log gives the same intervals).
QUALITY_BOOTSTRAP_ROUNDS = 1000

# Figures computed from the vote log alone are cached this long, under a key that changes with the log.
LOG_CACHE_S = 3600
# The last such figures computed, whatever the log's state then, are kept this long as well ("latest"):
# what a view may serve, labelled with their age, while a worker computes the current ones
# (stale-while-revalidate, ``ranking.services.rater_reports_serve``).
LOG_LATEST_S = 7 * 24 * 3600


def _log_mark(campaign_id: int) -> list[Any]:
    """What identifies the campaign's log as it stands: the number of votes, the largest id and that
    vote's time. The log is append-only, so a new vote changes the count (also one that commits after a
    larger id was seen); the time tells apart two databases whose ids happen to coincide (a test
    database made afresh, a restore) behind one long-lived cache."""
    mark = Vote.objects.filter(campaign_id=campaign_id).aggregate(n=Count("id"), last=Max("id"))
    last = mark["last"]
    at = Vote.objects.filter(pk=last).values_list("created_at", flat=True).first() if last else None
    return [int(mark["n"]), int(last or 0), at.isoformat() if at else ""]


def _log_key(name: str, campaign_id: int, parts: list[Any], mark: list[Any] | None) -> str:
    """The cache key of a figure at one state of the log (``mark``), or of its latest one (None)."""
    named = json.dumps([name, campaign_id, mark, parts], default=str, separators=(",", ":"))
    kind = "log" if mark is not None else "log-latest"
    return f"arena:{kind}:{name}:{campaign_id}:{hashlib.sha256(named.encode()).hexdigest()}"


def _cached_on_log(campaign_id: int, name: str, parts: list[Any], compute: Callable[[], T]) -> T:
    """``compute()``, a pure function of the campaign's vote log (and of ``parts``), cached in the
    platform's cache under a key naming the log's current mark: the same log and parts give the cached
    value, a new vote a fresh computation. Deterministic figures only (the bootstraps here are seeded)."""
    key = _log_key(name, campaign_id, parts, _log_mark(campaign_id))
    found = cache.get(key)
    if found is None:
        found = compute()
        cache.set(key, found, LOG_CACHE_S)
    return found  # type: ignore[no-any-return]


@dataclass(frozen=True)
class OnLog(Generic[V]):
    """A figure computed from a campaign's vote log, with the log's mark at the time (``_log_mark``)."""

    value: V
    mark: list[Any]
    computed_at: datetime

    @property
    def votes(self) -> int:
        """Votes in the log the figure stands on."""
        return int(self.mark[0])


@contextmanager
def _log_snapshot() -> Iterator[None]:
    """The mark and the figures read from one snapshot of the log, so that a figure stored under a mark
    is exactly that log's (PostgreSQL: a REPEATABLE READ transaction; inside a caller's transaction, its
    isolation holds)."""
    outermost = not connection.in_atomic_block
    with transaction.atomic():
        if outermost and connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        yield


def _on_log_compute(campaign_id: int, name: str, parts: list[Any], compute: Callable[[], V]) -> OnLog[V]:
    """``compute()`` for the log as it stands, stored under that state's key and as the latest."""
    with _log_snapshot():
        mark = _log_mark(campaign_id)
        value = compute()
    found = OnLog(value=value, mark=mark, computed_at=datetime.now(UTC))
    # Plain tuples in the cache: an entry stays readable across a deploy that changes the class.
    entry = (found.value, found.mark, found.computed_at.isoformat())
    cache.set(_log_key(name, campaign_id, parts, mark), entry, LOG_CACHE_S)
    cache.set(_log_key(name, campaign_id, parts, None), entry, LOG_LATEST_S)
    return found


def _on_log_entry(entry: Any) -> OnLog[Any] | None:
    if not (isinstance(entry, tuple) and len(entry) == 3):
        return None
    value, mark, computed_at = entry
    return OnLog(value=value, mark=list(mark), computed_at=datetime.fromisoformat(computed_at))


def _log_extends(campaign_id: int, earlier: list[Any], now: list[Any]) -> bool:
    """Whether the log as it stands (``now``) grew from the one ``earlier`` names: no fewer votes, no
    smaller largest id, and that vote still there with its time (the cache may have outlived a database).
    An empty earlier log is not taken: a page of no raters is nothing to show while the rest comes."""
    votes, last, at = earlier
    if not last or votes > now[0] or last > now[1]:
        return False
    found = Vote.objects.filter(pk=last, campaign_id=campaign_id).values_list("created_at", flat=True).first()
    return found is not None and found.isoformat() == at


def _on_log_cached(campaign_id: int, name: str, parts: list[Any]) -> tuple[OnLog[Any] | None, list[Any]]:
    """The figure cached for the log as it stands; else the latest one, computed on an earlier state of
    this log (the caller tells them apart by their mark); else None. With the log's current mark."""
    mark = _log_mark(campaign_id)
    found = _on_log_entry(cache.get(_log_key(name, campaign_id, parts, mark)))
    if found is not None:
        return found, mark
    latest = _on_log_entry(cache.get(_log_key(name, campaign_id, parts, None)))
    if latest is not None and (latest.mark == mark or _log_extends(campaign_id, latest.mark, mark)):
        return latest, mark
    return None, mark


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


# --- Preference pairs (reward-model / DPO training data) and their length audit. ------------------
#
# One row per vote with a winner: ties and both_bad have none, and votes the campaign's exclusion
# policy leaves out of the leaderboards (too fast, identity leak, over a cap, flagged rater) are left
# out here too, by the same rules (``exclusion_policy_for``), so the training data is the data the
# published scores stand on.

# Length is measured as the style-controlled view measures it (style counts: tokens outside code
# blocks), so the share below and the view's length coefficient speak of one quantity.
_LENGTH = STYLE_FEATURES.index("tokens")


@dataclass(frozen=True)
class PairSelection:
    votes: VoteArrays
    selected: NDArray[np.bool_]  # the votes the filters select
    pairs: NDArray[np.bool_]  # selected, kept by the policy, with a winner
    excluded: dict[str, int]  # per policy rule, among the selected votes (``total``: each vote once)
    no_winner: dict[str, int]  # ties and both_bad among the selected votes the policy kept


def preference_pair_selection(*, campaign: Campaign, filters: VoteFilters | None = None) -> PairSelection:
    votes = vote_arrays(campaign_id=campaign.pk)
    if filters is not None and filters != VoteFilters():
        ids = np.fromiter(
            votes_filtered(campaign=campaign, filters=filters).values_list("id", flat=True), dtype=np.int64
        )
        selected = np.isin(votes.vote_id, ids)
    else:
        selected = np.ones(len(votes), dtype=bool)
    rules = exclusion_policy_for(campaign).rules(votes)
    out = np.zeros(len(votes), dtype=bool)
    for hits in rules.values():
        out |= hits
    excluded = {name: int((hits & selected).sum()) for name, hits in rules.items()}
    excluded["total"] = int((out & selected).sum())
    kept = selected & ~out
    ties, both_bad = kept & (votes.outcome == 2), kept & (votes.outcome == 3)
    return PairSelection(
        votes=votes,
        selected=selected,
        pairs=kept & (votes.outcome <= 1),
        excluded=excluded,
        no_winner={"tie": int(ties.sum()), "both_bad": int(both_bad.sum())},
    )


def _messages(conversation: list[dict[str, Any]], side: str) -> list[dict[str, str]]:
    messages: list[dict[str, str]] = []
    for turn in conversation:
        messages.append({"role": "user", "content": turn["prompt"]})
        messages.append({"role": "assistant", "content": turn[side]})
    return messages


def preference_pair_row(event: dict[str, Any]) -> dict[str, Any]:
    """A vote event with texts (``battles.selectors.vote_events``) as a preference pair."""
    chosen, rejected = ("left", "right") if event["vote"] == "left" else ("right", "left")
    conversation = event["conversation"]
    last = conversation[-1] if conversation else {"prompt": "", "left": "", "right": ""}
    return {
        "vote_id": event["vote_id"],
        "battle_id": event["battle_id"],
        "campaign_id": event["campaign_id"],
        "timestamp": event["timestamp"],
        "category": event["prompt"]["category"],
        "language": event["prompt"]["language"],
        "prompt_id": event["prompt"]["id"],
        "source": event["prompt"]["source"],
        "system_prompt": event["params"].get("system_prompt", ""),
        "prompt": conversation[0]["prompt"] if conversation else "",
        "chosen": last[chosen],
        "rejected": last[rejected],
        "chosen_model": event[chosen]["model"],
        "chosen_version": event[chosen]["version"],
        "chosen_competitor_id": event[chosen]["competitor_id"],
        "chosen_side": chosen,
        "rejected_model": event[rejected]["model"],
        "rejected_version": event[rejected]["version"],
        "rejected_competitor_id": event[rejected]["competitor_id"],
        "turns": len(conversation),
        "chosen_messages": _messages(conversation, chosen),
        "rejected_messages": _messages(conversation, rejected),
    }


def preference_pairs(*, campaign: Campaign, filters: VoteFilters | None = None) -> Iterator[dict[str, Any]]:
    """The rows, in log order, streamed (texts fetched per chunk); the policy's exclusions are computed
    first from the log's arrays (the caps need the whole log in order)."""
    selection = preference_pair_selection(campaign=campaign, filters=filters)
    winners = selection.selected & (selection.votes.outcome <= 1)
    excluded = set(selection.votes.vote_id[winners & ~selection.pairs].tolist())
    votes = votes_filtered(campaign=campaign, filters=filters).filter(choice__in=(Choice.LEFT, Choice.RIGHT))
    for event in vote_events(votes=votes, texts=True):
        if event["vote_id"] not in excluded:
            yield preference_pair_row(event)


def _style_length_coefficient(*, campaign: Campaign, category: str) -> dict[str, Any]:
    snapshot = snapshot_latest(campaign=campaign, category=category, view=LeaderboardSnapshot.View.STYLE)
    if snapshot is None:
        reason = "no style-controlled leaderboard has been computed for this selection yet"
        return {"available": False, "reason": f"not available: {reason}"}
    base: dict[str, Any] = {"snapshot_version": snapshot.version, "interval": snapshot.method.get("interval")}
    withheld = snapshot.extra.get("style_withheld")
    if withheld:
        return {**base, "available": False, "reason": f"not available: {withheld}"}
    for row in snapshot.extra.get("style_coefficients") or []:
        if row.get("feature") == "tokens":
            return {
                **base,
                "available": True,
                "reason": None,
                "coef": row["coef"],
                "lower": row["lower"],
                "upper": row["upper"],
            }
    dropped = [d for d in (snapshot.extra.get("style_checks") or {}).get("dropped", []) if d.get("feature") == "tokens"]
    why = dropped[0]["reason"] if dropped else "the snapshot has no length coefficient"
    return {**base, "available": False, "reason": f"not available: {why}"}


def preference_pairs_audit(*, campaign: Campaign, filters: VoteFilters | None = None) -> dict[str, Any]:
    """How many pairs, what each rule left out, and whether the chosen answer tends to be the longer
    one: the share of pairs (of those whose lengths differ) where it is, with a 95% Wilson interval,
    next to the style-controlled view's length coefficient (logit per standard deviation of the
    normalised length gap, left minus right) from its latest snapshot."""
    selection = preference_pair_selection(campaign=campaign, filters=filters)
    votes, pairs = selection.votes, selection.pairs
    left_len = votes.style_left[pairs, _LENGTH]
    right_len = votes.style_right[pairs, _LENGTH]
    left_won = votes.outcome[pairs] == 0
    chosen = np.where(left_won, left_len, right_len)
    rejected = np.where(left_won, right_len, left_len)
    longer, shorter = int((chosen > rejected).sum()), int((chosen < rejected).sum())
    differ = longer + shorter
    lower, upper = wilson_interval(longer, differ, confidence=0.95)
    return {
        "votes": int(selection.selected.sum()),
        "pairs": int(pairs.sum()),
        "excluded": selection.excluded,
        "no_winner": selection.no_winner,
        "length": {
            "measure": "tokens outside code blocks (the style counts the style-controlled view uses)",
            "chosen_longer": longer,
            "chosen_shorter": shorter,
            "same_length": int(pairs.sum()) - differ,
            "share_chosen_longer": round(longer / differ, 6) if differ else None,
            "lower": round(float(lower), 6) if differ else None,
            "upper": round(float(upper), 6) if differ else None,
            "confidence": 0.95,
        },
        "style_length_coefficient": _style_length_coefficient(
            campaign=campaign, category=filters.category if filters is not None else ""
        ),
    }


# --- Judges: their verdicts as arrays, their boards and calibrations ---------------------------------


@dataclass(frozen=True)
class JudgeVerdictRows:
    """The verdicts a judge board ranks: ``ids`` of the JudgeVerdict rows used, and the counts left out."""

    arrays: VoteArrays
    total: int
    refused: int
    inconsistent: int
    last_id: int
    run_id: int | None


def judge_verdicts_for_board(
    *, campaign_id: int, judge_id: int, kind: str, run_id: int | None = None
) -> JudgeVerdictRows:
    """A battles board: the newest verdict of the judge per battle, across its runs (a rerun replaces
    its earlier verdict rather than counting twice). A golden board: the verdicts of one golden run
    (the newest, unless ``run_id`` names one): each golden run has its own answers."""
    verdicts = JudgeVerdict.objects.filter(campaign_id=campaign_id, judge_id=judge_id)
    if kind == JudgeRun.Kind.GOLDEN:
        if run_id is None:
            run_id = (
                JudgeRun.objects.filter(campaign_id=campaign_id, judge_id=judge_id, kind=JudgeRun.Kind.GOLDEN)
                .order_by("-created_at", "-id")
                .values_list("pk", flat=True)
                .first()
            )
        verdicts = verdicts.filter(run_id=run_id, battle__isnull=True)
    else:
        verdicts = verdicts.filter(battle__isnull=False)
        if run_id is None:
            run_id = (
                JudgeRun.objects.filter(campaign_id=campaign_id, judge_id=judge_id, kind=JudgeRun.Kind.BATTLES)
                .order_by("-created_at", "-id")
                .values_list("pk", flat=True)
                .first()
            )
    newest: dict[Any, tuple[Any, ...]] = {}
    for row in verdicts.order_by("id").values_list(
        "id", "battle_id", "prompt_id", "left_id", "right_id", "choice", "refused", "consistent", "category"
    ):
        key = row[1] if row[1] is not None else (row[2], row[3], row[4])
        newest[key] = row
    rows = sorted(newest.values(), key=lambda r: r[0])
    used = [r for r in rows if not r[6]]
    n = len(used)
    categories = tuple(sorted({r[8] for r in used}))
    code = {name: i for i, name in enumerate(categories)}
    prompts = {p: i for i, p in enumerate(sorted({r[2] for r in used}))}
    outcome = {"left": est.LEFT_WINS, "right": est.RIGHT_WINS, "tie": est.TIE, "both_bad": est.BOTH_BAD}
    zeros = np.zeros((n, len(STYLE_FEATURES)), dtype=np.float64)
    arrays = VoteArrays(
        vote_id=np.array([r[0] for r in used], dtype=np.int64),
        left=np.array([r[3] for r in used], dtype=np.int64),
        right=np.array([r[4] for r in used], dtype=np.int64),
        outcome=np.array([outcome[r[5]] for r in used], dtype=np.int64),
        decision_ms=np.zeros(n, dtype=np.int64),
        rater=np.zeros(n, dtype=np.int64),  # one "rater": the judge
        prompt=np.array([prompts[r[2]] for r in used], dtype=np.int64),
        category=np.array([code[r[8]] for r in used], dtype=np.int64),
        categories=categories,
        identity=np.zeros(n, dtype=bool),
        style_left=zeros,
        style_right=zeros.copy(),
    )
    return JudgeVerdictRows(
        arrays=arrays,
        total=len(rows),
        refused=len(rows) - n,
        inconsistent=sum(1 for r in used if not r[7]),
        last_id=max((r[0] for r in rows), default=0),
        run_id=run_id,
    )


def judge_calibration_pairs(*, campaign_id: int, judge_id: int) -> tuple[list[tuple[str, int, int]], dict[str, int]]:
    """(category, human code, judge code) for every battle with a human vote (gold battles aside) and a
    counterbalanced verdict of the judge (its newest per battle); and per category the refusals."""
    from .compute import CHOICE_CODES

    code = {name: i for i, name in enumerate(CHOICE_CODES)}
    human = dict(Vote.objects.filter(campaign_id=campaign_id).exclude(source="gold").values_list("battle_id", "choice"))
    newest: dict[Any, tuple[Any, ...]] = {}
    for row in (
        JudgeVerdict.objects.filter(campaign_id=campaign_id, judge_id=judge_id, battle_id__in=list(human))
        .order_by("id")
        .values_list("battle_id", "choice", "refused", "category")
    ):
        newest[row[0]] = row
    pairs: list[tuple[str, int, int]] = []
    refused: dict[str, int] = {}
    for battle_id, choice, was_refused, category in newest.values():
        if was_refused:
            refused[category] = refused.get(category, 0) + 1
            continue
        pairs.append((category, code[human[battle_id]], code[choice]))
    return pairs, refused


def judge_board_latest(*, campaign: Campaign, judge: Judge, kind: str = "battles") -> JudgeBoard | None:
    return JudgeBoard.objects.filter(campaign=campaign, judge=judge, kind=kind).order_by("-version").first()


def judge_calibration_latest(*, campaign: Campaign, judge: Judge) -> list[JudgeCalibration]:
    """The newest calibration's rows (overall first, then per category)."""
    newest = JudgeCalibration.objects.filter(campaign=campaign, judge=judge).aggregate(v=Max("version"))["v"]
    if newest is None:
        return []
    return list(JudgeCalibration.objects.filter(campaign=campaign, judge=judge, version=newest).order_by("category"))


def judge_calibrations_of_rubric(*, rubric: Rubric) -> list[JudgeCalibration]:
    """Every calibration measured under one rubric version (its judges, every campaign), newest first."""
    return list(
        JudgeCalibration.objects.filter(rubric=rubric)
        .select_related("judge", "campaign")
        .order_by("-created_at", "category")
    )


def judge_of_campaign(*, campaign: Campaign, judge_id: int) -> Judge | None:
    """A judge of the campaign's organisation (the caller already may read the campaign)."""
    return Judge.objects.filter(pk=judge_id, organization_id=campaign.organization_id).select_related("rubric").first()


# --- Attribute boards (ratio judgements) ---------------------------------------------------------------


def attribute_boards_viewable_by(user: User | ApiKeyPrincipal) -> QuerySet[AttributeBoard]:
    """Boards whose runs, scores and ledger the principal may read: owners, managers and viewers of the
    organisation, or its API keys (the same rule as campaigns)."""
    return AttributeBoard.objects.filter(organization__in=organizations_viewable_by(user)).select_related(
        "judge__rubric", "judge__endpoint"
    )


def attribute_board_viewable_by(*, user: User | ApiKeyPrincipal, board_id: int) -> AttributeBoard | None:
    return attribute_boards_viewable_by(user).filter(pk=board_id).first()


def attribute_board_writable_by(*, user: User | ApiKeyPrincipal, board_id: int) -> AttributeBoard | None:
    """A read-write key's organisation, or the organisations a person owns or manages."""
    return AttributeBoard.objects.filter(organization__in=organizations_writable_by(user), pk=board_id).first()


def attribute_run_viewable_by(*, user: User | ApiKeyPrincipal, run_id: int) -> AttributeRun | None:
    return (
        AttributeRun.objects.filter(organization__in=organizations_viewable_by(user), pk=run_id)
        .select_related("board", "judge__rubric")
        .first()
    )


def attribute_board_entities(board: AttributeBoard) -> list[AttributeEntity]:
    """The board's entities in estimator order (``position``)."""
    return list(AttributeEntity.objects.filter(board=board).order_by("position"))


@dataclass(frozen=True)
class RunObservations:
    """A run's accepted judgements as the estimator's arrays (indices into ``entities``)."""

    entities: list[int]  # entity ids, in position order
    i: NDArray[np.int64]
    j: NDArray[np.int64]
    log_ratio: NDArray[np.float64]
    confidence: NDArray[np.float64]


def attribute_run_observations(run: AttributeRun) -> RunObservations:
    """What reached the estimator in ``run``: the ledger's used rows, over the entities the run saw
    (the first ``run.entities`` positions)."""
    ids = list(
        AttributeEntity.objects.filter(board_id=run.board_id, position__lt=run.entities)
        .order_by("position")
        .values_list("pk", flat=True)
    )
    index = {pk: k for k, pk in enumerate(ids)}
    rows = list(
        AttributeJudgement.objects.filter(run=run, used=True)
        .order_by("id")
        .values_list("first_id", "second_id", "log_ratio", "confidence")
    )
    conf = [np.nan if c is None else float(c) for _, _, _, c in rows]
    return RunObservations(
        entities=ids,
        i=np.array([index[a] for a, _, _, _ in rows], dtype=np.int64),
        j=np.array([index[b] for _, b, _, _ in rows], dtype=np.int64),
        log_ratio=np.array([np.nan if r is None else r for _, _, r, _ in rows], dtype=np.float64),
        confidence=np.array(conf, dtype=np.float64),
    )


def attribute_run_fit(run: AttributeRun) -> RatioFit:
    """The run's solve, recomputed from its ledger: the same accepted judgements give the same bytes as
    the run recorded (``run.solve["hash"]``)."""
    obs = attribute_run_observations(run)
    return fit_ratio(len(obs.entities), obs.i, obs.j, obs.log_ratio, obs.confidence, seed=run.seed)


def attribute_fit_hash(fit: RatioFit) -> str:
    return hashlib.sha256(fit.canonical_bytes()).hexdigest()


def attribute_runs_compare(*, run: AttributeRun, other: AttributeRun) -> dict[str, Any]:
    """Replication between two finished runs of one board: Spearman's rho of the scores over the
    entities both ranked, top-k overlap, and (on pairs both runs judged) how often their fused
    log-ratios agree in sign. Same judge, different seeds: a seed replication; different judges:
    the judges' agreement."""
    if run.board_id != other.board_id:
        raise ValueError("runs of different boards")
    mine = dict(AttributeScore.objects.filter(run=run).values_list("entity_id", "score"))
    theirs = dict(AttributeScore.objects.filter(run=other).values_list("entity_id", "score"))
    top_mine = set(AttributeScore.objects.filter(run=run, in_top_k=True).values_list("entity_id", flat=True))
    top_theirs = set(AttributeScore.objects.filter(run=other, in_top_k=True).values_list("entity_id", flat=True))
    common = sorted(set(mine) & set(theirs))
    rho: float | None = None
    if len(common) >= 3:
        value = spearman([mine[e] for e in common], [theirs[e] for e in common])
        rho = None if np.isnan(value) else value

    def fused(r: AttributeRun) -> dict[tuple[int, int], float]:
        sums: dict[tuple[int, int], list[float]] = {}
        for a, b, lr in AttributeJudgement.objects.filter(run=r, used=True).values_list(
            "first_id", "second_id", "log_ratio"
        ):
            key, sign = ((a, b), 1.0) if a < b else ((b, a), -1.0)
            sums.setdefault(key, []).append(sign * (np.nan if lr is None else lr))
        return {key: float(np.mean(v)) for key, v in sums.items()}

    pairs_mine, pairs_theirs = fused(run), fused(other)
    shared = sorted(set(pairs_mine) & set(pairs_theirs))
    agree = sum(1 for key in shared if np.sign(pairs_mine[key]) == np.sign(pairs_theirs[key]))
    k = max(len(top_mine), 1)
    return {
        "run": run.pk,
        "other": other.pk,
        "kind": "seeds" if run.judge_id == other.judge_id else "judges",
        "entities": len(common),
        "spearman": rho,
        "top_k_overlap": len(top_mine & top_theirs) / k if top_mine else None,
        "shared_pairs": len(shared),
        "pair_sign_agreement": agree / len(shared) if shared else None,
    }


def attribute_board_public(*, slug: str) -> AttributeBoard | None:
    """A published board by its public address (any organisation: the address is the credential)."""
    with scopes_disabled():
        board = AttributeBoard.objects.filter(public_slug=slug).first()
    return board


def attribute_board_latest_run(board: AttributeBoard) -> AttributeRun | None:
    """The newest finished run of the board: what a published board shows."""
    return AttributeRun.objects.filter(board=board, status=AttributeRun.Status.DONE).order_by("-id").first()


def judge_writable_by(*, user: User | ApiKeyPrincipal, judge_id: int) -> Judge | None:
    """A judge the principal may put on a board: one of an organisation it may write to."""
    return (
        Judge.objects.filter(organization__in=organizations_writable_by(user), pk=judge_id)
        .select_related("organization", "rubric", "endpoint")
        .first()
    )


# --- The managers' dashboard: per-day series, pair coverage, decision times, per-rater reports and the
# cadence check. Every figure is an SQL aggregate over the vote log (grouped in the database; what comes
# back is one row per day, pair, bin or rater), so the page costs a few grouped scans at a million votes.

# A rater's pause longer than this ends a working session: the gap is not counted as active time.
SESSION_GAP_S = 30 * 60
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
    activity = _rater_activity(campaign)
    if not activity:
        return {}, {}, {}
    return activity, _median_decision_s(campaign), _rater_agreement(campaign)


def rater_figures_cached(*, campaign: Campaign) -> tuple[OnLog[RaterFigures] | None, list[Any]]:
    """The campaign's per-rater figures cached for the log as it stands, else the latest ones computed on
    an earlier state of it (older mark), else None; with the log's current mark (``_on_log_cached``)."""
    return _on_log_cached(campaign.pk, RATER_FIGURES, [])


def rater_figures_at(*, campaign: Campaign, mark: list[Any]) -> OnLog[RaterFigures] | None:
    """The per-rater figures cached for the log at ``mark`` exactly (a cache read, no SQL)."""
    return _on_log_entry(cache.get(_log_key(RATER_FIGURES, campaign.pk, [], mark)))


def rater_figures_compute(*, campaign: Campaign) -> OnLog[RaterFigures]:
    """The per-rater figures of the log as it stands, computed now (one snapshot of the log) and cached
    under its state and as the campaign's latest."""
    return _on_log_compute(campaign.pk, RATER_FIGURES, [], lambda: _rater_figures_from_log(campaign))


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
    return Cadence(
        threshold=campaign.cadence_threshold,
        window_days=CADENCE_WINDOW_DAYS,
        since=since,
        active_competitors=n,
        pairs=n * (n - 1) // 2,
        stale=stale,
    )
