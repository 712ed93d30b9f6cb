"""Leaderboard page and read API: permalinks per version, CSV / JSON downloads, open interval sides,
difference intervals and the stated multiple-testing correction."""

from __future__ import annotations

import csv
import io
import json

import pytest

from battles.models import Prompt
from ranking.services import leaderboards_recompute

from .synth import votes_write
from .test_recompute import board  # noqa: F401  (the fixture)

pytestmark = pytest.mark.django_db


def test_permalink_shows_that_version(board, alice_client):  # noqa: F811
    campaign, _, _ = board
    leaderboards_recompute(campaign_id=campaign.pk)
    leaderboards_recompute(campaign_id=campaign.pk)
    latest = alice_client.get(f"/leaderboard/{campaign.pk}/").content.decode()
    assert f'href="/leaderboard/{campaign.pk}/v/2/?view=raw" rel="bookmark"' in latest
    old = alice_client.get(f"/leaderboard/{campaign.pk}/v/1/?view=raw").content.decode()
    assert "Snapshot v1 " in old and "see the newest" in old
    assert alice_client.get(f"/leaderboard/{campaign.pk}/v/9/").status_code == 404


def test_downloads_csv_and_json(board, alice_client, charlie_client):  # noqa: F811
    campaign, competitors, _ = board
    leaderboards_recompute(campaign_id=campaign.pk)
    response = alice_client.get(f"/leaderboard/{campaign.pk}/v/1/snapshot.json?category=coding&view=raw")
    assert response.status_code == 200 and response["Content-Type"] == "application/json"
    assert 'filename="leaderboard-' in response["Content-Disposition"]
    payload = json.loads(response.content)
    assert payload["version"] == 1 and payload["category"] == "coding" and payload["rows"]
    rows = list(
        csv.DictReader(io.StringIO(alice_client.get(f"/leaderboard/{campaign.pk}/v/1/snapshot.csv").content.decode()))
    )
    assert rows[0]["competitor_id"] == str(competitors[0].pk) and rows[0]["rank_best"] == "1"
    assert {"lower_open", "upper_open", "interval_method"} <= set(rows[0])
    assert alice_client.get(f"/leaderboard/{campaign.pk}/v/1/snapshot.xml").status_code == 404
    assert charlie_client.get(f"/leaderboard/{campaign.pk}/v/1/snapshot.csv").status_code == 404


def test_open_sides_on_the_page_and_in_the_api(acme, bob, alice_client):
    """A 30-0 record: the winner is shown as "≥ x", the loser as "≤ y"; the API has null bounds with
    explicit open flags and a difference interval open above."""
    prompts = list(Prompt.objects.filter(campaign=acme.campaign))
    votes_write(
        campaign=acme.campaign,
        pool=acme.pool,
        raters=[bob],
        prompts=prompts,
        competitors=[acme.left, acme.right],
        strengths=(1e9, 1e-9),
        n=30,
        seed=8,
        tie_rate=0.0,
    )
    acme.campaign.ranking_min_votes = 10
    acme.campaign.save()
    leaderboards_recompute(campaign_id=acme.campaign.pk)
    html = alice_client.get(f"/leaderboard/{acme.campaign.pk}/").content.decode()
    assert "≥ " in html and "≤ " in html and "the votes bound this score on one side only" in html
    api = alice_client.get(f"/api/v1/campaigns/{acme.campaign.pk}/leaderboard/?include=pairwise").json()
    winner, loser = api["rows"]
    assert winner["upper"] is None and winner["upper_open"] is True and winner["lower"] is not None
    assert loser["lower"] is None and loser["lower_open"] is True
    diff = api["pairwise"]["difference"]
    assert diff["upper_open"][0][1] and diff["lower_open"][1][0] and diff["lower"][0][1] > 0
    assert api["pairwise"]["correction"].startswith("Holm")
    assert api["pairwise"]["sequential"]["cells"][0][1]["decision"] == "row beats column"
    assert "score difference ≥" in html


def test_heatmap_cells_are_focusable_with_their_details(board, alice_client):  # noqa: F811
    campaign, _, _ = board
    leaderboards_recompute(campaign_id=campaign.pk)
    html = alice_client.get(f"/leaderboard/{campaign.pk}/").content.decode()
    assert 'class="legend"' in html and "no battles" in html
    assert html.count('tabindex="0"') >= 12 + 4  # 4 x 3 heatmap cells and 4 interval cells
    assert "Holm p=" in html and "anytime-valid:" in html and "score difference" in html


def test_snapshot_csv_neutralises_formulas_in_label_and_family(board, alice_client):  # noqa: F811
    """A model name and a family typed as spreadsheet formulas reach snapshot.csv as text (an apostrophe
    first), as in every other CSV; the JSON download keeps the exact names."""
    from serving.models import ModelEndpoint

    campaign, competitors, _ = board
    formula = '=HYPERLINK("http://evil.test","x")'
    ModelEndpoint.objects.filter(pk=competitors[0].endpoint_id).update(name=formula)
    type(competitors[0]).objects.filter(pk=competitors[0].pk).update(family="+cmd|' /C calc'!A0")
    leaderboards_recompute(campaign_id=campaign.pk)
    body = alice_client.get(f"/leaderboard/{campaign.pk}/v/1/snapshot.csv").content.decode()
    row = next(r for r in csv.DictReader(io.StringIO(body)) if r["competitor_id"] == str(competitors[0].pk))
    assert row["label"].startswith("'" + formula), row["label"]
    assert row["family"] == "'+cmd|' /c calc'!a0", row["family"]  # the family as the board counts it (lower case)
    assert not any(cell.startswith(("=", "+", "@")) for r in csv.reader(io.StringIO(body)) for cell in r)
    payload = json.loads(alice_client.get(f"/leaderboard/{campaign.pk}/v/1/snapshot.json").content)
    assert any(r["label"].startswith(formula) for r in payload["rows"])
