"""Generating a battle's answers, outside any transaction (model calls take seconds and must hold no
locks): queued on the ``generation`` queue, generated whole or streamed live to the page, then both
answers released together or the battle voided. Also a multi-turn battle's next turn
(``battle_continue``), generated as the first was. The tasks that run it live here too."""

from __future__ import annotations

import logging
from typing import Any

from celery import shared_task
from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone
from kombu.exceptions import OperationalError as KombuOperationalError
from redis.exceptions import RedisError

from core.errors import Invalid
from raters.tenancy import TenantTask
from serving.analysis import answer_model_mentions, prompt_asks_identity, style_counts
from serving.triton import (
    EndpointSpec,
    GenerationResult,
    SamplingParams,
    StreamEvent,
    generate_pair,
    stream_pair,
)
from serving.triton import Prompt as ClientPrompt

from .. import selectors
from ..live import LivePublisher
from ..models import Battle, Campaign, Competitor, Generation, Side, Turn
from ..prompting import prompt_hash, prompt_validate
from ..rendering import answer_rendered
from .errors import ContinueRefused, IdentityQuestionRefused, NotAllowed
from .identity import IDENTITY_ANSWER_VOIDED, IDENTITY_QUESTION_REFUSED, identity_refused
from .shared_items import battle_items_share

logger = logging.getLogger(__name__)


def _generation_queue(battle: Battle) -> None:
    """Generate the battle in a worker of the generation queue (CELERY_TASK_ROUTES; sent when the
    current transaction commits; where tasks run eagerly, right here): streamed to its page if it is
    live, else generated whole."""
    task, here = (
        (battle_generate_live_task, battle_generate_live)
        if battle.live
        else (battle_generate_task, battle_generate_queued)
    )
    try:
        task.delay(str(battle.pk), organization_id=battle.organization_id)
    except (KombuOperationalError, RedisError):
        if transaction.get_connection().in_atomic_block:
            raise  # not sent yet (on commit); the caller's transaction decides
        # The broker is down: rather than leave the rater waiting until it is back, this one battle is
        # generated in the request (a web worker waits on the models, for the outage only); a live
        # page then replays the battle's channel, or shows the recorded answers, at the same pace.
        logger.error("generation queue unreachable: battle %s generated in the web request", battle.pk)
        here(battle_id=str(battle.pk))


# A battle still "generating" this long after its creation lost its worker: the endpoints' timeouts
# are capped at 110 s, so nothing can still be coming.
STALE_GENERATION_S = 150


def battle_generate(*, battle: Battle) -> Battle:
    """Fan the prompt out to both sides at once with the battle's one parameter set, then release both
    answers together, or void the battle if either side failed."""
    params = SamplingParams(**battle.params)
    turn, left_input, right_input = battle_turn_inputs(battle)
    try:
        if turn == 0:
            left_result, right_result = generate_pair(
                _endpoint_spec(battle.left), _endpoint_spec(battle.right), battle.prompt.text, params
            )
        else:  # each side continues its own conversation: two inputs, so the pair call that takes two
            left_result, right_result = stream_pair(
                _endpoint_spec(battle.left), _endpoint_spec(battle.right), left_input, right_input, params, _ignore
            )
    except Exception as exc:  # never leave a battle "generating": void it and say why to managers
        logger.exception("generation of battle %s failed", battle.pk)
        failed = GenerationResult("", 0, "error", 0.0, f"generation failed: {type(exc).__name__}: {exc}", "error")
        left_result = right_result = failed
    return battle_generations_record(battle=battle, left=left_result, right=right_result, turn=turn)


def _ignore(event: StreamEvent) -> None:
    pass


def _endpoint_spec(competitor: Competitor) -> EndpointSpec:
    """The competitor's model server; an external competitor has none (pair sampling never draws one
    for a generated battle, so this is a bug caught where it happens: the battle voids)."""
    if competitor.endpoint is None:
        raise ValueError(f"competitor {competitor.pk} is an external model and cannot generate")
    return competitor.endpoint.spec()


def battle_turn_inputs(battle: Battle) -> tuple[int, ClientPrompt, ClientPrompt]:
    """The turn to generate now and each side's input: for the first turn the prompt; for a later turn
    the side's own conversation (the prompt, that side's answers, the rater's turns), so each model
    continues what it said itself."""
    turns = list(battle.turns.order_by("index"))
    if not turns:
        return 0, battle.prompt.text, battle.prompt.text
    answers = {(g.turn, g.side): g.text for g in battle.generations.all()}

    def conversation(side: str) -> list[dict[str, str]]:
        messages = [{"role": "user", "content": battle.prompt.text}]
        for turn in turns:
            messages.append({"role": "assistant", "content": answers.get((turn.index - 1, side), "")})
            messages.append({"role": "user", "content": turn.text})
        return messages

    return len(turns), conversation(Side.LEFT), conversation(Side.RIGHT)


def battle_live_key(battle: Battle, turn: int) -> str:
    """The live channel of a battle's turn (the first turn's is the battle's id)."""
    return str(battle.pk) if turn == 0 else f"{battle.pk}.{turn}"


@transaction.atomic
def battle_continue(*, battle_id: Any, user: User, text: str) -> Battle:
    """The rater's next turn in a multi-turn battle: the message goes to both models, each with its own
    history; the battle is generating again (no vote meanwhile) and its answers are shown together, as
    the first turn's were. One vote at the end, never a regenerated answer."""
    battle = selectors.battle_for_rater(user=user, battle_id=battle_id)
    if battle is None:
        raise NotAllowed("No such battle.")
    campaign = battle.campaign
    if battle.status == Battle.Status.VOTED:
        raise ContinueRefused("This battle has been voted on; start the next one.")
    if battle.source != Battle.Source.GENERATED:
        # Its answers came ready-made: no model here can continue them.
        raise ContinueRefused("This battle has one turn: vote now.")
    if battle.status != Battle.Status.READY or battle.shown_at is None:
        raise ContinueRefused("Wait until both answers are complete before you continue.")
    if campaign.status != Campaign.Status.OPEN:
        raise ContinueRefused("This campaign is closed; no more turns or votes are taken.")
    if selectors.pool_for_rater(campaign=campaign, user=user) is None:
        raise ContinueRefused("You are no longer in a rater pool of this campaign.")
    index = battle.turns.count() + 1
    if index >= campaign.max_turns:
        raise ContinueRefused(
            f"This battle has had the {campaign.max_turns} turns the campaign allows: vote now."
            if campaign.max_turns > 1
            else "This campaign has one turn per battle: vote now."
        )
    try:
        clean = prompt_validate(text)
    except ValueError as exc:
        raise Invalid(str(exc), field_errors={"text": str(exc)}) from None
    if identity_refused(campaign) and prompt_asks_identity(clean):
        # Checked before the battle changes state: the turn is not stored and no model is called.
        raise IdentityQuestionRefused(IDENTITY_QUESTION_REFUSED, field_errors={"text": IDENTITY_QUESTION_REFUSED})
    live = bool(settings.ARENA_LIVE_STREAMING)
    now = timezone.now()
    # A second tab sending its own turn at the same moment: one flips READY, the other is refused.
    won = Battle.objects.filter(pk=battle.pk, status=Battle.Status.READY, shown_at__isnull=False).update(
        status=Battle.Status.GENERATING,
        shown_at=None,
        ready_at=None,
        generation_started_at=None,
        requested_at=now,
        live=live,
    )
    if not won:
        raise ContinueRefused("This battle changed in another tab; reload it.")
    Turn.objects.create(battle=battle, index=index, text=clean, text_hash=prompt_hash(clean))
    battle.refresh_from_db()
    _generation_queue(battle)  # live (streamed) or whole, as the update above set it
    return battle


def battle_generate_queued(*, battle_id: str) -> Battle | None:
    """The generation queue's work on one battle: generate it unless it was voided meanwhile (a
    withdrawn competitor, a closed campaign) or another delivery of the same task took it (late
    acknowledgement redelivers a task whose worker died): the conditional update on
    ``generation_started_at`` lets exactly one delivery call the models. A battle whose worker died
    after that is voided by the buffer's maintenance once it is stale, never generated twice."""
    started = Battle.objects.filter(
        pk=battle_id, status=Battle.Status.GENERATING, generation_started_at__isnull=True
    ).update(generation_started_at=timezone.now())
    battle = (
        Battle.objects.select_related("prompt", "left__endpoint", "right__endpoint", "campaign")
        .filter(pk=battle_id)
        .first()
    )
    if not started or battle is None:
        return battle
    return battle_generate(battle=battle)


@shared_task(
    base=TenantTask, acks_late=True, organization_slots="generation", name="battles.tasks.battle_generate_task"
)
def battle_generate_task(battle_id: str, *, organization_id: int) -> str:
    battle = battle_generate_queued(battle_id=battle_id)
    return battle.status if battle is not None else "missing"


_FAILURE_PHRASES = {
    "timeout": "did not answer in time",
    "unreachable": "could not be reached",
    "not_served": "is not being served at the moment",
    "malformed": "returned a malformed answer",
}


def _void_message(left: GenerationResult, right: GenerationResult) -> str:
    # Built only from the failure's kind: which side failed, or the model's name or server (both in
    # GenerationResult.error, kept for managers), would tell the rater who is who.
    phrases = sorted({_FAILURE_PHRASES.get(r.error_kind, "failed with an error") for r in (left, right) if not r.ok})
    return "One of the models " + " and ".join(phrases) + "."


@transaction.atomic
def battle_generations_record(
    *, battle: Battle, left: GenerationResult, right: GenerationResult, turn: int = 0
) -> Battle:
    for side, competitor, result in ((Side.LEFT, battle.left, left), (Side.RIGHT, battle.right, right)):
        timing = _streamed_timing(result)
        Generation.objects.create(
            **timing,
            battle=battle,
            side=side,
            turn=turn,
            competitor=competitor,
            text=result.text,
            # Rendered here, once, not on each view of the page (nor in the rater's request).
            **(answer_rendered(result.text) if result.ok else {}),
            output_tokens=result.output_tokens,
            finish_reason=result.finish_reason,
            latency_s=result.latency_s,
            error=result.error,
            style=style_counts(result.text).as_dict() if result.ok else {},
            model_mentions=list(answer_model_mentions(result.text)) if result.ok else [],
        )
    now = timezone.now()
    named = left.ok and right.ok and identity_refused(battle.campaign) and _names_a_model(left.text, right.text)
    if named:
        # Under "refuse" an answer that names a model or vendor is never shown: the battle is voided (its
        # prompt is not used up) and the rater told why; the generations stay for the managers.
        Battle.objects.filter(pk=battle.pk, status=Battle.Status.GENERATING).update(
            status=Battle.Status.VOID, void_reason=IDENTITY_ANSWER_VOIDED
        )
    elif left.ok and right.ok:
        ready = Battle.objects.filter(pk=battle.pk, status=Battle.Status.GENERATING).update(
            status=Battle.Status.READY, ready_at=now
        )
        if ready and turn == 0:
            battle.refresh_from_db()
            battle_items_share(battles=[battle])
    else:
        Battle.objects.filter(pk=battle.pk, status=Battle.Status.GENERATING).update(
            status=Battle.Status.VOID, void_reason=_void_message(left, right)
        )
    battle.refresh_from_db()
    return battle


def _names_a_model(*texts: str) -> bool:
    return any(answer_model_mentions(text) for text in texts)


def _streamed_timing(result: GenerationResult) -> dict[str, float | None]:
    """Time to first token and tokens per second (output tokens / the whole call), of a side that
    answered; an answer asked for (or sent) in one piece has no first token timed: None, not its latency."""
    if not result.ok:
        return {"ttft_s": None, "tokens_per_s": None}
    return {"ttft_s": result.ttft_s, "tokens_per_s": result.tokens_per_s if result.latency_s > 0 else None}


# --- Live battles (rater-typed prompts): generated by a worker, streamed to the page ----------------


def battle_start_live(*, battle: Battle) -> Battle:
    """Mark a new battle live and queue its generation on the ``generation`` queue (sent when the
    surrounding transaction commits). The web request returns at once; the page reads the battle's live
    channel (battles/live.py) and shows both answers at one pace."""
    Battle.objects.filter(pk=battle.pk).update(live=True)
    battle.live = True
    _generation_queue(battle)
    return battle


def battle_generate_live(*, battle_id: Any) -> Battle | None:
    """The worker's part of a live battle: both sides streamed at once with the one parameter set, every
    arrival published to the battle's live channel, then both generations recorded (READY) or the battle
    voided, and the channel told which. Exactly once, as ``battle_generate_queued``: the conditional
    update on ``generation_started_at`` lets one delivery call the models; a battle voided meanwhile is
    left alone."""
    started = Battle.objects.filter(
        pk=battle_id, status=Battle.Status.GENERATING, generation_started_at__isnull=True
    ).update(generation_started_at=timezone.now())
    battle = (
        Battle.objects.select_related("prompt", "left__endpoint", "right__endpoint", "campaign")
        .filter(pk=battle_id)
        .first()
    )
    if not started or battle is None:
        return battle
    battle_pk = battle.pk
    turn, left_input, right_input = battle_turn_inputs(battle)
    publisher = LivePublisher(battle_live_key(battle, turn))
    # Under "refuse", what each side has written so far: once either names a model, nothing more of the
    # battle is published (the chunk that completes the name included) and it ends voided.
    screen = identity_refused(battle.campaign)
    written = ["", ""]
    withheld = [False]

    def on_event(event: StreamEvent) -> None:
        if screen:
            written[event.side] += event.delta
            if withheld[0] or _names_a_model(written[event.side]):
                withheld[0] = True
                return
        try:
            publisher.chunk(event.side, event.delta, event.done)
        except Exception:  # the page then gets the recorded texts at the end (live.live_frames)
            logger.exception("battle %s: publishing an arrival failed", battle_pk)

    try:
        params = SamplingParams(**battle.params)
        try:
            left_result, right_result = stream_pair(
                _endpoint_spec(battle.left),
                _endpoint_spec(battle.right),
                left_input,
                right_input,
                params,
                on_event,
            )
        except Exception as exc:
            logger.exception("live generation of battle %s failed", battle.pk)
            failed = GenerationResult("", 0, "error", 0.0, f"generation failed: {type(exc).__name__}: {exc}", "error")
            left_result = right_result = failed
        for side, result in (("left", left_result), ("right", right_result)):
            logger.info(
                "battle %s %s: ttft %s, latency %.3f s, %d output tokens, %s tokens/s%s",
                battle.pk,
                side,
                "n/a" if result.ttft_s is None else f"{result.ttft_s:.3f} s",
                result.latency_s,
                result.output_tokens,
                _streamed_timing(result)["tokens_per_s"],
                f", failed: {result.error}" if not result.ok else "",
            )
        battle = battle_generations_record(battle=battle, left=left_result, right=right_result, turn=turn)
        try:
            publisher.end("ready" if battle.status == Battle.Status.READY else "void")
        except Exception:
            logger.exception("battle %s: publishing the end failed", battle.pk)
    finally:
        publisher.close()
    return battle


@shared_task(
    base=TenantTask, acks_late=True, organization_slots="generation", name="battles.tasks.battle_generate_live_task"
)
def battle_generate_live_task(battle_id: str, *, organization_id: int) -> str:
    """A live battle's two streams, published to its live channel (battles/live.py) as they arrive;
    exactly once, like ``battle_generate_task`` (a redelivery finds the generation started)."""
    battle = battle_generate_live(battle_id=battle_id)
    return battle.status if battle is not None else "missing"


def battle_streams(battle: Battle) -> bool:
    """Whether the battle's page shows it through the live stream: a streamed battle not yet shown in
    full. Also once it is recorded: a reload must not show the answers earlier than the paced stream
    would (the longer answer's tail, paced at the slower model's rate, would tell who was faster)."""
    return battle.live and battle.shown_at is None and battle.status in (Battle.Status.GENERATING, Battle.Status.READY)
