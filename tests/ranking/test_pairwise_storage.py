"""The pairwise section stored compactly (issue 23.2): every pair's grids as arrays beside the section's JSON.
A known board gives the same values as the JSON lists of lists it was stored as before (computed here cell by
cell, as the section was); a snapshot stored the old way reads the same through the download, the API, the
pairwise route and the page; the page's heatmap shows the top of a board larger than it can hold."""

from __future__ import annotations

import json
import re
from typing import Any

import numpy as np
import pytest

from ranking import estimators as est
from ranking import views
from ranking.board_pairwise import DECISIONS, PairwiseGrids, pairwise_expand
from ranking.compute import Method, board_compute
from ranking.models import LeaderboardSnapshot
from ranking.services import leaderboards_recompute

from .test_multiplicity import votes_for
from .test_recompute import board  # noqa: F401  (the fixture)


def _section_cell_by_cell(cells: est.Cells, method: Method, shown: np.ndarray) -> dict[str, Any]:
    """The grids as the section computed them before the compact form: a Python value per cell."""
    table = est.pairwise_table(cells, both_bad=method.both_bad, confidence=method.confidence)
    idx = np.flatnonzero(shown)
    sub_n = table.battles[np.ix_(idx, idx)]
    sub_p = table.p_value[np.ix_(idx, idx)]
    upper_tri = np.triu(np.ones_like(sub_p, dtype=bool), 1) & np.isfinite(sub_p)
    adjusted = np.full_like(sub_p, np.nan)
    adjusted[upper_tri] = est.holm_adjust(sub_p[upper_tri])
    adjusted = np.where(np.isfinite(adjusted), adjusted, adjusted.T)
    k = len(idx)

    def grid(values: np.ndarray, full: bool = True) -> list[list[float | None]]:
        sub = values[np.ix_(idx, idx)] if full else values
        return [
            [
                None if sub_n[i, j] == 0 or i == j or not np.isfinite(sub[i, j]) else round(float(sub[i, j]), 4)
                for j in range(k)
            ]
            for i in range(k)
        ]

    ties = table.ties + (table.both_bad if method.both_bad == "tie" else 0.0)
    score, counted = table.wins + 0.5 * ties, table.wins + table.wins.T + ties
    level = est.bonferroni_confidence(method.confidence, k * (k - 1) // 2)
    s_n = counted[np.ix_(idx, idx)]
    lower, upper = est.confidence_sequence(score[np.ix_(idx, idx)], s_n, confidence=level)

    def cell(i: int, j: int) -> dict[str, Any] | None:
        if i == j or s_n[i, j] == 0:
            return None
        lo, hi = float(lower[i, j]), float(upper[i, j])
        decision = "row beats column" if lo > 0.5 else "column beats row" if hi < 0.5 else "not yet"
        return {"lower": round(lo, 4), "upper": round(hi, 4), "decision": decision}

    return {
        "win_rate": grid(table.win_rate),
        "lower": grid(table.wilson_lower),
        "upper": grid(table.wilson_upper),
        "p_value": grid(table.p_value),
        "p_holm": grid(adjusted, full=False),
        "n": [[int(table.battles[i, j]) for j in idx] for i in idx],
        "cells": [[cell(i, j) for j in range(k)] for i in range(k)],
    }


@pytest.mark.parametrize("both_bad", ["tie", "drop"])
def test_the_compact_grids_hold_the_values_of_the_json_lists(both_bad: str) -> None:
    """14 competitors, two of them hidden (few votes) and one pair that never met, ties and both-bad votes:
    every grid, expanded from the stored bytes, equals the cell-by-cell computation exactly, and a section
    stored the old way reads back into the same grids."""
    rng = np.random.default_rng(5)
    m = 4000
    a = rng.integers(0, 12, m)
    b = (a + 1 + rng.integers(0, 11, m)) % 12
    never = ((a == 0) & (b == 1)) | ((a == 1) & (b == 0))
    a, b = a[~never], b[~never]
    # Strengths far apart at the ends, so some pairs are decided each way and some are not yet.
    theta = np.linspace(-2.0, 2.0, 12)
    left_wins = rng.random(a.shape[0]) < 1.0 / (1.0 + np.exp(theta[b] - theta[a]))
    outcome = np.where(rng.random(a.shape[0]) < 0.2, rng.choice([2, 3], a.shape[0]), np.where(left_wins, 0, 1))
    # Two rare competitors (ids 13, 14) with 5 votes each: hidden at min_votes 30.
    a = np.concatenate([a, [12] * 5, [13] * 5])
    b = np.concatenate([b, [3] * 5, [4] * 5])
    outcome = np.concatenate([outcome, [0, 1, 2, 3, 0, 1, 1, 0, 2, 0]])
    method = Method(both_bad=both_bad, min_votes=30)  # type: ignore[arg-type]
    result = board_compute(votes_for(a, b, outcome, np.arange(a.shape[0])), np.arange(1, 15), {}, method)
    cells = est.aggregate_cells(a, b, outcome, n_competitors=14)
    shown = np.arange(14) < 12
    expected = _section_cell_by_cell(cells, method, shown)

    full = result.pairwise_full()
    assert full["competitor_ids"] == list(range(1, 13))
    for name in ("win_rate", "lower", "upper", "p_value", "p_holm", "n"):
        assert full[name] == expected[name], name
    assert full["sequential"]["cells"] == expected["cells"]
    assert full["win_rate"][0][1] is None and full["n"][0][1] == 0  # the pair that never met
    assert {c["decision"] for row in expected["cells"] for c in row if c} == set(DECISIONS[1:])
    # A JSON of the old shape (a snapshot stored before) reads into the same grids, and encodes to the same bytes.
    old = PairwiseGrids.from_json(full)
    assert old is not None and old.encode() == result.pairwise_arrays
    assert pairwise_expand(full, b"") is full
    assert len(result.pairwise_arrays) < len(json.dumps(full)) / 3


@pytest.mark.django_db
def test_a_snapshot_stored_the_old_way_reads_the_same(board, alice_client, monkeypatch):  # noqa: F811
    """Version 2 is version 1 with its grids as JSON lists (as snapshots were stored before): the download,
    the API's include=pairwise, the pairwise route's Holm p-values and the page's heatmap give the same. And
    a heatmap capped at two competitors shows the two highest-scored, saying so."""
    campaign, competitors, _ = board
    leaderboards_recompute(campaign_id=campaign.pk)
    new = LeaderboardSnapshot.objects.get(campaign=campaign, category="", view="raw")
    assert len(new.pairwise_arrays) > 0 and "win_rate" not in new.pairwise
    pairwise_of_new = alice_client.get(f"/api/v1/campaigns/{campaign.pk}/pairwise/").json()
    old = LeaderboardSnapshot.objects.get(pk=new.pk)
    old.pk, old.version = None, 2
    old.pairwise, old.pairwise_arrays = pairwise_expand(new.pairwise, bytes(new.pairwise_arrays)), b""
    old.save()

    def heatmap(version: int) -> str:
        html = alice_client.get(f"/leaderboard/{campaign.pk}/v/{version}/?view=raw").content.decode()
        return html[html.index('<table class="heatmap"') : html.index("</table>", html.index('<table class="heatmap"'))]

    def download(version: int) -> dict[str, Any]:
        return json.loads(alice_client.get(f"/leaderboard/{campaign.pk}/v/{version}/snapshot.json").content)

    assert heatmap(1) == heatmap(2) and heatmap(1).count("anytime-valid:") == 3 * 12  # title, aria-label, data-tip
    assert download(1)["pairwise"] == download(2)["pairwise"] == old.pairwise
    assert download(1)["pairwise"]["sequential"]["cells"][0][1]["decision"] in DECISIONS[1:]
    api = alice_client.get(f"/api/v1/campaigns/{campaign.pk}/leaderboard/?include=pairwise").json()
    assert api["version"] == 2 and api["pairwise"] == old.pairwise
    assert alice_client.get(f"/api/v1/campaigns/{campaign.pk}/pairwise/").json()["pairs"] == pairwise_of_new["pairs"]
    assert any(p["p_holm"] is not None for p in pairwise_of_new["pairs"])

    monkeypatch.setattr(views, "HEATMAP_COMPETITORS", 2)
    html = alice_client.get(f"/leaderboard/{campaign.pk}/").content.decode()
    assert "The 2 highest-scored of the 4 competitors shown" in html
    capped = html[html.index('<table class="heatmap"') :]
    labels = re.findall(r'<th scope="row">([^<]+)</th>', capped)
    top = [r["label"] for r in api["rows"] if not r["hidden"]][:2]
    assert sorted(labels) == sorted(top) and capped.count("anytime-valid:") == 3 * 2
