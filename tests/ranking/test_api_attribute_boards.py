"""The attribute-board API: create a board with entities and start runs (write keys), read boards, runs,
scores and the full judgement ledger (cursor pages), compare runs, publish; outsiders get 404."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from ranking import services
from ranking.models import AttributeBoard, AttributeRun
from tests.conftest import Tenant, api_client

from .attribute_world import ratio_judge, truths
from .ratio_sim import attribute_with, entity_text, fake_generate

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def sim(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("serving.ratio_judging.generate", fake_generate())


def _create(client: Client, judge_id: int, n: int = 12, **extra: Any) -> Any:
    body = {
        "name": "Formality",
        "attribute": attribute_with("how formal", noise=0.3),
        "judge_id": judge_id,
        "top_k": 3,
        "entities": [{"text": entity_text(float(s), f"Text {k}"), "label": f"t{k}"} for k, s in enumerate(truths(n))],
        **extra,
    }
    return client.post(reverse("api-attribute-boards"), body, content_type="application/json")


def _execute_queued() -> None:
    # What the worker does (tests never commit, so the on-commit task is not sent).
    for run_id in AttributeRun.objects.filter(status="queued").values_list("pk", flat=True):
        services.attribute_run_execute(run_id=run_id)


def test_create_run_and_read_everything(acme: Tenant) -> None:
    judge = ratio_judge(acme.organization)
    writer = api_client(acme.organization, scope="write")
    created = _create(writer, judge.pk)
    assert created.status_code == 201, created.content
    board = created.json()
    assert board["entities"] == 12 and board["calls_per_entity"] == 8 and board["judge"]["id"] == judge.pk
    assert board["judge"]["rubric_hash"] == judge.rubric.content_hash and board["published"] is False
    started = writer.post(reverse("api-attribute-board-runs", args=[board["id"]]), {}, content_type="application/json")
    assert started.status_code == 202 and started.json()["status"] == "queued"
    _execute_queued()
    reader = api_client(acme.organization, scope="read", name="reader")
    run = reader.get(reverse("api-attribute-run", args=[started.json()["id"]])).json()
    assert run["status"] == "done" and run["calls"] == run["accepted"] > 0 and run["budget_calls"] == 96
    assert run["template_hash"] and run["solve"]["hash"] and run["stop_reason"] in ("budget", "separated")
    # Scores: best first, cursor-paged.
    page = reader.get(reverse("api-attribute-run-scores", args=[run["id"]]), {"limit": 5}).json()
    assert [r["rank"] for r in page["results"]] == [1, 2, 3, 4, 5] and page["next"]
    rest = reader.get(page["next"]).json()
    assert rest["results"][0]["rank"] == 6
    assert page["results"][0]["in_top_k"] and page["results"][0]["z_score"] > 0
    # Every score row carries the run's provenance: judge, template, seed, counts, tokens and cost.
    for row in page["results"] + rest["results"]:
        provenance = row["provenance"]
        assert provenance["run_id"] == run["id"] and provenance["judge"]["id"] == judge.pk
        assert provenance["judge"]["rubric_hash"] == judge.rubric.content_hash
        assert (provenance["template_hash"], provenance["seed"]) == (run["template_hash"], run["seed"])
        assert (provenance["calls"], provenance["accepted"], provenance["output_tokens"]) == (
            run["calls"],
            run["accepted"],
            run["output_tokens"],
        )
        assert provenance["call_seconds"] == run["call_seconds"] and provenance["solve_hash"] == run["solve"]["hash"]
    # The full ledger, in the order of the calls, both orders of each pair.
    ledger: list[dict[str, Any]] = []
    url: str | None = reverse("api-attribute-run-judgements", args=[run["id"]]) + "?limit=500"
    while url:
        body = reader.get(url).json()
        ledger += body["results"]
        url = body["next"]
    assert len(ledger) == run["calls"] and [j["id"] for j in ledger] == sorted(j["id"] for j in ledger)
    assert {j["order"] for j in ledger} == {1, 2} and all(j["raw_reply"] for j in ledger)
    entities = reader.get(reverse("api-attribute-board-entities", args=[board["id"]]), {"limit": 500}).json()
    assert [e["position"] for e in entities["results"]] == list(range(12))
    # A replication with another seed, compared.
    again = writer.post(
        reverse("api-attribute-board-runs", args=[board["id"]]), {"seed": 5}, content_type="application/json"
    )
    assert again.json()["seed"] == 5
    _execute_queued()
    compare = reader.get(reverse("api-attribute-run-compare", args=[run["id"], again.json()["id"]])).json()
    assert compare["kind"] == "seeds" and compare["entities"] == 12 and compare["spearman"] > 0.8
    listed = reader.get(reverse("api-attribute-board-runs", args=[board["id"]])).json()["results"]
    assert [r["id"] for r in listed] == [again.json()["id"], run["id"]]


def test_writes_need_a_write_key_and_a_ratio_judge_of_yours(acme: Tenant, globex: Tenant) -> None:
    judge = ratio_judge(acme.organization)
    reader = api_client(acme.organization, scope="read")
    assert _create(reader, judge.pk).status_code == 403
    foreign = ratio_judge(globex.organization)
    writer = api_client(acme.organization, scope="write")
    refused = _create(writer, foreign.pk)
    assert refused.status_code == 400 and "judge_id" in refused.json()["error"]["fields"]
    bad = _create(writer, judge.pk, calls_per_entity="8")  # a string is not an integer
    assert bad.status_code == 400
    assert not AttributeBoard.objects.exists()
    assert writer.get(reverse("api-attribute-boards"), {"limit": 0}).status_code == 400


def test_an_outsider_gets_404_for_every_board_route(acme: Tenant, globex: Tenant) -> None:
    judge = ratio_judge(acme.organization)
    writer = api_client(acme.organization, scope="write")
    board = _create(writer, judge.pk).json()
    run = writer.post(reverse("api-attribute-board-runs", args=[board["id"]]), {}, content_type="application/json")
    _execute_queued()
    outsider = api_client(globex.organization, scope="write", name="globex")
    run_id = run.json()["id"]
    for url in (
        reverse("api-attribute-board", args=[board["id"]]),
        reverse("api-attribute-board-entities", args=[board["id"]]),
        reverse("api-attribute-board-runs", args=[board["id"]]),
        reverse("api-attribute-board-publication", args=[board["id"]]),
        reverse("api-attribute-run", args=[run_id]),
        reverse("api-attribute-run-scores", args=[run_id]),
        reverse("api-attribute-run-judgements", args=[run_id]),
        reverse("api-attribute-run-compare", args=[run_id, run_id]),
    ):
        assert outsider.get(url).status_code == 404, url
        response = outsider.post(url, {}, content_type="application/json")
        assert response.status_code in (404, 405), url
        assert b"Formality" not in response.content
    assert outsider.get(reverse("api-attribute-boards")).json()["results"] == []
    assert AttributeRun.objects.count() == 1


def test_publish_read_publicly_and_unpublish(acme: Tenant) -> None:
    judge = ratio_judge(acme.organization)
    writer = api_client(acme.organization, scope="write")
    board = _create(
        writer,
        judge.pk,
        n=6,
        entities=[{"text": entity_text(float(k), f"<script>alert({k})</script>")} for k in range(6)],
    ).json()
    writer.post(reverse("api-attribute-board-runs", args=[board["id"]]), {}, content_type="application/json")
    _execute_queued()
    url = reverse("api-attribute-board-publication", args=[board["id"]])
    assert writer.get(url).json()["published"] is False
    published = writer.post(url, content_type="application/json")
    assert published.status_code == 201
    again = writer.post(url, content_type="application/json")
    assert again.status_code == 200 and again.json()["slug"] == published.json()["slug"]
    slug = published.json()["slug"]
    anonymous = Client()
    public = anonymous.get(reverse("api-public-attribute-board", args=[slug])).json()
    assert public["name"] == "Formality" and public["run"]["status"] == "done" and len(public["scores"]) == 6
    assert public["scores"][0]["position"] == 5  # the strongest planted truth
    assert all(row["provenance"]["run_id"] == public["run"]["id"] for row in public["scores"])
    ledger = anonymous.get(reverse("api-public-attribute-board-judgements", args=[slug])).json()
    assert ledger["results"] and all(j["run_id"] == public["run"]["id"] for j in ledger["results"])
    page = anonymous.get(published.json()["url"])
    assert page.status_code == 200 and b"<script>alert(" not in page.content and b"&lt;script&gt;" in page.content
    assert writer.delete(url).status_code == 204
    assert writer.delete(url).status_code == 404
    assert anonymous.get(reverse("api-public-attribute-board", args=[slug])).status_code == 404
    assert anonymous.get(reverse("ranking:attribute-board-public", args=[slug])).status_code == 404
