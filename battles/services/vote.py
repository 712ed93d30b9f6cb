"""The vote: a battle marked shown, then the rater's vote appended to the log in the statement that flips the
battle from READY to VOTED, with what the log records of the battle's answers."""

from __future__ import annotations

from collections.abc import Iterable
from contextlib import nullcontext
from datetime import datetime
from typing import Any
from uuid import UUID

from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.db.models import Exists
from django.utils import timezone

from core.errors import Invalid
from core.prepared import PreparedUpdate
from raters.hooks import send_on_commit
from raters.models import WebhookEvent
from raters.services import webhook_event_emit, webhook_events_subscribed
from serving.analysis import prompt_asks_identity

from .. import hooks, selectors
from ..models import Battle, Campaign, Choice, Generation, Side, Vote
from ..prompting import prompt_hash
from .errors import NotAllowed, VoteRejected
from .gold import _attention_assess, _qualification_assess


def _style_sum(styles: Iterable[dict[str, Any]]) -> dict[str, Any]:
    total: dict[str, Any] = {}
    for style in styles:
        for key, value in style.items():
            total[key] = total.get(key, 0) + value
    return total


# The vote's statements that every vote runs, compiled once (core.prepared) and run with each vote's values:
# the stamp of the first showing; the flip (what the log takes of the answers is read with the battle).
_mark_shown: PreparedUpdate = PreparedUpdate(
    lambda battle_id, shown_at: (
        Battle.objects.filter(pk=battle_id, shown_at__isnull=True),
        {"shown_at": shown_at},
    ),
    battle_id=UUID,
    shown_at=datetime,
)
# The flip checks that the rater is still in a pool the campaign names, in the same statement: a rater taken
# out of the pool after the battle was handed out votes no more (what the vote's own read of the pool did).
# It also asks that the battle be shown as the vote saw it (its first showing's stamp): a turn added since in
# another tab clears the stamp until its answers are shown, so a vote is never stored with the answers of fewer
# turns than the battle has, nor with a decision time counted from another showing.
_mark_voted: PreparedUpdate = PreparedUpdate(
    lambda battle_id, voted_at, campaign_id, rater_id, shown_at: (
        Battle.objects.filter(pk=battle_id, status=Battle.Status.READY, shown_at=shown_at).filter(
            Exists(selectors.pools_of_rater_in(campaign_id, rater_id))
        ),
        {"status": Battle.Status.VOTED, "voted_at": voted_at},
    ),
    battle_id=UUID,
    voted_at=datetime,
    campaign_id=int,
    rater_id=int,
    shown_at=datetime,
)


def _conversation_log(battle: Battle) -> dict[str, Any]:
    """What the vote log records of the battle's answers: per side the tokens and latency summed over
    every turn, the last turn's finish reason, the style counts of the whole conversation, the identity
    flags of every turn, and, for a multi-turn battle, each turn on its own (``Vote.turns``)."""
    generations: dict[int, dict[str, Generation]] = {}
    # What the log takes of each answer (not its text), in turn order; turns are read only for a battle
    # that has more than one (a single-turn battle's only message is its prompt).
    for generation in selectors.battle_answers_logged(battle):
        generations.setdefault(generation.turn, {})[generation.side] = generation
    later = [turn.text for turn in selectors.battle_turns_given(battle, generations)]
    texts = [battle.prompt.text, *later]
    turns: list[dict[str, Any]] = []
    for index in sorted(generations):
        pair = generations[index]
        turns.append(
            {
                "index": index,
                "prompt_hash": battle.prompt.text_hash if index == 0 else prompt_hash(texts[index]),
                "asks_identity": prompt_asks_identity(texts[index]),
                **{
                    side: {
                        "tokens": generation.output_tokens,
                        "finish_reason": generation.finish_reason,
                        "latency_s": generation.latency_s,
                        "ttft_s": generation.ttft_s,
                        "names_model": bool(generation.model_mentions),
                    }
                    for side, generation in ((str(Side.LEFT), pair[Side.LEFT]), (str(Side.RIGHT), pair[Side.RIGHT]))
                },
            }
        )
    last = generations[max(generations)]
    every = [generations[index] for index in sorted(generations)]
    return {
        "left_tokens": sum(pair[Side.LEFT].output_tokens for pair in every),
        "left_finish_reason": last[Side.LEFT].finish_reason,
        "left_latency_s": sum(pair[Side.LEFT].latency_s for pair in every),
        "right_tokens": sum(pair[Side.RIGHT].output_tokens for pair in every),
        "right_finish_reason": last[Side.RIGHT].finish_reason,
        "right_latency_s": sum(pair[Side.RIGHT].latency_s for pair in every),
        "left_style": _style_sum(pair[Side.LEFT].style for pair in every),
        "right_style": _style_sum(pair[Side.RIGHT].style for pair in every),
        "prompt_asks_identity": any(turn["asks_identity"] for turn in turns),
        "answer_names_model": any(turn[side]["names_model"] for turn in turns for side in ("left", "right")),
        "turns": turns if len(turns) > 1 else None,
    }


def battle_mark_shown(*, battle: Battle) -> Battle:
    """Stamp the first time both answers were sent to the rater; decision time counts from here."""
    if battle.shown_at is None and battle.status == Battle.Status.READY:
        now = timezone.now()
        if _mark_shown.run(battle_id=battle.pk, shown_at=now):
            battle.shown_at = now  # this request's stamp: no read back
        else:
            battle.refresh_from_db(fields=["shown_at"])  # another request stamped it first
    return battle


def vote_submit(*, battle_id: Any, user: User, choice: str, battle: Battle | None = None) -> Vote:
    """Append the rater's vote on their battle to the log, in the statement that flips the battle from
    READY to VOTED (the flip is conditional: of two concurrent submissions one wins, the other is told the
    first vote stands; a vote with more to write, a gold battle's or one with webhooks, in one transaction).
    ``battle``: the rater's battle as the caller already read it with ``selectors.battle_for_rater`` (the page's
    view does, for its study gate), so it is not read twice; every check below is made on it all the same, and
    the conditional update settles any change since."""
    try:
        return _vote_submit(battle_id=battle_id, user=user, choice=choice, battle=battle)
    except IntegrityError:
        # Rolled back whole (the flip too). The log's one vote per battle refused it: another vote is
        # stored (the failure path pays the look-up; the vote's own insert needs no savepoint). Anything
        # else is not the rater's doing and stays an error.
        if Vote.objects.filter(battle_id=battle_id).exists():
            raise VoteRejected("This battle has already been voted on. Your first vote stands.") from None
        raise


def _vote_submit(*, battle_id: Any, user: User, choice: str, battle: Battle | None) -> Vote:
    if choice not in Choice.values:
        raise Invalid(f"Unknown choice {choice!r}: use one of {', '.join(Choice.values)}.")
    if battle is None or str(battle.pk) != str(battle_id) or battle.rater_id != user.pk:
        battle = selectors.battle_with_answers_logged(user=user, battle_id=battle_id)
    if battle is None:
        raise NotAllowed("No such battle.")
    if battle.status == Battle.Status.VOID:
        raise VoteRejected(f"This battle was voided and cannot be voted on: {battle.void_reason}")
    if battle.status == Battle.Status.VOTED:
        raise VoteRejected("This battle has already been voted on (perhaps in another tab). Your first vote stands.")
    if battle.campaign.status != Campaign.Status.OPEN:
        raise VoteRejected("This campaign is closed; no more votes are taken.")
    if battle.status != Battle.Status.READY or battle.shown_at is None:
        raise VoteRejected("This battle has not been shown yet; open it before voting.")
    pool_id = battle.pool_id
    assert pool_id is not None  # set with the rater (battle_for_rater found it by its rater)

    now = timezone.now()
    # What the log records of the answers, read before the write: the flip below stores the vote only where the
    # battle is still shown as it was read (the same turns).
    log = _conversation_log(battle)
    decision_ms = max(0, int((now - battle.shown_at).total_seconds() * 1000))
    vote = Vote(
        organization_id=battle.organization_id,
        campaign=battle.campaign,
        battle=battle,
        created_at=now,
        rater=user,
        pool_id=pool_id,
        prompt=battle.prompt,
        prompt_hash=battle.prompt.text_hash,
        category=battle.prompt.category,
        language=battle.prompt.language,
        prompt_source=battle.prompt.source,
        left=battle.left,
        right=battle.right,
        left_model=battle.left.model_name,
        left_version=battle.left.version_label,
        right_model=battle.right.model_name,
        right_version=battle.right.version_label,
        source=battle.source,
        params=battle.params,
        choice=choice,
        decision_ms=decision_ms,
        **log,
    )
    # The vote is one statement, a transaction of its own (the flip and the insert): the common case. Where more
    # is written with it (a gold battle's assessments, the webhook deliveries of an organisation subscribed to
    # rated battles) or a caller's transaction is open (a savepoint: a refusal leaves it usable), all of it runs
    # in one transaction.
    alone = not (
        transaction.get_connection().in_atomic_block
        or battle.source == Battle.Source.GOLD
        or WebhookEvent.BATTLE_RATED in webhook_events_subscribed(battle.organization_id)
    )
    with nullcontext() if alone else transaction.atomic():
        return _vote_store(vote=vote, battle=battle, user=user, now=now)


def _vote_store(*, vote: Vote, battle: Battle, user: User, now: datetime) -> Vote:
    # The database settles races: of two concurrent submissions only one flips READY to VOTED, and the vote is
    # inserted in the same statement only where it did. The flip also asks that the rater still be in a pool of
    # the campaign, and that the battle be shown as read; when it flips nothing, a look says which refused it
    # (the failure path pays the reads).
    assert battle.shown_at is not None
    stored = _mark_voted.update_and_insert(
        vote,
        battle_id=battle.pk,
        voted_at=now,
        campaign_id=battle.campaign_id,
        rater_id=user.pk,
        shown_at=battle.shown_at,
    )
    if not stored:
        if not selectors.rater_in_campaign_pool(campaign=battle.campaign, user=user):
            raise VoteRejected("You are no longer in a rater pool of this campaign; this vote was not stored.")
        now_status = Battle.objects.filter(pk=battle.pk).values_list("status", flat=True).first()
        if now_status == Battle.Status.VOTED:
            raise VoteRejected(
                "This battle has already been voted on (perhaps in another tab). Your first vote stands."
            )
        raise VoteRejected("This battle changed in another tab (a new turn?); reload it and vote again.")
    if battle.source == Battle.Source.GOLD:
        _attention_assess(vote=vote, battle=battle)
        _qualification_assess(vote=vote, battle=battle)
    send_on_commit(
        hooks.vote_stored,
        sender=Vote,
        campaign_id=vote.campaign_id,
        vote_id=vote.pk,
        organization_id=vote.organization_id,
    )
    # The battle is locked by the vote, so its competitors may be named; the rater only by an opaque id.
    webhook_event_emit(
        organization_id=vote.organization_id,
        event=WebhookEvent.BATTLE_RATED,
        payload={
            "campaign_id": vote.campaign_id,
            "battle_id": battle.pk,
            "vote_id": vote.pk,
            "choice": vote.choice,
            "source": "rater",
            "rater_id": vote.rater_id,
            "pool_id": vote.pool_id,
            "prompt_id": vote.prompt_id,
            "category": vote.category,
            "left": {"competitor_id": vote.left_id, "model": vote.left_model, "version": vote.left_version},
            "right": {"competitor_id": vote.right_id, "model": vote.right_model, "version": vote.right_version},
            "created_at": vote.created_at,
        },
    )
    return vote
