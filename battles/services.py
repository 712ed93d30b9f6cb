"""Every write about campaigns, battles and votes.

A battle is created, generated outside any transaction (model calls can take seconds and must not
hold locks), then either released with both answers at once or voided. A vote locks the battle with a
conditional update and appends to the log in the same transaction, so two tabs cannot both vote.
"""

from __future__ import annotations

import contextlib
import csv
import hashlib
import io
import json
import logging
import math
import os
import random
import secrets
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AnonymousUser, User
from django.core.exceptions import ValidationError
from django.db import IntegrityError, models, transaction
from django.db.models import ProtectedError
from django.utils import timezone
from kombu.exceptions import OperationalError as KombuOperationalError
from redis.exceptions import RedisError

from raters.authentication import ApiKeyPrincipal
from raters.errors import Conflict, Invalid, LimitReached, NotFound, PermissionDenied
from raters.hooks import send_on_commit
from raters.models import ApiKey, AuditAction, RaterFlag, RaterPool, Role, WebhookEvent
from raters.services import audit_record, membership_set, pool_member_add, rater_flag_raise, webhook_event_emit
from raters.tenancy import organization_scope, scopes_disabled
from serving.analysis import answer_model_mentions, prompt_asks_identity, style_counts
from serving.models import ModelEndpoint
from serving.triton.client import (
    EndpointSpec,
    GenerationResult,
    SamplingParams,
    StreamEvent,
    generate,
    generate_pair,
    stream_pair,
)
from serving.triton.client import Prompt as ClientPrompt

from . import exporting, hooks, judging, selectors
from .experimenting import unit_position, variant_index
from .exporting import VoteFilters
from .gold import Corruption, attention_answer_corrupt
from .live import LivePublisher
from .models import (
    Battle,
    Campaign,
    Choice,
    Competitor,
    Experiment,
    ExportJob,
    Exposure,
    Generation,
    GoldenAnswer,
    GoldItem,
    Judge,
    JudgeRun,
    JudgeVerdict,
    Participant,
    Prompt,
    Qualification,
    RaterConsent,
    Rubric,
    Side,
    Study,
    Turn,
    Variant,
    Vote,
    consent_hash,
)
from .prompt_import import ERRORS_LISTED, PromptRow
from .prompting import CATEGORIES, prompt_classify, prompt_hash, prompt_validate

# The refusals of this app, as domain errors (raters.errors): the edges map them to pages and statuses.


class NotAllowed(NotFound):
    """Not a campaign or battle of this rater's (indistinguishable from a missing one)."""


class CapReached(LimitReached):
    """The rater has rated as much as the campaign allows, in this session or in all. The rater pages
    show it as the normal end of a stint (a thank-you, not an error page, and not a 429: that is for
    rate limits)."""


class PromptCapReached(Conflict):
    """A typed prompt whose text has been rated as often as the campaign allows (the rater's session
    and caps are fine: another prompt may be used at once)."""


class NothingToRate(Conflict):
    pass


class VoteRejected(Conflict):
    pass


class RaterBlocked(PermissionDenied):
    """The rater failed too many attention checks in this campaign (and is flagged)."""


class PromptsNotAccepted(PermissionDenied):
    pass


class IdentityQuestionRefused(Invalid):
    """Under the campaign's "refuse" identity policy: a typed prompt or turn that asks a model who it
    is. Refused before anything is stored or generated (no battle, no model called, no vote)."""


# What the rater is told, in the page, the console's words and the API alike.
IDENTITY_QUESTION_REFUSED = (
    "This campaign does not let the models answer questions about who they are (which model, which "
    "company): the comparison is blind, so neither model was asked. Please write a different prompt."
)
IDENTITY_ANSWER_VOIDED = (
    "One of the answers named a model or the company behind it, which this campaign does not allow (the "
    "comparison is blind): the battle was voided and its answers are not shown. Nothing was recorded as a vote."
)


def identity_refused(campaign: Campaign) -> bool:
    return campaign.identity_policy == Campaign.IdentityPolicy.REFUSE


class QualificationFailed(PermissionDenied):
    """The rater did not pass the campaign's qualification: no real battle here, and they are told."""


_rng = random.SystemRandom()
logger = logging.getLogger(__name__)


# --- Campaign configuration (manager actions; each writes an audit row) ---------------------------


@transaction.atomic
def campaign_open(*, campaign: Campaign, actor: User | AnonymousUser | None) -> Campaign:
    if Competitor.objects.filter(campaign=campaign, active=True, gold=False).count() < 2:
        raise Conflict("A campaign needs at least two active competitors before it can open.")
    if not campaign.rater_pools.exists():
        raise Conflict("A campaign needs at least one rater pool before it can open.")
    Campaign.objects.filter(pk=campaign.pk).update(status=Campaign.Status.OPEN, opened_at=timezone.now())
    campaign.refresh_from_db()
    audit_record(organization=campaign.organization, actor=actor, action=AuditAction.CAMPAIGN_OPENED, obj=campaign)
    buffer_refill_request(campaign=campaign)  # sent on commit: the first raters find battles ready
    return campaign


@transaction.atomic
def campaign_close(*, campaign: Campaign, actor: User | AnonymousUser | None) -> Campaign:
    Campaign.objects.filter(pk=campaign.pk).update(status=Campaign.Status.CLOSED, closed_at=timezone.now())
    # Battles shown but not voted on would otherwise wait for a reopening, with their clock running.
    # Shadow battles still in the buffer stay ready: their answers cannot be made again, and a reopened
    # campaign serves them (``shadow_battles_import`` refuses a closed campaign's new ones).
    _open_battles_void(
        Battle.objects.filter(campaign=campaign).exclude(source=Battle.Source.SHADOW, rater__isnull=True),
        "The campaign was closed before the vote.",
    )
    campaign.refresh_from_db()
    audit_record(organization=campaign.organization, actor=actor, action=AuditAction.CAMPAIGN_CLOSED, obj=campaign)
    webhook_event_emit(
        organization_id=campaign.organization_id,
        event=WebhookEvent.CAMPAIGN_CLOSED,
        payload={"campaign_id": campaign.pk, "slug": campaign.slug, "closed_at": campaign.closed_at},
    )
    return campaign


@transaction.atomic
def campaign_save(
    *,
    campaign: Campaign,
    actor: User | AnonymousUser | None,
    changed: list[str],
    rater_pools: Iterable[RaterPool] | None = None,
) -> Campaign:
    """Create or change a campaign and, when ``rater_pools`` is given, set its pools: pools of the
    campaign's own organisation only."""
    created = campaign._state.adding
    pools = list(rater_pools) if rater_pools is not None else None
    if pools is not None:
        foreign = [pool.name for pool in pools if pool.organization_id != campaign.organization_id]
        if foreign:
            message = f"Not pools of {campaign.organization}: {', '.join(foreign)}."
            raise Invalid(message, field_errors={"rater_pools": message})
    try:
        campaign.full_clean(exclude=["rater_pools"])
    except ValidationError as exc:
        raise Invalid(" ".join(exc.messages), field_errors=exc.message_dict) from None
    campaign.save()
    if pools is not None:
        campaign.rater_pools.set(pools)
    audit_record(
        organization=campaign.organization,
        actor=actor,
        action=AuditAction.CAMPAIGN_CREATED if created else AuditAction.CAMPAIGN_CHANGED,
        obj=campaign,
        data={"fields": changed},
    )
    if not created and "identity_policy" in changed and identity_refused(campaign):
        # Battles generated ahead on a prompt that asks who the model is are never served now.
        _open_battles_void(
            Battle.objects.filter(campaign=campaign, rater__isnull=True, prompt__asks_identity=True),
            "The prompt asks a model who it is, which the campaign now refuses.",
        )
    if not created and set(changed) & RANKING_FIELDS:
        # The leaderboards must show the new policy or method now, not after the next vote.
        send_on_commit(hooks.leaderboards_stale, sender=Campaign, campaign_id=campaign.pk, now=False)
    return campaign


@transaction.atomic
def campaign_delete(*, campaign: Campaign, actor: User | AnonymousUser | None) -> None:
    """Only a campaign without battles can go: battles and votes are history."""
    if Battle.objects.filter(campaign=campaign).exists():
        raise Conflict(f"{campaign} has battles and cannot be deleted; close it instead.")
    audit_record(
        organization=campaign.organization,
        actor=actor,
        action=AuditAction.CAMPAIGN_DELETED,
        obj=campaign,
        data={"name": campaign.name},
    )
    try:
        with transaction.atomic():
            campaign.delete()
    except ProtectedError:
        raise Conflict(f"{campaign} is used by an A/B experiment: change or delete the experiment first.") from None


def leaderboards_refresh_request(*, campaign: Campaign) -> None:
    """A manager asked for fresh leaderboards now (past the debounce); the ranking app does it."""
    send_on_commit(hooks.leaderboards_stale, sender=Campaign, campaign_id=campaign.pk, now=True)


# Campaign fields that change how the log is ranked (not what is in it).
RANKING_FIELDS = frozenset(
    {
        "min_decision_ms",
        "prompt_hash_cap",
        "rater_vote_cap",
        "exclude_identity_leaks",
        "both_bad_as_tie",
        "ranking_min_votes",
        "ranking_bootstrap_rounds",
        "ranking_interval",
        "ranking_style_interval",
        "ranking_anchor",
        "ranking_ties",
    }
)


def _open_battles_void(battles: models.QuerySet[Battle], reason: str) -> int:
    return battles.filter(status__in=(Battle.Status.GENERATING, Battle.Status.READY)).update(
        status=Battle.Status.VOID, void_reason=reason
    )


def competitor_version_default(*, endpoint: ModelEndpoint) -> str:
    """The version label of a competitor added without one: the model version its endpoint pins on the
    Triton server (what the votes are really for), else today's date (ISO), which orders successive
    checkpoints of a model that is redeployed under the same name."""
    return endpoint.model_version or timezone.localdate().isoformat()


@transaction.atomic
def competitor_save(*, competitor: Competitor, actor: User | AnonymousUser | None, changed: list[str]) -> Competitor:
    created = competitor._state.adding
    if (competitor.endpoint is None) == (not competitor.external_model):
        raise Invalid(
            "Choose an endpoint, or name an external model, not both.",
            field_errors={"endpoint": "Choose an endpoint, or name an external model (one without an endpoint)."},
        )
    if not competitor.version_label:
        if competitor.endpoint is None:
            raise Invalid("An external model needs a version.", field_errors={"version_label": "Required."})
        competitor.version_label = competitor_version_default(endpoint=competitor.endpoint)
    if competitor.endpoint is not None and competitor.endpoint.organization_id != competitor.campaign.organization_id:
        raise Invalid(
            "The endpoint belongs to another organisation.",
            field_errors={"endpoint": "The endpoint must belong to the campaign's organisation."},
        )
    if not created:
        # Votes name the competitor: pointing it at another model or version would rewrite history.
        stored = (
            Competitor.objects.filter(pk=competitor.pk).values("endpoint_id", "external_model", "version_label").get()
        )
        identity_changed = (stored["endpoint_id"], stored["external_model"], stored["version_label"]) != (
            competitor.endpoint_id,
            competitor.external_model,
            competitor.version_label,
        )
        if identity_changed and competitor_has_battles(competitor):
            raise Conflict(
                "This competitor has battles: its model and version cannot change. "
                "Add a new competitor for the new version instead."
            )
        if competitor.active and Competitor.objects.filter(pk=competitor.pk, retired_at__isnull=False).exists():
            raise Conflict(
                f"{competitor} is retired, and retiring is final: add a new competitor to bring the model back.",
                field_errors={"active": "A retired competitor stays inactive."},
            )
    competitor.organization_id = competitor.campaign.organization_id
    competitor.save()
    if not competitor.active:
        # A withdrawn competitor gets no more votes, including on battles already handed out.
        _open_battles_void(
            Battle.objects.filter(models.Q(left=competitor) | models.Q(right=competitor)),
            "A competitor was withdrawn before the vote.",
        )
        buffer_refill_request(campaign=competitor.campaign)  # replace what was voided
    audit_record(
        organization=competitor.organization,
        actor=actor,
        action=AuditAction.COMPETITOR_ADDED if created else AuditAction.COMPETITOR_CHANGED,
        obj=competitor,
        data={
            "endpoint": competitor.endpoint_id,
            "external_model": competitor.external_model,
            "version": competitor.version_label,
            "fields": changed,
        },
    )
    return competitor


def competitor_has_battles(competitor: Competitor) -> bool:
    return Battle.objects.filter(models.Q(left=competitor) | models.Q(right=competitor)).exists()


def competitor_delete_refusal(competitor: Competitor) -> str | None:
    """Why the competitor cannot be deleted (it has battles, so votes may name it), or None."""
    if competitor.pk is not None and competitor_has_battles(competitor):
        return (
            f"{competitor} has battles and cannot be deleted: its votes name it, and the log is never rewritten. "
            "Retire it instead (the 'Retire' action): it gets no new battles and keeps its history on the board."
        )
    return None


@transaction.atomic
def competitor_retire(*, competitor: Competitor, actor: User | AnonymousUser | None) -> Competitor:
    """Retire a competitor for good: no new battles (its open ones are voided, as on a withdrawal), its
    votes and its row on the board kept, marked retired. Final: a retired competitor is never made
    active again (the model comes back as a new competitor). Audited as ``competitor.retired``."""
    # ``of``: the endpoint is an outer join (an external model has none), which FOR UPDATE cannot lock.
    locked = (
        Competitor.objects.select_for_update(of=("self",)).select_related("campaign", "endpoint").get(pk=competitor.pk)
    )
    if locked.gold:
        raise Conflict("The gold pseudo-competitors are the platform's own; they cannot be retired.")
    if locked.retired_at is not None:
        raise Conflict(f"{locked} is retired already (since {locked.retired_at:%Y-%m-%d %H:%M} UTC).")
    locked.active = False
    locked.retired_at = timezone.now()
    locked.save(update_fields=["active", "retired_at"])
    voided = _open_battles_void(
        Battle.objects.filter(models.Q(left=locked) | models.Q(right=locked)),
        "A competitor was retired before the vote.",
    )
    buffer_refill_request(campaign=locked.campaign)  # replace what was voided
    audit_record(
        organization=locked.organization,
        actor=actor,
        action=AuditAction.COMPETITOR_RETIRED,
        obj=locked,
        data={
            "endpoint": locked.endpoint_id,
            "external_model": locked.external_model,
            "version": locked.version_label,
            "battles_voided": voided,
        },
    )
    leaderboards_refresh_request(campaign=locked.campaign)  # a board computed now marks it retired
    competitor.active, competitor.retired_at = locked.active, locked.retired_at
    return locked


@transaction.atomic
def competitor_delete(*, competitor: Competitor, actor: User | AnonymousUser | None) -> None:
    """Only a competitor that never fought can be deleted; one with battles is retired instead
    (``competitor_retire``), since its votes name it."""
    refusal = competitor_delete_refusal(competitor)
    if refusal is not None:
        raise Conflict(refusal)
    audit_record(
        organization=competitor.organization,
        actor=actor,
        action=AuditAction.COMPETITOR_DELETED,
        obj=competitor,
        data={
            "endpoint": competitor.endpoint_id,
            "external_model": competitor.external_model,
            "version": competitor.version_label,
        },
    )
    try:
        with transaction.atomic():
            competitor.delete()
    except ProtectedError:
        raise Conflict(
            f"{competitor} is still referred to (by an experiment's variant, or the campaign's log): it cannot "
            "be deleted. Change the variant first, or retire the competitor."
        ) from None


def endpoint_has_battles(endpoint: ModelEndpoint) -> bool:
    """Registered with ``serving.hooks`` (see apps.py): whether any battle used the endpoint."""
    return Battle.objects.filter(models.Q(left__endpoint=endpoint) | models.Q(right__endpoint=endpoint)).exists()


def prompt_build(
    *,
    campaign: Campaign,
    text: str,
    source: str,
    author: User | AnonymousUser | None = None,
    category: str = "",
    language: str = "",
) -> Prompt:
    """A validated, hashed and classified prompt (not yet saved). Category and language given by the
    manager win; otherwise the deterministic classifier decides."""
    try:
        clean = prompt_validate(text)
    except ValueError as exc:
        raise Invalid(str(exc), field_errors={"text": str(exc)}) from None
    # The classifier costs about a millisecond a prompt: a file that names both is imported without it.
    auto_category, auto_language = prompt_classify(clean) if not (category and language) else ("", "")
    return Prompt(
        organization_id=campaign.organization_id,
        campaign=campaign,
        text=clean,
        text_hash=prompt_hash(clean),
        asks_identity=prompt_asks_identity(clean),
        category=category or auto_category,
        language=language or auto_language,
        source=source,
        author=author if author is not None and author.is_authenticated else None,
    )


@dataclass(frozen=True)
class PromptsImported:
    """What an import stored: the new prompts' ids in file order, the external ids skipped because the
    campaign had them already (``on_duplicate="skip"``), and how many new prompts repeat the text of
    an earlier prompt (the campaign's or the file's, by normalised hash: allowed, and counted)."""

    prompt_ids: list[int]
    skipped_external_ids: list[str]
    repeated_texts: int


class CampaignClosed(Conflict):
    pass


_IMPORT_CHUNK = 2000


def _audit_actor(actor: Any) -> User | None:
    # An API key acts for its organisation, not as a person: the audit row names no user then.
    return actor if isinstance(actor, User) else None


@transaction.atomic
def prompts_import(
    *,
    campaign: Campaign,
    rows: Sequence[PromptRow],
    actor: User | AnonymousUser | None,
    on_duplicate: str = "error",
    via: str = "console",
) -> PromptsImported:
    """Add parsed rows (``battles.prompt_import``) to the campaign's pool, all or nothing.

    Each prompt is validated, hashed and classified as every prompt is (``prompt_build``). An external
    id the campaign already has is an error naming the row, or, with ``on_duplicate="skip"``, that row
    is left out. A closed campaign takes no prompts (``Conflict``). The campaign row is locked, so two
    imports into one campaign run one after the other and see each other's external ids; the unique
    constraint stays the last word."""
    if on_duplicate not in ("error", "skip"):
        raise Invalid("on_duplicate is error or skip.", field_errors={"on_duplicate": "Choose error or skip."})
    locked = Campaign.objects.select_for_update().get(pk=campaign.pk)
    if locked.status == Campaign.Status.CLOSED:
        raise CampaignClosed("The campaign is closed; it takes no new prompts.")
    if not rows:
        raise Invalid("The file has no rows; nothing was imported.", field_errors={"file": "The file has no rows."})

    external_ids = [row.external_id for row in rows if row.external_id]
    taken: set[str] = set()
    for start in range(0, len(external_ids), _IMPORT_CHUNK):
        taken.update(
            Prompt.objects.filter(
                campaign=campaign, external_id__in=external_ids[start : start + _IMPORT_CHUNK]
            ).values_list("external_id", flat=True)
        )
    skipped: list[str] = []
    if taken and on_duplicate == "error":
        clashes = [row for row in rows if row.external_id in taken]
        listed = clashes[:ERRORS_LISTED]
        more = f" (the first {len(listed)} are listed)" if len(listed) < len(clashes) else ""
        raise Invalid(
            f"{len(clashes)} rows name an external id the campaign already has{more}; nothing was imported. "
            "Import with on_duplicate=skip to leave those rows out.",
            field_errors={
                f"row {row.row}.external_id": "The campaign already has a prompt with this external id."
                for row in listed
            },
        )
    if taken:
        skipped = [row.external_id for row in rows if row.external_id in taken]
        rows = [row for row in rows if row.external_id not in taken]

    prompts: list[Prompt] = []
    for row in rows:
        try:
            prompt = prompt_build(
                campaign=campaign,
                text=row.text,
                source=Prompt.Source.POOL,
                author=actor if isinstance(actor, User) else None,
                category=row.category,
                language=row.language,
            )
        except Invalid as exc:
            raise Invalid(
                f"Row {row.row}: {exc.message} Nothing was imported.",
                field_errors={f"row {row.row}.{name}": errors for name, errors in exc.field_errors.items()},
            ) from None
        prompt.external_id = row.external_id
        prompts.append(prompt)

    hashes = sorted({prompt.text_hash for prompt in prompts})
    known: set[str] = set()
    for start in range(0, len(hashes), _IMPORT_CHUNK):
        known.update(
            Prompt.objects.filter(campaign=campaign, text_hash__in=hashes[start : start + _IMPORT_CHUNK]).values_list(
                "text_hash", flat=True
            )
        )
    repeated = 0
    for prompt in prompts:
        repeated += prompt.text_hash in known
        known.add(prompt.text_hash)

    try:
        with transaction.atomic():
            Prompt.objects.bulk_create(prompts, batch_size=1000)
    except IntegrityError:
        # Only a concurrent writer that bypassed the campaign lock could get here.
        raise Conflict("Another import added some of these external ids meanwhile; nothing was imported.") from None
    audit_record(
        organization=campaign.organization,
        actor=_audit_actor(actor),
        action=AuditAction.PROMPTS_IMPORTED,
        obj=campaign,
        data={"count": len(prompts), "skipped": len(skipped), "repeated_texts": repeated, "via": via},
    )
    return PromptsImported(
        prompt_ids=[prompt.pk for prompt in prompts], skipped_external_ids=skipped, repeated_texts=repeated
    )


@transaction.atomic
def prompt_save(*, prompt: Prompt, actor: User | AnonymousUser | None, changed: list[str]) -> Prompt:
    """Create or change a pool prompt: validated, hashed and classified like every prompt. A prompt
    that has battles keeps its text (votes record its hash); its category, language and ``active``
    may still change."""
    created = prompt._state.adding
    if prompt.organization_id is not None and prompt.campaign.organization_id != prompt.organization_id:
        raise Invalid(
            "The campaign must belong to the prompt's organisation.",
            field_errors={"campaign": "The campaign must belong to the prompt's organisation."},
        )
    if not created:
        stored = Prompt.objects.select_for_update().get(pk=prompt.pk)
        if stored.text != prompt.text and Battle.objects.filter(prompt=stored).exists():
            raise Conflict(
                "This prompt has battles, so its text cannot change: add a new prompt instead.",
                field_errors={"text": "Fixed once the prompt has battles; add a new prompt instead."},
            )
    built = prompt_build(
        campaign=prompt.campaign,
        text=prompt.text,
        source=prompt.source or Prompt.Source.POOL,
        category=prompt.category,
        language=prompt.language if not created else "",
    )
    prompt.organization_id = built.organization_id
    prompt.text, prompt.text_hash, prompt.language = built.text, built.text_hash, built.language
    prompt.save()
    audit_record(
        organization=prompt.campaign.organization,
        actor=actor,
        action=AuditAction.PROMPT_CREATED if created else AuditAction.PROMPT_CHANGED,
        obj=prompt,
        data={"fields": changed},
    )
    return prompt


# --- Battles ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Assignment:
    battle: Battle
    resumed: bool


def _check_caps(*, campaign: Campaign, user: User, session_key: str) -> None:
    if selectors.battles_in_session(campaign=campaign, user=user, session_key=session_key) >= campaign.session_cap:
        raise CapReached(
            f"You have rated {campaign.session_cap} battles in this session, the most this campaign allows "
            "at a stretch. Thank you! Take a break and log in again later to continue."
        )
    if campaign.rater_vote_cap is not None and (
        selectors.votes_by_rater(campaign=campaign, user=user) >= campaign.rater_vote_cap
    ):
        raise CapReached(
            f"You have cast {campaign.rater_vote_cap} votes in this campaign, the most one rater may cast. "
            "Thank you for your work!"
        )


def battle_assign(*, campaign: Campaign, user: User, session_key: str, prompt_text: str | None = None) -> Assignment:
    """Give the rater a battle: the pending one if there is one; else, for a pool prompt, one claimed
    from the campaign's buffer of battles generated ahead; else one prepared for this rater now, by a
    worker (the page says "preparing" and polls until it is ready: no web worker waits on a model).

    ``prompt_text`` is a rater-typed prompt (only where the campaign allows it); its battle is generated
    live by a worker and streamed to the page (``battle_start_live``)."""
    if campaign.status != Campaign.Status.OPEN:
        raise NotAllowed("This campaign is not open.")
    pool = selectors.pool_for_rater(campaign=campaign, user=user)
    if pool is None:
        raise NotAllowed("You are not in a rater pool of this campaign.")
    pending = _pending_or_none(campaign=campaign, user=user)
    if pending is not None:
        return Assignment(battle=pending, resumed=True)
    if selectors.rater_blocked(campaign=campaign, user=user):
        raise RaterBlocked(
            "You have missed too many of this campaign's attention checks, so it has no more battles for you. "
            "If you think this is a mistake, contact the team running the study."
        )
    _check_caps(campaign=campaign, user=user, session_key=session_key)
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
    if prompt.source == Prompt.Source.RATER and settings.ARENA_LIVE_STREAMING:
        battle_start_live(battle=battle)  # generated by a worker while the page streams it
        return Assignment(battle=battle, resumed=False)
    _generation_queue(battle)
    if prompt_text is None:
        buffer_refill_request(campaign=campaign)
    battle.refresh_from_db()
    return Assignment(battle=battle, resumed=False)


def _generation_queue(battle: Battle) -> None:
    """Generate the battle in a worker of the generation queue (CELERY_TASK_ROUTES; sent when the
    current transaction commits; where tasks run eagerly, right here): streamed to its page if it is
    live, else generated whole."""
    from .tasks import battle_generate_live_task, battle_generate_task

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


def _pending_or_none(*, campaign: Campaign, user: User) -> Battle | None:
    """The rater's open battle: ready, or being prepared (the page polls), or None. One whose worker
    was lost is voided (its prompt is not used up) and the rater gets a new one."""
    pending = selectors.battle_pending_for_rater(campaign=campaign, user=user)
    if pending is None or pending.status == Battle.Status.READY:
        return pending
    if (timezone.now() - pending.requested_at).total_seconds() > STALE_GENERATION_S:
        Battle.objects.filter(pk=pending.pk, status=Battle.Status.GENERATING).update(
            status=Battle.Status.VOID, void_reason="The answers were never completed."
        )
        return None
    return pending


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


class ContinueRefused(Conflict):
    pass


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


# --- The buffer: battles generated ahead for pool prompts, claimed by raters ------------------------


def _buffer(campaign_id: int) -> models.QuerySet[Battle]:
    return Battle.objects.filter(
        campaign_id=campaign_id, rater__isnull=True, status__in=(Battle.Status.GENERATING, Battle.Status.READY)
    )


def buffer_refill_request(*, campaign: Campaign) -> None:
    """Ask a generation worker to top the campaign's buffer up (cheap when it is full)."""
    if campaign.buffer_size == 0 or campaign.status != Campaign.Status.OPEN:
        return
    from .tasks import buffer_fill_task

    buffer_fill_task.delay(campaign.pk, organization_id=campaign.organization_id)


def buffer_fill(*, campaign_id: int) -> list[Battle]:
    """Top the campaign's buffer up to ``buffer_size`` battles: for each, a pool prompt (the least
    rated of a random handful, under the prompt-hash cap, not one already waiting) and a pair under
    the campaign's sampling policy, the side shown left a coin flip; each is queued for generation.
    Concurrent fillers count each other's battles: the campaign's row is locked while they are counted
    and created, so the buffer never overfills. A closed campaign gets none."""
    with transaction.atomic():
        campaign = Campaign.objects.select_for_update().filter(pk=campaign_id).first()
        if campaign is None or campaign.status != Campaign.Status.OPEN or campaign.buffer_size == 0:
            return []
        waiting = _buffer(campaign.pk)
        deficit = campaign.buffer_size - waiting.count()
        if deficit <= 0:
            return []
        taken = set(waiting.values_list("prompt_id", flat=True))
        created: list[Battle] = []
        for _ in range(deficit):
            prompt = selectors.buffer_prompt_pick(campaign=campaign, exclude=taken, rng=_rng)
            pair = selectors.pair_pick(campaign=campaign, rng=_rng) if prompt is not None else None
            if prompt is None or pair is None:
                break
            taken.add(prompt.pk)
            created.append(
                Battle.objects.create(
                    organization_id=campaign.organization_id,
                    campaign=campaign,
                    prompt=prompt,
                    left=pair[0],
                    right=pair[1],
                    params={**campaign.sampling_params(), "seed": secrets.randbits(31)},
                )
            )
        for battle in created:
            _generation_queue(battle)  # sent when this transaction commits
    return created


def _shareable(battle: Battle, campaign: Campaign) -> bool:
    """Whether a battle that just became ready is an item to copy for k raters: generated ahead for a
    pool prompt, or pushed as a shadow battle. Not a rater's typed prompt (theirs alone), not gold (a
    per-rater check), not a live battle, not a multi-turn campaign's (each rater continues their own
    conversation, so the copies would stop being one item), not a copy already."""
    return (
        campaign.reviewers_per_item > 1
        and campaign.max_turns <= 1
        and battle.item_key is None
        and not battle.live
        and battle.status == Battle.Status.READY
        and (
            battle.source == Battle.Source.SHADOW
            or (battle.source == Battle.Source.GENERATED and battle.prompt.source == Prompt.Source.POOL)
        )
    )


@transaction.atomic
def battle_items_share(*, battles: list[Battle]) -> list[Battle]:
    """Shared battles: for each battle of a campaign with ``reviewers_per_item = k > 1`` that just became
    ready, ``k - 1`` copies in the campaign's buffer, so that k different raters judge the same answer
    pair. A copy is a battle of its own (one vote per battle is a database constraint): the same prompt,
    parameters, source and answers (its Generation rows copied), its sides drawn afresh (a coin flip per
    copy, so no rater's side order is shared with another's; agreement maps the sides back through the
    competitor ids). All k carry ``item_key`` (the first battle's id). The copies keep the first one's
    creation time, so the buffer's age limit ages the item, not each copy; a battle handed to a rater
    directly (nothing was buffered) is the item's first copy, the others wait in the buffer. The claim
    never gives one rater two copies (same prompt: "never the same prompt twice", and a unique
    constraint on (item_key, rater))."""
    made: list[Battle] = []
    by_campaign: dict[int, Campaign] = {}
    for battle in battles:
        campaign = by_campaign.setdefault(battle.campaign_id, battle.campaign)
        if not _shareable(battle, campaign):
            continue
        generations = list(Generation.objects.filter(battle=battle, turn=0))
        if {g.side for g in generations} != {Side.LEFT, Side.RIGHT}:
            continue
        Battle.objects.filter(pk=battle.pk).update(item_key=battle.pk)
        battle.item_key = battle.pk
        copies: list[Battle] = []
        rows: list[Generation] = []
        for _ in range(campaign.reviewers_per_item - 1):
            swap = _rng.random() < 0.5
            copy = Battle(
                organization_id=battle.organization_id,
                campaign_id=battle.campaign_id,
                prompt_id=battle.prompt_id,
                left_id=battle.right_id if swap else battle.left_id,
                right_id=battle.left_id if swap else battle.right_id,
                status=Battle.Status.READY,
                source=battle.source,
                params=battle.params,
                ready_at=battle.ready_at,
                requested_at=battle.requested_at,
                generation_started_at=battle.generation_started_at,
                experiment_id=battle.experiment_id,
                item_key=battle.pk,
            )
            copies.append(copy)
            for generation in generations:
                side = generation.side
                if swap:
                    side = Side.RIGHT if side == Side.LEFT else Side.LEFT
                rows.append(
                    Generation(
                        battle=copy,
                        side=side,
                        turn=0,
                        competitor_id=generation.competitor_id,
                        text=generation.text,
                        output_tokens=generation.output_tokens,
                        finish_reason=generation.finish_reason,
                        latency_s=generation.latency_s,
                        ttft_s=generation.ttft_s,
                        tokens_per_s=generation.tokens_per_s,
                        error=generation.error,
                        style=generation.style,
                        model_mentions=generation.model_mentions,
                    )
                )
        Battle.objects.bulk_create(copies)
        Generation.objects.bulk_create(rows)
        # auto_now_add stamped them now; the item is as old as its answers.
        Battle.objects.filter(pk__in=[c.pk for c in copies]).update(created_at=battle.created_at)
        made.extend(copies)
    return made


def battle_claim(*, campaign: Campaign, user: User, pool: RaterPool, session_key: str) -> Battle | None:
    """Hand the rater the oldest ready battle of the buffer that they may rate, or None.

    Checked at claim time, since the buffer was filled without knowing who would rate: the prompt is
    not one the rater has seen (by normalised text), its hash is under the campaign's cap, both
    competitors are still available, the battle is younger than the buffer's age limit (shadow battles:
    both competitors still active, and no age limit: see ``buffer_maintain``). The claim is a
    conditional update (``rater IS NULL``): of two raters racing for one battle, one gets it and the
    other the next. A rater who already holds an open battle (a second tab) makes the database refuse
    (IntegrityError: one open battle per rater and campaign), which the caller turns into that battle."""
    now = timezone.now()
    candidates = list(
        Battle.objects.filter(
            campaign=campaign,
            rater__isnull=True,
            status=Battle.Status.READY,
        )
        .filter(
            models.Q(created_at__gte=now - timedelta(seconds=campaign.buffer_max_age_s))
            | models.Q(source=Battle.Source.SHADOW)
        )
        .select_related("prompt")
        .order_by("created_at")[:CLAIM_CANDIDATES]
    )
    if not candidates:
        return None
    # The rules, for these few candidates only (never over the rater's whole history or the whole log).
    hashes = {candidate.prompt.text_hash for candidate in candidates}
    seen = selectors.hashes_rated_by(campaign=campaign, user=user, hashes=hashes)
    full = selectors.hashes_at_cap(campaign=campaign, hashes=hashes)
    available = set(selectors.competitors_available(campaign=campaign).values_list("pk", flat=True))
    active = (
        set(Competitor.objects.filter(campaign=campaign, active=True).values_list("pk", flat=True))
        if any(candidate.source == Battle.Source.SHADOW for candidate in candidates)
        else set()
    )
    refuse = identity_refused(campaign)
    items = {candidate.item_key for candidate in candidates if candidate.item_key is not None}
    held = selectors.items_held_by(campaign=campaign, user=user, item_keys=items) if items else set()
    for candidate in candidates:
        if candidate.prompt.text_hash in seen or candidate.prompt.text_hash in full:
            continue
        if refuse and candidate.prompt.asks_identity:
            continue  # generated (or pushed) before the policy changed: never served under "refuse"
        if candidate.item_key is not None and candidate.item_key in held:
            continue
        usable = active if candidate.source == Battle.Source.SHADOW else available
        if candidate.left_id not in usable or candidate.right_id not in usable:
            continue
        with transaction.atomic():  # a savepoint: the one-open-battle constraint may refuse the update
            won = Battle.objects.filter(pk=candidate.pk, rater__isnull=True, status=Battle.Status.READY).update(
                rater=user, pool=pool, session_key=session_key, claimed_at=now
            )
        if won:
            candidate.refresh_from_db()
            return candidate
    return None


def buffer_maintain_schedule_open_campaigns() -> int:
    """Beat's safety net: queue the buffer's maintenance for every open campaign that keeps one, each in
    its organisation's scope."""
    from .tasks import buffer_maintain_task

    with scopes_disabled():  # the one listing across organisations
        open_campaigns = list(
            Campaign.objects.filter(status=Campaign.Status.OPEN, buffer_size__gt=0).values_list("pk", "organization_id")
        )
    for campaign_id, organization_id in open_campaigns:
        buffer_maintain_task.delay(campaign_id, organization_id=organization_id)
    return len(open_campaigns)


# How many of the buffer's oldest battles a claim looks at before preparing one for the rater instead.
CLAIM_CANDIDATES = 16


def buffer_maintain(*, campaign_id: int) -> int:
    """Void what the buffer must not hand out, then top it up: battles unclaimed for longer than the
    campaign's age limit, battles of a competitor that is unavailable (down, or withdrawn), and battles
    whose worker was lost (generating for longer than any model may take). Returns how many were voided."""
    campaign = Campaign.objects.filter(pk=campaign_id).first()
    if campaign is None:
        return 0
    now = timezone.now()
    # Shadow battles are left alone: their answers were pushed once and cannot be made again, and they
    # do not go stale (the age limit is there so generated answers reflect the models now deployed; a
    # shadow battle records what a model answered then, and says so). A withdrawn competitor voids them
    # in ``competitor_save``; a model server being down does not matter, their answers exist.
    generated = _buffer(campaign.pk).filter(source=Battle.Source.GENERATED)
    voided = generated.filter(created_at__lt=now - timedelta(seconds=campaign.buffer_max_age_s)).update(
        status=Battle.Status.VOID, void_reason="Not claimed within the campaign's buffer age; replaced."
    )
    available = selectors.competitors_available(campaign=campaign).values("pk")
    voided += (
        _buffer(campaign.pk)
        .filter(source=Battle.Source.GENERATED)
        .filter(models.Q(~models.Q(left__in=available)) | models.Q(~models.Q(right__in=available)))
        .update(status=Battle.Status.VOID, void_reason="A competitor became unavailable before a rater got it.")
    )
    voided += Battle.objects.filter(
        campaign=campaign,
        status=Battle.Status.GENERATING,
        requested_at__lt=now - timedelta(seconds=STALE_GENERATION_S),
    ).update(status=Battle.Status.VOID, void_reason="The answers were never completed.")
    if campaign.status == Campaign.Status.OPEN:
        buffer_fill(campaign_id=campaign.pk)
    return voided


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
    answered; a model answering in one piece has its first token at its latency."""
    if not result.ok:
        return {"ttft_s": None, "tokens_per_s": None}
    return {"ttft_s": result.ttft_s, "tokens_per_s": result.tokens_per_s if result.latency_s > 0 else None}


# --- Live battles (rater-typed prompts): generated by a worker, streamed to the page ----------------

GENERATION_QUEUE = "generation"  # where CELERY_TASK_ROUTES sends the generation tasks


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
                "battle %s %s: ttft %.3f s, latency %.3f s, %d output tokens, %s tokens/s%s",
                battle.pk,
                side,
                result.ttft_s,
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


def battle_streams(battle: Battle) -> bool:
    """Whether the battle's page shows it through the live stream: a streamed battle not yet shown in
    full. Also once it is recorded: a reload must not show the answers earlier than the paced stream
    would (the longer answer's tail, paced at the slower model's rate, would tell who was faster)."""
    return battle.live and battle.shown_at is None and battle.status in (Battle.Status.GENERATING, Battle.Status.READY)


def _style_sum(styles: Iterable[dict[str, Any]]) -> dict[str, Any]:
    total: dict[str, Any] = {}
    for style in styles:
        for key, value in style.items():
            total[key] = total.get(key, 0) + value
    return total


def _conversation_log(battle: Battle) -> dict[str, Any]:
    """What the vote log records of the battle's answers: per side the tokens and latency summed over
    every turn, the last turn's finish reason, the style counts of the whole conversation, the identity
    flags of every turn, and, for a multi-turn battle, each turn on its own (``Vote.turns``)."""
    generations: dict[int, dict[str, Generation]] = {}
    # What the log takes of each answer (not its text), in turn order; turns are read only for a battle
    # that has more than one (a single-turn battle's only message is its prompt).
    fields = ("id", "battle_id", "side", "turn", "output_tokens", "finish_reason", "latency_s", "ttft_s")
    for generation in battle.generations.only(*fields, "model_mentions", "style").order_by("turn", "side"):
        generations.setdefault(generation.turn, {})[generation.side] = generation
    later = [turn.text for turn in battle.turns.order_by("index")] if max(generations, default=0) > 0 else []
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
        Battle.objects.filter(pk=battle.pk, shown_at__isnull=True).update(shown_at=timezone.now())
        battle.refresh_from_db(fields=["shown_at"])
    return battle


def vote_submit(*, battle_id: Any, user: User, choice: str, battle: Battle | None = None) -> Vote:
    """Append the rater's vote on their battle to the log, in the transaction that flips the battle from
    READY to VOTED (the flip is conditional: of two concurrent submissions one wins, the other is told the
    first vote stands). ``battle``: the rater's battle as the caller already read it with
    ``selectors.battle_for_rater`` (the page's view does, for its study gate), so it is not read twice;
    every check below is made on it all the same, and the conditional update settles any change since."""
    try:
        return _vote_submit(battle_id=battle_id, user=user, choice=choice, battle=battle)
    except IntegrityError:
        # Rolled back whole (the flip too). The log's one vote per battle refused it: another vote is
        # stored (the failure path pays the look-up; the vote's own insert needs no savepoint). Anything
        # else is not the rater's doing and stays an error.
        if Vote.objects.filter(battle_id=battle_id).exists():
            raise VoteRejected("This battle has already been voted on. Your first vote stands.") from None
        raise


@transaction.atomic
def _vote_submit(*, battle_id: Any, user: User, choice: str, battle: Battle | None) -> Vote:
    if choice not in Choice.values:
        raise Invalid(f"Unknown choice {choice!r}: use one of {', '.join(Choice.values)}.")
    if battle is None or str(battle.pk) != str(battle_id) or battle.rater_id != user.pk:
        battle = selectors.battle_for_rater(user=user, battle_id=battle_id)
    if battle is None:
        raise NotAllowed("No such battle.")
    if battle.status == Battle.Status.VOID:
        raise VoteRejected(f"This battle was voided and cannot be voted on: {battle.void_reason}")
    if battle.status == Battle.Status.VOTED:
        raise VoteRejected("This battle has already been voted on (perhaps in another tab). Your first vote stands.")
    if battle.campaign.status != Campaign.Status.OPEN:
        raise VoteRejected("This campaign is closed; no more votes are taken.")
    if not selectors.rater_in_campaign_pool(campaign=battle.campaign, user=user):
        raise VoteRejected("You are no longer in a rater pool of this campaign; this vote was not stored.")
    if battle.status != Battle.Status.READY or battle.shown_at is None:
        raise VoteRejected("This battle has not been shown yet; open it before voting.")
    pool_id = battle.pool_id
    assert pool_id is not None  # set with the rater (battle_for_rater found it by its rater)

    now = timezone.now()
    # The database settles races: of two concurrent submissions only one flips READY to VOTED.
    claimed = Battle.objects.filter(pk=battle.pk, status=Battle.Status.READY).update(
        status=Battle.Status.VOTED, voted_at=now
    )
    if not claimed:
        raise VoteRejected("This battle has already been voted on (perhaps in another tab). Your first vote stands.")
    log = _conversation_log(battle)
    decision_ms = max(0, int((now - battle.shown_at).total_seconds() * 1000))
    vote = Vote.objects.create(
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


# --- Shadow battles: answers pushed over the API, served to raters like generated ones --------------

# An answer's text longer than this is refused (the page shows whole answers; generated ones stop at
# the campaign's max_tokens).
SHADOW_ANSWER_MAX_CHARS = 100_000
SHADOW_BATCH_MAX = 1000


class IdempotencyConflict(Conflict):
    """An idempotency key already used with another request body."""


@dataclass(frozen=True)
class ShadowAnswer:
    """One side of a shadow battle as the caller sent it. With an experiment, ``variant`` names the
    variant whose competitor answered (then ``model`` and ``version`` may be empty)."""

    text: str
    output_tokens: int
    finish_reason: str
    latency_s: float
    model: str = ""
    version: str = ""
    ttft_s: float | None = None
    variant: str = ""


@dataclass(frozen=True)
class ShadowBattleInput:
    idempotency_key: str
    prompt: str
    answers: tuple[ShadowAnswer, ShadowAnswer]
    category: str = ""
    language: str = ""
    system_prompt: str | None = None
    experiment: str = ""

    def digest(self) -> str:
        """sha256 of the request, key left out: what a replay must match."""
        body = {
            "prompt": self.prompt,
            "category": self.category,
            "language": self.language,
            "system_prompt": self.system_prompt,
            "experiment": self.experiment,
            "answers": [
                [a.model, a.version, a.variant, a.text, a.output_tokens, a.finish_reason, a.latency_s, a.ttft_s]
                for a in self.answers
            ],
        }
        return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


@dataclass(frozen=True)
class ShadowResult:
    battle_id: uuid.UUID
    status: str
    created: bool  # False: a replay of an earlier request with the same key and body


def _shadow_audit_actor(
    actor: User | AnonymousUser | ApiKeyPrincipal | None,
) -> tuple[User | AnonymousUser | None, dict[str, str]]:
    """A request made with an API key has no person behind it: the audit row names the key instead."""
    if isinstance(actor, ApiKeyPrincipal):
        return None, {"api_key": actor.api_key.prefix}
    return actor, {}


class _Errors:
    """Field errors of a batch, named ``<prefix><field>`` (the API's prefix says which item)."""

    def __init__(self, prefix: Callable[[int], str]) -> None:
        self.prefix = prefix
        self.fields: dict[str, list[str]] = {}

    def add(self, index: int, field: str, message: str) -> None:
        self.fields.setdefault(f"{self.prefix(index)}{field}", []).append(message)

    def raise_if_any(self, cls: type[Invalid] | type[Conflict] = Invalid) -> None:
        if self.fields:
            first = next(iter(self.fields.items()))
            more = f" (and {len(self.fields) - 1} more)" if len(self.fields) > 1 else ""
            raise cls(f"{first[0]}: {first[1][0]}{more}", field_errors=self.fields)


def _shadow_validate(index: int, item: ShadowBattleInput, errors: _Errors) -> str:
    """Check what can be checked on the item alone; returns the clean prompt text."""
    clean = ""
    try:
        clean = prompt_validate(item.prompt)
    except ValueError as exc:
        errors.add(index, "prompt", str(exc))
    if item.category and item.category not in CATEGORIES:
        errors.add(index, "category", f"Unknown category {item.category!r}: use one of {', '.join(CATEGORIES)}.")
    if len(item.language) > 8:
        errors.add(index, "language", "At most 8 characters (a language tag such as en or pt-BR).")
    if not item.idempotency_key or len(item.idempotency_key) > 200:
        errors.add(index, "idempotency_key", "Required, 1 to 200 characters.")
    if len(item.answers) != 2:
        errors.add(index, "answers", "Exactly two answers.")
        return clean
    for side, answer in enumerate(item.answers):
        field = f"answers.{side}."
        if not answer.text.strip():
            errors.add(index, field + "text", "An answer cannot be empty.")
        elif len(answer.text) > SHADOW_ANSWER_MAX_CHARS:
            errors.add(index, field + "text", f"At most {SHADOW_ANSWER_MAX_CHARS} characters.")
        if answer.output_tokens < 0:
            errors.add(index, field + "output_tokens", "Must be 0 or more.")
        if not 1 <= len(answer.finish_reason) <= 16:
            errors.add(index, field + "finish_reason", "1 to 16 characters (e.g. stop, length).")
        if not (math.isfinite(answer.latency_s) and answer.latency_s >= 0):
            errors.add(index, field + "latency_s", "Seconds, 0 or more.")
        if answer.ttft_s is not None and not (
            math.isfinite(answer.ttft_s) and 0 <= answer.ttft_s <= max(answer.latency_s, 0)
        ):
            errors.add(index, field + "ttft_s", "Seconds, from 0 to the answer's latency.")
        if not (item.experiment and answer.variant):
            for name, value in (("model", answer.model), ("version", answer.version)):
                if not value:
                    errors.add(index, field + name, "Required (or name an experiment and its variant).")
        if len(answer.model) > 120:
            errors.add(index, field + "model", "At most 120 characters.")
        if answer.model == GOLD_COMPETITOR_NAME:
            errors.add(index, field + "model", f"{GOLD_COMPETITOR_NAME!r} is reserved for gold battles.")
        if len(answer.version) > 80:
            errors.add(index, field + "version", "At most 80 characters.")
    return clean


def _shadow_identities(
    campaign: Campaign, items: list[ShadowBattleInput], errors: _Errors
) -> list[tuple[tuple[str, str], tuple[str, str]]]:
    """Each item's two (model, version): given, or the variants' competitors of its experiment."""
    keys = {item.experiment for item in items if item.experiment}
    variants: dict[tuple[str, str], Variant] = {}
    experiments: dict[str, Experiment] = {}
    if keys:
        for found in Experiment.objects.filter(organization_id=campaign.organization_id, key__in=keys):
            experiments[found.key] = found
        for row in Variant.objects.filter(experiment__in=experiments.values()).select_related(
            "experiment", "competitor__endpoint"
        ):
            variants[(row.experiment.key, row.name)] = row
    identities = []
    for index, item in enumerate(items):
        pair: list[tuple[str, str]] = []
        experiment = experiments.get(item.experiment) if item.experiment else None
        if item.experiment and experiment is None:
            errors.add(index, "experiment", f"No experiment {item.experiment!r} in this organisation.")
        elif experiment is not None and experiment.campaign_id != campaign.pk:
            errors.add(index, "experiment", "This experiment's battles go to another campaign (or to none).")
        for side, answer in enumerate(item.answers[:2]):
            identity = (answer.model, answer.version)
            if experiment is not None and experiment.campaign_id == campaign.pk and answer.variant:
                variant = variants.get((experiment.key, answer.variant))
                if variant is None:
                    errors.add(index, f"answers.{side}.variant", f"No variant {answer.variant!r} in {experiment}.")
                elif variant.competitor is None:
                    errors.add(index, f"answers.{side}.variant", f"Variant {variant} names no competitor.")
                else:
                    named = (variant.competitor.model_name, variant.competitor.version_label)
                    if answer.model and (answer.model, answer.version) != named:
                        errors.add(
                            index, f"answers.{side}.model", f"Variant {variant} is {named[0]} {named[1]}, not this."
                        )
                    identity = named
            pair.append(identity)
        if len(pair) == 2 and pair[0] == pair[1] and pair[0] != ("", ""):
            errors.add(index, "answers", "The two answers must come from different models or versions.")
        identities.append((pair[0], pair[1]) if len(pair) == 2 else (("", ""), ("", "")))
    return identities


def _shadow_competitors(
    *, campaign: Campaign, wanted: set[tuple[str, str]], actor: User | AnonymousUser | None
) -> dict[tuple[str, str], Competitor]:
    """The campaign's competitor for each (model, version): a competitor with an endpoint of that name
    and version if there is one (the same model keeps one rating however its answers came), else an
    external one, created (and audited) where missing."""

    def existing() -> dict[tuple[str, str], Competitor]:
        found: dict[tuple[str, str], Competitor] = {}
        competitors = Competitor.objects.filter(campaign=campaign, gold=False).select_related("endpoint").order_by("id")
        for competitor in competitors:
            # An endpoint's competitor wins over an external one of the same name and version.
            key = (competitor.model_name, competitor.version_label)
            if key not in found or (competitor.endpoint_id is not None and found[key].endpoint_id is None):
                found[key] = competitor
        return found

    found = existing()
    missing = sorted(wanted - found.keys())
    if missing:
        Competitor.objects.bulk_create(
            [
                Competitor(
                    organization_id=campaign.organization_id,
                    campaign=campaign,
                    external_model=model,
                    version_label=version,
                )
                for model, version in missing
            ],
            ignore_conflicts=True,  # a concurrent import created the same one: it is found below
        )
        found = existing()
        person, key = _shadow_audit_actor(actor)
        for model, version in missing:
            audit_record(
                organization=campaign.organization,
                actor=person,
                action=AuditAction.COMPETITOR_ADDED,
                obj=found[(model, version)],
                data={"external_model": model, "version": version, "via": "shadow battle", **key},
            )
    return found


def shadow_battles_import(
    *,
    campaign: Campaign,
    items: list[ShadowBattleInput],
    actor: User | AnonymousUser | None,
    field_prefix: Callable[[int], str] = lambda index: f"battles.{index}.",
) -> list[ShadowResult]:
    """Add ready-made battles to the campaign's buffer, all or none, one result per item in order.

    Each battle is served to raters exactly like a generated one (battle_claim: blind, same page, same
    caps): the side shown left is a coin flip made here, not the order given; style counts and identity
    signals are computed now from the answers, as for generated ones. Competitors are matched by
    (model, version), or created as external models (no endpoint: never drawn for generated battles).

    Idempotent per item: a key already used with the same body returns that battle (``created`` False)
    and writes nothing; with another body the whole call is refused (``IdempotencyConflict``, naming
    the items). Invalid items are all named (``Invalid.field_errors``) and nothing is written."""
    if len(items) > SHADOW_BATCH_MAX:
        raise Invalid(f"At most {SHADOW_BATCH_MAX} battles per call.", field_errors={"battles": "Too many."})
    if not items:
        raise Invalid("No battles given.", field_errors={"battles": "At least one battle."})
    try:
        return _shadow_battles_import(campaign=campaign, items=items, actor=actor, field_prefix=field_prefix)
    except IntegrityError:
        # A concurrent request took one of these keys (or competitors) first: once more, now replaying it.
        return _shadow_battles_import(campaign=campaign, items=items, actor=actor, field_prefix=field_prefix)


@transaction.atomic
def _shadow_battles_import(
    *,
    campaign: Campaign,
    items: list[ShadowBattleInput],
    actor: User | AnonymousUser | None,
    field_prefix: Callable[[int], str],
) -> list[ShadowResult]:
    if campaign.status == Campaign.Status.CLOSED:
        raise Conflict("This campaign is closed: it takes no more battles.")
    errors = _Errors(field_prefix)
    texts = [_shadow_validate(index, item, errors) for index, item in enumerate(items)]
    first_index: dict[str, int] = {}
    for index, item in enumerate(items):
        if item.idempotency_key in first_index:
            other = first_index[item.idempotency_key]
            errors.add(index, "idempotency_key", f"Used twice in this call (also item {other}).")
        first_index.setdefault(item.idempotency_key, index)
    errors.raise_if_any()

    digests = [item.digest() for item in items]
    earlier = {
        row["idempotency_key"]: row
        for row in Battle.objects.filter(
            campaign=campaign, idempotency_key__in=[item.idempotency_key for item in items]
        ).values("idempotency_key", "request_digest", "pk", "status")
    }
    conflicts = _Errors(field_prefix)
    for index, item in enumerate(items):
        row = earlier.get(item.idempotency_key)
        if row is not None and row["request_digest"] != digests[index]:
            conflicts.add(index, "idempotency_key", "Already used with a different request body.")
    if conflicts.fields:
        first_field = next(iter(conflicts.fields))
        raise IdempotencyConflict(
            f"{first_field}: this idempotency key was already used with a different request body; nothing was changed.",
            field_errors=conflicts.fields,
        )
    fresh = [index for index, item in enumerate(items) if item.idempotency_key not in earlier]

    identity_errors = _Errors(lambda position: field_prefix(fresh[position]))
    identities = _shadow_identities(campaign, [items[i] for i in fresh], identity_errors)
    identity_errors.raise_if_any()
    competitors: dict[tuple[str, str], Competitor] = {}
    if fresh:
        wanted = {identity for pair in identities for identity in pair}
        competitors = _shadow_competitors(campaign=campaign, wanted=wanted, actor=actor)
    for position, index in enumerate(fresh):
        for side, identity in enumerate(identities[position]):
            competitor = competitors[identity]
            if not competitor.active:
                errors.add(index, f"answers.{side}.model", f"{competitor} was withdrawn from this campaign.")
    errors.raise_if_any()

    prompts = _shadow_prompts(campaign=campaign, items=[(texts[i], items[i]) for i in fresh])
    now = timezone.now()
    refuse = identity_refused(campaign)
    battles: list[Battle] = []
    generations: list[Generation] = []
    for position, index in enumerate(fresh):
        item = items[index]
        first, second = (competitors[identity] for identity in identities[position])
        answers = item.answers
        # The server decides the sides: the order of the request says nothing about what raters see.
        if _rng.random() < 0.5:
            first, second = second, first
            answers = (answers[1], answers[0])
        battle = Battle(
            organization_id=campaign.organization_id,
            campaign=campaign,
            prompt=prompts[position],
            left=first,
            right=second,
            status=Battle.Status.READY,
            source=Battle.Source.SHADOW,
            params={"system_prompt": item.system_prompt if item.system_prompt is not None else campaign.system_prompt},
            ready_at=now,
            requested_at=now,
            idempotency_key=item.idempotency_key,
            request_digest=digests[index],
            experiment=None,
        )
        if refuse and (prompts[position].asks_identity or _names_a_model(answers[0].text, answers[1].text)):
            # Under "refuse" such a pair is never shown: stored voided (the request is answered, and a
            # replay finds it), like a generated battle whose answer named a model.
            battle.status = Battle.Status.VOID
            battle.void_reason = (
                IDENTITY_ANSWER_VOIDED
                if _names_a_model(answers[0].text, answers[1].text)
                else "The prompt asks a model who it is, which the campaign refuses."
            )
        battles.append(battle)
        for pane, competitor, answer in ((Side.LEFT, first, answers[0]), (Side.RIGHT, second, answers[1])):
            generations.append(
                Generation(
                    battle=battle,
                    side=pane,
                    competitor=competitor,
                    text=answer.text,
                    output_tokens=answer.output_tokens,
                    finish_reason=answer.finish_reason,
                    latency_s=answer.latency_s,
                    ttft_s=answer.ttft_s,
                    tokens_per_s=answer.output_tokens / answer.latency_s if answer.latency_s > 0 else None,
                    # The same analysis as a generated answer's (battle_generations_record).
                    style=style_counts(answer.text).as_dict(),
                    model_mentions=list(answer_model_mentions(answer.text)),
                )
            )
    _shadow_experiments_link(campaign=campaign, battles=battles, items=[items[i] for i in fresh])
    Battle.objects.bulk_create(battles, batch_size=500)
    Generation.objects.bulk_create(generations, batch_size=1000)
    battle_items_share(battles=battles)
    if battles:
        person, key = _shadow_audit_actor(actor)
        audit_record(
            organization=campaign.organization,
            actor=person,
            action=AuditAction.SHADOW_BATTLES_IMPORTED,
            obj=campaign,
            data={"count": len(battles), "replayed": len(items) - len(battles), **key},
        )
    created = {items[index].idempotency_key: battle for index, battle in zip(fresh, battles, strict=True)}
    results = []
    for item in items:
        if item.idempotency_key in created:
            battle = created[item.idempotency_key]
            results.append(ShadowResult(battle.pk, battle.status, True))
        else:
            row = earlier[item.idempotency_key]
            results.append(ShadowResult(row["pk"], row["status"], False))
    return results


def _shadow_experiments_link(*, campaign: Campaign, battles: list[Battle], items: list[ShadowBattleInput]) -> None:
    keys = {item.experiment for item in items if item.experiment}
    if not keys:
        return
    experiments = {e.key: e for e in Experiment.objects.filter(organization_id=campaign.organization_id, key__in=keys)}
    for battle, item in zip(battles, items, strict=True):
        if item.experiment:
            battle.experiment = experiments[item.experiment]


def _shadow_prompts(*, campaign: Campaign, items: list[tuple[str, ShadowBattleInput]]) -> list[Prompt]:
    """A prompt per item: the campaign's shadow prompt of the same text, category and language if there
    is one (found with one query by hash), else a new one (classified where no category is given)."""
    hashes = {prompt_hash(text) for text, _ in items}
    known: dict[tuple[str, str, str], Prompt] = {}
    for prompt in Prompt.objects.filter(campaign=campaign, source=Prompt.Source.SHADOW, text_hash__in=hashes):
        known.setdefault((prompt.text, prompt.category, prompt.language), prompt)
    new: list[Prompt] = []
    chosen: list[Prompt] = []
    for text, item in items:
        category, language = item.category, item.language
        if not category or not language:
            auto_category, auto_language = prompt_classify(text)
            category, language = category or auto_category, language or auto_language
        key = (text, category, language)
        if key not in known:
            known[key] = Prompt(
                organization_id=campaign.organization_id,
                campaign=campaign,
                text=text,
                text_hash=prompt_hash(text),
                asks_identity=prompt_asks_identity(text),
                category=category,
                language=language,
                source=Prompt.Source.SHADOW,
            )
            new.append(known[key])
        chosen.append(known[key])
    Prompt.objects.bulk_create(new, batch_size=500)
    return chosen


# --- A/B experiments: sticky assignment ---------------------------------------------------------------


class ExperimentInactive(Conflict):
    pass


@dataclass(frozen=True)
class AssignmentResult:
    variant: Variant
    exposures: int  # this unit's exposures to this variant, this one included


def experiment_assign(*, experiment: Experiment, unit_id: str) -> AssignmentResult:
    """The unit's variant (``battles.experimenting``: a hash of the key and the unit id, weighted),
    and its exposure counted: one row per (experiment, unit, variant), created on the first exposure
    and counted up by a conditional update after (concurrent first exposures: one insert wins, the
    other counts up)."""
    if not experiment.active:
        raise ExperimentInactive(f"Experiment {experiment.key} is not active.")
    if not unit_id or len(unit_id) > 200:
        raise Invalid("unit_id: 1 to 200 characters.", field_errors={"unit_id": "1 to 200 characters."})
    variants = list(Variant.objects.filter(experiment=experiment).select_related("competitor__endpoint").order_by("id"))
    if not variants:
        raise Conflict(f"Experiment {experiment.key} has no variants.")
    variant = variants[variant_index(unit_position(experiment.key, unit_id), [v.weight for v in variants])]
    now = timezone.now()
    exposures = Exposure.objects.filter(experiment=experiment, unit_id=unit_id, variant=variant)
    with transaction.atomic():
        if not exposures.update(count=models.F("count") + 1, last_seen_at=now):
            try:
                with transaction.atomic():  # a savepoint: a concurrent first exposure may win the insert
                    Exposure.objects.create(
                        experiment=experiment, variant=variant, unit_id=unit_id, first_seen_at=now, last_seen_at=now
                    )
            except IntegrityError:
                exposures.update(count=models.F("count") + 1, last_seen_at=now)
        count = exposures.values_list("count", flat=True).get()
    return AssignmentResult(variant=variant, exposures=count)


@transaction.atomic
def variant_save(*, variant: Variant, actor: User | AnonymousUser | None, changed: list[str]) -> Variant:
    """A variant added or changed (its experiment's change, in the audit log). Changing a weight moves
    some units to another variant from their next assignment on; the exposures say which."""
    created = variant._state.adding
    try:
        variant.full_clean()
    except ValidationError as exc:
        raise Invalid(" ".join(exc.messages), field_errors=exc.message_dict) from None
    variant.save()
    audit_record(
        organization=variant.experiment.organization,
        actor=actor,
        action=AuditAction.EXPERIMENT_CHANGED,
        obj=variant.experiment,
        data={"variant": variant.name, "created": created, "fields": changed, "weight": variant.weight},
    )
    return variant


@transaction.atomic
def variant_delete(*, variant: Variant, actor: User | AnonymousUser | None) -> None:
    audit_record(
        organization=variant.experiment.organization,
        actor=actor,
        action=AuditAction.EXPERIMENT_CHANGED,
        obj=variant.experiment,
        data={"variant": variant.name, "deleted": True},
    )
    variant.delete()


# --- Gold battles and attention checks ---------------------------------------------------------------

# The pseudo-competitors that present a gold item's answers: a neutral name, revealed after the vote
# like a model's (nothing on the page says "gold" or "test" unless the campaign's gold_feedback is on).
GOLD_COMPETITOR_NAME = "Reference answer"
GOLD_VERSIONS = ("1", "2")
# Fields of a gold item fixed once it has been served: its verdict was stamped on those battles.
GOLD_FIXED_FIELDS = ("prompt_text", "answer_1", "answer_2", "expected", "kind", "campaign_id")


@transaction.atomic
def gold_item_save(*, item: GoldItem, actor: User | AnonymousUser | None, changed: list[str]) -> GoldItem:
    """Create or change a gold item (or attention check). Once served, its prompt, answers, verdict and
    kind are fixed (the battles recorded its verdict); ``active``, category and note may change."""
    created = item._state.adding
    item.organization_id = item.campaign.organization_id
    if not created:
        stored = GoldItem.objects.select_for_update().get(pk=item.pk)
        moved = [f for f in GOLD_FIXED_FIELDS if getattr(stored, f) != getattr(item, f)]
        if moved and Battle.objects.filter(gold_item=stored).exists():
            raise Conflict(
                "This item has been served to raters, so its prompt, answers and verdict are fixed: add a new item.",
                field_errors={f.removesuffix("_id"): "Fixed once the item has been served." for f in moved},
            )
    try:
        item.prompt_text = prompt_validate(item.prompt_text)
    except ValueError as exc:
        raise Invalid(str(exc), field_errors={"prompt_text": str(exc)}) from None
    try:
        item.full_clean()
    except ValidationError as exc:
        raise Invalid(" ".join(exc.messages), field_errors=exc.message_dict) from None
    item.save()
    audit_record(
        organization=item.campaign.organization,
        actor=actor,
        action=AuditAction.GOLD_ITEM_CREATED if created else AuditAction.GOLD_ITEM_CHANGED,
        obj=item,
        data={"fields": changed, "kind": item.kind},
    )
    return item


@transaction.atomic
def gold_item_delete(*, item: GoldItem, actor: User | AnonymousUser | None) -> None:
    """Delete an item never served; a served one is kept (its battles and votes point at it): deactivate it."""
    if Battle.objects.filter(gold_item=item).exists():
        raise Conflict("This item has been served to raters and is kept with their votes: deactivate it instead.")
    audit_record(
        organization=item.campaign.organization,
        actor=actor,
        action=AuditAction.GOLD_ITEM_DELETED,
        obj=item,
        data={"kind": item.kind},
    )
    item.delete()


GOLD_IMPORT_MAX_ROWS = 2000
GOLD_IMPORT_COLUMNS = ("prompt", "answer_1", "answer_2", "expected", "kind", "category", "language", "corrupt", "note")


@transaction.atomic
def gold_items_import(*, campaign: Campaign, text: str, actor: User | AnonymousUser | None) -> list[GoldItem]:
    """Gold items from CSV with a header row (columns ``GOLD_IMPORT_COLUMNS``; ``prompt``, ``expected``
    and the answers required, ``kind`` gold by default; an attention check may leave the broken answer
    empty and name a ``corrupt`` method to make it from the good one). All or none: every bad row and
    field is named (``row 3: answer_2``) and nothing is written."""
    reader = csv.DictReader(io.StringIO(text))
    header = [name.strip() for name in reader.fieldnames or []]
    unknown = sorted(set(header) - set(GOLD_IMPORT_COLUMNS))
    missing = sorted({"prompt", "expected", "answer_1", "answer_2"} - set(header))
    if unknown or missing:
        problems = ([f"unknown columns: {', '.join(unknown)}"] if unknown else []) + (
            [f"missing columns: {', '.join(missing)}"] if missing else []
        )
        raise Invalid(f"The header row is wrong ({'; '.join(problems)}).", field_errors={"header": problems})
    errors: dict[str, list[str]] = {}
    made: list[GoldItem] = []
    for number, raw in enumerate(reader, start=2):  # row 1 is the header
        if number - 1 > GOLD_IMPORT_MAX_ROWS:
            raise Invalid(f"At most {GOLD_IMPORT_MAX_ROWS} rows a file.", field_errors={"file": ["too many rows"]})
        row = {key.strip(): (value or "").strip() for key, value in raw.items() if key is not None}
        answers = {"answer_1": row.get("answer_1", ""), "answer_2": row.get("answer_2", "")}
        method = row.get("corrupt", "")
        if method:
            good, broken = ("answer_1", "answer_2") if row.get("expected") == "answer_1" else ("answer_2", "answer_1")
            if row.get("kind") != GoldItem.Kind.ATTENTION or row.get("expected") not in ("answer_1", "answer_2"):
                errors.setdefault(f"row {number}: corrupt", []).append(
                    "Only an attention check with answer_1 or answer_2 expected can be generated."
                )
                continue
            if method not in {c.value for c in Corruption} or not answers[good]:
                errors.setdefault(f"row {number}: corrupt", []).append(
                    f"Use one of {', '.join(c.value for c in Corruption)}, with the good answer written."
                )
                continue
            answers[broken] = attention_answer_corrupt(answers[good], method=method, seed=number)
        item = GoldItem(
            campaign=campaign,
            prompt_text=row.get("prompt", ""),
            answer_1=answers["answer_1"],
            answer_2=answers["answer_2"],
            expected=row.get("expected", ""),
            kind=row.get("kind") or GoldItem.Kind.GOLD,
            category=row.get("category") or "other",
            language=row.get("language") or "und",
            note=row.get("note", ""),
        )
        try:
            made.append(gold_item_save(item=item, actor=actor, changed=["imported"]))
        except Invalid as exc:
            for field, problems in (exc.field_errors or {"": [exc.message]}).items():
                column = "prompt" if field == "prompt_text" else field
                listed = problems if isinstance(problems, list) else [str(problems)]
                errors.setdefault(f"row {number}: {column}" if column else f"row {number}", []).extend(listed)
    if errors:
        first = next(iter(errors.items()))
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        raise Invalid(f"{first[0]}: {first[1][0]}{more}; nothing was imported.", field_errors=errors)
    return made


def gold_item_draw(*, campaign: Campaign, user: User) -> GoldItem | None:
    """Whether the rater's next battle is gold, and which item: with probability ``gold_rate``, one of
    the active items this rater has never been served. Deterministic per rater sequence (seeded by
    campaign, rater and how many battles they have been handed), so a rater cannot reload their way
    round a check: a new request for the same position draws the same answer."""
    if campaign.gold_rate <= 0:
        return None
    served = selectors.battles_served_to(campaign=campaign, user=user)
    rng = random.Random(f"gold:{campaign.pk}:{user.pk}:{served}")
    if rng.random() >= campaign.gold_rate:
        return None
    ids = sorted(selectors.gold_items_unseen(campaign=campaign, user=user).values_list("pk", flat=True))
    if not ids:
        return None
    return GoldItem.objects.get(pk=rng.choice(ids))


def gold_competitors(*, campaign: Campaign) -> tuple[Competitor, Competitor]:
    """The campaign's two gold pseudo-competitors (answer 1, answer 2), created on first use: external
    competitors marked ``gold``, never ranked, drawn, matched by a shadow battle or listed."""
    pair = []
    for version in GOLD_VERSIONS:
        competitor = Competitor.objects.filter(campaign=campaign, gold=True, version_label=version).first()
        if competitor is None:
            with transaction.atomic():
                competitor, _ = Competitor.objects.get_or_create(
                    campaign=campaign,
                    endpoint=None,
                    external_model=GOLD_COMPETITOR_NAME,
                    version_label=version,
                    defaults={"organization_id": campaign.organization_id, "gold": True},
                )
        pair.append(competitor)
    return pair[0], pair[1]


def _gold_generation(*, battle: Battle, side: str, competitor: Competitor, text: str) -> Generation:
    return Generation(
        battle=battle,
        side=side,
        competitor=competitor,
        text=text,
        output_tokens=len(text.split()),
        finish_reason="stop",
        latency_s=0.0,
        style=style_counts(text).as_dict(),
        model_mentions=list(answer_model_mentions(text)),
    )


@transaction.atomic
def gold_battle_create(*, campaign: Campaign, user: User, pool: RaterPool, item: GoldItem, session_key: str) -> Battle:
    """A battle of the item for this rater, ready at once like one claimed from the buffer: the same
    page, renderer and flow; the side shown left a coin flip; the verdict in this battle's sides
    stamped on it (``gold_expected``). The one-open-battle constraint may refuse it (IntegrityError)."""
    one, two = gold_competitors(campaign=campaign)
    prompt = Prompt.objects.filter(
        campaign=campaign, source=Prompt.Source.GOLD, text_hash=prompt_hash(item.prompt_text)
    ).first()
    if prompt is None:
        prompt = prompt_build(
            campaign=campaign,
            text=item.prompt_text,
            source=Prompt.Source.GOLD,
            category=item.category,
            language=item.language if item.language != "und" else "",
        )
        prompt.save()
    swapped = _rng.random() < 0.5
    left, right = (two, one) if swapped else (one, two)
    texts = (item.answer_2, item.answer_1) if swapped else (item.answer_1, item.answer_2)
    expected = {
        GoldItem.Expected.ANSWER_1: Choice.RIGHT if swapped else Choice.LEFT,
        GoldItem.Expected.ANSWER_2: Choice.LEFT if swapped else Choice.RIGHT,
    }.get(GoldItem.Expected(item.expected), Choice.BOTH_BAD)
    now = timezone.now()
    with transaction.atomic():  # a savepoint: the unique open-battle constraint may refuse this row
        battle = Battle.objects.create(
            organization_id=campaign.organization_id,
            campaign=campaign,
            rater=user,
            pool=pool,
            prompt=prompt,
            left=left,
            right=right,
            status=Battle.Status.READY,
            source=Battle.Source.GOLD,
            params={"system_prompt": campaign.system_prompt},
            session_key=session_key,
            ready_at=now,
            requested_at=now,
            claimed_at=now,
            gold_item=item,
            gold_expected=expected,
        )
    Generation.objects.bulk_create(
        [
            _gold_generation(battle=battle, side=Side.LEFT, competitor=left, text=texts[0]),
            _gold_generation(battle=battle, side=Side.RIGHT, competitor=right, text=texts[1]),
        ]
    )
    return battle


def _attention_assess(*, vote: Vote, battle: Battle) -> None:
    """After a vote on an attention check: at ``attention_block_after`` failures the rater is flagged
    (a new RaterFlag row, audited; their votes then leave the rankings by the exclusion policy) and the
    claim refuses them. The warning is the page's (``attention_warning``)."""
    campaign = battle.campaign
    if campaign.attention_block_after is None or battle.gold_item is None:
        return
    if battle.gold_item.kind != GoldItem.Kind.ATTENTION:
        return
    failures = selectors.attention_failures(campaign=campaign, user=vote.rater)
    if failures < campaign.attention_block_after:
        return
    rater_flag_raise(
        organization=campaign.organization,
        rater=vote.rater,
        kind=RaterFlag.Kind.ATTENTION,
        campaign_id=campaign.pk,
        reason=f"Failed {failures} attention checks in campaign {campaign.name!r} (#{campaign.pk}); "
        f"blocked at {campaign.attention_block_after}.",
        evidence={"attention_failed": failures, "block_after": campaign.attention_block_after, "vote_id": vote.pk},
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


def _qualification_assess(*, vote: Vote, battle: Battle) -> None:
    """After a gold vote of a rater still qualifying: once they have answered the campaign's
    ``qualification_battles`` gold battles, the outcome is written (passed at ``qualification_pass``'s
    share correct, else failed), once: a unique constraint settles two racing votes."""
    campaign = battle.campaign
    if campaign.qualification_battles <= 0:
        return
    if selectors.qualification_of(campaign=campaign, user=vote.rater) is not None:
        return
    answered, correct = selectors.gold_votes_of(campaign=campaign, user=vote.rater)
    if answered < campaign.qualification_battles:
        return
    score = correct / answered
    passed = score >= campaign.qualification_pass - 1e-12
    try:
        with transaction.atomic():
            Qualification.objects.create(
                organization_id=campaign.organization_id,
                campaign=campaign,
                rater=vote.rater,
                status=Qualification.Status.PASSED if passed else Qualification.Status.FAILED,
                answered=answered,
                correct=correct,
                score=score,
                threshold=campaign.qualification_pass,
                last_vote_id=vote.pk,
                decided_at=vote.created_at,
            )
    except IntegrityError:
        return  # decided by a vote racing this one


def attention_warning(*, campaign: Campaign, user: User) -> str | None:
    """The warning shown to a rater who has failed ``attention_warn_after`` attention checks or more
    (and is not blocked yet), or None."""
    if campaign.attention_warn_after is None:
        return None
    failures = selectors.attention_failures(campaign=campaign, user=user)
    if failures < campaign.attention_warn_after:
        return None
    return (
        "Some of the battles you rated had an answer that was plainly broken, and your vote did not pick "
        "the other one. Please read both answers carefully before voting"
        + (
            ": a few more misses and this campaign will stop giving you battles."
            if campaign.attention_block_after
            else "."
        )
    )


# --- Exports: a job written to a file by a worker, then downloaded. -------------------------------


def export_job_create(
    *,
    campaign: Campaign,
    requested_by: User | None,
    api_key: ApiKey | None,
    kind: str,
    format: str,
    texts: bool,
    filters: VoteFilters,
) -> ExportJob:
    """Queue an export of the campaign's data. Reading the data is all it does, so anyone who may read
    the campaign's vote log may ask (read-only API keys included). The job is sent to a worker when the
    transaction commits (``export_job_run_task``, the default queue)."""
    if kind not in ExportJob.Kind.values or (kind != ExportJob.Kind.VOTES and hooks.export_kind(kind) is None):
        raise Invalid(f"Unknown export kind {kind!r}.", field_errors={"kind": ["Unknown export kind."]})
    if kind == ExportJob.Kind.PREFERENCE_PAIRS and format != ExportJob.Format.JSONL:
        raise Invalid(
            "Preference pairs are exported as JSON lines only (a conversation does not fit a CSV row).",
            field_errors={"format": ["Preference pairs are exported as jsonl."]},
        )
    with transaction.atomic():
        job = ExportJob.objects.create(
            organization_id=campaign.organization_id,
            campaign=campaign,
            requested_by=requested_by,
            requested_by_key=api_key,
            kind=kind,
            format=format,
            params={"texts": texts, "filters": filters.as_params()},
        )
        from .tasks import export_job_run_task

        export_job_run_task.delay(str(job.pk), organization_id=job.organization_id)
    return job


def export_event_payload(job: ExportJob) -> dict[str, Any]:
    """What the ``export.ready`` event (``hooks.export_ready``, the webhooks) says about a finished job."""
    return {
        "id": str(job.pk),
        "campaign_id": job.campaign_id,
        "kind": job.kind,
        "format": job.format,
        "status": job.status,
        "rows": job.rows,
        "bytes": job.bytes,
        "sha256": job.sha256,
        "error": job.error,
        "finished_at": job.finished_at.isoformat() if job.finished_at else None,
    }


def export_path(job: ExportJob) -> Path:
    return Path(settings.ARENA_EXPORT_ROOT) / job.path


def export_relative_path(job: ExportJob) -> Path:
    """Where the worker writes the job's file, relative to ARENA_EXPORT_ROOT (its ``path`` once done)."""
    return Path(str(job.organization_id)) / job.filename


def export_file_delete(relative: str | Path) -> None:
    """Delete an export's file (``relative`` to ARENA_EXPORT_ROOT); one already gone is no error."""
    (Path(settings.ARENA_EXPORT_ROOT) / relative).unlink(missing_ok=True)


def export_job_deleted(*, job: ExportJob, using: str) -> None:
    """A job's row is being deleted (by itself, or with its campaign or organisation): its file goes
    once the delete commits, so a rolled-back delete keeps a file its row still points at. Both its
    recorded ``path`` and where its worker writes it are removed: a job deleted while it ran records
    no path (and its worker, finding the row gone, removes what it wrote). The delete has committed
    by then, so a file that cannot be removed is logged, never raised."""
    paths = {str(path) for path in (job.path, export_relative_path(job)) if path}

    def delete() -> None:
        for path in paths:
            try:
                export_file_delete(path)
            except OSError:
                logger.exception("export %s: file %s not deleted with its job", job.pk, path)

    transaction.on_commit(delete, using=using)


def _export_content(job: ExportJob) -> tuple[Iterator[bytes | str], Callable[[], int] | None, dict[str, Any] | None]:
    """The job's encoded content in chunks; how many rows passed (None: count the lines, as JSON lines
    have one row per line); the kind's audit."""
    texts = bool(job.params.get("texts"))
    filters = VoteFilters.from_params(job.params.get("filters") or {})
    if job.kind == ExportJob.Kind.VOTES:
        votes = selectors.votes_filtered(campaign=job.campaign, filters=filters)
        if job.format == ExportJob.Format.CSV:
            events = exporting.Counted(selectors.vote_events(votes=votes, texts=texts))
            return exporting.csv_from_events(events, texts=texts), lambda: events.count, None
        return selectors.vote_event_jsonl(votes=votes, texts=texts), None, None
    kind = hooks.export_kind(job.kind)
    if kind is None:
        raise Invalid(f"Unknown export kind {job.kind!r}.")
    return exporting.jsonl_from_events(kind.rows(job.campaign, filters)), None, kind.audit(job.campaign, filters)


def export_job_run(*, job_id: str) -> ExportJob | None:
    """Write the job's file: streamed from the database to disk chunk by chunk (flat memory), hashed
    and counted on the way, renamed into place when complete; the job then records rows, bytes,
    sha256 and when it finished, and ``export.ready`` is sent. A failure marks the job failed with the
    reason and leaves no partial file. Claimed with a conditional update, so a redelivered task does
    nothing, unless the job has been running for longer than a task may run (its worker was killed:
    the redelivery starts it again). Not one transaction: the job shows ``running`` while it runs; a
    job deleted meanwhile (with its campaign) leaves no file and returns None."""
    now = timezone.now()
    abandoned = now - timedelta(seconds=settings.CELERY_TASK_TIME_LIMIT)
    claimed = (
        ExportJob.objects.filter(pk=job_id)
        .filter(
            models.Q(status=ExportJob.Status.QUEUED)
            | models.Q(status=ExportJob.Status.RUNNING, started_at__lt=abandoned)
        )
        .update(status=ExportJob.Status.RUNNING, started_at=now)
    )
    job = ExportJob.objects.select_related("campaign").filter(pk=job_id).first()
    if not claimed or job is None:
        return job
    relative = export_relative_path(job)
    target = Path(settings.ARENA_EXPORT_ROOT) / relative
    partial = target.with_name(target.name + ".part")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        chunks, counted, audit = _export_content(job)
        digest = hashlib.sha256()
        size = lines = 0
        with partial.open("wb") as out:
            for chunk in chunks:
                data = chunk.encode() if isinstance(chunk, str) else chunk
                out.write(data)
                digest.update(data)
                size += len(data)
                lines += data.count(b"\n")
        os.replace(partial, target)
        rows = counted() if counted is not None else lines
    except Exception as exc:
        with contextlib.suppress(OSError):
            partial.unlink(missing_ok=True)
        logger.exception("export %s failed", job.pk)
        changes: dict[str, Any] = {
            "status": ExportJob.Status.FAILED,
            "error": (f"{type(exc).__name__}: {exc}")[:2000],
            "finished_at": timezone.now(),
        }
    else:
        changes = {
            "status": ExportJob.Status.DONE,
            "rows": rows,
            "bytes": size,
            "sha256": digest.hexdigest(),
            "path": str(relative),
            "audit": audit,
            "finished_at": timezone.now(),
        }
    with transaction.atomic():
        if not ExportJob.objects.filter(pk=job.pk).update(**changes):
            # The job was deleted while it ran (with its campaign): the file has no row to own it.
            export_file_delete(relative)
            return None
        job.refresh_from_db()
        # The webhooks' deliveries are written with the job's final state and sent after the commit.
        webhook_event_emit(
            organization_id=job.organization_id, event=WebhookEvent.EXPORT_READY, payload=export_event_payload(job)
        )
        send_on_commit(
            hooks.export_ready,
            sender=ExportJob,
            organization_id=job.organization_id,
            event="export.ready",
            payload=export_event_payload(job),
        )
    return job


def export_jobs_purge(*, now: datetime | None = None) -> int:
    """Delete the files of finished exports older than ARENA_EXPORT_RETENTION_DAYS and mark their jobs
    expired (the job rows stay: who exported what, when). Across organisations: beat's task."""
    cutoff = (now or timezone.now()) - timedelta(days=settings.ARENA_EXPORT_RETENTION_DAYS)
    purged = 0
    with scopes_disabled():
        old = list(
            ExportJob.objects.filter(
                status__in=(ExportJob.Status.DONE, ExportJob.Status.FAILED), finished_at__lt=cutoff
            ).values_list("pk", "path")
        )
        for pk, path in old:
            if path:
                export_file_delete(path)
            purged += ExportJob.objects.filter(pk=pk).update(status=ExportJob.Status.EXPIRED, path="")
    return purged


# --- Crowd studies (README, "Crowd studies") --------------------------------------------------------

STUDY_TIMEOUT_REASON = (
    "The participant's study time ran out before they voted. Their answers were seen, so the battle is voided "
    "rather than handed to another rater."
)
STUDY_ENDED_REASON = "The participant left the study before voting on this battle."
STUDY_LEFT_REASON = (
    "The participant left (returned) the study before voting. Their answers were seen, so the battle is voided "
    "rather than handed to another rater."
)


def _participant_open_battles_void(participant: Participant, reason: str) -> int:
    # A claimed battle's answers were read by this participant: handing it to someone else would let
    # one person's reading (and any skipped, disliked pair) shape what the next rater sees. Void it.
    return _open_battles_void(
        Battle.objects.filter(campaign_id=participant.study.campaign_id, rater_id=participant.user_id), reason
    )


class ParticipantInAnotherStudy(Conflict):
    """The vendor id already took part in another study of the same campaign: a second participation
    would be a second account voting on the same battles (its votes counted twice, its caps fresh)."""


def _participant_same_study(existing: Participant, study: Study) -> Participant:
    if existing.study_id != study.pk:
        raise ParticipantInAnotherStudy(
            "You have already taken part in another study of this campaign, so you cannot take part in this one "
            "as well. Please return this study on the site that sent you here."
        )
    return existing


@transaction.atomic
def participant_enter(
    *, study: Study, vendor_participant_id: str, vendor_study_id: str = "", external_session_id: str = ""
) -> tuple[Participant, bool]:
    """The participant of ``study`` with this vendor id: created on first entry (an account without a
    password, a rater of the organisation, a member of the study's pool), else the existing one
    (returns ``(participant, created)``). A vendor id is one participation per campaign: one that
    entered another study of the same campaign (whatever its state there) is refused with
    ``ParticipantInAnotherStudy`` rather than resumed, since that study's pool, target and code are not
    this one's. The database settles two entries racing with one id (the unique constraint on
    campaign, vendor and id): the second one's insert waits for the first and then finds its row, and
    gets the same answer as if it had come second."""
    existing = (
        Participant.objects.select_for_update()
        .filter(campaign_id=study.campaign_id, vendor=study.vendor, vendor_participant_id=vendor_participant_id)
        .select_related("user", "study")
        .first()
    )
    if existing is not None:
        _participant_same_study(existing, study)
        if (
            existing.status == Participant.Status.ACTIVE
            and external_session_id
            and external_session_id != existing.external_session_id
        ):
            existing.external_session_id = external_session_id
            existing.save(update_fields=["external_session_id"])
        return existing, False
    try:
        with transaction.atomic():  # a savepoint: the account goes too if another entry won the race
            # A random username: the vendor's id is never shown where the account is named.
            user = User.objects.create_user(username=f"participant-{secrets.token_hex(8)}", password=None)
            membership_set(organization=study.organization, user=user, role=Role.RATER, actor=None)
            pool_member_add(pool=study.pool, user=user, actor=None)
            participant = Participant.objects.create(
                organization_id=study.organization_id,
                study=study,
                vendor_participant_id=vendor_participant_id,
                vendor_study_id=vendor_study_id,
                external_session_id=external_session_id,
                user=user,
            )
    except IntegrityError:
        participant = Participant.objects.select_related("user", "study").get(
            campaign_id=study.campaign_id, vendor=study.vendor, vendor_participant_id=vendor_participant_id
        )
        return _participant_same_study(participant, study), False
    return participant, True


@transaction.atomic
def participant_consent(*, participant: Participant, agree: bool) -> Participant:
    """Record the participant's answer to the study's consent text. Declining ends their part (and
    voids a battle they may hold); agreeing is stamped once."""
    now = timezone.now()
    active = Participant.objects.filter(pk=participant.pk, status=Participant.Status.ACTIVE)
    if agree:
        active.filter(consented_at__isnull=True).update(consented_at=now)
    elif active.update(status=Participant.Status.DECLINED, ended_at=now):
        _participant_open_battles_void(participant, STUDY_ENDED_REASON)
    participant.refresh_from_db()
    return participant


@transaction.atomic
def participant_leave(*, participant: Participant) -> Participant:
    """The participant leaves before finishing (Prolific calls it returning the study): their part
    ends as ``left``, with no completion code, and a battle they hold is voided exactly as when their
    time runs out (its answers were read). Leaving is final: the same vendor id cannot enter this
    campaign again (``participant_enter``). A participant whose part already ended is left as is."""
    participant = participant_refresh(participant=participant)  # reached the target: completed, not left
    active = Participant.objects.filter(pk=participant.pk, status=Participant.Status.ACTIVE)
    if active.update(status=Participant.Status.LEFT, ended_at=timezone.now()):
        _participant_open_battles_void(participant, STUDY_LEFT_REASON)
    participant.refresh_from_db()
    return participant


@transaction.atomic
def participant_refresh(*, participant: Participant, now: Any = None, complete: bool = True) -> Participant:
    """Bring an active participant's state up to date: completed once their votes in the campaign reach
    the study's target (this wins over the clock: the work is done), else timed out once their time
    limit has passed, which voids their open battle. ``complete=False`` leaves a participant who has
    reached the target active (the battle pages: the last reveal is still shown, with the way out)."""
    now = now or timezone.now()
    if participant.status != Participant.Status.ACTIVE:
        return participant
    study = participant.study
    active = Participant.objects.filter(pk=participant.pk, status=Participant.Status.ACTIVE)
    votes = selectors.votes_by_rater(campaign=study.campaign, user=participant.user)
    if votes >= study.target_votes:
        if complete and active.update(status=Participant.Status.COMPLETED, completed_at=now):
            _participant_open_battles_void(participant, STUDY_ENDED_REASON)
    elif now >= participant.deadline:
        if active.update(status=Participant.Status.TIMED_OUT, ended_at=now):
            _participant_open_battles_void(participant, STUDY_TIMEOUT_REASON)
    participant.refresh_from_db()
    return participant


def participants_time_out_due() -> int:
    """Beat's sweep: participants who left without finishing (their time limit passed, nobody asked
    again) give their open battle up now, not at some later request. Each in its organisation's scope."""
    now = timezone.now()
    with scopes_disabled():  # the one listing across organisations
        due = [
            (participant.pk, participant.organization_id)
            for participant in Participant.objects.filter(status=Participant.Status.ACTIVE).select_related("study")
            if now >= participant.deadline
        ]
    ended = 0
    for participant_id, organization_id in due:
        with organization_scope(organization_id):
            participant = Participant.objects.select_related("study__campaign", "user").get(pk=participant_id)
            if participant_refresh(participant=participant, now=now).status != Participant.Status.ACTIVE:
                ended += 1
    return ended


# --- Judges: served models that vote under a versioned rubric, into their own log ----------------------


class JudgeUnusable(Invalid):
    pass


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
        from .tasks import judge_run_task

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
                    generation_seconds=models.F("generation_seconds") + result.latency_s
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
                gpu_seconds=F("gpu_seconds") + sum(c.result.latency_s for c in calls),
            )
    except IntegrityError:
        return False
    return True


def judge_run_execute(*, run_id: int) -> JudgeRun | None:
    """Judge every pair of the run twice, positions swapped (left first, then right first), and append
    the counterbalanced verdicts. Model calls happen outside any transaction; each verdict is written in
    its own. Resumable: a redelivered run judges only the pairs it has no verdict for. A run whose every
    call failed ends as failed, naming the commonest error."""
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
    if run.calls and run.calls_failed == run.calls:
        dominant = max(errors.items(), key=lambda item: item[1])[0] if errors else "every call failed"
        update.update(status=JudgeRun.Status.FAILED, error=f"every judge call failed; most often: {dominant}"[:2000])
    elif run.kind == JudgeRun.Kind.GOLDEN and not run.calls:
        # Nothing to judge because no competitor answered: a failure, never an empty "done" board.
        answer_errors = list(GoldenAnswer.objects.filter(run=run).values_list("error", flat=True))
        if answer_errors and all(answer_errors):
            dominant = max(set(answer_errors), key=answer_errors.count)
            update.update(
                status=JudgeRun.Status.FAILED, error=f"every competitor answer failed; most often: {dominant}"[:2000]
            )
    JudgeRun.objects.filter(pk=run_id).update(**update)
    return _judge_run_finish(run_id)


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


# --- Crowd studies over the API (README, "Crowd studies" and "REST API") ----------------------------

STUDY_FIELDS = (
    "name",
    "vendor",
    "target_votes",
    "time_limit_min",
    "completion_code",
    "completion_url",
    "instructions",
    "consent_text",
)


@transaction.atomic
def study_create(
    *, campaign: Campaign, pool_id: int, actor: User | AnonymousUser | ApiKeyPrincipal | None, **fields: Any
) -> Study:
    """A new study of ``campaign`` from the API: validated as the console validates it (the pool one of
    the campaign's, the target within its caps, the completion URL https with ``{code}``), audited as
    ``study.created`` (a key's prefix where no person made it)."""
    unknown = set(fields) - set(STUDY_FIELDS)
    if unknown:
        raise Invalid(f"Unknown study fields: {', '.join(sorted(unknown))}.")
    pool = RaterPool.objects.filter(pk=pool_id, organization_id=campaign.organization_id).first()
    if pool is None:
        message = "No such rater pool in the campaign's organisation."
        raise Invalid(message, field_errors={"pool": message})
    study = Study(organization_id=campaign.organization_id, campaign=campaign, pool=pool, **fields)
    try:
        study.full_clean()
    except ValidationError as exc:
        raise Invalid(" ".join(exc.messages), field_errors=exc.message_dict) from None
    study.save()
    person, via = _shadow_audit_actor(actor)
    audit_record(
        organization=campaign.organization,
        actor=person,
        action=AuditAction.STUDY_CREATED,
        obj=study,
        data={"fields": ["pool", *sorted(fields)], **via},
    )
    return study


@transaction.atomic
def study_close(*, study: Study, actor: User | AnonymousUser | ApiKeyPrincipal | None) -> Study:
    """Close a study: its link answers "not found" from now on, so nobody enters or comes back through
    it; what its participants did stays (votes, progress, codes). Closing twice is a ``Conflict``; the
    console's *active* box reopens one. Audited as ``study.closed``."""
    closed = Study.objects.filter(pk=study.pk, active=True).update(active=False)
    if not closed:
        raise Conflict(f"The study {study} is closed already.")
    study.refresh_from_db()
    person, via = _shadow_audit_actor(actor)
    audit_record(
        organization=study.organization,
        actor=person,
        action=AuditAction.STUDY_CLOSED,
        obj=study,
        data={"participants": study.participants.count(), **via},
    )
    return study


# --- A campaign's own consent step ------------------------------------------------------------------------


def campaign_consent_agree(*, campaign: Campaign, user: User, text_hash: str) -> RaterConsent:
    """Record that the rater agrees to the campaign's consent text, as the page showed it
    (``text_hash``: a text changed since is refused, so nobody agrees to words they did not read).
    Agreeing twice keeps the first row."""
    if not campaign.consent_text:
        raise Invalid("This campaign asks for no consent.")
    current = consent_hash(campaign.consent_text)
    if text_hash != current:
        raise Conflict("The consent text changed while you were reading it: please read it again.")
    consent, _ = RaterConsent.objects.get_or_create(
        campaign=campaign,
        rater=user,
        text_hash=current,
        defaults={"organization_id": campaign.organization_id},
    )
    return consent
