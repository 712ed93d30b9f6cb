"""Offline golden-set runs: every competitor answers every pool prompt once, the judge compares every
pair of answers, the campaign gets a golden judge board; the CI command exits non-zero when the candidate
does not beat the baseline at the stated confidence."""

from __future__ import annotations

import io
import json
from collections.abc import Callable

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from battles.models import GoldenAnswer, JudgeRun, JudgeVerdict
from battles.services import competitor_retire, judge_run_create
from core.errors import Invalid
from ranking import selectors
from ranking.management.commands import judge_golden
from ranking.services import golden_run_and_check
from ranking.tasks import golden_run_task
from serving.triton.server import TritonServer

from ..battles.judge_world import judge_make
from ..conftest import MODEL_SERVER_URL, Tenant
from ..factories import CompetitorFactory, ModelEndpointFactory, PromptFactory


def _short_competitor(tenant: Tenant, url: str):  # type: ignore[no-untyped-def]
    # delay-fast answers with the parameters it received as one line of JSON: always shorter than the
    # n-gram contestants' paragraphs, so the simulated judge (longer is better) prefers the others.
    endpoint = ModelEndpointFactory.create(
        organization=tenant.organization, name="echo", url=url, model_name="delay-fast"
    )
    return CompetitorFactory.create(campaign=tenant.campaign, endpoint=endpoint, version_label="1")


@pytest.fixture
def fixed_prompts() -> None:
    """The pool prompts' texts numbered from 0 whatever ran before in the session: the simulated judge
    decides on word counts, and a shifted factory sequence once gave an n-gram answer the echo's length
    (a tie, 7 wins of 8). Requested before ``acme``, so it runs before the tenant's prompts are made."""
    PromptFactory.reset_sequence(0)


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
    fixed_prompts: None, acme: Tenant, triton_server: TritonServer
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
    assert run.calls == 2 * 3 * 8 and run.answer_wall_seconds > 0
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
def test_the_golden_task_runs_the_same_check(fixed_prompts: None, acme: Tenant, triton_server: TritonServer) -> None:
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


@pytest.mark.triton
def test_no_judged_pair_of_candidate_and_baseline_exits_2(
    fixed_prompts: None, acme: Tenant, triton_server: TritonServer
) -> None:
    # The candidate answers (on Triton); the baseline's endpoint is the base world's discard port, so
    # none of its answers exist and no pair of the two is judged: nothing to decide on, not a regression.
    echo = _short_competitor(acme, triton_server.grpc_url)
    judge = judge_make(acme, url=triton_server.grpc_url)
    dead = CompetitorFactory.create(
        campaign=acme.campaign,
        endpoint=ModelEndpointFactory.create(organization=acme.organization, name="dead", url=MODEL_SERVER_URL),
        version_label="1",
    )
    out, err = io.StringIO(), io.StringIO()
    with pytest.raises(SystemExit) as exited:
        call_command(
            "judge_golden", "--campaign", str(acme.campaign.pk), "--judge", str(judge.pk),
            "--candidate", str(echo.pk), "--baseline", str(dead.pk),
            "--competitor", str(echo.pk), "--competitor", str(dead.pk), stdout=out, stderr=err,
        )  # fmt: skip
    assert exited.value.code == judge_golden.EXIT_RUN_FAILED == 2, (out.getvalue(), err.getvalue())
    result = json.loads(out.getvalue())
    assert result["check"]["pairs"] == 0 and not result["check"]["beats"]
    # A run that judged no pair at all is a failed run, with its reason (the baseline's answers failed).
    assert result["status"] == "failed" and "no pair judged: no prompt has answers from two" in err.getvalue()
    assert GoldenAnswer.objects.filter(run_id=result["run_id"], competitor=echo).exists()


# --- Exit statuses a CI can tell apart (no model server needed: nothing is run, or nothing answers) -------


def _cli(monkeypatch: pytest.MonkeyPatch, *args: str) -> tuple[int, str, str]:
    """The command as CI runs it (``manage.py judge_golden ...``: argparse from the command line, a
    ``CommandError`` turned into its exit status), returning (status, stdout, stderr)."""
    # run_from_argv closes every connection when it ends, which would end the test's transaction.
    monkeypatch.setattr("django.core.management.base.connections.close_all", lambda: None)
    out, err = io.StringIO(), io.StringIO()
    command = judge_golden.Command(stdout=out, stderr=err)
    monkeypatch.setattr("sys.stderr", err)  # argparse writes its usage there
    try:
        command.run_from_argv(["manage.py", "judge_golden", "--skip-checks", *args])
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    return code, out.getvalue(), err.getvalue()


def _retired(tenant: Tenant) -> int:
    competitor = CompetitorFactory.create(
        campaign=tenant.campaign,
        endpoint=ModelEndpointFactory.create(organization=tenant.organization, name="old", url=MODEL_SERVER_URL),
        version_label="old",
    )
    competitor_retire(competitor=competitor, actor=None)
    return competitor.pk


def _on_the_judges_model(tenant: Tenant) -> int:
    endpoint = ModelEndpointFactory.create(
        organization=tenant.organization, name="self", url=MODEL_SERVER_URL, model_name="judge-sim"
    )  # the model judge_make's judges are served by
    return CompetitorFactory.create(campaign=tenant.campaign, endpoint=endpoint, version_label="self").pk


USAGE_ERRORS: dict[str, Callable[[Tenant, Tenant, int], list[str]]] = {
    # Each: the arguments after the command, given Acme, Globex and the id of an Acme judge.
    "no such campaign": lambda a, g, j: ["--campaign", "999999", "--judge", str(j)],
    "a judge of another organisation": lambda a, g, j: [
        "--campaign", str(g.campaign.pk), "--judge", str(j),
    ],
    "confidence above 1": lambda a, g, j: [
        "--campaign", str(a.campaign.pk), "--judge", str(j), "--candidate", str(a.left.pk),
        "--baseline", str(a.right.pk), "--confidence", "1.5",
    ],
    "confidence one half": lambda a, g, j: [
        "--campaign", str(a.campaign.pk), "--judge", str(j), "--candidate", str(a.left.pk),
        "--baseline", str(a.right.pk), "--confidence", "0.5",
    ],
    "confidence not a number": lambda a, g, j: [
        "--campaign", str(a.campaign.pk), "--judge", str(j), "--confidence", "high",
    ],
    "no --judge": lambda a, g, j: ["--campaign", str(a.campaign.pk)],
    "candidate without baseline": lambda a, g, j: [
        "--campaign", str(a.campaign.pk), "--judge", str(j), "--candidate", str(a.left.pk),
    ],
    "unknown candidate": lambda a, g, j: [
        "--campaign", str(a.campaign.pk), "--judge", str(j), "--candidate", "999999", "--baseline", str(a.right.pk),
    ],
    "another organisation's baseline": lambda a, g, j: [
        "--campaign", str(a.campaign.pk), "--judge", str(j), "--candidate", str(a.left.pk),
        "--baseline", str(g.left.pk),
    ],
    "retired candidate": lambda a, g, j: [
        "--campaign", str(a.campaign.pk), "--judge", str(j), "--candidate", str(_retired(a)),
        "--baseline", str(a.right.pk),
    ],
    "candidate is the baseline": lambda a, g, j: [
        "--campaign", str(a.campaign.pk), "--judge", str(j), "--candidate", str(a.left.pk),
        "--baseline", str(a.left.pk),
    ],
    "candidate served by the judge's own model": lambda a, g, j: [
        "--campaign", str(a.campaign.pk), "--judge", str(j), "--candidate", str(_on_the_judges_model(a)),
        "--baseline", str(a.right.pk),
    ],
    "unknown --competitor": lambda a, g, j: [
        "--campaign", str(a.campaign.pk), "--judge", str(j), "--competitor", "999999",
    ],
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(USAGE_ERRORS))
def test_a_usage_error_exits_3_before_any_run(
    case: str, acme: Tenant, globex: Tenant, monkeypatch: pytest.MonkeyPatch
) -> None:
    judge = judge_make(acme, url=MODEL_SERVER_URL)
    code, out, err = _cli(monkeypatch, *USAGE_ERRORS[case](acme, globex, judge.pk))
    assert code == judge_golden.EXIT_USAGE == 3, (out, err)
    assert err.strip() and out == ""
    assert not JudgeRun.objects.exists() and not GoldenAnswer.objects.exists()


def test_a_retired_judge_is_a_usage_error(acme: Tenant, monkeypatch: pytest.MonkeyPatch) -> None:
    judge = judge_make(acme, url=MODEL_SERVER_URL)
    judge.active = False
    judge.save()
    code, _, err = _cli(monkeypatch, "--campaign", str(acme.campaign.pk), "--judge", str(judge.pk))
    assert code == 3 and "retired" in err and not JudgeRun.objects.exists()


def test_called_from_code_a_usage_error_is_a_command_error_with_status_3(acme: Tenant) -> None:
    judge = judge_make(acme, url=MODEL_SERVER_URL)
    for args in (
        ["--campaign", str(acme.campaign.pk), "--judge", str(judge.pk), "--candidate", str(acme.left.pk),
         "--baseline", str(acme.right.pk), "--confidence", "2"],
        ["--campaign", str(acme.campaign.pk), "--judge", str(judge.pk), "--confidence", "x"],
    ):  # fmt: skip
        with pytest.raises(CommandError) as raised:
            call_command("judge_golden", *args, stdout=io.StringIO(), stderr=io.StringIO())
        assert raised.value.returncode == 3, args
    assert not JudgeRun.objects.exists()


def test_the_help_lists_the_exit_statuses(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr("django.core.management.base.connections.close_all", lambda: None)
    with pytest.raises(SystemExit):
        judge_golden.Command().run_from_argv(["manage.py", "judge_golden", "--help"])
    shown = capsys.readouterr().out
    assert "exit status:" in shown
    for code in (0, 1, 2, 3):
        assert f"\n  {code}  " in shown


def test_a_run_where_nothing_answers_exits_2(acme: Tenant, monkeypatch: pytest.MonkeyPatch) -> None:
    # The base world's endpoints (competitors and judge) point at the discard port: every answer fails.
    judge = judge_make(acme, url=MODEL_SERVER_URL)
    code, out, err = _cli(
        monkeypatch, "--campaign", str(acme.campaign.pk), "--judge", str(judge.pk),
        "--candidate", str(acme.left.pk), "--baseline", str(acme.right.pk),
    )  # fmt: skip
    assert code == judge_golden.EXIT_RUN_FAILED == 2, (out, err)
    result = json.loads(out)
    run = JudgeRun.objects.get(pk=result["run_id"])
    assert run.status == result["status"] == JudgeRun.Status.FAILED
    assert "every competitor answer failed" in run.error and "unreachable" in run.error
    assert "failed" in err and run.calls == 0


def test_the_task_checks_its_arguments_before_calling_a_model(acme: Tenant) -> None:
    judge = judge_make(acme, url=MODEL_SERVER_URL)
    run = judge_run_create(
        judge=judge, campaign=acme.campaign, actor=None, kind=JudgeRun.Kind.GOLDEN,
        competitor_ids=[acme.left.pk, acme.right.pk], start=False,
    )  # fmt: skip
    with pytest.raises(Invalid, match="confidence"):
        golden_run_and_check(run_id=run.pk, candidate_id=acme.left.pk, baseline_id=acme.right.pk, confidence=0.4)
    other = CompetitorFactory.create(campaign=acme.campaign, endpoint=acme.left.endpoint, version_label="other")
    with pytest.raises(Invalid, match="not among the run's competitors"):
        golden_run_and_check(run_id=run.pk, candidate_id=other.pk, baseline_id=acme.right.pk)
    run.refresh_from_db()
    assert run.status == JudgeRun.Status.QUEUED and not GoldenAnswer.objects.filter(run=run).exists()
