"""Board quality through the recompute, the API and the board page: separability and the cyclic share on the
raw boards, the comparison endpoint (category against overall, a judge board against the human board, a
version against an older one) and the page's section."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from django.test import Client
from django.urls import reverse

from battles.models import Campaign, JudgeRun, Prompt
from ranking import services
from ranking.estimators import board_quality as bq
from ranking.models import AttributeRun, JudgeBoard, LeaderboardSnapshot
from ranking.services import leaderboards_recompute
from tests.conftest import Tenant, login
from tests.factories import CompetitorFactory, ModelEndpointFactory, UserFactory

from ..battles.judge_world import judge_make
from .attribute_world import board_with, ratio_judge
from .ratio_sim import fake_generate
from .synth import votes_write

pytestmark = pytest.mark.django_db


def world(acme: Tenant, bob: Any) -> Campaign:
    campaign = acme.campaign
    competitors = [acme.left, acme.right]
    for k in range(2):
        endpoint = ModelEndpointFactory(organization=acme.organization, name=f"q-{k}")
        competitors.append(CompetitorFactory.create(campaign=campaign, endpoint=endpoint, version_label="1"))
    votes_write(
        campaign=campaign,
        pool=acme.pool,
        raters=[bob, UserFactory.create(), UserFactory.create()],
        prompts=list(Prompt.objects.filter(campaign=campaign)),
        competitors=competitors,
        strengths=(8.0, 2.0, 1.0, 0.25),
        n=400,
        seed=4,
        categories=("coding", "writing"),
    )
    Campaign.objects.filter(pk=campaign.pk).update(ranking_min_votes=20, ranking_bootstrap_rounds=10, min_decision_ms=0)
    campaign.refresh_from_db()
    return campaign


def test_the_recompute_stores_quality_and_the_api_compares_boards(acme: Tenant, alice: Any, bob: Any) -> None:
    campaign = world(acme, bob)
    leaderboards_recompute(campaign_id=campaign.pk)
    raw = LeaderboardSnapshot.objects.get(campaign=campaign, category="", view="raw")
    sep, cyc = raw.extra["quality"]["separability"], raw.extra["cyclic"]
    # Separability agrees with a recount from the stored rows.
    placed = [r for r in raw.rows if not r["hidden"]]
    assert not any(r["lower_open"] or r["upper_open"] for r in placed)
    apart = sum(
        1
        for i, r in enumerate(placed)
        for s in placed[i + 1 :]
        if r["component"] == s["component"] and (r["lower"] > s["upper"] or s["lower"] > r["upper"])
    )
    assert sep["pairs"] == 6 and sep["separated"] == apart and sep["share"] == round(apart / 6, 4)
    assert sep["separated"] >= 3  # strengths 8, 2, 1, 1/4: the far pairs are resolved
    # Bradley-Terry votes: transitive, the cyclic share small and not beyond noise.
    assert cyc["pairs"] == 6 and cyc["share"] < 0.2 and cyc["p_value"] > 0.001
    for snapshot in LeaderboardSnapshot.objects.filter(campaign=campaign):
        assert ("quality" in snapshot.extra) == (snapshot.view == "raw"), snapshot

    client = login(alice)
    body = client.get(reverse("leaderboard", args=[campaign.pk])).json()
    assert body["extra"]["quality"]["separability"]["share"] == sep["share"]
    assert body["extra"]["cyclic"]["share"] == cyc["share"]

    url = reverse("api-leaderboards-compare", args=[campaign.pk])
    out = client.get(url, {"b_category": "coding"}).json()
    assert out["reference"]["category"] == "" and out["candidate"]["category"] == "coding"
    expected = bq.board_comparison(
        bq.board_scores(raw.rows),
        bq.board_scores(LeaderboardSnapshot.objects.get(campaign=campaign, category="coding", view="raw").rows),
        names=(out["reference"]["name"], out["candidate"]["name"]),
    )
    assert out["comparison"]["agreement"] == expected["agreement"]
    assert out["comparison"]["verdict"] == expected["verdict"]

    # A judge board that reverses the human order cannot stand in; an identical one is not contradicted.
    judge = judge_make(acme, url="http://127.0.0.1:1", name="<b>strict</b>")
    reversed_rows = [
        {**r, "score": 2000 - r["score"], "lower": 2000 - r["upper"], "upper": 2000 - r["lower"]} for r in placed
    ]
    JudgeBoard.objects.create(
        organization=acme.organization,
        campaign=campaign,
        judge=judge,
        rubric=judge.rubric,
        kind=JudgeRun.Kind.BATTLES,
        version=1,
        method={"confidence": 0.95},
        rows=reversed_rows,
    )
    out = client.get(url, {"b_judge": judge.pk}).json()
    assert out["candidate"]["kind"] == "judge" and out["comparison"]["contradicted"] == apart
    assert out["comparison"]["stands_in"] is False

    # "This week against last": the newest version against the newest one created before a date (here: the
    # moment version 2 was stored; a real client passes a week ago).
    leaderboards_recompute(campaign_id=campaign.pk)  # no new votes: the same numbers in version 2
    newest = LeaderboardSnapshot.objects.get(campaign=campaign, category="", view="raw", version=2)
    out = client.get(url, {"b_before": newest.created_at.isoformat()}).json()
    assert (out["reference"]["version"], out["candidate"]["version"]) == (2, 1)
    assert out["comparison"]["contradicted"] == 0 and out["comparison"]["kendall_tau"]["value"] == 1.0
    assert client.get(url, {"b_before": raw.created_at.isoformat()}).status_code == 404

    # The page: its section, the judge comparison (the judge's name escaped) and the verdict.
    page = client.get(reverse("ranking:leaderboard", args=[campaign.pk]) + "?category=coding").content.decode()
    assert "Board quality" in page and "Separability" in page and "Cyclic share" in page
    assert "&lt;b&gt;strict&lt;/b&gt;" in page and "<b>strict</b>" not in page
    assert "cannot stand in" in page


def test_an_outsider_and_another_organisations_judge_get_404(
    acme: Tenant, globex: Tenant, alice: Any, charlie: Any
) -> None:
    rows = [
        {
            "competitor_id": acme.left.pk,
            "hidden": False,
            "component": 0,
            "score": 1000.0,
            "lower": 990.0,
            "upper": 1010.0,
        }
    ]
    LeaderboardSnapshot.objects.create(
        organization=acme.organization,
        campaign=acme.campaign,
        category="",
        view="raw",
        version=1,
        method={},
        policy={},
        excluded={},
        rows=rows,
    )
    url = reverse("api-leaderboards-compare", args=[acme.campaign.pk])
    assert login(alice).get(url).status_code == 200
    assert login(charlie).get(url).status_code == 404
    assert Client().get(url).status_code in (401, 403)
    foreign = judge_make(globex, url="http://127.0.0.1:1")
    JudgeBoard.objects.create(
        organization=globex.organization,
        campaign=globex.campaign,
        judge=foreign,
        rubric=foreign.rubric,
        version=1,
        method={},
        rows=rows,
    )
    assert login(alice).get(url, {"b_judge": foreign.pk}).status_code == 404


def test_a_finished_ratio_run_reports_its_top_k_error_in_the_api_and_on_the_public_page(
    acme: Tenant, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("serving.ratio_judging.generate", fake_generate([]))
    # Entities far apart (the simulated judge's noise 0.2): the top 2 is all but certain.
    board = board_with(acme.organization, ratio_judge(acme.organization), np.arange(8.0), top_k=2, noise=0.2)
    run = services.attribute_run_execute(run_id=services.attribute_run_start(board=board, actor=None).pk)
    assert run.status == AttributeRun.Status.DONE, run.failure_reason
    error = run.solve["top_k_error"]
    assert error["k"] == 2 and error["draws"] == bq.TOP_K_DRAWS and error["probability"] < 0.01
    assert [round(p) for p in error["in_top_k"]] == [0, 0, 0, 0, 0, 0, 1, 1]
    slug, _ = services.attribute_board_publish(board=board, actor=None)
    public = Client().get(reverse("api-public-attribute-board", args=[slug])).json()
    assert public["run"]["top_k_error"] == error
    page = Client().get(reverse("ranking:attribute-board-public", args=[slug])).content.decode()
    assert 'id="top-k-error"' in page and "P(top 2)" in page
