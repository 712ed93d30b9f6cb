"""The real small LLM (SmolLM2-135M-Instruct, over the vLLM-backend contract in ChatML) as an opt-in judge,
end to end: both presentation orders called through serving, replies stored verbatim, parsed strictly.
A 135M model mostly fails the strict format; the point is the real path, so what is asserted is that every
call got an answer and every answer was either a verdict or a recorded refusal, never a repaired one."""

from __future__ import annotations

import pytest

from battles import judging
from battles.models import JudgeRun, JudgeVerdict
from battles.services import judge_create, judge_run_create, judge_run_execute, rubric_create
from ranking import services as ranking_services
from serving.triton.server import TritonServer
from tests.conftest import endpoint_of, make_real_llm_tenant

from ..factories import CompetitorFactory, ModelEndpointFactory
from .judge_world import battle_plant

pytestmark = [pytest.mark.django_db, pytest.mark.triton, pytest.mark.real_llm]


def test_the_real_small_llm_judges_battles_end_to_end(alice, bob, llm_triton_server: TritonServer) -> None:  # type: ignore[no-untyped-def]
    tenant = make_real_llm_tenant(owner=alice, rater=bob, server=llm_triton_server, name="RealJudge")
    smol = next(endpoint_of(c) for c in (tenant.left, tenant.right) if endpoint_of(c).model_name.startswith("smollm2"))
    # A judge never judges its own model: the battles it judges are between two other (planted) competitors,
    # and the one with SmolLM2 on a side is skipped.
    others = [
        CompetitorFactory.create(
            campaign=tenant.campaign,
            endpoint=ModelEndpointFactory.create(
                organization=tenant.organization, name=f"planted {n}", url=smol.url, model_name=f"planted-{n}"
            ),
            version_label="1",
        )
        for n in ("a", "b")
    ]
    for i in range(3):
        battle_plant(tenant, left=others[0], right=others[1], better="left", index=i, vote="left", rater=bob)
    battle_plant(tenant, left=tenant.left, right=tenant.right, better="left", index=3)
    rubric = rubric_create(
        organization=tenant.organization, name="helpful", question="Which answer is more helpful?", actor=None
    )
    judge = judge_create(
        organization=tenant.organization, name="smol judge", endpoint=smol, rubric=rubric, max_tokens=48, actor=None
    )
    run = judge_run_create(judge=judge, campaign=tenant.campaign, actor=None, start=False)
    done = judge_run_execute(run_id=run.pk)
    assert done is not None
    # A run that judged no pair (a 135M model may refuse the strict reply every time) ends failed, saying so.
    if done.pairs_judged:
        assert done.status == JudgeRun.Status.DONE, done.error
    else:
        assert done.status == JudgeRun.Status.FAILED and "all 3 pairs were refused" in done.error, done.error
    assert done.pairs_excluded_family == 1
    assert done.calls == 6 and done.calls_failed == 0 and done.output_tokens > 0 and done.call_wall_seconds > 0
    for verdict in JudgeVerdict.objects.filter(run=done):
        for reply, parsed in ((verdict.reply_ab, verdict.verdict_ab), (verdict.reply_ba, verdict.verdict_ba)):
            assert reply  # the model's own text, kept verbatim
            assert (judging.reply_parse(reply).verdict or "") == parsed
        assert verdict.refused == (not verdict.verdict_ab or not verdict.verdict_ba)
    assert done.stats["refusal_rate"] is not None
    ranking_services.judge_run_settle(run_id=done.pk)  # its board and calibration exist, whatever it said
