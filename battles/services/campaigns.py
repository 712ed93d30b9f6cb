"""Campaign configuration (manager actions, each audited), a fresh-leaderboards request, and a
campaign's own consent step."""

from __future__ import annotations

from collections.abc import Iterable

from django.contrib.auth.models import AnonymousUser, User
from django.core.exceptions import ValidationError
from django.db import models, transaction
from django.db.models import ProtectedError
from django.utils import timezone

from core.errors import Conflict, Invalid
from raters.hooks import send_on_commit
from raters.models import AuditAction, RaterPool, WebhookEvent
from raters.services import audit_record, webhook_event_emit

from .. import hooks
from ..models import Battle, Campaign, Competitor, RaterConsent, consent_hash
from .buffer import buffer_refill_request
from .identity import identity_refused

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
