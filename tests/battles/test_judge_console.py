"""The console's judge pages: a rubric edit writes a new version (and new judges), a run is started from
the console (audited), and the judge's board page shows its rows and its calibration against the humans."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from battles import tasks as battle_tasks
from battles.models import Judge, JudgeRun, Rubric
from battles.services import judge_run_create, judge_run_execute
from ranking import services as ranking_services
from ranking.models import JudgeBoard
from raters.models import AuditAction, AuditEvent

from ..conftest import MODEL_SERVER_URL, Tenant
from .judge_world import battle_plant, judge_make


def test_editing_a_rubric_writes_a_new_version_and_a_new_judge(acme: Tenant, alice_client: Client) -> None:
    judge = judge_make(acme, url=MODEL_SERVER_URL)
    rubric = judge.rubric
    url = reverse("admin:battles_rubric_change", args=[rubric.pk])
    assert alice_client.get(url).status_code == 200
    response = alice_client.post(
        url,
        {"organization": acme.organization.pk, "question": "Which answer is more correct?", "instructions": ""},
    )
    assert response.status_code == 302, response.content.decode()[:3000]
    rubric.refresh_from_db()
    assert rubric.question == "Which answer is more helpful?"  # the old version is untouched
    newest = Rubric.objects.get(organization=acme.organization, name=rubric.name, version=2)
    assert newest.question == "Which answer is more correct?" and newest.content_hash != rubric.content_hash
    assert Judge.objects.get(rubric=newest).endpoint_id == judge.endpoint_id
    judge.refresh_from_db()
    assert not judge.active
    assert AuditEvent.objects.filter(action=AuditAction.RUBRIC_CREATED, object_id=str(newest.pk)).exists()


def test_a_run_started_from_the_console_is_queued_and_audited(
    acme: Tenant, alice_client: Client, monkeypatch: pytest.MonkeyPatch, django_capture_on_commit_callbacks: Any
) -> None:
    judge = judge_make(acme, url=MODEL_SERVER_URL)
    queued: list[Any] = []
    monkeypatch.setattr(battle_tasks.judge_run_task, "delay", lambda *a, **k: queued.append((a, k)))
    with django_capture_on_commit_callbacks(execute=True):
        response = alice_client.post(
            reverse("admin:battles_judgerun_add"),
            {"judge": judge.pk, "campaign": acme.campaign.pk, "kind": "battles", "seed": 0, "competitor_ids": "[]"},
        )
    assert response.status_code == 302, response.content.decode()[:3000]
    run = JudgeRun.objects.get(judge=judge)
    assert queued == [((run.pk,), {"organization_id": acme.organization.pk})]
    assert AuditEvent.objects.filter(action=AuditAction.JUDGE_RUN_CREATED, object_id=str(run.pk)).exists()
    page = alice_client.get(reverse("admin:battles_judgerun_change", args=[run.pk]))
    assert page.status_code == 200 and b"Pairs total" in page.content


def test_the_judge_board_page_shows_rows_and_calibration(acme: Tenant, bob: Any, alice_client: Client) -> None:
    for i in range(3):
        battle_plant(acme, left=acme.left, right=acme.right, better="left", index=i, vote="left", rater=bob)
    judge = judge_make(acme, url=MODEL_SERVER_URL)
    run = judge_run_create(judge=judge, campaign=acme.campaign, actor=None, start=False)
    judge_run_execute(run_id=run.pk)
    ranking_services.judge_run_settle(run_id=run.pk)
    board = JudgeBoard.objects.get(judge=judge)
    page = alice_client.get(reverse("admin:ranking_judgeboard_change", args=[board.pk]))
    html = page.content.decode()
    assert page.status_code == 200
    assert "Calibration against the human votes" in html and "Too few battles to tell" in html
    assert acme.left.endpoint.name in html  # type: ignore[union-attr]
    listing = alice_client.get(reverse("admin:ranking_judgecalibration_changelist")).content.decode()
    assert "Too few battles to tell" in listing
