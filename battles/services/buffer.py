"""The buffer: battles generated ahead for pool prompts, claimed by raters; its refills and its
maintenance (and their tasks)."""

from __future__ import annotations

import contextlib
import random
import secrets
from datetime import datetime, timedelta
from typing import Any

from celery import shared_task
from django.contrib.auth.models import User
from django.db import models, transaction
from django.utils import timezone

from core.prepared import PreparedUpdate, first_unlocked
from core.tasks import TransactionAwareTask, mark_clear
from raters.models import RaterPool
from raters.tenancy import TenantTask, scopes_disabled

from .. import selectors
from ..models import Battle, Campaign, Competitor, Vote
from .generation import STALE_GENERATION_S, _generation_queue
from .identity import identity_refused

_rng = random.SystemRandom()


# --- The buffer: battles generated ahead for pool prompts, claimed by raters ------------------------


def _buffer(campaign_id: int) -> models.QuerySet[Battle]:
    return Battle.objects.filter(
        campaign_id=campaign_id, rater__isnull=True, status__in=(Battle.Status.GENERATING, Battle.Status.READY)
    )


def buffer_refill_request(*, campaign: Campaign) -> None:
    """Ask a generation worker to top the campaign's buffer up (cheap when it is full), when the current
    transaction commits. A refill is a courtesy, never the rater's business: with the broker down the
    request is logged and dropped (beat's maintenance of every open campaign's buffer asks again once the
    broker is back), so the rater's next battle is still answered rather than failing with a 500."""
    if campaign.buffer_size == 0 or campaign.status != Campaign.Status.OPEN:
        return
    # One refill waiting at a time: the claims made while it waits ride along (it counts the buffer when it
    # runs), instead of each queueing a fill that would find the buffer full.
    buffer_fill_task.delay_once_or_log(
        _refill_mark(campaign.pk), REFILL_MARK_S, campaign.pk, organization_id=campaign.organization_id
    )


# How long a refill asked for may wait to begin before a claim asks again (its worker may be lost).
REFILL_MARK_S = 30


def _refill_mark(campaign_id: int) -> str:
    return f"battles:buffer-refill:{campaign_id}"


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


@shared_task(base=TenantTask, acks_late=True, name="battles.tasks.buffer_fill_task")
def buffer_fill_task(campaign_id: int, *, organization_id: int) -> int:
    mark_clear(_refill_mark(campaign_id))  # before the buffer is counted: a claim from now on asks anew
    return len(buffer_fill(campaign_id=campaign_id))


# A claim is one statement, compiled once (core.prepared) and run with each claim's values: an update of the
# buffer's oldest ready battle that the rater may have and that no concurrent claim holds, which returns it.
def _claim_statement(*, refuse_identity: bool, capped: bool) -> PreparedUpdate:
    """The claim: the buffer's oldest ready battle that no rater has, that every rule lets this rater have and
    that no concurrent claim holds (``first_unlocked``: PostgreSQL's ``FOR UPDATE SKIP LOCKED``), given to the
    rater, in one conditional update that returns it. The rules, all asked of the database: within the age
    limit, or pushed in shadow mode; both competitors still available, or for a shadow battle still active; a
    prompt whose normalised text the rater has not had in a battle that was not voided; a shared item of which
    the rater has no copy; under ``refuse_identity``, no prompt that asks the model's identity; where the
    campaign caps votes a prompt hash (``capped``), a hash with fewer than ``hash_cap`` votes."""

    def build(**values: Any) -> tuple[models.QuerySet[Battle], dict[str, Any]]:
        campaign_id, rater_id = values["campaign_id"], values["rater_id"]
        available = selectors.competitors_available_in(campaign_id).values("pk")
        active = Competitor.objects.filter(campaign_id=campaign_id, active=True).values("pk")
        seen = selectors.rater_battles_counted(campaign_id=campaign_id, rater_id=rater_id).filter(
            prompt__campaign_id=campaign_id,  # the same as the battle's: the prompts' index is (campaign, hash)
            prompt__text_hash=models.OuterRef("prompt__text_hash"),
        )
        held = Battle.objects.filter(campaign_id=campaign_id, rater_id=rater_id, item_key=models.OuterRef("item_key"))
        shadow = models.Q(source=Battle.Source.SHADOW)
        candidates = (
            Battle.objects.filter(campaign_id=campaign_id, rater__isnull=True, status=Battle.Status.READY)
            .filter(
                (shadow & models.Q(left__in=active, right__in=active))
                | (~shadow & models.Q(created_at__gte=values["since"], left__in=available, right__in=available))
            )
            .exclude(models.Exists(seen))
            .exclude(models.Q(item_key__isnull=False) & models.Exists(held))
        )
        if refuse_identity:  # generated (or pushed) before the policy changed: never served under "refuse"
            candidates = candidates.exclude(prompt__asks_identity=True)
        if capped:
            votes_on_hash = Vote.objects.filter(
                campaign_id=campaign_id, prompt_hash=models.OuterRef("prompt__text_hash")
            )
            candidates = candidates.alias(hash_votes=selectors.rows_counted(votes_on_hash)).filter(
                hash_votes__lt=values["hash_cap"]
            )
        return (
            Battle.objects.filter(
                pk=first_unlocked(candidates.order_by("created_at")), rater__isnull=True, status=Battle.Status.READY
            ),
            {
                "rater_id": rater_id,
                "pool_id": values["pool_id"],
                "session_key": values["session_key"],
                "claimed_at": values["claimed_at"],
            },
        )

    slots: dict[str, type] = {
        "campaign_id": int,
        "rater_id": int,
        "since": datetime,
        "pool_id": int,
        "session_key": str,
        "claimed_at": datetime,
    }
    if capped:
        slots["hash_cap"] = int
    return PreparedUpdate(build, **slots)


_claims: dict[tuple[bool, bool], PreparedUpdate] = {
    (refuse_identity, capped): _claim_statement(refuse_identity=refuse_identity, capped=capped)
    for refuse_identity in (False, True)
    for capped in (False, True)
}


def battle_claim(*, campaign: Campaign, user: User, pool: RaterPool, session_key: str) -> Battle | None:
    """Hand the rater the oldest ready battle of the buffer that they may rate, or None.

    Checked at claim time, since the buffer was filled without knowing who would rate: the prompt is
    not one the rater has seen (by normalised text), its hash is under the campaign's cap, both
    competitors are still available, the battle is younger than the buffer's age limit (shadow battles:
    both competitors still active, and no age limit: see ``buffer_maintain``), a prompt asking the model's
    identity is not served under the "refuse" policy, and a shared item's copy goes to a rater without one.
    One statement asks every rule and claims the battle (``_claim_statement``): the oldest battle that passes
    them and that no concurrent claim holds, so raters claiming at once each get a different battle, none
    waits for another's and none loses a race and tries again. A rater who already holds an open battle (a
    second tab) makes the database refuse (IntegrityError: one open battle per rater and campaign), which the
    caller turns into that battle."""
    now = timezone.now()
    capped = campaign.prompt_hash_cap is not None
    values: dict[str, Any] = {
        "campaign_id": campaign.pk,
        "rater_id": user.pk,
        "since": now - timedelta(seconds=campaign.buffer_max_age_s),
        "pool_id": pool.pk,
        "session_key": session_key,
        "claimed_at": now,
    }
    if capped:
        values["hash_cap"] = campaign.prompt_hash_cap
    # One statement: in autocommit it is a transaction of its own (no BEGIN and COMMIT around it); inside a
    # caller's transaction a savepoint keeps that transaction usable if the one-open-battle constraint refuses it.
    with transaction.atomic() if transaction.get_connection().in_atomic_block else contextlib.nullcontext():
        claimed: Battle | None = _claims[(identity_refused(campaign), capped)].first_updated(**values)
    return claimed


def buffer_maintain_schedule_open_campaigns() -> int:
    """Beat's safety net: queue the buffer's maintenance for every open campaign that keeps one, each in
    its organisation's scope."""
    with scopes_disabled():  # the one listing across organisations
        open_campaigns = list(
            Campaign.objects.filter(status=Campaign.Status.OPEN, buffer_size__gt=0).values_list("pk", "organization_id")
        )
    for campaign_id, organization_id in open_campaigns:
        buffer_maintain_task.delay(campaign_id, organization_id=organization_id)
    return len(open_campaigns)


@shared_task(base=TransactionAwareTask, name="battles.tasks.buffer_maintain_open_task")
def buffer_maintain_open_task() -> int:
    """Beat's safety net, across organisations: each open campaign's buffer is checked in its own
    organisation's scope (the service lists them unscoped on purpose)."""
    return buffer_maintain_schedule_open_campaigns()


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


@shared_task(base=TenantTask, acks_late=True, name="battles.tasks.buffer_maintain_task")
def buffer_maintain_task(campaign_id: int, *, organization_id: int) -> int:
    return buffer_maintain(campaign_id=campaign_id)
