"""Attribute boards end to end in the database, with the simulated judge answering in-process (the
client's ``generate`` patched; tests/ranking/test_attribute_boards_triton.py runs the same judge in a real
Triton): runs, the append-only ledger, refusals, failures, byte-identical solves, replication, audit."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from django.db import DatabaseError, connection, transaction
from scipy.stats import spearmanr

from battles.models import Judge, Rubric
from core.errors import Invalid
from ranking import selectors, services
from ranking.models import AttributeJudgement, AttributeRun, AttributeScore, LedgerAppendOnlyError
from raters.models import AuditAction, AuditEvent
from tests.conftest import Tenant
from tests.factories import ModelEndpointFactory

from .attribute_world import board_with, ratio_judge, truths
from .ratio_sim import fake_generate

pytestmark = pytest.mark.django_db


@pytest.fixture
def sim(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    prompts: list[str] = []
    monkeypatch.setattr("serving.ratio_judging.generate", fake_generate(prompts))
    return prompts


def _run(board, **kw) -> AttributeRun:  # type: ignore[no-untyped-def]
    run = services.attribute_run_start(board=board, actor=None, **kw)
    return services.attribute_run_execute(run_id=run.pk)


def _scores(run: AttributeRun) -> dict[int, float]:
    return {s.entity.position: s.score for s in AttributeScore.objects.filter(run=run).select_related("entity")}


def test_a_run_recovers_the_truth_within_budget_and_records_its_provenance(acme: Tenant, sim: list[str]) -> None:
    strengths = truths(30, seed=1)
    board = board_with(acme.organization, ratio_judge(acme.organization), strengths, noise=0.4)
    run = _run(board)
    assert run.status == AttributeRun.Status.DONE, run.failure_reason
    assert run.calls <= run.budget_calls == 8 * 30 and run.calls == len(sim) == run.judgements.count()
    assert run.stop_reason in ("budget", "separated", "exhausted")
    assert run.template_hash and run.rubric_hash == board.judge.rubric.content_hash and run.seed == board.seed
    assert run.output_tokens > 0 and run.call_seconds > 0 and run.accepted == run.calls
    scores = _scores(run)
    rho = spearmanr([scores[k] for k in range(30)], strengths).statistic
    assert rho >= 0.95
    rows = list(AttributeScore.objects.filter(run=run).order_by("rank"))
    assert [r.rank for r in rows] == list(range(1, 31))
    assert sum(r.in_top_k for r in rows) == board.top_k
    assert all(r.stop_reason == run.stop_reason and (r.lower or np.inf) < r.score < (r.upper or -np.inf) for r in rows)
    assert rows[0].percentile == 100.0 and rows[-1].percentile == 0.0
    assert min(r.score for r in rows) == 0.0
    # z-scores are sds above the top-k boundary: positive exactly for the top k.
    assert all(r.z_score is not None and (r.z_score > 0) == r.in_top_k for r in rows)


def test_every_pair_is_judged_in_both_orders_and_confidence_is_recorded_not_weighted(
    acme: Tenant, sim: list[str]
) -> None:
    board = board_with(acme.organization, ratio_judge(acme.organization), truths(12, seed=2), top_k=3)
    run = _run(board)
    ledger = list(AttributeJudgement.objects.filter(run=run))
    by_pair = Counter(frozenset((j.first_id, j.second_id)) for j in ledger)
    assert set(by_pair.values()) == {2}
    for j in ledger:
        mirrored = next(o for o in ledger if (o.first_id, o.second_id) == (j.second_id, j.first_id))
        assert {j.order, mirrored.order} == {1, 2} and j.batch == mirrored.batch
    assert all(j.confidence is not None and 0 <= j.confidence <= 1 for j in ledger)
    # The same judgements with every confidence changed give the same solve: confidence is no weight.
    obs = selectors.attribute_run_observations(run)
    from ranking.estimators.ratio import fit_ratio

    other = fit_ratio(
        len(obs.entities),
        obs.i,
        obs.j,
        obs.log_ratio,
        np.full(obs.i.size, 0.01),
        seed=run.seed,
        **selectors.RUN_FIT_OPTIONS,
    )
    np.testing.assert_array_equal(other.scores, selectors.attribute_run_fit(run).scores)


def test_refused_and_malformed_pairs_are_recorded_excluded_and_never_proposed_again(
    acme: Tenant, sim: list[str]
) -> None:
    board = board_with(acme.organization, ratio_judge(acme.organization), truths(40, seed=3), refuse=0.1, malformed=0.1)
    run = _run(board)
    assert run.status == AttributeRun.Status.DONE
    ledger = list(AttributeJudgement.objects.filter(run=run))
    statuses = Counter(j.status for j in ledger)
    assert statuses["refused"] == run.refused > 0 and statuses["malformed"] == run.malformed > 0
    assert statuses["accepted"] == run.accepted
    assert all(j.log_ratio is None and j.reason for j in ledger if j.status != "accepted")
    assert any(j.raw_reply.startswith("Sure!") for j in ledger if j.status == "malformed")  # kept verbatim
    pairs = Counter(frozenset((j.first_id, j.second_id)) for j in ledger)
    assert max(pairs.values()) == 2  # no pair asked again, refused or not
    bad = {frozenset((j.first_id, j.second_id)) for j in ledger if j.status != "accepted"}
    assert run.pairs_refused == len(bad)
    # Neither order of a pair with a refusal reaches the estimator, not even its accepted half.
    for j in ledger:
        assert j.used == (frozenset((j.first_id, j.second_id)) not in bad)
    assert selectors.attribute_run_observations(run).i.size == sum(j.used for j in ledger)


def test_the_same_accepted_judgements_give_a_byte_identical_solve(acme: Tenant, sim: list[str]) -> None:
    board = board_with(acme.organization, ratio_judge(acme.organization), truths(20, seed=4), refuse=0.05)
    run = _run(board)
    assert selectors.attribute_fit_hash(selectors.attribute_run_fit(run)) == run.solve["hash"]
    # A second run with the same seed and the same deterministic judge repeats the run call for call.
    again = _run(board)
    assert again.solve["hash"] == run.solve["hash"]
    assert _scores(again) == _scores(run)


def test_a_run_whose_calls_all_fail_ends_failed_naming_the_dominant_error(
    acme: Tenant, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("serving.ratio_judging.generate", fake_generate(fail="unreachable"))
    board = board_with(acme.organization, ratio_judge(acme.organization), truths(10, seed=5), top_k=3)
    run = _run(board)
    assert run.status == AttributeRun.Status.FAILED and run.stop_reason == "failed"
    assert "unreachable" in run.failure_reason and f"{run.calls} of {run.calls}" in run.failure_reason
    assert run.calls < run.budget_calls  # it gave up after a batch of nothing but errors
    assert not AttributeScore.objects.filter(run=run).exists()  # never a flat board
    assert run.call_errors == run.calls == run.judgements.count()


def test_a_run_the_judge_refuses_throughout_fails_too(acme: Tenant, sim: list[str]) -> None:
    board = board_with(acme.organization, ratio_judge(acme.organization), truths(8, seed=6), top_k=2, refuse=1.0)
    run = _run(board)
    assert run.status == AttributeRun.Status.FAILED and "the judge refused" in run.failure_reason
    assert run.stop_reason == "failed" and not AttributeScore.objects.filter(run=run).exists()


def test_early_stopping_only_on_a_certified_separation(acme: Tenant, sim: list[str]) -> None:
    # A planted gap between the top 3 and the rest, a near-noiseless judge: the boundary separates early.
    strengths = np.r_[np.full(3, 6.0) + np.arange(3) * 0.1, np.linspace(0.0, 1.0, 27)]
    board = board_with(acme.organization, ratio_judge(acme.organization), strengths, top_k=3, noise=0.05)
    run = _run(board)
    assert run.stop_reason == "separated" and run.calls < run.budget_calls and not run.degraded
    top = set(AttributeScore.objects.filter(run=run, in_top_k=True).values_list("entity__position", flat=True))
    assert top == {0, 1, 2}
    # No gap at the boundary and a noisy judge: it runs to its budget.
    flat = board_with(
        acme.organization, ratio_judge(acme.organization, name="j2"), np.linspace(0, 1, 30), name="flat", noise=0.8
    )
    flat_run = _run(flat)
    assert flat_run.stop_reason == "budget" and flat_run.calls == flat_run.budget_calls


def test_replication_across_seeds_and_across_judges(acme: Tenant, sim: list[str]) -> None:
    strengths = truths(30, seed=7)
    judge = ratio_judge(acme.organization)
    board = board_with(acme.organization, judge, strengths, noise=0.3)
    first = _run(board)
    reseeded = _run(board, seed=99)
    assert reseeded.seed == 99 and reseeded.judge_id == judge.pk
    seeds = selectors.attribute_runs_compare(run=first, other=reseeded)
    assert seeds["kind"] == "seeds" and seeds["entities"] == 30 and seeds["spearman"] > 0.9
    other_judge = ratio_judge(acme.organization, name="second judge")
    second = _run(board, judge=other_judge)
    judges = selectors.attribute_runs_compare(run=first, other=second)
    assert judges["kind"] == "judges" and judges["spearman"] > 0.9
    assert judges["shared_pairs"] > 0 and judges["pair_sign_agreement"] > 0.8
    expected = spearmanr([_scores(first)[k] for k in range(30)], [_scores(second)[k] for k in range(30)]).statistic
    assert judges["spearman"] == pytest.approx(expected)


def test_the_ledger_is_append_only(acme: Tenant, sim: list[str]) -> None:
    board = board_with(acme.organization, ratio_judge(acme.organization), truths(6, seed=8), top_k=2)
    run = _run(board)
    row = AttributeJudgement.objects.filter(run=run).first()
    assert row is not None
    row.reason = "edited"
    with pytest.raises(LedgerAppendOnlyError):
        row.save()
    with pytest.raises(LedgerAppendOnlyError):
        row.delete()
    with pytest.raises(LedgerAppendOnlyError):
        AttributeJudgement.objects.filter(run=run).update(reason="x")
    with pytest.raises(LedgerAppendOnlyError):
        AttributeJudgement.objects.filter(run=run).delete()
    # ... and the database itself (ranking 0007), for whatever bypasses the ORM.
    for statement in (
        "UPDATE ranking_attributejudgement SET reason = 'x' WHERE id = %s",
        "DELETE FROM ranking_attributejudgement WHERE id = %s",
    ):
        with pytest.raises(DatabaseError, match="append-only"):
            with transaction.atomic(), connection.cursor() as cursor:
                cursor.execute(statement, [row.pk])
    row.refresh_from_db()
    assert row.reason != "edited"


def test_a_run_executes_once(acme: Tenant, sim: list[str]) -> None:
    board = board_with(acme.organization, ratio_judge(acme.organization), truths(6, seed=9), top_k=2)
    run = services.attribute_run_start(board=board, actor=None)
    services.attribute_run_execute(run_id=run.pk)
    calls = len(sim)
    again = services.attribute_run_execute(run_id=run.pk)  # a redelivered task: the claim fails
    assert len(sim) == calls and again.status == AttributeRun.Status.DONE


def test_boards_need_a_ratio_judge_of_their_organisation_and_changes_are_audited(
    acme: Tenant, globex: Tenant, sim: list[str], alice
) -> None:  # type: ignore[no-untyped-def]
    pairwise = Rubric.objects.create(organization=acme.organization, name="pw", question="Which is better?")
    endpoint = ModelEndpointFactory.create(organization=acme.organization)
    wrong_kind = Judge.objects.create(organization=acme.organization, name="pw", endpoint=endpoint, rubric=pairwise)
    with pytest.raises(Invalid):
        board_with(acme.organization, wrong_kind, truths(5))
    with pytest.raises(Invalid):
        board_with(acme.organization, ratio_judge(globex.organization), truths(5))
    board = board_with(acme.organization, ratio_judge(acme.organization), truths(5), top_k=2)
    with pytest.raises(Invalid):
        board_with(acme.organization, board.judge, truths(5), top_k=2)  # the name is taken
    services.attribute_entities_add(board=board, entities=[services.EntityInput(text="more [[true=0]]")], actor=alice)
    assert list(board.entities.values_list("position", flat=True)) == list(range(6))
    run = services.attribute_run_start(board=board, actor=alice)
    slug, new = services.attribute_board_publish(board=board, actor=alice)
    assert new and services.attribute_board_publish(board=board, actor=alice) == (slug, False)
    assert services.attribute_board_unpublish(board=board, actor=alice)
    assert not services.attribute_board_unpublish(board=board, actor=alice)
    actions = list(AuditEvent.objects.filter(organization=acme.organization).values_list("action", flat=True))
    for action in (
        AuditAction.ATTRIBUTE_BOARD_CREATED,
        AuditAction.ATTRIBUTE_ENTITIES_ADDED,
        AuditAction.ATTRIBUTE_RUN_STARTED,
        AuditAction.ATTRIBUTE_BOARD_PUBLISHED,
        AuditAction.ATTRIBUTE_BOARD_UNPUBLISHED,
    ):
        assert action in actions
    assert run.budget_calls == 8 * 6 and run.entities == 6
    with pytest.raises(Invalid):
        tiny = board_with(acme.organization, board.judge, truths(3), name="tiny", top_k=3)
        services.attribute_run_start(board=tiny, actor=None)


def test_starting_a_run_sends_its_task_on_commit_and_the_task_runs_it_in_its_organisation(
    acme: Tenant, sim: list[str], django_capture_on_commit_callbacks, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    from celery import Task

    from ranking.tasks import attribute_run_task
    from raters.tenancy import scope

    sent: list[tuple[object, object]] = []
    monkeypatch.setattr(Task, "apply_async", lambda self, args=None, kwargs=None, **_: sent.append((args, kwargs)))
    board = board_with(acme.organization, ratio_judge(acme.organization), truths(6, seed=10), top_k=2)
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        run = services.attribute_run_start(board=board, actor=None)
    assert sent == [] and len(callbacks) == 1  # nothing leaves before the commit
    callbacks[0]()
    assert sent == [((run.pk,), {"organization_id": acme.organization.pk})]
    with scope(organization=[]):  # the task opens the run's organisation itself
        assert attribute_run_task(run.pk, organization_id=acme.organization.pk) == "done"
    assert AttributeRun.objects.get(pk=run.pk).calls == len(sim) > 0
