"""Offline golden-set runs: every competitor answers every pool prompt once, the judge compares every
pair of answers, the campaign gets a golden judge board; the CI command exits non-zero when the candidate
does not beat the baseline at the stated confidence."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command

from battles.models import GoldenAnswer, JudgeRun, JudgeVerdict
from battles.services import judge_run_create
from ranking import selectors
from ranking.tasks import golden_run_task
from serving.triton.server import TritonServer

from ..battles.judge_world import judge_make
from ..conftest import Tenant
from ..factories import CompetitorFactory, ModelEndpointFactory


def _short_competitor(tenant: Tenant, url: str):  # type: ignore[no-untyped-def]
    # delay-fast answers with the parameters it received as one line of JSON: always shorter than the
    # n-gram contestants' paragraphs, so the simulated judge (longer is better) prefers the others.
    endpoint = ModelEndpointFactory.create(
        organization=tenant.organization, name="echo", url=url, model_name="delay-fast"
    )
    return CompetitorFactory.create(campaign=tenant.campaign, endpoint=endpoint, version_label="1")


def _command(*args: str) -> tuple[int, dict]:  # type: ignore[type-arg]
    out, err = io.StringIO(), io.StringIO()
    try:
        call_command("judge_golden", *args, stdout=out, stderr=err)
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    return code, json.loads(out.getvalue())


@pytest.mark.triton
def test_the_golden_command_exits_by_whether_the_candidate_beats_the_baseline(
    acme: Tenant, triton_server: TritonServer
) -> None:
    echo = _short_competitor(acme, triton_server.grpc_url)
    judge = judge_make(acme, url=triton_server.grpc_url)
    common = ["--campaign", str(acme.campaign.pk), "--judge", str(judge.pk), "--confidence", "0.95"]
    code, result = _command(*common, "--candidate", str(acme.left.pk), "--baseline", str(echo.pk))
    assert code == 0, result
    check = result["check"]
    assert check["beats"] and check["pairs"] == 8 and check["wins"] == 8 and check["lower_bound"] > 0.5
    run = JudgeRun.objects.get(pk=result["run_id"])
    # Three competitors answered the eight pool prompts once each; every pair of answers was judged.
    assert run.kind == JudgeRun.Kind.GOLDEN and GoldenAnswer.objects.filter(run=run).count() == 3 * 8
    assert JudgeVerdict.objects.filter(run=run, battle__isnull=True).count() == 3 * 8
    assert run.calls == 2 * 3 * 8 and run.generation_seconds > 0
    board = selectors.judge_board_latest(campaign=acme.campaign, judge=judge, kind="golden")
    assert board is not None and board.run_id == run.pk and board.verdicts_used == 24
    last = next(row for row in board.rows if row["competitor_id"] == echo.pk)
    assert last["wins"] == 0
    # The other way round the command fails CI: status 1, and the numbers say why.
    code, result = _command(*common, "--candidate", str(echo.pk), "--baseline", str(acme.left.pk))
    assert code == 1 and not result["check"]["beats"] and result["check"]["losses"] == 8
    # Too little evidence for the stated confidence also fails: two prompts, 99.9%.
    code, result = _command(
        "--campaign", str(acme.campaign.pk), "--judge", str(judge.pk), "--confidence", "0.999",
        "--candidate", str(acme.left.pk), "--baseline", str(echo.pk),
        "--competitor", str(acme.left.pk), "--competitor", str(echo.pk),
    )  # fmt: skip
    # 8 wins of 8: the one-sided 99.9% Wilson lower bound is 0.456 (z = 3.09), not above one half.
    assert result["check"]["wins"] == 8 and result["check"]["losses"] == 0
    assert code == 1 and result["check"]["lower_bound"] == pytest.approx(0.456, abs=0.005)


@pytest.mark.triton
def test_the_golden_task_runs_the_same_check(acme: Tenant, triton_server: TritonServer) -> None:
    echo = _short_competitor(acme, triton_server.grpc_url)
    judge = judge_make(acme, url=triton_server.grpc_url)
    run = judge_run_create(
        judge=judge, campaign=acme.campaign, actor=None, kind=JudgeRun.Kind.GOLDEN,
        competitor_ids=[acme.right.pk, echo.pk], start=False,
    )  # fmt: skip
    result = golden_run_task.apply(
        args=(run.pk,),
        kwargs={"organization_id": acme.organization.pk, "candidate_id": echo.pk, "baseline_id": acme.right.pk},
    ).get()
    assert result["status"] == "done" and result["check"]["beats"] is False and result["check"]["pairs"] == 8
    assert GoldenAnswer.objects.filter(run=run).count() == 16  # only the two named competitors answered
