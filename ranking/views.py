"""Leaderboard pages for managers and viewers of the campaign's organisation."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from arena.http import AuthenticatedHttpRequest
from battles.selectors import campaign_viewable_by

from . import selectors
from .models import LeaderboardSnapshot


def _interval_geometry(rows: list[dict[str, Any]]) -> tuple[float, float]:
    shown = [r for r in rows if not r["hidden"]]
    if not shown:
        return 900.0, 1100.0
    lo = min(r["lower"] for r in shown)
    hi = max(r["upper"] for r in shown)
    pad = max(5.0, (hi - lo) * 0.05)
    return lo - pad, hi + pad


def _heat(value: float | None) -> str:
    """A diverging colour for a win rate: blue above one half, red below."""
    if value is None:
        return "#f2f4f7"
    strength = min(1.0, abs(value - 0.5) * 2)
    if value >= 0.5:
        return f"rgba(33, 85, 204, {0.12 + 0.7 * strength:.2f})"
    return f"rgba(180, 35, 24, {0.12 + 0.7 * strength:.2f})"


@require_GET
@login_required
def leaderboard(request: AuthenticatedHttpRequest, campaign_id: int) -> HttpResponse:
    campaign = campaign_viewable_by(user=request.user, campaign_id=campaign_id)
    if campaign is None:
        raise Http404("No such campaign.")
    category = request.GET.get("category", "")
    view = request.GET.get("view", LeaderboardSnapshot.View.RAW)
    if view not in LeaderboardSnapshot.View.values:
        view = LeaderboardSnapshot.View.RAW
    snapshot = selectors.snapshot_latest(campaign=campaign, category=category, view=view)
    other = selectors.snapshot_latest(
        campaign=campaign, category=category,
        view=LeaderboardSnapshot.View.STYLE if view == LeaderboardSnapshot.View.RAW else LeaderboardSnapshot.View.RAW,
    )
    context: dict[str, Any] = {
        "campaign": campaign, "snapshot": snapshot, "category": category, "view": view,
        "categories": selectors.snapshot_categories(campaign=campaign), "views": LeaderboardSnapshot.View.choices,
    }
    if snapshot is not None:
        rows = snapshot.rows
        lo, hi = _interval_geometry(rows)
        width = hi - lo
        other_ranks = {r["competitor_id"]: (r["rank_best"], r["rank_worst"]) for r in (other.rows if other else [])
                       if not r["hidden"]}
        shown, hidden = [], []
        for row in rows:
            if row["hidden"]:
                hidden.append(row)
                continue
            row = dict(row)
            row["bar_left"] = 100 * (row["lower"] - lo) / width
            row["bar_width"] = max(0.5, 100 * (row["upper"] - row["lower"]) / width)
            row["dot"] = 100 * (row["score"] - lo) / width
            theirs = other_ranks.get(row["competitor_id"])
            row["other_rank"] = theirs if theirs and theirs != (row["rank_best"], row["rank_worst"]) else None
            shown.append(row)
        pairwise = snapshot.pairwise or {}
        names = {r["competitor_id"]: r["label"] for r in rows}
        matrix = []
        for i, cid in enumerate(pairwise.get("competitor_ids", [])):
            cells = []
            for j, _ in enumerate(pairwise["competitor_ids"]):
                rate = pairwise["win_rate"][i][j]
                cells.append({
                    "rate": rate, "n": pairwise["n"][i][j], "colour": _heat(rate),
                    "lower": pairwise["lower"][i][j], "upper": pairwise["upper"][i][j],
                })
            matrix.append({"label": names.get(cid, str(cid)), "cells": cells})
        context.update({
            "shown": shown, "hidden": hidden, "axis": (round(lo), round(hi)),
            "matrix": matrix, "matrix_labels": [names.get(c, str(c)) for c in pairwise.get("competitor_ids", [])],
            "rank_changes": [r for r in shown if r["other_rank"]],
            "other_view_label": dict(LeaderboardSnapshot.View.choices)[other.view] if other else "",
        })
    return render(request, "ranking/leaderboard.html", context)
