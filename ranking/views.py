"""Leaderboard pages for managers and viewers of the campaign's organisation: the newest snapshot,
a permalink to every stored version, and each version as CSV or JSON."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

import numpy as np
from django import forms
from django.contrib import admin
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils.safestring import mark_safe
from django.views.decorators.http import require_GET

from battles.models import Campaign, Competitor
from battles.selectors import (
    VoteCounts,
    campaign_viewable_by,
    campaigns_managed_by,
    competitors_unavailable,
    vote_counts,
)
from core.http import AuthenticatedHttpRequest
from core.spreadsheet import csv_row
from raters.models import FLAG_IN_FORCE, RaterFlag
from raters.tenancy import organization_scope

from . import charts, selectors, services
from .models import AttributeScore, LeaderboardSnapshot


def _interval_geometry(rows: list[dict[str, Any]]) -> tuple[float, float]:
    """The axis of the interval plot: every finite bound and score, padded; open sides run to its edge."""
    shown = [r for r in rows if not r["hidden"]]
    values = [v for r in shown for v in (r.get("lower"), r.get("upper"), r["score"]) if v is not None]
    if not values:
        return 900.0, 1100.0
    lo, hi = min(values), max(values)
    pad = max(5.0, (hi - lo) * 0.05)
    return lo - pad, hi + pad


# Heatmap colours: a diverging scale, blue where the row wins, red where the column does. The legend on
# the page is drawn from the same function, so the two cannot drift apart.
def _heat(value: float | None) -> str:
    """A diverging colour for a win rate: blue above one half, red below."""
    if value is None:
        return "#f2f4f7"
    strength = min(1.0, abs(value - 0.5) * 2)
    if value >= 0.5:
        return f"rgba(33, 85, 204, {0.12 + 0.7 * strength:.2f})"
    return f"rgba(180, 35, 24, {0.12 + 0.7 * strength:.2f})"


LEGEND_STOPS = (0.0, 0.25, 0.5, 0.75, 1.0)


def interval_text(row: dict[str, Any]) -> str:
    """ "1250 – 1310", or with an open side "≥ 1350" / "≤ 850" (the votes do not bound the other side)."""
    lower, upper = row.get("lower"), row.get("upper")
    if lower is None and upper is None:
        return "unbounded"
    if upper is None:
        return f"≥ {lower:.0f}"
    if lower is None:
        return f"≤ {upper:.0f}"
    return f"{lower:.0f} – {upper:.0f}"


def _difference_text(diff: dict[str, Any], i: int, j: int, estimate: list[list[float | None]]) -> str | None:
    lower, upper = diff["lower"][i][j], diff["upper"][i][j]
    if estimate[i][j] is None:
        return None
    lo_open, hi_open = diff["lower_open"][i][j], diff["upper_open"][i][j]
    if lo_open and hi_open:
        return "difference unbounded"
    if hi_open:
        return f"difference ≥ {lower:+.0f}"
    if lo_open:
        return f"difference ≤ {upper:+.0f}"
    return f"difference {lower:+.0f} to {upper:+.0f}"


# The heatmap shows at most this many competitors (the highest-scored of a larger board), so a page of a
# 1,000-competitor board is not a million cells; the API's pairwise route and the download have every pair.
HEATMAP_COMPETITORS = 60


def _selection(request: AuthenticatedHttpRequest) -> tuple[str, str]:
    category = request.GET.get("category", "")
    view = request.GET.get("view", LeaderboardSnapshot.View.RAW)
    if view not in LeaderboardSnapshot.View.values:
        view = LeaderboardSnapshot.View.RAW
    return category, view


def _campaign(request: AuthenticatedHttpRequest, campaign_id: int) -> Campaign:
    campaign = campaign_viewable_by(user=request.user, campaign_id=campaign_id)
    if campaign is None:
        raise Http404("No such campaign.")
    return campaign


def _snapshot_version(campaign: Campaign, category: str, view: str, version: int) -> LeaderboardSnapshot:
    snapshot = (
        selectors.snapshot_history(campaign=campaign, category=category, view=view).filter(version=version).first()
    )
    if snapshot is None:
        raise Http404("No such snapshot version.")
    return snapshot


@require_GET
@login_required
def leaderboard(request: AuthenticatedHttpRequest, campaign_id: int) -> HttpResponse:
    campaign = _campaign(request, campaign_id)
    category, view = _selection(request)
    snapshot = selectors.snapshot_latest(campaign=campaign, category=category, view=view)
    return _render(request, campaign, category, view, snapshot, permalinked=False)


@require_GET
@login_required
def leaderboard_version(request: AuthenticatedHttpRequest, campaign_id: int, version: int) -> HttpResponse:
    """The permalink of one stored version: the page as it was computed then."""
    campaign = _campaign(request, campaign_id)
    category, view = _selection(request)
    return _render(
        request, campaign, category, view, _snapshot_version(campaign, category, view, version), permalinked=True
    )


def snapshot_payload(snapshot: LeaderboardSnapshot) -> dict[str, Any]:
    """The stored snapshot as the JSON download (and the API) give it."""
    return {
        "campaign": snapshot.campaign_id,
        "category": snapshot.category,
        "view": snapshot.view,
        "version": snapshot.version,
        "created_at": snapshot.created_at.isoformat(),
        "last_vote_id": snapshot.last_vote_id,
        "votes_total": snapshot.votes_total,
        "votes_used": snapshot.votes_used,
        "method": snapshot.method,
        "policy": snapshot.policy,
        "excluded": snapshot.excluded,
        "rows": snapshot.rows,
        "pairwise": selectors.snapshot_pairwise_stored(snapshot=snapshot),
        "extra": snapshot.extra,
        "compute_seconds": snapshot.compute_seconds,
    }


CSV_COLUMNS = (
    "rank_best",
    "rank_worst",
    "competitor_id",
    "label",
    "score",
    "lower",
    "upper",
    "lower_open",
    "upper_open",
    "interval_method",
    "votes",
    "counted",
    "wins",
    "ties",
    "both_bad",
    "win_rate",
    "tie_rate",
    "both_bad_rate",
    "component",
    "hidden",
    "retired",
    "family",
)


@require_GET
@login_required
def leaderboard_download(request: AuthenticatedHttpRequest, campaign_id: int, version: int, fmt: str) -> HttpResponse:
    """One version as ``snapshot.json`` (everything stored) or ``snapshot.csv`` (one row per competitor;
    an open interval side is an empty cell with ``*_open`` true)."""
    campaign = _campaign(request, campaign_id)
    category, view = _selection(request)
    snapshot = _snapshot_version(campaign, category, view, version)
    # Live, beside the stored numbers: whether each competitor is retired now, and its family.
    live = {
        c.pk: {"retired": not c.active, "family": c.family_name}
        for c in Competitor.objects.filter(campaign=campaign).select_related("endpoint")
    }
    stem = f"leaderboard-{campaign.pk}-{category or 'overall'}-{view}-v{version}"
    if fmt == "json":
        response = HttpResponse(json.dumps(snapshot_payload(snapshot), indent=1), content_type="application/json")
    elif fmt == "csv":
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow(CSV_COLUMNS)
        for row in snapshot.rows:
            full = {**row, **live.get(int(row["competitor_id"]), {"retired": True, "family": ""})}
            writer.writerow(csv_row(full, CSV_COLUMNS))
        response = HttpResponse(buffer.getvalue(), content_type="text/csv; charset=utf-8")
    else:
        raise Http404("Downloads are csv or json.")
    response["Content-Disposition"] = f'attachment; filename="{stem}.{fmt}"'
    return response


def _render(
    request: AuthenticatedHttpRequest,
    campaign: Campaign,
    category: str,
    view: str,
    snapshot: LeaderboardSnapshot | None,
    *,
    permalinked: bool,
) -> HttpResponse:
    # Ranks are compared with the raw view (the raw view with the style-controlled one): its rows only.
    raw = LeaderboardSnapshot.View.RAW
    other_view = LeaderboardSnapshot.View.STYLE if view == raw else raw
    other = (
        selectors.snapshot_history(campaign=campaign, category=category, view=other_view)
        .defer("pairwise", "pairwise_arrays")
        .first()
    )
    manages = _manages(request, campaign)
    context: dict[str, Any] = {
        "campaign": campaign,
        # Managers only (they can act on it): the board may look current while its queue stalled.
        "cadence": cadence_note(campaign) if manages else None,
        "snapshot": snapshot,
        "category": category,
        "view": view,
        "categories": selectors.snapshot_categories(campaign=campaign),
        "views": LeaderboardSnapshot.View.choices,
        "permalinked": permalinked,
        "families": selectors.family_disclosure(campaign=campaign),
        "legend": [{"value": v, "colour": _heat(v)} for v in LEGEND_STOPS],
        # Live, not part of the snapshot: how long each competitor's model was down in this campaign.
        "unavailable": [
            {"label": str(c), "minutes": e.unavailable_min, "outages": e.outages}
            for c, e in competitors_unavailable(campaign=campaign)
        ],
    }
    if snapshot is not None:
        # An analysis that failed on these votes (ranking/board_analyses.py) is named once, with its reason, in
        # place of its section (this request's copy of the snapshot only; the API keeps the block as stored).
        context["failed_analyses"] = [
            (key, block.get("reason", ""))
            for key, block in snapshot.extra.items()
            if isinstance(block, dict) and block.get("failed")
        ]
        if context["failed_analyses"]:
            failed = {key for key, _ in context["failed_analyses"]}
            snapshot.extra = {key: value for key, value in snapshot.extra.items() if key not in failed}
        # The log's votes now, as the dashboard and the API count them (gold ones said apart), beside the
        # version's own count (a snapshot ranks the votes outside gold battles that it read).
        context["votes"] = vote_counts(campaign_id=campaign.pk)
        query = f"?category={category}&view={view}" if category else f"?view={view}"
        context["links"] = {
            "permalink": reverse("ranking:leaderboard-version", args=[campaign.pk, snapshot.version]) + query,
            "latest": reverse("ranking:leaderboard", args=[campaign.pk]) + query,
            "csv": reverse("ranking:leaderboard-download", args=[campaign.pk, snapshot.version, "csv"]) + query,
            "json": reverse("ranking:leaderboard-download", args=[campaign.pk, snapshot.version, "json"]) + query,
        }
        current = selectors.competitor_names(campaign=campaign)  # live: retired now, as the API says
        rows = [
            {**r, "retired": not current.get(int(r["competitor_id"]), {"active": False})["active"]}
            for r in snapshot.rows
        ]
        lo, hi = _interval_geometry(rows)
        width = hi - lo
        other_ranks = {
            r["competitor_id"]: (r["rank_best"], r["rank_worst"])
            for r in (other.rows if other else [])
            if not r["hidden"]
        }
        shown, hidden = [], []
        for row in rows:
            if row["hidden"]:
                hidden.append(row)
                continue
            row = dict(row)
            left = lo if row.get("lower") is None else row["lower"]
            right = hi if row.get("upper") is None else row["upper"]
            row["bar_left"] = 100 * (left - lo) / width
            row["bar_width"] = max(0.5, 100 * (right - left) / width)
            row["dot"] = 100 * (row["score"] - lo) / width
            row["interval_text"] = interval_text(row)
            theirs = other_ranks.get(row["competitor_id"])
            row["other_rank"] = theirs if theirs and theirs != (row["rank_best"], row["rank_worst"]) else None
            shown.append(row)
        pairwise = snapshot.pairwise or {}
        names = {r["competitor_id"]: r["label"] or f"#{r['competitor_id']}" for r in rows}
        diff = pairwise.get("difference") if "estimate" in pairwise.get("difference", {}) else None
        ids = pairwise.get("competitor_ids", [])
        grids = selectors.snapshot_pairwise_grids(snapshot=snapshot)
        positions = list(range(len(ids)))
        if len(ids) > HEATMAP_COMPETITORS:
            # A million cells is no page: the top of the board here, every pair in the API and the download.
            rank = {r["competitor_id"]: k for k, r in enumerate(shown)}
            top = sorted(positions, key=lambda p: rank.get(ids[p], len(rank)))[:HEATMAP_COMPETITORS]
            positions = sorted(top)
        grid = grids.select(np.array(positions, dtype=np.int64)).as_json() if grids is not None and ids else {}
        matrix = []
        for a, i in enumerate(positions):
            cid = ids[i]
            cells = []
            for b, j in enumerate(positions):
                other_id = ids[j]
                rate = grid["win_rate"][a][b]
                parts = []
                if rate is not None:
                    parts.append(
                        f"{names.get(cid, cid)} vs {names.get(other_id, other_id)}: win rate {rate:.2f}, "
                        f"Wilson {grid['lower'][a][b]:.2f}–{grid['upper'][a][b]:.2f}, "
                        f"n={grid['n'][a][b]}"
                    )
                    if grid["p_holm"][a][b] is not None:
                        parts.append(f"Holm p={grid['p_holm'][a][b]:.3g}")
                    if grid["sequential_cells"][a][b]:
                        parts.append(f"anytime-valid: {grid['sequential_cells'][a][b]['decision']}")
                if diff is not None and i != j:
                    # The simultaneous interval first: it is the one that holds when several pairs are read.
                    together = diff.get("simultaneous")
                    alone = _difference_text(diff, i, j, diff["estimate"])
                    text = _difference_text(together, i, j, diff["estimate"]) if together else None
                    if text and alone:
                        parts.append(f"score {text} (simultaneous over all pairs; this pair alone: {alone})")
                    elif alone:
                        parts.append(f"score {alone} (this pair alone)")
                cells.append({"rate": rate, "colour": _heat(rate), "tip": "; ".join(parts)})
            matrix.append({"label": names.get(cid, str(cid)), "cells": cells})
        context.update(
            {
                "shown": shown,
                "hidden": hidden,
                "axis": (round(lo), round(hi)),
                "matrix": matrix,
                "matrix_labels": [names.get(ids[i], str(ids[i])) for i in positions],
                "matrix_of": len(ids) if len(positions) < len(ids) else None,
                "rank_changes": [r for r in shown if r["other_rank"]],
                "simultaneous_ranks": [r for r in shown if r.get("rank_simultaneous")],
                "other_view_label": dict(LeaderboardSnapshot.View.choices)[other.view] if other else "",
                "any_open": any(r.get("lower_open") or r.get("upper_open") for r in shown),
                "any_retired": any(r["retired"] for r in rows),
                # From stored rows (no refit): this board against the overall one, the judges' against the human.
                "comparisons": selectors.board_comparisons_for_page(campaign=campaign, snapshot=snapshot),
            }
        )
        if shown and not category and view == raw and manages:
            # Managers: the leader can be rolled out from here, in stages, through an A/B experiment.
            context["leader"] = shown[0]
            context["promotion_offers"] = selectors.promotion_offers(
                campaign_id=campaign.pk, leader_id=int(shown[0]["competitor_id"])
            )
    return render(request, "ranking/leaderboard.html", context)


# --- Published boards: public, no login --------------------------------------------------------------


@require_GET
def board_index(request: HttpRequest) -> HttpResponse:
    """The public index of published boards: those their organisations published and listed, each with the
    content hashes of its entities and attributes (``selectors.public_board_index``). No login."""
    response = render(request, "ranking/public_index.html", {"index": selectors.public_board_index_cached()})
    response["Cache-Control"] = "no-store"  # unpublishing or unlisting takes effect at once
    return response


@require_GET
def board_public(request: HttpRequest, slug: str) -> HttpResponse:
    """A published leaderboard for anyone with its address: no login, no tenant of the visitor's
    (the selector opens the board's own organisation scope). Unknown or unpublished: 404."""
    category = request.GET.get("category", "")
    view = request.GET.get("view", LeaderboardSnapshot.View.RAW)
    if view not in LeaderboardSnapshot.View.values:
        view = LeaderboardSnapshot.View.RAW
    board = selectors.public_board(slug=slug, category=category, view=view)
    if board is None:
        raise Http404("No such board.")
    shown = [dict(r) for r in board.rows if not r["hidden"]]
    lo, hi = _interval_geometry(shown)
    width = hi - lo
    for row in shown:
        left = lo if row["lower"] is None else row["lower"]
        right = hi if row["upper"] is None else row["upper"]
        row["bar_left"] = 100 * (left - lo) / width
        row["bar_width"] = max(0.5, 100 * (right - left) / width)
        row["dot"] = 100 * (row["score"] - lo) / width
        row["interval_text"] = interval_text(row)
    context: dict[str, Any] = {
        "board": board,
        "snapshot": board.snapshot,
        "shown": shown,
        "hidden": [r for r in board.rows if r["hidden"]],
        "axis": (round(lo), round(hi)),
        "views": LeaderboardSnapshot.View.choices,
        "any_open": any(r["lower_open"] or r["upper_open"] for r in shown),
        "any_retired": any(r["retired"] for r in board.rows),
    }
    response = render(request, "ranking/public_board.html", context)
    # Public, but not for search engines or shared caches: unpublishing must take effect at once.
    response["X-Robots-Tag"] = "noindex"
    response["Cache-Control"] = "no-store"
    return response


PUBLIC_ATTRIBUTE_ROWS = 500


@require_GET
def attribute_board_public(request: HttpRequest, slug: str) -> HttpResponse:
    """A published attribute board: the newest finished run's scores and provenance, for anyone with the
    address. Entity texts are the tenant's own words: the template auto-escapes them. Unknown or
    unpublished: 404."""
    board = selectors.attribute_board_public(slug=slug)
    if board is None:
        raise Http404("No such board.")
    with organization_scope(board.organization_id):
        run = selectors.attribute_board_latest_run(board)
        scores = (
            list(
                AttributeScore.objects.filter(run=run)
                .select_related("entity")
                .order_by("rank")[: PUBLIC_ATTRIBUTE_ROWS + 1]
            )
            if run
            else []
        )
        context: dict[str, Any] = {
            "board": board,
            "run": run,
            "scores": scores[:PUBLIC_ATTRIBUTE_ROWS],
            "truncated": len(scores) > PUBLIC_ATTRIBUTE_ROWS,
            "ledger_url": reverse("api-public-attribute-board-judgements", args=[slug]),
            "order": dict((run.solve or {}).get("order") or {}) if run else {},
            "top_k_error": dict((run.solve or {}).get("top_k_error") or {}) if run else {},
        }
        in_top_k = context["top_k_error"].get("in_top_k") or []
        for score in context["scores"]:
            position = score.entity.position
            score.p_top_k = in_top_k[position] if position < len(in_top_k) else None
        response = render(request, "ranking/public_attribute_board.html", context)
    response["X-Robots-Tag"] = "noindex"
    response["Cache-Control"] = "no-store"
    return response


# --- The managers' dashboard (in the console's frame) ------------------------------------------------


def _manages(request: AuthenticatedHttpRequest, campaign: Campaign) -> bool:
    return campaigns_managed_by(request.user).filter(pk=campaign.pk).exists()


def _managed_campaign(request: AuthenticatedHttpRequest, campaign_id: int) -> Campaign:
    """The campaign, for an owner or manager of its organisation; anyone else (a viewer, a rater, an
    outsider) gets 404, as for every tenant object."""
    campaign = campaigns_managed_by(request.user).filter(pk=campaign_id).first()
    if campaign is None:
        raise Http404("No such campaign.")
    return campaign


def cadence_note(campaign: Campaign) -> dict[str, Any] | None:
    """ "The board may be stale: N pairs had under T votes in 7 days", for an open campaign with such pairs
    (not for one with no votes yet: it is new, not stale)."""
    if campaign.status != Campaign.Status.OPEN:
        return None
    found = selectors.cadence(campaign=campaign)
    if not found.stale or not found.voted:
        return None
    return {"stale": len(found.stale), "pairs": found.pairs, "threshold": found.threshold, "days": found.window_days}


# How many raters the dashboard's chart and table show (the CSV and the API have every one).
DASHBOARD_CHART_RATERS = 40
DASHBOARD_TABLE_RATERS = 500


def _day(value: Any) -> str:
    return value.isoformat() if hasattr(value, "isoformat") else str(value)


def _seconds(value: float) -> str:
    return f"{value:g} s"


class PlanForm(forms.Form):
    """The dashboard's planner: a margin (and a power) in, battles out (``selectors.campaign_plan``)."""

    margin = forms.FloatField(min_value=0.1, max_value=2000.0, label="Margin (Elo points)")
    power = forms.FloatField(min_value=0.5, max_value=0.999, initial=0.8, required=False, label="Power")
    tie_rate = forms.FloatField(
        min_value=0.0, max_value=0.95, required=False, label="Tie rate", help_text="Empty: the board's."
    )
    competitors = forms.IntegerField(
        min_value=2, max_value=10000, required=False, label="Competitors", help_text="Empty: the board's."
    )


def _plan(request: AuthenticatedHttpRequest, campaign: Campaign) -> tuple[PlanForm, dict[str, Any] | None]:
    if "margin" not in request.GET:
        return PlanForm(initial={"power": 0.8}), None
    form = PlanForm(request.GET)
    if not form.is_valid():
        return form, None
    data = form.cleaned_data
    try:
        plan = selectors.campaign_plan(
            campaign=campaign,
            margin=data["margin"],
            power=data["power"] or 0.8,
            tie_rate=data["tie_rate"],
            competitors=data["competitors"],
        )
    except ValueError as exc:
        form.add_error(None, str(exc))
        return form, None
    return form, plan


@require_GET
@login_required
def campaign_dashboard(request: AuthenticatedHttpRequest, campaign_id: int) -> HttpResponse:
    """Votes and active raters per day, battles per pair, decision times, gold accuracy and agreement
    per rater, the flags in force and the cadence check: the campaign at a glance for its managers."""
    campaign = _managed_campaign(request, campaign_id)
    labels = selectors.competitor_labels(campaign=campaign)
    competitors = list(campaign.competitors.filter(gold=False).order_by("pk").values_list("pk", "active"))
    # The log's counts (per day, per bin, per pair, in all) and, unless cached, the per-rater figures: from
    # one read of the log on PostgreSQL (dashboard_log; elsewhere None, and the selectors' SQL).
    log = selectors.dashboard_log(campaign_id=campaign.pk)
    counts = selectors.dashboard_counts(campaign=campaign, log=log)
    coverage = counts.coverage
    # Active competitors and retired ones that fought: the matrix shows what the board stands on.
    met = {cid for pair in coverage for cid in pair}
    ids = [cid for cid, active in competitors if active or cid in met]
    index = {cid: i for i, cid in enumerate(ids)}
    matrix = {(index[a], index[b]): n for (a, b), n in coverage.items() if a in index and b in index}
    histogram = counts.histogram
    bins = [(f"{lo:g}–{hi:g}" if hi is not None else f"≥ {lo:g}", float(n)) for lo, hi, n in histogram]
    minimum_s = campaign.min_decision_ms / 1000
    # Where the minimum falls on the bin axis (bins are uneven, so interpolate within its bin).
    marker_bin = next(
        (i + (minimum_s - lo) / (hi - lo) for i, (lo, hi, _) in enumerate(histogram) if hi and lo <= minimum_s < hi),
        None,
    )
    # The per-rater figures may be the latest computed while a worker refreshes them: the page says so.
    served = services.rater_reports_serve(campaign=campaign, log=log)
    del log  # the page keeps only what it shows
    reports = served.reports
    # The chart shows the raters a manager should look at first: flagged, then the least accurate on
    # gold, then the least agreeing (unknowns last).
    worst = sorted(
        reports,
        key=lambda r: (
            not r.flagged,
            r.gold_accuracy if r.gold_accuracy is not None else 2.0,
            r.agreement if r.agreement is not None else 2.0,
            r.rater_id,
        ),
    )[:DASHBOARD_CHART_RATERS]
    rater_ids = [r.rater_id for r in reports]
    flags = (
        RaterFlag.objects.filter(FLAG_IN_FORCE, organization_id=campaign.organization_id, rater_id__in=rater_ids)
        .select_related("rater", "created_by")
        .order_by("-created_at")
    )
    votes_per_day, raters_per_day = counts.votes_per_day, counts.raters_per_day
    svg = {
        "votes": charts.bar_chart(
            [(_day(d), float(n)) for d, n in votes_per_day],
            chart_id="chart-votes",
            title="Votes per day (UTC)",
            unit="votes",
            x_label="day (UTC)",
            empty="No votes yet.",
        ),
        "raters": charts.bar_chart(
            [(_day(d), float(n)) for d, n in raters_per_day],
            chart_id="chart-raters",
            title="Active raters per day (UTC)",
            unit="raters",
            x_label="day (UTC)",
            empty="No votes yet.",
        ),
        "coverage": charts.matrix_chart(
            [labels.get(cid, str(cid)) for cid in ids],
            matrix,
            chart_id="chart-coverage",
            title="Battles per pair (voted, gold battles aside)",
            empty="Fewer than two competitors.",
        ),
        "decisions": charts.bar_chart(
            bins if any(n for _, n in bins) else [],
            chart_id="chart-decisions",
            title="Decision time (votes per bin of seconds)",
            unit="votes",
            x_label="decision time (seconds)",
            empty="No votes yet.",
            marker=(marker_bin, f"minimum {_seconds(minimum_s)}") if marker_bin is not None and minimum_s else None,
        ),
        "quality": charts.rater_chart(
            [
                charts.RaterDot(
                    label=r.name,
                    accuracy=r.gold_accuracy,
                    lower=r.gold_lower,
                    upper=r.gold_upper,
                    answered=r.gold_answered,
                    agreement=r.agreement,
                    flagged=r.flagged,
                )
                for r in worst
            ],
            chart_id="chart-quality",
            title="Gold accuracy and agreement per rater",
            empty="No raters yet.",
        ),
    }
    context: dict[str, Any] = {
        **admin.site.each_context(request),
        "title": f"Dashboard: {campaign.name}",
        "campaign": campaign,
        "opts": Campaign._meta,
        # Each chart is built by ranking.charts from numbers and escaped names: markup of our own.
        "svg": {name: mark_safe(markup) for name, markup in svg.items()},  # noqa: S308
        # The log's votes, gold ones said apart (battles.selectors.vote_counts: the board and the API count so).
        "votes": VoteCounts(total=counts.votes, gold=counts.gold),
        "rater_figures": served,
        "reports": reports[:DASHBOARD_TABLE_RATERS],
        "reports_total": len(reports),
        "reports_cut": len(reports) > DASHBOARD_TABLE_RATERS,
        "chart_raters": len(worst),
        "flags": flags,
        "cadence": selectors.cadence(campaign=campaign),
        "session_gap_min": selectors.SESSION_GAP_S // 60,
    }
    context["plan_form"], context["plan"] = _plan(request, campaign)
    context["promotions"] = selectors.promotions_of_campaign(campaign_id=campaign.pk)
    return render(request, "ranking/dashboard.html", context)


RATER_CSV_COLUMNS = (
    "rater_id",
    "rater",
    "battles",
    "median_decision_s",
    "active_hours",
    "battles_per_hour",
    "first_vote_at",
    "last_vote_at",
    "gold_answered",
    "gold_correct",
    "gold_accuracy",
    "gold_lower",
    "gold_upper",
    "attention_answered",
    "attention_failed",
    "agreement",
    "agreement_items",
    "agreement_pairs",
    "flagged",
    "flag_reason",
)


@require_GET
@login_required
def campaign_raters_csv(request: AuthenticatedHttpRequest, campaign_id: int) -> HttpResponse:
    """Every rater's report (the dashboard's table, all rows) as CSV, for the log as it stands: an export
    is expected to be complete, so figures older than the log are not served here (computed instead)."""
    campaign = _managed_campaign(request, campaign_id)
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(RATER_CSV_COLUMNS)
    for r in selectors.rater_reports(campaign=campaign):
        values = {**r.__dict__, "rater": r.name}
        writer.writerow(csv_row(values, RATER_CSV_COLUMNS))
    response = HttpResponse(buffer.getvalue(), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="raters-{campaign.pk}.csv"'
    return response
