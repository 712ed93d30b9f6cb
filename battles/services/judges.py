"""Judges: served models that vote under a versioned rubric, into their own log. Rubrics and judges
created and revised, and judge runs queued and executed (over a campaign's battles, or a golden set)."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from celery import shared_task
from django.conf import settings
from django.contrib.auth.models import AnonymousUser, User
from django.db import IntegrityError, models, transaction
from django.utils import timezone

from core.errors import Invalid, NotFound
from raters.hooks import send_on_commit
from raters.models import AuditAction
from raters.services import audit_record
from raters.tenancy import TenantTask
from serving.models import ModelEndpoint
from serving.triton import EndpointSpec, GenerationResult, SamplingParams, generate

from .. import hooks, judging
from ..models import (
    Battle,
    Campaign,
    Competitor,
    Generation,
    GoldenAnswer,
    Judge,
    JudgeRun,
    JudgeVerdict,
    Prompt,
    Rubric,
    Side,
)
from .errors import JudgeUnusable
from .generation import _endpoint_spec
from .prompts import _audit_actor

logger = logging.getLogger(__name__)


# --- Judges: served models that vote under a versioned rubric, into their own log ----------------------


def _rubric_next_version(*, organization_id: int, name: str) -> int:
    newest = Rubric.objects.filter(organization_id=organization_id, name=name).aggregate(v=models.Max("version"))["v"]
    return int(newest or 0) + 1


@transaction.atomic
def rubric_create(
    *,
    organization: Any,
    name: str,
    question: str,
    instructions: str = "",
    kind: str = Rubric.Kind.PAIRWISE,
    actor: User | AnonymousUser | None,
) -> Rubric:
    """A rubric's first version, or the next one of an existing name (versions are never rewritten)."""
    rubric = Rubric(
        organization=organization,
        name=name,
        version=_rubric_next_version(organization_id=organization.pk, name=name),
        kind=kind,
        question=question,
        instructions=instructions,
    )
    rubric.full_clean(exclude=["content_hash"])
    rubric.save()
    audit_record(
        organization=organization,
        actor=actor,
        action=AuditAction.RUBRIC_CREATED,
        obj=rubric,
        data={"name": name, "version": rubric.version, "kind": kind, "content_hash": rubric.content_hash},
    )
    return rubric


@transaction.atomic
def judge_create(
    *,
    organization: Any,
    name: str,
    endpoint: ModelEndpoint,
    rubric: Rubric,
    family: str = "",
    excluded_families: Sequence[str] = (),
    max_tokens: int = 256,
    actor: User | AnonymousUser | None,
) -> Judge:
    judge = Judge(
        organization=organization,
        name=name,
        endpoint=endpoint,
        rubric=rubric,
        family=family,
        excluded_families=list(excluded_families),
        max_tokens=max_tokens,
    )
    judge.full_clean()
    judge.save()
    audit_record(
        organization=organization,
        actor=actor,
        action=AuditAction.JUDGE_CREATED,
        obj=judge,
        data={
            "name": name,
            "endpoint": endpoint.name,
            "model_name": endpoint.model_name,
            "rubric": rubric.name,
            "rubric_version": rubric.version,
            "rubric_hash": rubric.content_hash,
            "excluded_families": sorted(judge.families_excluded()),
        },
    )
    return judge


@transaction.atomic
def judge_save(*, judge: Judge, actor: User | AnonymousUser | None, changed: list[str]) -> Judge:
    """A judge's name, token limit or active flag (its model, rubric and families are its identity)."""
    judge.full_clean()
    judge.save(update_fields=["name", "max_tokens", "active"])
    audit_record(
        organization=judge.organization,
        actor=actor,
        action=AuditAction.JUDGE_CHANGED,
        obj=judge,
        data={"fields": changed, "name": judge.name, "active": judge.active, "max_tokens": judge.max_tokens},
    )
    return judge


@transaction.atomic
def rubric_revise(
    *, rubric: Rubric, question: str, instructions: str, actor: User | AnonymousUser | None
) -> tuple[Rubric, list[Judge]]:
    """A rubric's new wording: version n + 1, and for every active judge on the old version a new judge on
    the new one (the old judge is retired: inactive, its verdicts and calibration kept). Each campaign the
    old judge had judged gets a run of the new judge, so its board and its calibration are measured again
    under the new wording (a calibration belongs to one rubric version)."""
    revised = rubric_create(
        organization=rubric.organization,
        name=rubric.name,
        question=question,
        instructions=instructions,
        kind=rubric.kind,
        actor=actor,
    )
    successors = []
    for old in Judge.objects.filter(rubric=rubric, active=True).select_related("endpoint").order_by("pk"):
        base = old.name.rsplit(" (v", 1)[0]
        new = judge_create(
            organization=old.organization,
            name=f"{base} (v{revised.version})"[:120],
            endpoint=old.endpoint,
            rubric=revised,
            family=old.family,
            excluded_families=list(old.excluded_families or []),
            max_tokens=old.max_tokens,
            actor=actor,
        )
        Judge.objects.filter(pk=old.pk).update(active=False)
        audit_record(
            organization=old.organization,
            actor=actor,
            action=AuditAction.JUDGE_CHANGED,
            obj=old,
            data={"active": False, "successor": new.pk, "rubric_version": revised.version},
        )
        successors.append(new)
        judged = (
            JudgeRun.objects.filter(judge=old, kind=JudgeRun.Kind.BATTLES, status=JudgeRun.Status.DONE)
            .values_list("campaign_id", flat=True)
            .distinct()
        )
        for campaign in Campaign.objects.filter(pk__in=list(judged)).order_by("pk"):
            judge_run_create(judge=new, campaign=campaign, actor=actor)
    return revised, successors


@transaction.atomic
def judge_run_create(
    *,
    judge: Judge,
    campaign: Campaign,
    actor: User | AnonymousUser | None,
    kind: str = JudgeRun.Kind.BATTLES,
    seed: int = 0,
    competitor_ids: Sequence[int] = (),
    start: bool = True,
) -> JudgeRun:
    """A queued run of ``judge`` over ``campaign`` (its battles, or a golden set); the worker starts it
    after the commit (``start=False``: the caller runs ``judge_run_execute`` itself, as the CLI does)."""
    if judge.organization_id != campaign.organization_id:
        raise NotFound("No such campaign.")
    if not judge.active:
        raise JudgeUnusable("This judge is retired (its rubric has a newer version): use its successor.")
    if judge.rubric.kind != Rubric.Kind.PAIRWISE:
        raise JudgeUnusable("Only a pairwise rubric judges battles.")
    competitors = sorted({int(c) for c in competitor_ids})
    if competitors:
        found = set(
            Competitor.objects.filter(campaign=campaign, pk__in=competitors, gold=False).values_list("pk", flat=True)
        )
        if found != set(competitors):
            raise Invalid("Every competitor of a golden run must be one of the campaign's.")
    run = JudgeRun.objects.create(
        organization_id=campaign.organization_id,
        campaign=campaign,
        judge=judge,
        rubric=judge.rubric,
        kind=kind,
        seed=seed,
        competitor_ids=competitors,
        created_by=_audit_actor(actor),
    )
    audit_record(
        organization=campaign.organization,
        actor=actor,
        action=AuditAction.JUDGE_RUN_CREATED,
        obj=run,
        data={"judge": judge.name, "campaign": campaign.pk, "kind": kind, "seed": seed, "competitors": competitors},
    )
    if start:
        organization_id = campaign.organization_id
        transaction.on_commit(lambda: judge_run_task.delay(run.pk, organization_id=organization_id))
    return run


@dataclass(frozen=True)
class JudgePair:
    """One pair to judge: a battle's, or a golden set's (``battle_id`` None)."""

    battle_id: Any
    prompt_id: int
    category: str
    prompt: str
    left_id: int
    right_id: int
    left: str
    right: str


@dataclass(frozen=True)
class _Call:
    result: GenerationResult
    reply: judging.Reply
    input_tokens: int


def _judge_call(spec: EndpointSpec, params: SamplingParams, judge: Judge, pair: JudgePair, order: str) -> _Call:
    a, b = (pair.left, pair.right) if order == "ab" else (pair.right, pair.left)
    text = judging.judge_prompt(
        question=judge.rubric.question,
        instructions=judge.rubric.instructions,
        prompt=pair.prompt,
        answer_a=a,
        answer_b=b,
    )
    result = generate(spec, text, params)
    if not result.ok:
        reply = judging.Reply(None, f"call failed: {result.error_kind or 'error'}")
    else:
        reply = judging.reply_parse(result.text)
    return _Call(result, reply, len(text.split()))


def _battle_pairs(run: JudgeRun, excluded: set[str]) -> tuple[list[JudgePair], int]:
    """The campaign's judgeable battles (both answers there, no gold pseudo-competitor, one turn) not yet
    judged in this run, and how many were left out because the judge may not judge a side (its own model,
    or an excluded family: ``Judge.may_judge``)."""
    done = set(JudgeVerdict.objects.filter(run=run, battle__isnull=False).values_list("battle_id", flat=True))
    battles = (
        Battle.objects.filter(
            campaign_id=run.campaign_id, status__in=[Battle.Status.READY, Battle.Status.VOTED], left__gold=False
        )
        .exclude(source=Battle.Source.GOLD)
        .exclude(turns__isnull=False)
        .select_related("prompt", "left__endpoint", "right__endpoint")
        .order_by("created_at", "id")
    )
    answers: dict[tuple[Any, str], str] = {}
    battle_list = [b for b in battles if b.pk not in done]
    for g in Generation.objects.filter(battle_id__in=[b.pk for b in battle_list], turn=0).only(
        "battle_id", "side", "text", "error"
    ):
        if not g.error:
            answers[(g.battle_id, g.side)] = g.text
    pairs, skipped = [], 0
    for battle in battle_list:
        if not (run.judge.may_judge(battle.left, excluded) and run.judge.may_judge(battle.right, excluded)):
            skipped += 1
            continue
        left, right = answers.get((battle.pk, Side.LEFT)), answers.get((battle.pk, Side.RIGHT))
        if left is None or right is None:
            continue
        pairs.append(
            JudgePair(
                battle.pk,
                battle.prompt_id,
                battle.prompt.category,
                battle.prompt.text,
                battle.left_id,
                battle.right_id,
                left,
                right,
            )
        )
    return pairs, skipped


def _golden_competitors(run: JudgeRun) -> list[Competitor]:
    found = Competitor.objects.filter(campaign_id=run.campaign_id, gold=False, endpoint__isnull=False)
    if run.competitor_ids:
        found = found.filter(pk__in=run.competitor_ids)
    else:
        found = found.filter(active=True)
    return list(found.select_related("endpoint").order_by("pk"))


def _golden_answers(run: JudgeRun, competitors: list[Competitor], prompts: list[Prompt]) -> None:
    """Each competitor answers each prompt once (already-stored answers are kept: a resumed run does not
    generate them again), with the campaign's one parameter set."""
    campaign = run.campaign
    have = set(GoldenAnswer.objects.filter(run=run).values_list("prompt_id", "competitor_id"))
    todo = [(p, c) for p in prompts for c in competitors if (p.pk, c.pk) not in have]

    def answer(item: tuple[Prompt, Competitor]) -> tuple[Prompt, Competitor, GenerationResult]:
        prompt, competitor = item
        params = SamplingParams(
            temperature=campaign.temperature,
            top_p=campaign.top_p,
            max_tokens=campaign.max_tokens,
            system_prompt=campaign.system_prompt,
            seed=run.seed,
        )
        return prompt, competitor, generate(_endpoint_spec(competitor), prompt.text, params)

    with ThreadPoolExecutor(max_workers=max(1, settings.ARENA_JUDGE_CONCURRENCY)) as pool:
        for prompt, competitor, result in pool.map(answer, todo):
            with contextlib.suppress(IntegrityError), transaction.atomic():
                GoldenAnswer.objects.create(
                    organization_id=run.organization_id,
                    run=run,
                    prompt=prompt,
                    competitor=competitor,
                    text=result.text,
                    output_tokens=result.output_tokens,
                    finish_reason=result.finish_reason,
                    latency_s=result.latency_s,
                    error=result.error,
                )
                JudgeRun.objects.filter(pk=run.pk).update(
                    answer_wall_seconds=models.F("answer_wall_seconds") + result.latency_s
                )


def _golden_pairs(run: JudgeRun, excluded: set[str]) -> tuple[list[JudgePair], int]:
    competitors = _golden_competitors(run)
    prompts = list(
        Prompt.objects.filter(campaign_id=run.campaign_id, source=Prompt.Source.POOL, active=True).order_by("pk")
    )
    _golden_answers(run, competitors, prompts)
    answers = {
        (a.prompt_id, a.competitor_id): a.text
        for a in GoldenAnswer.objects.filter(run=run).only("prompt_id", "competitor_id", "text", "error")
        if not a.error
    }
    done = set(JudgeVerdict.objects.filter(run=run).values_list("prompt_id", "left_id", "right_id"))
    allowed = {c.pk: run.judge.may_judge(c, excluded) for c in competitors}
    pairs, skipped = [], 0
    for prompt in prompts:
        for i, left in enumerate(competitors):
            for right in competitors[i + 1 :]:
                if (prompt.pk, left.pk, right.pk) in done:
                    continue
                if not (allowed[left.pk] and allowed[right.pk]):
                    skipped += 1
                    continue
                a, b = answers.get((prompt.pk, left.pk)), answers.get((prompt.pk, right.pk))
                if a is None or b is None:
                    continue
                pairs.append(JudgePair(None, prompt.pk, prompt.category, prompt.text, left.pk, right.pk, a, b))
    return pairs, skipped


def _verdict_record(run: JudgeRun, judge: Judge, pair: JudgePair, ab: _Call, ba: _Call) -> bool:
    """Append one pair's verdict and count it on the run, in one transaction; False when this run already
    has it (a redelivered task: the database's unique constraint decides, and nothing is counted twice)."""
    combined = judging.combine(ab.reply, ba.reply)
    refusal = "; ".join(
        f"{order}: {call.reply.refusal}" for order, call in (("ab", ab), ("ba", ba)) if call.reply.refused
    )[:300]
    decisive = [c.reply.verdict for c in (ab, ba) if c.reply.verdict in ("A", "B")]
    calls = (ab, ba)
    try:
        with transaction.atomic():
            JudgeVerdict.objects.create(
                organization_id=run.organization_id,
                campaign_id=run.campaign_id,
                run=run,
                judge=judge,
                rubric_id=run.rubric_id,
                rubric_version=judge.rubric.version,
                rubric_hash=judge.rubric.content_hash,
                battle_id=pair.battle_id,
                prompt_id=pair.prompt_id,
                category=pair.category,
                left_id=pair.left_id,
                right_id=pair.right_id,
                choice=combined.choice,
                consistent=combined.consistent,
                refused=combined.refused,
                refusal=refusal,
                verdict_ab=ab.reply.verdict or "",
                verdict_ba=ba.reply.verdict or "",
                reply_ab=ab.result.text,
                reply_ba=ba.result.text,
                input_tokens=ab.input_tokens + ba.input_tokens,
                output_tokens=sum(c.result.output_tokens for c in calls),
                latency_s=sum(c.result.latency_s for c in calls),
            )
            F = models.F
            JudgeRun.objects.filter(pk=run.pk).update(
                pairs_judged=F("pairs_judged") + int(not combined.refused),
                pairs_refused=F("pairs_refused") + int(combined.refused),
                pairs_inconsistent=F("pairs_inconsistent") + int(not combined.refused and not combined.consistent),
                calls=F("calls") + 2,
                calls_refused=F("calls_refused") + sum(c.reply.refused and c.result.ok for c in calls),
                calls_failed=F("calls_failed") + sum(not c.result.ok for c in calls),
                first_position=F("first_position") + decisive.count("A"),
                second_position=F("second_position") + decisive.count("B"),
                input_tokens=F("input_tokens") + ab.input_tokens + ba.input_tokens,
                output_tokens=F("output_tokens") + sum(c.result.output_tokens for c in calls),
                call_wall_seconds=F("call_wall_seconds") + sum(c.result.latency_s for c in calls),
            )
    except IntegrityError:
        return False
    return True


def judge_run_execute(*, run_id: int) -> JudgeRun | None:
    """Judge every pair of the run twice, positions swapped (left first, then right first), and append
    the counterbalanced verdicts. Model calls happen outside any transaction; each verdict is written in
    its own. Resumable: a redelivered run judges only the pairs it has no verdict for. A run that judged no
    pair (every call failed, every reply refused, every pair excluded, nothing to judge) ends as failed,
    with the reason (``_nothing_judged_reason``), never as an empty "done"."""
    claimed = JudgeRun.objects.filter(pk=run_id, status__in=[JudgeRun.Status.QUEUED, JudgeRun.Status.RUNNING]).update(
        status=JudgeRun.Status.RUNNING, started_at=timezone.now()
    )
    if not claimed:
        return JudgeRun.objects.filter(pk=run_id).first()
    run = JudgeRun.objects.select_related("judge__endpoint", "judge__rubric", "campaign").get(pk=run_id)
    judge = run.judge
    excluded = judge.families_excluded()
    try:
        if run.kind == JudgeRun.Kind.GOLDEN:
            pairs, skipped = _golden_pairs(run, excluded)
        else:
            pairs, skipped = _battle_pairs(run, excluded)
        JudgeRun.objects.filter(pk=run.pk).update(
            pairs_total=JudgeVerdict.objects.filter(run=run).count() + len(pairs), pairs_excluded_family=skipped
        )
        spec = judge.endpoint.spec()
        params = SamplingParams(temperature=judge.temperature, top_p=1.0, max_tokens=judge.max_tokens, seed=run.seed)
        errors: dict[str, int] = {}

        def both(pair: JudgePair) -> tuple[JudgePair, _Call, _Call]:
            return pair, _judge_call(spec, params, judge, pair, "ab"), _judge_call(spec, params, judge, pair, "ba")

        with ThreadPoolExecutor(max_workers=max(1, settings.ARENA_JUDGE_CONCURRENCY)) as pool:
            for pair, ab, ba in pool.map(both, pairs):
                for call in (ab, ba):
                    if not call.result.ok:
                        errors[call.result.error] = errors.get(call.result.error, 0) + 1
                _verdict_record(run, judge, pair, ab, ba)
    except Exception as exc:
        logger.exception("judge run %s failed", run_id)
        JudgeRun.objects.filter(pk=run_id).update(
            status=JudgeRun.Status.FAILED, finished_at=timezone.now(), error=f"{type(exc).__name__}: {exc}"[:2000]
        )
        return _judge_run_finish(run_id)
    run.refresh_from_db()
    update: dict[str, Any] = {
        "status": JudgeRun.Status.DONE,
        "finished_at": timezone.now(),
        "stats": run.stats_derived(),
    }
    if not run.pairs_judged:
        # A run that judged nothing is a failure with its reason, never an empty "done".
        update.update(status=JudgeRun.Status.FAILED, error=_nothing_judged_reason(run, errors)[:2000])
    JudgeRun.objects.filter(pk=run_id).update(**update)
    return _judge_run_finish(run_id)


def _nothing_judged_reason(run: JudgeRun, errors: dict[str, int]) -> str:
    """Why a finished run has no judged pair, in the words the console and the API show."""
    if run.calls and run.calls_failed == run.calls:
        dominant = max(errors.items(), key=lambda item: item[1])[0] if errors else "every call failed"
        return f"every judge call failed; most often: {dominant}"
    if run.pairs_refused:
        refusals = list(
            JudgeVerdict.objects.filter(run=run, refused=True).exclude(refusal="").values_list("refusal", flat=True)
        )
        commonest = f"; most often: {max(set(refusals), key=refusals.count)}" if refusals else ""
        return (
            f"no pair judged: all {run.pairs_refused} pairs were refused (each reply must be exactly the JSON "
            f"verdict asked for; a failed call counts too){commonest}. Use a model built for judging."
        )
    if run.pairs_excluded_family:
        return (
            f"no pair judged: all {run.pairs_excluded_family} pairs were excluded, because this judge may not judge "
            f"a side (its own model or family: {', '.join(sorted(run.judge.families_excluded()))}). A judge must not "
            "be a competitor of the campaign it judges: use a judge on another model."
        )
    if run.kind == JudgeRun.Kind.GOLDEN:
        answer_errors = list(GoldenAnswer.objects.filter(run=run).values_list("error", flat=True))
        failed = [error for error in answer_errors if error]
        if answer_errors and len(failed) == len(answer_errors):
            return f"every competitor answer failed; most often: {max(set(failed), key=failed.count)}"
        if failed:
            return (
                f"no pair judged: no prompt has answers from two competitors ({len(failed)} of {len(answer_errors)} "
                f"answers failed; most often: {max(set(failed), key=failed.count)})."
            )
        return "no pair judged: the golden set has no pair of answers (it needs two competitors and a pool prompt)."
    return (
        "no pair judged: the campaign has no battle to judge yet (a single-turn battle with both answers, "
        "gold battles aside)."
    )


def _judge_run_finish(run_id: int) -> JudgeRun:
    with transaction.atomic():
        run = JudgeRun.objects.get(pk=run_id)
        send_on_commit(
            hooks.judge_run_finished,
            sender=JudgeRun,
            organization_id=run.organization_id,
            campaign_id=run.campaign_id,
            judge_id=run.judge_id,
            run_id=run.pk,
        )
    return run


@shared_task(base=TenantTask, acks_late=True, organization_slots="generation", name="battles.tasks.judge_run_task")
def judge_run_task(run_id: int, *, organization_id: int) -> str:
    """A judge run (its calls take seconds each): resumable, so a redelivery only finishes what is left."""
    run = judge_run_execute(run_id=run_id)
    return run.status if run is not None else "missing"
