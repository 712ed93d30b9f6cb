"""Judge boards (a judge's verdicts ranked with the human boards' estimator, never mixed with human votes)
and calibration against the humans (agreement, Cohen's kappa, gates, per category, per rubric version)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from battles.models import Judge, JudgeRun
from battles.services import judge_run_create, judge_run_execute, rubric_revise
from ranking import selectors, services, tasks
from ranking.compute import calibration_compute
from ranking.estimators import calibration_gate
from ranking.models import JudgeBoard, JudgeCalibration, LeaderboardSnapshot
from serving.triton.server import TritonServer

from ..battles.judge_world import battle_plant, judge_make
from ..conftest import MODEL_SERVER_URL, Tenant
from ..factories import PromptFactory


def _judge(judge: Judge, tenant: Tenant) -> JudgeRun:
    run = judge_run_create(judge=judge, campaign=tenant.campaign, actor=None, start=False)
    done = judge_run_execute(run_id=run.pk)
    assert done is not None and done.status == JudgeRun.Status.DONE, done and done.error
    services.judge_run_settle(run_id=done.pk)
    return done


@pytest.mark.triton
def test_the_judge_board_ranks_the_judges_verdicts_and_never_the_human_votes(
    acme: Tenant, bob: Any, triton_server: TritonServer
) -> None:
    acme.campaign.ranking_min_votes = 5
    acme.campaign.save()
    # The right competitor's answers are better in 9 of 10 battles; the humans (bob) vote the other way.
    for i in range(40):
        better = "left" if i % 10 == 0 else "right"
        battle_plant(acme, left=acme.left, right=acme.right, better=better, index=i, vote="left", rater=bob)
    judge = judge_make(acme, url=triton_server.grpc_url)
    run = _judge(judge, acme)
    board = selectors.judge_board_latest(campaign=acme.campaign, judge=judge)
    assert board is not None and board.run_id == run.pk and board.rubric_id == judge.rubric_id
    assert board.verdicts_used == 40 and board.verdicts_refused == 0
    shown = [row for row in board.rows if not row["hidden"]]
    assert [row["competitor_id"] for row in shown] == [acme.right.pk, acme.left.pk]
    assert next(r for r in shown if r["competitor_id"] == acme.right.pk)["wins"] == 36
    assert "no human vote" in board.method["source"]
    # The human board is computed from the 40 human votes only, all for the left side.
    services.leaderboards_recompute(campaign_id=acme.campaign.pk)
    human = LeaderboardSnapshot.objects.filter(campaign=acme.campaign, category="", view="raw").latest("version")
    assert human.votes_total == 40
    assert human.rows[0]["competitor_id"] == acme.left.pk and human.rows[0]["wins"] == 40
    # A second run over the same battles replaces the first's verdicts on the board, never doubles them.
    _judge(judge, acme)
    again = selectors.judge_board_latest(campaign=acme.campaign, judge=judge)
    assert again is not None and again.version == board.version + 1 and again.verdicts_used == 40


@pytest.mark.triton
def test_calibration_measures_the_judges_set_accuracy_per_category(
    acme: Tenant, bob: Any, triton_server: TritonServer
) -> None:
    # judge-sim-noisy is right on 80% of pairs (10% of its replies malformed); humans follow the truth. Its
    # choices are a hash of the prompt: fixed texts make the draw the same in every run, whatever ran before
    # (a factory's numbered texts depend on the order pytest-xdist gives the tests).
    for i in range(240):
        better = "left" if i % 3 else "right"
        category = "coding" if i % 2 else "writing"
        prompt = PromptFactory.create(campaign=acme.campaign, text=f"Calibration question {i}.", category=category)
        battle_plant(
            acme, left=acme.left, right=acme.right, better=better, index=i, vote=better, rater=bob, prompt=prompt
        )
    noisy = judge_make(acme, url=triton_server.grpc_url, model="judge-sim-noisy")
    _judge(noisy, acme)
    rows = {row.category: row for row in selectors.judge_calibration_latest(campaign=acme.campaign, judge=noisy)}
    assert set(rows) == {"", "coding", "writing"}
    overall = rows[""]
    assert overall.battles + overall.refused == 240 and overall.refused > 0
    assert overall.rubric_id == noisy.rubric_id
    assert overall.agreement is not None and abs(overall.agreement - 0.8) < 0.07
    assert overall.agreement_lower is not None and overall.agreement_upper is not None
    assert overall.agreement_lower < 0.8 < overall.agreement_upper
    # About 0.8 on about 220 battles: the interval's lower end lies near 0.75, so the gate is read from it
    # (with_humans or insufficient), never "may run alone".
    agreed = sum(overall.table[i][i] for i in range(4))
    assert overall.gate == calibration_gate(agreed, overall.battles) != JudgeCalibration.Gate.MAY_RUN_ALONE
    assert overall.kappa is not None and 0.4 < overall.kappa < 0.75
    assert rows["coding"].battles + rows["writing"].battles == overall.battles
    # The accurate judge passes the 90% gate; it sees the same battles.
    exact = judge_make(acme, url=triton_server.grpc_url, name="exact")
    _judge(exact, acme)
    best = selectors.judge_calibration_latest(campaign=acme.campaign, judge=exact)[0]
    assert best.category == "" and best.agreement == 1.0 and best.kappa == 1.0
    assert best.gate == JudgeCalibration.Gate.MAY_RUN_ALONE


def test_the_gates_and_kappa_are_the_textbook_ones() -> None:
    # The gates are read from the 95% Wilson interval of the agreement (tests/ranking/test_judge_calibration.py):
    # 66/100 lies under 0.75 (upper end 0.745), 84/100 at or above it (lower end 0.756), 96/100 at or above 0.90
    # (lower end 0.902; 95/100: 0.888).
    assert calibration_gate(66, 100) == "needs_work"
    assert calibration_gate(75, 100) == "insufficient"  # the interval spans 0.75
    assert calibration_gate(84, 100) == "with_humans"
    assert calibration_gate(95, 100) == "with_humans"
    assert calibration_gate(96, 100) == "may_run_alone"
    assert calibration_gate(19, 19) == "insufficient"
    # Cohen (1960)-style 2 x 2 example: 20 + 15 agreements of 50, marginals 25/25 and 30/20 -> p_o 0.7,
    # p_e 0.5, kappa 0.4.
    human = np.array([0] * 25 + [1] * 25)
    judge = np.array([0] * 20 + [1] * 5 + [0] * 10 + [1] * 15)
    out = calibration_compute(human, judge)
    assert out["agreement"] == 0.7 and out["kappa"] == pytest.approx(0.4)
    # 35 of 50 agree: the interval (0.56 to 0.81) spans 0.75, so the battles cannot tell yet.
    assert out["gate"] == "insufficient" and out["table"][0][:2] == [20, 5] and out["table"][1][:2] == [10, 15]
    empty = calibration_compute(np.array([], dtype=np.int64), np.array([], dtype=np.int64))
    assert empty["agreement"] is None and empty["gate"] == "insufficient" and empty["kappa_note"]


@pytest.mark.triton
def test_a_new_rubric_version_is_a_new_judge_and_a_new_calibration(
    acme: Tenant, bob: Any, triton_server: TritonServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    for i in range(3):
        battle_plant(acme, left=acme.left, right=acme.right, better="left", index=i, vote="left", rater=bob)
    judge = judge_make(acme, url=triton_server.grpc_url)
    _judge(judge, acme)
    first = selectors.judge_calibration_latest(campaign=acme.campaign, judge=judge)
    assert first and first[0].rubric_id == judge.rubric_id and first[0].battles == 3
    assert first[0].gate == JudgeCalibration.Gate.INSUFFICIENT  # 3 battles: no gate is claimed
    queued: list[tuple[Any, ...]] = []
    from battles import tasks as battle_tasks

    monkeypatch.setattr(battle_tasks.judge_run_task, "delay", lambda *a, **k: queued.append((a, k)))
    revised, successors = rubric_revise(
        rubric=judge.rubric, question="Which answer is more correct?", instructions="", actor=None
    )
    judge.refresh_from_db()
    assert revised.version == judge.rubric.version + 1 and revised.content_hash != judge.rubric.content_hash
    assert not judge.active and len(successors) == 1 and successors[0].rubric_id == revised.pk
    # The successor was queued a run on the campaign the old judge had judged: its own calibration follows.
    rerun = JudgeRun.objects.get(judge=successors[0])
    assert rerun.campaign_id == acme.campaign.pk and rerun.rubric_id == revised.pk
    judge_run_execute(run_id=rerun.pk)
    services.judge_run_settle(run_id=rerun.pk)
    new = selectors.judge_calibration_latest(campaign=acme.campaign, judge=successors[0])
    assert new and all(row.rubric_id == revised.pk for row in new)
    assert {row.rubric_id for row in selectors.judge_calibrations_of_rubric(rubric=judge.rubric)} == {judge.rubric_id}


def test_a_finished_run_schedules_its_board_and_calibration(
    acme: Tenant, django_capture_on_commit_callbacks: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    battle_plant(acme, left=acme.left, right=acme.right, better="left", index=1)
    judge = judge_make(acme, url=MODEL_SERVER_URL)
    run = judge_run_create(judge=judge, campaign=acme.campaign, actor=None, start=False)
    sent: list[tuple[Any, ...]] = []
    monkeypatch.setattr(tasks.judge_run_settle_task, "delay", lambda *a, **k: sent.append((a, k)))
    with django_capture_on_commit_callbacks(execute=True):
        judge_run_execute(run_id=run.pk)
    assert sent == [((run.pk,), {"organization_id": acme.organization.pk})]
    tasks.judge_run_settle_task.apply(args=(run.pk,), kwargs={"organization_id": acme.organization.pk})
    assert JudgeBoard.objects.filter(judge=judge, campaign=acme.campaign).count() == 1
