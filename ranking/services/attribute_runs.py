"""Runs of an attribute board: queue one, and execute it on a worker (the adaptive design's batches, each
pair judged in both orders, the ledger, the fit and the stopping rule, the scores)."""

from __future__ import annotations

import logging
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
from celery import shared_task
from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from battles.models import Judge
from core.errors import Invalid
from raters.models import AuditAction
from raters.services import audit_record
from raters.tenancy import TenantTask
from serving.ratio_judging import TEMPLATE_HASH, RatioCall, ratio_judge_call

from .. import selectors
from ..estimators.board_quality import top_k_draws, top_k_error
from ..estimators.ratio import RatioFit, fit_ratio
from ..estimators.ratio_design import check_stop, propose_batch, score_rows
from ..models import AttributeBoard, AttributeEntity, AttributeJudgement, AttributeRun, AttributeScore
from .attribute_boards import _check_judge

logger = logging.getLogger(__name__)

# Judge calls run concurrently within a batch (each pair's two orders included); the writes stay here.
JUDGE_CONCURRENCY = 8
# The evidence a finished run needs before it may rank (else it fails, saying which rule broke): every
# entity in at least MIN_USABLE usable judgements (one pair judged in both orders), and the judged pairs
# joining every entity into one comparison graph (scores across separate groups are not comparable).
MIN_USABLE = 2


@transaction.atomic
def attribute_run_start(
    *,
    board: AttributeBoard,
    actor: User | None,
    judge: Judge | None = None,
    seed: int | None = None,
    via: str = "console",
) -> AttributeRun:
    """Queue a run of the board (by default with its own judge and seed; another judge or seed is a
    replication). The run is executed by a worker (``attribute_run_task``), sent when this commits."""
    judge = judge or board.judge
    _check_judge(judge, board.organization_id)
    n = AttributeEntity.objects.filter(board=board).count()
    if n < 3:
        raise Invalid("A board needs at least 3 entities to run.")
    if board.top_k >= n:
        raise Invalid(f"top_k ({board.top_k}) must be below the number of entities ({n}).")
    budget = board.calls_per_entity * n
    run = AttributeRun.objects.create(
        organization_id=board.organization_id,
        board=board,
        judge=judge,
        attribute=board.attribute,
        rubric_hash=judge.rubric.content_hash,
        template_hash=TEMPLATE_HASH,
        model_name=judge.endpoint.model_name,
        seed=board.seed if seed is None else seed,
        top_k=board.top_k,
        batch_size=board.batch_size,
        entities=n,
        budget_calls=budget - budget % 2,  # a pair costs two calls
        requested_by=actor,
    )
    audit_record(
        organization=board.organization,
        actor=actor,
        action=AuditAction.ATTRIBUTE_RUN_STARTED,
        obj=board,
        data={"run": run.pk, "judge": judge.pk, "seed": run.seed, "budget_calls": run.budget_calls, "via": via},
    )
    attribute_run_task.delay(run.pk, organization_id=board.organization_id)
    return run


def _judge_pair_orders(
    run: AttributeRun, judge: Judge, pairs: list[tuple[AttributeEntity, AttributeEntity]]
) -> list[RatioCall]:
    """Both orders of every pair, concurrently: [p0 (a, b), p0 (b, a), p1 (a, b), ...]."""
    spec = judge.endpoint.spec()
    rubric = run.judge.rubric
    attribute = run.attribute
    jobs = [(x, y) for a, b in pairs for x, y in ((a, b), (b, a))]

    retries = settings.ARENA_RATIO_CALL_RETRIES
    wait_s = settings.ARENA_RATIO_RETRY_WAIT_MS / 1000.0

    def call(job: tuple[AttributeEntity, AttributeEntity]) -> RatioCall:
        first, second = job
        for attempt in range(retries + 1):
            if attempt:
                time.sleep(attempt * wait_s)
            result = ratio_judge_call(
                spec,
                attribute=attribute,
                question=rubric.question,
                instructions=rubric.instructions,
                first=first.text,
                second=second.text,
                max_tokens=judge.max_tokens,
                seed=run.seed,
                temperature=judge.temperature,
            )
            # A failed call is asked again; a refusal or a malformed reply is the judge's answer (at
            # temperature 0 asking again repeats it), and an address refused by the outbound rule stays so.
            if result.verdict.status != "error" or result.error_kind == "refused":
                break
        return result

    with ThreadPoolExecutor(max_workers=JUDGE_CONCURRENCY) as pool:
        return list(pool.map(call, jobs))


# The run's counter for each outcome of a call.
_COUNTER_OF = {"accepted": "accepted", "refused": "refused", "malformed": "malformed", "error": "call_errors"}


def _dominant_error(run_id: int) -> str:
    counts = Counter(
        (status, reason if status == AttributeJudgement.Status.ERROR else "")
        for status, reason in AttributeJudgement.objects.filter(run_id=run_id)
        .exclude(status=AttributeJudgement.Status.ACCEPTED)
        .values_list("status", "reason")
    )
    total = AttributeJudgement.objects.filter(run_id=run_id).count()
    if not counts:
        return "no judge call was made"
    (status, reason), count = counts.most_common(1)[0]
    what = {"error": f"call error: {reason}", "refused": "the judge refused", "malformed": "malformed replies"}[status]
    return f"No judgement was accepted ({total} calls); the dominant failure: {what} ({count} of {total} calls)."


def attribute_run_execute(*, run_id: int) -> AttributeRun:
    """Run a queued run to its end (the worker's body; the module section's design, issue 12):

    batches from the adaptive design (``propose_batch``), each pair judged in both orders, the
    judgements appended to the ledger (one transaction per batch), the fit refreshed, and the
    stopping rule looked at before each batch: the run stops early only when the critical top-k pair
    separates under inflated bounds on two consecutive looks of a non-degraded solve, otherwise it
    spends its budget (or runs out of unjudged pairs: "exhausted"). A pair with any refusal,
    malformed reply or failed call is never proposed again, and neither of its orders reaches the
    estimator. A run that accepted nothing ends failed, naming the dominant failure; it writes no
    scores (a flat board would read as a tie of everything). Exactly one worker executes a run: the
    claim is a conditional update.

    Failed calls are retried and a wholly failed first batch (a cold judge) is asked again
    (settings ARENA_RATIO_*); a finished run whose evidence is too thin (MIN_USABLE) fails instead of
    ranking."""
    claimed = AttributeRun.objects.filter(pk=run_id, status=AttributeRun.Status.QUEUED).update(
        status=AttributeRun.Status.RUNNING, started_at=timezone.now()
    )
    run = AttributeRun.objects.select_related("board", "judge__rubric", "judge__endpoint").get(pk=run_id)
    if claimed != 1:
        return run
    try:
        return _attribute_run_body(run)
    except Exception as exc:
        logger.exception("attribute run %s failed", run_id)
        AttributeRun.objects.filter(pk=run_id).update(
            status=AttributeRun.Status.FAILED,
            failure_reason=f"The run stopped on an internal error ({type(exc).__name__}).",
            finished_at=timezone.now(),
        )
        run.refresh_from_db()
        return run


@shared_task(base=TenantTask, acks_late=True, organization_slots="generation", name="ranking.tasks.attribute_run_task")
def attribute_run_task(run_id: int, *, organization_id: int) -> str:
    """Execute one attribute-board run (its claim makes a redelivery a no-op); returns its status."""
    return attribute_run_execute(run_id=run_id).status


def _attribute_run_body(run: AttributeRun) -> AttributeRun:
    entities = list(AttributeEntity.objects.filter(board=run.board, position__lt=run.entities).order_by("position"))
    n = len(entities)
    index = {e.pk: k for k, e in enumerate(entities)}
    top_k = min(run.top_k, n - 1)
    ii: list[int] = []
    jj: list[int] = []
    rr: list[float] = []
    cc: list[float] = []
    banned: set[tuple[int, int]] = set()
    consecutive = 0
    fit = fit_ratio(n, ii, jj, rr, seed=run.seed, **selectors.RUN_FIT_OPTIONS)
    stop_reason = ""
    batch = 0
    cold_starts = 0
    while True:
        run.checks += 1
        look = check_stop(fit, top_k=top_k, spent=run.calls, budget=run.budget_calls, consecutive=consecutive)
        if look.stop:
            stop_reason = look.reason
            break
        consecutive = look.consecutive
        size = min(run.batch_size, max((run.budget_calls - run.calls) // 2, 1))
        proposal = propose_batch(fit, top_k=top_k, batch_size=size, refused=banned, seed=run.seed + run.checks)
        if proposal.pairs.shape[0] == 0:
            stop_reason = "exhausted"
            break
        batch += 1
        pairs = [(entities[a], entities[b]) for a, b in proposal.pairs.tolist()]
        calls = _judge_pair_orders(run, run.judge, pairs)
        if run.calls == 0:
            # A cold judge (loading, not yet served) fails a whole first batch: ask again after each wait
            # before the run may fail on it. The failed attempts are logged, not written to the ledger.
            for wait in settings.ARENA_RATIO_COLD_START_WAITS_S:
                if any(c.verdict.status != "error" for c in calls):
                    break
                cold_starts += 1
                logger.warning("attribute run %s: first batch failed whole; asking again in %.1f s", run.pk, wait)
                time.sleep(wait)
                calls = _judge_pair_orders(run, run.judge, pairs)
        rows: list[AttributeJudgement] = []
        for p, (a, b) in enumerate(pairs):
            both = calls[2 * p : 2 * p + 2]
            used = all(c.verdict.accepted for c in both)
            if not used:
                banned.add((min(index[a.pk], index[b.pk]), max(index[a.pk], index[b.pk])))
                run.pairs_refused += 1
            run.pairs += 1
            for order, (first, second), c in ((1, (a, b), both[0]), (2, (b, a), both[1])):
                v = c.verdict
                rows.append(
                    AttributeJudgement(
                        organization_id=run.organization_id,
                        run=run,
                        first=first,
                        second=second,
                        order=order,
                        batch=batch,
                        status=v.status,
                        raw_reply=c.reply,
                        more=v.more,
                        ratio=v.ratio,
                        log_ratio=v.log_ratio,
                        confidence=v.confidence,
                        used=used,
                        reason=v.reason,
                        output_tokens=c.output_tokens,
                        latency_s=c.latency_s,
                    )
                )
                run.calls += 1
                run.output_tokens += c.output_tokens
                run.call_seconds += c.latency_s
                counter = _COUNTER_OF[v.status]
                setattr(run, counter, getattr(run, counter) + 1)
                if used:
                    assert v.log_ratio is not None
                    ii.append(index[first.pk])
                    jj.append(index[second.pk])
                    rr.append(v.log_ratio)
                    cc.append(np.nan if v.confidence is None else v.confidence)
        with transaction.atomic():
            AttributeJudgement.objects.bulk_create(rows)
            run.save(update_fields=_RUN_COUNTERS)
        if run.accepted == 0 and run.call_errors == run.calls:
            # The judge answers nothing at all (down, not served, refusing the address): spending the
            # rest of the budget on it would only repeat the same error.
            stop_reason = "failed"
            break
        fit = fit_ratio(n, ii, jj, rr, cc, seed=run.seed, **selectors.RUN_FIT_OPTIONS)
    return _attribute_run_finish(run, fit, entities, top_k=top_k, stop_reason=stop_reason, cold_starts=cold_starts)


_RUN_COUNTERS = [
    "calls",
    "accepted",
    "refused",
    "malformed",
    "call_errors",
    "pairs",
    "pairs_refused",
    "checks",
    "output_tokens",
    "call_seconds",
]


def _finite(x: float) -> float | None:
    return float(x) if np.isfinite(x) else None


def order_figures(run_id: int) -> dict[str, Any]:
    """What the two presentation orders of the run's usable pairs say about the judge (recorded in
    ``solve["order"]``). Order 1 shows ``a`` first and answers ``r1 = log(a/b)``, order 2 shows ``b`` first
    and answers ``r2 = log(b/a)``; an order-free judge gives ``r1 = -r2``. *Disagreements*: pairs whose two
    answers favour the same position (``r1 * r2 > 0``: the verdict flips with the order). *Signed order
    residual*: the mean of ``(r1 + r2) / 2`` in natural-log units, positive when the item shown first is
    favoured (``exp`` of it: by what factor), with its standard error."""
    by_pair: dict[tuple[int, int, int], dict[int, float]] = {}
    for first, second, order, batch, r in AttributeJudgement.objects.filter(run_id=run_id, used=True).values_list(
        "first_id", "second_id", "order", "batch", "log_ratio"
    ):
        if r is not None:  # a used judgement always has its log-ratio
            by_pair.setdefault((min(first, second), max(first, second), batch), {})[order] = float(r)
    both = np.array([[v[1], v[2]] for v in by_pair.values() if 1 in v and 2 in v], dtype=np.float64).reshape(-1, 2)
    n = int(both.shape[0])
    disagree = int(np.sum(both[:, 0] * both[:, 1] > 0))
    residual = (both[:, 0] + both[:, 1]) / 2.0
    mean = float(residual.mean()) if n else None
    return {
        "pairs": n,
        "disagreements": disagree,
        "disagreement_rate": round(disagree / n, 4) if n else None,
        "signed_residual": mean,
        "signed_residual_se": float(residual.std(ddof=1) / np.sqrt(n)) if n > 1 else None,
        "first_shown_factor": float(np.exp(mean)) if mean is not None else None,
    }


def _thin_evidence(run: AttributeRun, fit: RatioFit, entities: list[AttributeEntity]) -> str:
    """Why the run's evidence is too thin to rank (MIN_USABLE), or "" when it is enough."""
    usable = fit.n_comparisons
    thin = [e.label or f"#{e.position}" for k, e in enumerate(entities) if usable[k] < MIN_USABLE]
    problems = []
    if thin:
        named = ", ".join(thin[:5]) + (f" and {len(thin) - 5} more" if len(thin) > 5 else "")
        problems.append(
            f"{len(thin)} of {len(entities)} entities have fewer than {MIN_USABLE} usable judgements ({named})"
        )
    if fit.n_components > 1:
        problems.append(f"the judged pairs form {fit.n_components} separate groups, not one comparison graph")
    if not problems:
        return ""
    failed = run.calls - run.accepted
    return (
        f"Too little evidence to rank: {'; '.join(problems)}. Every entity needs at least {MIN_USABLE} usable "
        f"judgements and the judged pairs must connect all entities. {failed} of {run.calls} calls gave no "
        f"usable judgement ({run.call_errors} failed, {run.refused} refused, {run.malformed} malformed)."
    )


@transaction.atomic
def _attribute_run_finish(
    run: AttributeRun,
    fit: RatioFit,
    entities: list[AttributeEntity],
    *,
    top_k: int,
    stop_reason: str,
    cold_starts: int = 0,
) -> AttributeRun:
    run.finished_at = timezone.now()
    run.degraded = fit.degraded
    run.solve = {
        "hash": selectors.attribute_fit_hash(fit),
        "observations": int(fit.edges.n_obs.sum()) if fit.edges.n_obs.size else 0,
        "edges": int(fit.edges.lo.size),
        "components": int(fit.n_components),
        "dispersion": _finite(fit.dispersion),
        "scale": _finite(fit.scale),
        "cyclic_share": _finite(fit.cyclic_share),
        "overridden": int(fit.overridden.sum()),
        "iterations": int(fit.iterations),
        "converged": bool(fit.converged),
        "degraded_reasons": list(fit.degraded_reasons),
        "std_method": fit.std_method,
        "method": {k: v for k, v in fit.method.items() if isinstance(v, (str, int, float, bool))},
        "cold_start_retries": cold_starts,
        "order": order_figures(run.pk),
    }
    thin = "" if fit.edges.lo.size == 0 else _thin_evidence(run, fit, entities)
    if fit.edges.lo.size == 0 or thin:
        run.status = AttributeRun.Status.FAILED
        run.stop_reason = "failed"
        run.failure_reason = thin or _dominant_error(run.pk)
        if cold_starts:
            run.failure_reason += f" The first batch was asked again {cold_starts} times (a cold judge?) first."
        run.save(
            update_fields=[
                *_RUN_COUNTERS,
                "status",
                "stop_reason",
                "failure_reason",
                "finished_at",
                "degraded",
                "solve",
            ]
        )
        return run
    run.status = AttributeRun.Status.DONE
    run.stop_reason = stop_reason
    # How likely the reported top-k set is wrong, under the fit's own posterior (estimators.board_quality).
    run.solve["top_k_error"] = top_k_error(fit, top_k, draws=top_k_draws(fit.n_entities), seed=run.seed)
    AttributeScore.objects.bulk_create(
        [
            AttributeScore(
                organization_id=run.organization_id,
                run=run,
                entity=entities[row.entity],
                rank=row.rank,
                score=row.score,
                std=_finite(row.std),
                z_score=_finite(row.z_score),
                percentile=row.percentile,
                lower=_finite(row.lower),
                upper=_finite(row.upper),
                in_top_k=row.in_top_k,
                comparisons=int(fit.n_comparisons[row.entity]),
                stop_reason=stop_reason,
            )
            for row in score_rows(fit, top_k=top_k, stop_reason=stop_reason)
        ]
    )
    run.save(
        update_fields=[*_RUN_COUNTERS, "status", "stop_reason", "failure_reason", "finished_at", "degraded", "solve"]
    )
    return run
