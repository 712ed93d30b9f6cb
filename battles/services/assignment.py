"""Handing a rater a battle (``battle_assign``): their pending one, else a qualification battle while
they qualify, a gold battle by the campaign's mix, one claimed from the buffer, or one prepared for
them now; caps and blocks checked first."""

from __future__ import annotations

import logging
import math
import random
import secrets
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.core.cache import cache
from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.timesince import timeuntil

from raters.models import RaterPool

from .. import selectors
from ..models import Battle, Campaign, Competitor, GoldItem, Prompt, Qualification
from .buffer import battle_claim, buffer_refill_request
from .errors import (
    CapReached,
    IdentityQuestionRefused,
    NotAllowed,
    NothingToRate,
    PromptCapReached,
    PromptsNotAccepted,
    QualificationFailed,
    RaterBlocked,
)
from .generation import STALE_GENERATION_S, _generation_queue, battle_start_live
from .gold import gold_battle_create, gold_item_draw
from .identity import IDENTITY_QUESTION_REFUSED, identity_refused
from .prompts import prompt_build

logger = logging.getLogger(__name__)

_rng = random.SystemRandom()


# --- Battles ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Assignment:
    battle: Battle
    resumed: bool


def _check_caps(*, campaign: Campaign, user: User, now: datetime, in_session: int | None) -> None:
    # The session cap counts the rater's battles of the last session_window_h hours over every login:
    # logging out and in again does not reset it. ``in_session``: that count as the caller read it at ``now``
    # (None: read it here).
    if in_session is None:
        in_session = selectors.battles_in_session_window(campaign=campaign, user=user, now=now)
    if in_session >= campaign.session_cap:
        frees_at = selectors.session_window_frees_at(campaign=campaign, user=user, now=now)
        when = f"in {timeuntil(frees_at, now)}" if frees_at is not None else "later"
        raise CapReached(
            f"You have rated {campaign.session_cap} battles in the last {campaign.session_window_h} hours, the "
            f"most this campaign allows at a stretch. Thank you! Take a break: you can continue {when}."
        )
    if campaign.rater_vote_cap is not None and (
        selectors.votes_by_rater(campaign=campaign, user=user) >= campaign.rater_vote_cap
    ):
        raise CapReached(
            f"You have cast {campaign.rater_vote_cap} votes in this campaign, the most one rater may cast. "
            "Thank you for your work!"
        )


def battle_assign(
    *, campaign: Campaign, user: User, session_key: str, prompt_text: str | None = None, now: datetime | None = None
) -> Assignment:
    """Give the rater a battle: the pending one if there is one; else, for a pool prompt, one claimed
    from the campaign's buffer of battles generated ahead; else one prepared for this rater now, by a
    worker (no web worker waits on a model): streamed live to the page where live streaming is on, else
    the page says "preparing" and polls until it is ready.

    ``prompt_text`` is a rater-typed prompt (only where the campaign allows it); its battle is generated
    live by a worker and streamed to the page (``battle_start_live``).

    ``now``: the time the rater asked (the caps and the session window count as of it; default: now), the
    one ``selectors.campaign_for_next`` read the campaign as of, whose pool and standing are then not read again."""
    if campaign.status != Campaign.Status.OPEN:
        raise NotAllowed("This campaign is not open.")
    # The rater's pool, whether they hold an open battle and their count against the session cap, in one
    # statement; the open battle itself is read only where there is one.
    now = now or timezone.now()
    pool, standing = selectors.pool_and_standing(campaign=campaign, user=user, now=now)
    if pool is None:
        raise NotAllowed("You are not in a rater pool of this campaign.")
    in_session: int | None = standing.in_session
    if standing.open:
        pending = _pending_or_none(campaign=campaign, user=user)
        if pending is not None:
            return Assignment(battle=pending, resumed=True)
        in_session = None  # a lost battle was voided meanwhile: the count is read again
    if selectors.rater_blocked(campaign=campaign, user=user):
        raise RaterBlocked(
            "You have missed too many of this campaign's attention checks, so it has no more battles for you. "
            "If you think this is a mistake, contact the team running the study."
        )
    _check_caps(campaign=campaign, user=user, now=now, in_session=in_session)
    qualifying = _qualification_battle(campaign=campaign, user=user, pool=pool, session_key=session_key)
    if qualifying is not None:
        return qualifying

    if prompt_text is not None:
        if not campaign.allow_rater_prompts:
            raise PromptsNotAccepted(
                "This campaign does not accept prompts typed by raters; rate the prompts it gives you instead."
            )
        prompt = prompt_build(campaign=campaign, text=prompt_text, source=Prompt.Source.RATER, author=user)
        if prompt.asks_identity and identity_refused(campaign):
            raise IdentityQuestionRefused(IDENTITY_QUESTION_REFUSED, field_errors={"prompt": IDENTITY_QUESTION_REFUSED})
        if (
            campaign.prompt_hash_cap is not None
            and selectors.votes_on_prompt_hash(campaign=campaign, text_hash=prompt.text_hash)
            >= campaign.prompt_hash_cap
        ):
            raise PromptCapReached(
                "This prompt has already been rated as often as the campaign allows. Please write a different one."
            )
    else:
        item = gold_item_draw(campaign=campaign, user=user)
        if item is not None:
            try:
                return Assignment(
                    battle=gold_battle_create(
                        campaign=campaign, user=user, pool=pool, item=item, session_key=session_key
                    ),
                    resumed=False,
                )
            except IntegrityError:
                pending = _pending_or_none(campaign=campaign, user=user)
                if pending is None:
                    raise
                return Assignment(battle=pending, resumed=True)
        try:
            claimed = battle_claim(campaign=campaign, user=user, pool=pool, session_key=session_key)
        except IntegrityError:
            # Another request of this rater (a second tab) got an open battle first: the database allows
            # one per rater and campaign. Hand out that one.
            pending = _pending_or_none(campaign=campaign, user=user)
            if pending is None:
                raise
            return Assignment(battle=pending, resumed=True)
        if claimed is not None:
            buffer_refill_request(campaign=campaign)
            return Assignment(battle=claimed, resumed=False)
        picked = selectors.prompt_pick(campaign=campaign, user=user, rng=_rng)
        if picked is None:
            raise NothingToRate("There are no more prompts for you to rate in this campaign right now.")
        prompt = picked

    pair = selectors.pair_pick(campaign=campaign, rng=_rng)
    if pair is None:
        raise NothingToRate("Not enough models of this campaign are available right now. Try again in a while.")
    try:
        battle = _battle_create(
            campaign=campaign, user=user, pool=pool, prompt=prompt, pair=pair, session_key=session_key
        )
    except IntegrityError:
        pending = _pending_or_none(campaign=campaign, user=user)
        if pending is None:
            raise
        return Assignment(battle=pending, resumed=True)
    if settings.ARENA_LIVE_STREAMING:
        # Generated by a worker while the page streams it: a typed prompt, and a pool prompt when nothing
        # in the buffer was ready for this rater (streamed at the common pace from the first words,
        # instead of a "preparing" page for the whole generation).
        battle_start_live(battle=battle)
    else:
        _generation_queue(battle)
    if prompt_text is None:
        buffer_refill_request(campaign=campaign)
    battle.refresh_from_db()
    return Assignment(battle=battle, resumed=False)


def _pending_or_none(*, campaign: Campaign, user: User) -> Battle | None:
    """The rater's open battle: ready, or being prepared (the page polls), or None. One whose worker
    was lost is voided (its prompt is not used up) and the rater gets a new one."""
    pending = selectors.battle_pending_for_rater(campaign=campaign, user=user)
    if pending is None or pending.status == Battle.Status.READY:
        return pending
    waited = (timezone.now() - pending.requested_at).total_seconds()
    if waited > STALE_GENERATION_S:
        Battle.objects.filter(pk=pending.pk, status=Battle.Status.GENERATING).update(
            status=Battle.Status.VOID, void_reason="The answers were never completed."
        )
        return None
    battle_generation_nudge(pending)
    return pending


def battle_generation_nudge(battle: Battle) -> None:
    """A battle still waiting for its generation to start LOST_TASK_S after it was asked for has most likely
    lost its task: it is sent again. Called by the rater's next request and by the "preparing" page's
    poll (battles.views.battle_state), so a rater who just waits on the page is served too."""
    if battle.status != Battle.Status.GENERATING or battle.generation_started_at is not None or battle.live:
        return
    if (timezone.now() - battle.requested_at).total_seconds() > LOST_TASK_S:
        _generation_resend(battle)


# A battle no generation worker has started this long after it was asked for has most likely lost its
# task: the web worker that created it died between the commit and the send, or the broker was down
# then. The rater's next request, or the preparing page's poll, sends the task again (at most once per
# this many seconds); a
# generation is started by one delivery only (battle_generate_queued's conditional update), so a task
# that was merely slow makes the copy a no-op.
LOST_TASK_S = 15


def _generation_resend(battle: Battle) -> None:
    if cache.add(f"battles:generation-resent:{battle.pk}", 1, timeout=LOST_TASK_S):
        logger.warning(
            "battle %s: no worker started its generation in %s s; its task is sent again", battle.pk, LOST_TASK_S
        )
        _generation_queue(battle)


@transaction.atomic
def _battle_create(
    *,
    campaign: Campaign,
    user: User,
    pool: RaterPool,
    prompt: Prompt,
    pair: tuple[Competitor, Competitor],
    session_key: str,
) -> Battle:
    if prompt._state.adding:
        prompt.save()
    params: dict[str, Any] = {**campaign.sampling_params(), "seed": secrets.randbits(31)}
    with transaction.atomic():  # a savepoint: the unique open-battle constraint may refuse this row
        return Battle.objects.create(
            organization_id=campaign.organization_id,
            campaign=campaign,
            rater=user,
            pool=pool,
            prompt=prompt,
            left=pair[0],
            right=pair[1],
            params=params,
            session_key=session_key,
            claimed_at=timezone.now(),
        )


def _qualification_battle(*, campaign: Campaign, user: User, pool: RaterPool, session_key: str) -> Assignment | None:
    """While the rater has no decided qualification in a campaign that asks for one, every battle they
    are handed is one of its gold battles (an active item they have not been served, drawn as the gold
    mix draws: seeded by their position); a rater who failed is refused, with the reason. None: no
    qualification (passed, or none asked), so real battles follow."""
    if campaign.qualification_battles <= 0:
        return None
    decided = selectors.qualification_of(campaign=campaign, user=user)
    if decided is not None:
        if decided.status == Qualification.Status.FAILED:
            raise QualificationFailed(
                f"You answered {decided.correct} of the {decided.answered} qualification battles as expected; "
                f"this campaign needs {math.ceil(decided.threshold * decided.answered)} to start, so it has no "
                "battles for you. Thank you for trying. If you think this is a mistake, contact the team running "
                "the study."
            )
        return None
    ids = sorted(selectors.gold_items_unseen(campaign=campaign, user=user).values_list("pk", flat=True))
    if not ids:
        raise NothingToRate(
            "This campaign's qualification is not ready (it has too few check battles). Please try again later."
        )
    served = selectors.battles_served_to(campaign=campaign, user=user)
    item = GoldItem.objects.get(pk=random.Random(f"qualification:{campaign.pk}:{user.pk}:{served}").choice(ids))
    try:
        return Assignment(
            battle=gold_battle_create(campaign=campaign, user=user, pool=pool, item=item, session_key=session_key),
            resumed=False,
        )
    except IntegrityError:
        pending = _pending_or_none(campaign=campaign, user=user)
        if pending is None:
            raise
        return Assignment(battle=pending, resumed=True)
