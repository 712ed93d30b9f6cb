"""Attribute runs against a judge that fails (issue 20.7), with the real Triton HTTP client talking to an
in-process fake of the server's endpoint (tests/serving/fake_triton.py) that answers as the simulated
ratio judge does, or with a Triton error on cue: a failed call is retried, a cold first batch is asked
again, and a run whose evidence is too thin fails saying which rule broke instead of ranking a board of
ties."""

from __future__ import annotations

import json

import pytest

from ranking import services
from ranking.models import AttributeRun, AttributeScore
from ranking.services.attribute_runs import MIN_USABLE
from serving.models import ModelEndpoint
from tests.conftest import Tenant
from tests.serving.fake_triton import fake_triton

from .attribute_world import board_with, ratio_judge, truths
from .ratio_sim import judge as sim_judge

pytestmark = pytest.mark.django_db


def _run(board) -> AttributeRun:  # type: ignore[no-untyped-def]
    run = services.attribute_run_start(board=board, actor=None)
    return services.attribute_run_execute(run_id=run.pk)


def _http_judge(acme: Tenant, url: str):  # type: ignore[no-untyped-def]
    judge = ratio_judge(acme.organization, url=url)
    ModelEndpoint.objects.filter(pk=judge.endpoint_id).update(protocol=ModelEndpoint.Protocol.HTTP)
    judge.endpoint.refresh_from_db()
    return judge


def _items(prompt: str) -> tuple[str, str]:
    """The two entities' texts of a ratio prompt."""
    a = prompt.split("<<<ITEM A>>>\n", 1)[1].split("\n<<<END ITEM A>>>", 1)[0]
    b = prompt.split("<<<ITEM B>>>\n", 1)[1].split("\n<<<END ITEM B>>>", 1)[0]
    return json.loads(a), json.loads(b)


def test_a_run_where_almost_every_call_fails_fails_loudly_instead_of_ranking_ties(acme: Tenant) -> None:
    """12 entities, 96 calls; the judge answers only about the pair (Text 0, Text 1) and fails every
    other call, retries included. On main this run ended "done" with 10 of 12 entities tied at 0."""

    def fail(_number: int, prompt: str) -> str | None:
        texts = {t.split(" [[", 1)[0] for t in _items(prompt)}
        return None if texts == {"Text 0", "Text 1"} else "inference failed: out of memory"

    with fake_triton(sim_judge, fail) as (url, server):
        board = board_with(acme.organization, _http_judge(acme, url), truths(12, seed=5), top_k=3)
        run = _run(board)
    assert run.status == AttributeRun.Status.FAILED and run.stop_reason == "failed", run.failure_reason
    assert run.accepted >= 2 and run.call_errors > 0.8 * run.calls
    assert "Too little evidence to rank" in run.failure_reason
    assert f"fewer than {MIN_USABLE} usable judgements" in run.failure_reason
    assert "10 of 12 entities" in run.failure_reason and "t2" in run.failure_reason
    assert f"{run.call_errors} failed" in run.failure_reason
    assert not AttributeScore.objects.filter(run=run).exists()
    # Every failed call was asked 1 + ARENA_RATIO_CALL_RETRIES times (2 retries), none recorded twice.
    assert server.failed == 3 * run.call_errors and run.judgements.count() == run.calls


def test_a_failed_call_is_retried_and_its_retry_is_what_the_ledger_records(acme: Tenant) -> None:
    """A third of the calls fail on their first try (a transient error): each succeeds on its retry, so
    the run is whole and the ledger holds one answer per call."""
    seen: set[str] = set()

    def fail(number: int, prompt: str) -> str | None:
        first = prompt not in seen
        seen.add(prompt)
        return "transient" if first and number % 3 == 0 else None

    with fake_triton(sim_judge, fail) as (url, server):
        board = board_with(acme.organization, _http_judge(acme, url), truths(10, seed=2), top_k=3)
        run = _run(board)
    assert run.status == AttributeRun.Status.DONE, run.failure_reason
    assert server.failed > 0 and run.call_errors == 0 and run.accepted == run.calls
    assert server.requests == run.calls + server.failed


def test_a_cold_judge_fails_the_first_batch_and_the_run_still_completes(acme: Tenant) -> None:
    """The model is not served for its first 96 requests (loading): the whole first batch (16 pairs, 32
    calls) and both retries of each call. The batch is asked again after the cold-start wait, and the run
    completes; on main it failed on the first batch."""
    with fake_triton(
        sim_judge, lambda n, _p: "Request for unknown model: 'ratio-sim' is not ready" if n <= 96 else None
    ) as (url, server):
        board = board_with(acme.organization, _http_judge(acme, url), truths(12, seed=3), top_k=3)
        run = _run(board)
    assert run.status == AttributeRun.Status.DONE, run.failure_reason
    assert run.solve["cold_start_retries"] == 1 and server.failed == 96
    assert run.call_errors == 0 and run.accepted == run.calls  # the failed attempts are not in the ledger
    assert AttributeScore.objects.filter(run=run).count() == 12


def test_a_judge_that_never_comes_up_fails_after_the_cold_start_retries(acme: Tenant) -> None:
    with fake_triton(sim_judge, lambda _n, _p: "Request for unknown model: 'ratio-sim' is not ready") as (
        url,
        server,
    ):
        board = board_with(acme.organization, _http_judge(acme, url), truths(8, seed=4), top_k=2)
        run = _run(board)
    assert run.status == AttributeRun.Status.FAILED and "call error: not_served" in run.failure_reason
    assert "asked again 2 times" in run.failure_reason
    assert run.solve["cold_start_retries"] == 2  # ARENA_RATIO_COLD_START_WAITS_S in the test settings
    # Three attempts at the first batch (the first and two cold-start retries), three tries per call.
    assert server.requests == 3 * 3 * run.calls
