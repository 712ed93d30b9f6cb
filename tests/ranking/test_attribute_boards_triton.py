"""An attribute board judged through a real Triton server: the simulated ratio judge
(tests/serving/model_repository/ratio-sim) reads each entity's hidden true log-strength, adds noise,
and sometimes refuses or answers malformed JSON; the run recovers the truth."""

from __future__ import annotations

from collections import Counter

import pytest
from scipy.stats import spearmanr

from ranking import selectors, services
from ranking.models import AttributeJudgement, AttributeRun, AttributeScore
from serving.triton.server import TritonServer
from tests.conftest import Tenant

from .attribute_world import board_with, ratio_judge, truths

pytestmark = [pytest.mark.django_db, pytest.mark.triton]


def test_recovery_of_50_entities_at_8_calls_each_through_triton(acme: Tenant, triton_server: TritonServer) -> None:
    strengths = truths(50, seed=11)
    judge = ratio_judge(acme.organization, url=triton_server.grpc_url)
    board = board_with(acme.organization, judge, strengths, top_k=10, noise=0.5, refuse=0.03, malformed=0.02)
    run = services.attribute_run_start(board=board, actor=None)
    run = services.attribute_run_execute(run_id=run.pk)
    assert run.status == AttributeRun.Status.DONE, run.failure_reason
    assert run.budget_calls == 400 and run.calls <= 400
    statuses = Counter(AttributeJudgement.objects.filter(run=run).values_list("status", flat=True))
    assert statuses["error"] == 0 and statuses["refused"] > 0 and statuses["malformed"] > 0
    assert statuses["accepted"] == run.accepted
    scores = dict(AttributeScore.objects.filter(run=run).values_list("entity__position", "score"))
    rho = spearmanr([scores[k] for k in range(50)], strengths).statistic
    assert rho >= 0.95, rho
    # What the ledger holds is the served model's own reply, and re-solving it gives the run's bytes.
    sample = AttributeJudgement.objects.filter(run=run, status="accepted").first()
    assert sample is not None and sample.raw_reply.startswith('{"more": ') and sample.latency_s > 0
    assert selectors.attribute_fit_hash(selectors.attribute_run_fit(run)) == run.solve["hash"]


def test_an_unserved_judge_model_fails_the_run_with_its_error(acme: Tenant, triton_server: TritonServer) -> None:
    judge = ratio_judge(acme.organization, url=triton_server.grpc_url)
    judge.endpoint.model_name = "no-such-judge"
    judge.endpoint.save()
    board = board_with(acme.organization, judge, truths(8), top_k=2)
    run = services.attribute_run_execute(run_id=services.attribute_run_start(board=board, actor=None).pk)
    assert run.status == AttributeRun.Status.FAILED and "not_served" in run.failure_reason
