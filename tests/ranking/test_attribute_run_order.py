"""Ratio runs pay for both presentation orders; what the two orders say about the judge is recorded and
shown (issue 20.8): the order-disagreement count and the signed order residual, in the run's solve record,
the API and the published page. Known truth: the simulated judge adds a fixed bias toward the item shown
first (``[[sim bias=...]]``)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from django.test import Client
from django.urls import reverse

from ranking import services
from ranking.models import AttributeJudgement, AttributeRun
from tests.conftest import Tenant, api_client

from .attribute_world import ratio_judge
from .ratio_sim import attribute_with, entity_text, fake_generate

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def sim(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("serving.ratio_judging.generate", fake_generate())


def _board_and_run(client: Client, judge_id: int, strengths: np.ndarray, **sim: float) -> tuple[Any, Any]:
    body = {
        "name": "Formality",
        "attribute": attribute_with("how formal", **sim),
        "judge_id": judge_id,
        "top_k": 3,
        "entities": [{"text": entity_text(float(s), f"Text {k}"), "label": f"t{k}"} for k, s in enumerate(strengths)],
    }
    board = client.post(reverse("api-attribute-boards"), body, content_type="application/json").json()
    client.post(reverse("api-attribute-board-runs", args=[board["id"]]), {}, content_type="application/json")
    for run_id in AttributeRun.objects.filter(status="queued").values_list("pk", flat=True):
        services.attribute_run_execute(run_id=run_id)
    run = AttributeRun.objects.get(board_id=board["id"])
    return board, client.get(reverse("api-attribute-run", args=[run.pk])).json()


def test_a_judge_biased_toward_the_first_item_shows_it_in_both_figures(acme: Tenant) -> None:
    """No noise and a bias of 0.4 toward the item shown first: the two orders disagree exactly on the pairs
    whose true log-ratio is under 0.4 in size, and the signed residual is the bias (to the judge's rounding
    of ratios to 3 decimals)."""
    strengths = np.linspace(0.0, 3.0, 12)
    writer = api_client(acme.organization, scope="write")
    board, run = _board_and_run(writer, ratio_judge(acme.organization).pk, strengths, noise=0, bias=0.4)
    assert run["status"] == "done", run["failure_reason"]
    truth = {e.pk: strengths[e.position] for e in AttributeRun.objects.get(pk=run["id"]).board.entities.all()}
    pairs = {
        frozenset((j.first_id, j.second_id)) for j in AttributeJudgement.objects.filter(run_id=run["id"], used=True)
    }
    expected = sum(1 for p in pairs if abs(truth[min(p)] - truth[max(p)]) < 0.4)
    assert run["order_pairs"] == len(pairs) == run["accepted"] // 2
    assert run["order_disagreements"] == expected > 0
    assert run["order_residual"] == pytest.approx(0.4, abs=2e-3)
    order = run["solve"]["order"]
    assert order["disagreement_rate"] == pytest.approx(expected / len(pairs), abs=1e-4)
    assert order["first_shown_factor"] == pytest.approx(math.exp(0.4), abs=3e-3)
    # The published page shows both.
    published = writer.post(reverse("api-attribute-board-publication", args=[board["id"]])).json()
    page = " ".join(Client().get(published["url"]).content.decode().split())
    assert f"in {expected} of {len(pairs)} pairs the two orders favoured the same position" in page
    assert "Signed order residual 0.40" in page and "favoured by a factor of 1.49" in page


def test_an_order_free_judge_has_a_residual_near_zero(acme: Tenant) -> None:
    writer = api_client(acme.organization, scope="write")
    strengths = np.random.default_rng(1).normal(0.0, 1.0, 12)
    _, run = _board_and_run(writer, ratio_judge(acme.organization).pk, strengths, noise=0.3)
    order = run["solve"]["order"]
    assert order["pairs"] > 20 and abs(order["signed_residual"]) < 3 * order["signed_residual_se"]
    assert run["order_disagreements"] == order["disagreements"] < order["pairs"] / 4
