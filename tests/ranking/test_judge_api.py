"""The judges' API: judges, runs with their stats, a judge's board and calibration; outsiders get 404."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from battles import tasks as battle_tasks
from battles.models import JudgeRun, JudgeVerdict
from battles.services import judge_run_create, judge_run_execute
from ranking import services
from raters.models import Role

from ..battles.judge_world import battle_plant, judge_make
from ..conftest import MODEL_SERVER_URL, Tenant, api_client, login
from ..factories import MembershipFactory, UserFactory


@pytest.fixture
def judged(acme: Tenant, bob: Any) -> tuple[Any, JudgeRun]:
    for i in range(3):
        battle_plant(acme, left=acme.left, right=acme.right, better="left", index=i, vote="left", rater=bob)
    judge = judge_make(acme, url=MODEL_SERVER_URL)  # nothing answers there: every pair refused
    run = judge_run_create(judge=judge, campaign=acme.campaign, actor=None, start=False)
    judge_run_execute(run_id=run.pk)
    services.judge_run_settle(run_id=run.pk)
    run.refresh_from_db()
    return judge, run


def test_the_owner_reads_judges_runs_boards_and_calibration(acme: Tenant, judged: Any, alice_client: Client) -> None:
    judge, run = judged
    base = f"/api/v1/campaigns/{acme.campaign.pk}"
    listed = alice_client.get("/api/v1/judges/").json()["results"]
    assert [j["id"] for j in listed] == [judge.pk]
    one = alice_client.get(f"/api/v1/judges/{judge.pk}/").json()
    assert one["rubric"]["version"] == 1 and one["rubric"]["content_hash"] == judge.rubric.content_hash
    assert one["temperature"] == 0.0
    runs = alice_client.get(f"{base}/judge-runs/").json()["results"]
    assert [r["id"] for r in runs] == [run.pk] and runs[0]["status"] == "failed"
    detail = alice_client.get(f"{base}/judge-runs/{run.pk}/").json()
    assert detail["calls"] == 6 and detail["stats"]["failure_rate"] == 1.0 and detail["pairs_refused"] == 3
    board = alice_client.get(f"{base}/judges/{judge.pk}/board/").json()
    assert board["verdicts_total"] == 3 and board["verdicts_refused"] == 3 and board["verdicts_used"] == 0
    assert board["rubric_version"] == 1 and board["calibration"][0]["refused"] == 3
    calibration = alice_client.get(f"{base}/judges/{judge.pk}/calibration/").json()
    assert calibration["gates"] == {"needs_work_below": 0.75, "may_run_alone_from": 0.9}
    assert calibration["results"][0]["gate"] == "insufficient"
    assert alice_client.get(f"{base}/judges/{judge.pk}/board/?kind=golden").status_code == 404


def test_an_outsider_gets_404_everywhere(acme: Tenant, globex: Tenant, judged: Any, charlie_client: Client) -> None:
    judge, run = judged
    base = f"/api/v1/campaigns/{acme.campaign.pk}"
    assert charlie_client.get("/api/v1/judges/").json()["results"] == []
    for url in (
        f"/api/v1/judges/{judge.pk}/",
        f"{base}/judge-runs/",
        f"{base}/judge-runs/{run.pk}/",
        f"{base}/judge-runs/{run.pk}/verdicts/",
        f"{base}/judges/{judge.pk}/board/",
        f"{base}/judges/{judge.pk}/calibration/",
    ):
        assert charlie_client.get(url).status_code == 404, url
    # Globex's own campaign cannot reach Acme's judge either.
    other = f"/api/v1/campaigns/{globex.campaign.pk}"
    assert charlie_client.get(f"{other}/judges/{judge.pk}/board/").status_code == 404
    response = charlie_client.post(f"{other}/judge-runs/", {"judge_id": judge.pk}, content_type="application/json")
    assert response.status_code == 400 and "judge_id" in response.json()["error"]["fields"]
    assert (
        charlie_client.post(f"{base}/judge-runs/", {"judge_id": judge.pk}, content_type="application/json").status_code
        == 404
    )


def test_a_write_key_starts_a_run_and_a_read_key_cannot(
    acme: Tenant, judged: Any, monkeypatch: pytest.MonkeyPatch, django_capture_on_commit_callbacks: Any
) -> None:
    judge, _ = judged
    queued: list[Any] = []
    monkeypatch.setattr(battle_tasks.judge_run_task, "delay", lambda *a, **k: queued.append((a, k)))
    url = f"/api/v1/campaigns/{acme.campaign.pk}/judge-runs/"
    reader = api_client(acme.organization, scope="read")
    assert reader.post(url, {"judge_id": judge.pk}, content_type="application/json").status_code == 403
    writer = api_client(acme.organization, scope="write", name="writer")
    with django_capture_on_commit_callbacks(execute=True):
        response = writer.post(url, {"judge_id": judge.pk, "seed": 4}, content_type="application/json")
    assert response.status_code == 202, response.content
    body = response.json()
    assert body["status"] == "queued" and body["seed"] == 4 and body["kind"] == "battles"
    assert queued == [((body["id"],), {"organization_id": acme.organization.pk})]
    bad = writer.post(
        url, {"judge_id": judge.pk, "kind": "golden", "competitor_ids": [999999]}, content_type="application/json"
    )
    assert bad.status_code == 400


def test_a_manager_reads_a_runs_verdicts_page_by_page(acme: Tenant, judged: Any) -> None:
    judge, run = judged
    manager = UserFactory.create(email="manager@acme.test")
    MembershipFactory.create(user=manager, organization=acme.organization, role=Role.MANAGER)
    client = login(manager)
    url = f"/api/v1/campaigns/{acme.campaign.pk}/judge-runs/{run.pk}/verdicts/"
    first = client.get(url, {"limit": 2})
    assert first.status_code == 200, first.content
    page = first.json()
    assert len(page["results"]) == 2 and page["next"]
    rest = client.get(page["next"]).json()
    listed = page["results"] + rest["results"]
    stored = list(JudgeVerdict.objects.filter(run=run).order_by("id"))
    assert [v["id"] for v in listed] == [v.pk for v in stored] and rest["next"] is None
    one, row = listed[0], stored[0]
    assert one["run_id"] == run.pk and one["judge_id"] == judge.pk and one["battle_id"] == str(row.battle_id)
    assert (one["rubric_id"], one["rubric_version"], one["rubric_hash"]) == (
        judge.rubric_id,
        judge.rubric.version,
        judge.rubric.content_hash,
    )
    assert {one["left_id"], one["right_id"]} == {acme.left.pk, acme.right.pk}
    # Nothing answers at the discard port: both orders failed, so the pair is a refusal with its reason.
    assert one["refused"] is True and one["choice"] == "" and "call failed: unreachable" in one["refusal"]
    assert one["verdict_ab"] == one["verdict_ba"] == "" and one["consistent"] == row.consistent
    assert one["input_tokens"] == row.input_tokens > 0 and one["created_at"]
    # A read key of the organisation reads them too; a limit out of range is a 400.
    assert api_client(acme.organization).get(url).json()["results"][0]["id"] == row.pk
    assert client.get(url, {"limit": 0}).status_code == 400


def test_a_rater_and_another_organisation_get_404_for_verdicts(
    acme: Tenant, globex: Tenant, judged: Any, bob_client: Client, charlie_client: Client
) -> None:
    _, run = judged
    url = f"/api/v1/campaigns/{acme.campaign.pk}/judge-runs/{run.pk}/verdicts/"
    assert bob_client.get(f"/api/v1/campaigns/{acme.campaign.pk}/judge-runs/{run.pk}/").status_code == 404
    assert bob_client.get(url).status_code == 404  # a rater: as the run itself
    assert charlie_client.get(url).status_code == 404
    # Acme's run through Globex's campaign, and Globex's key: 404 as well.
    assert (
        charlie_client.get(f"/api/v1/campaigns/{globex.campaign.pk}/judge-runs/{run.pk}/verdicts/").status_code == 404
    )
    assert api_client(globex.organization, name="globex key").get(url).status_code == 404
