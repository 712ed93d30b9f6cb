"""Crowd studies: participants entering, consenting, leaving, completing or timing out (and beat's
sweep of those whose time ran out), and studies created and closed over the API."""

from __future__ import annotations

import secrets
from typing import Any

from celery import shared_task
from django.contrib.auth.models import AnonymousUser, User
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone

from core.errors import Conflict, Invalid
from core.tasks import TransactionAwareTask
from raters.authentication import ApiKeyPrincipal
from raters.models import AuditAction, RaterAttribute, RaterPool, Role
from raters.services import audit_record, membership_set, pool_member_add, rater_attribute_set
from raters.tenancy import organization_scope, scopes_disabled

from .. import selectors
from ..models import Battle, Campaign, Participant, Study
from .campaigns import _open_battles_void
from .errors import ParticipantInAnotherStudy
from .shadow import _shadow_audit_actor

# --- Crowd studies (docs/managers/crowd-studies.md) --------------------------------------------------------

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


def _participant_same_study(existing: Participant, study: Study) -> Participant:
    if existing.study_id != study.pk:
        raise ParticipantInAnotherStudy(
            "You have already taken part in another study of this campaign, so you cannot take part in this one "
            "as well. Please return this study on the site that sent you here."
        )
    return existing


@transaction.atomic
def participant_enter(
    *,
    study: Study,
    vendor_participant_id: str,
    vendor_study_id: str = "",
    external_session_id: str = "",
    attributes: dict[str, str] | None = None,
) -> tuple[Participant, bool]:
    """The participant of ``study`` with this vendor id: created on first entry (an account without a
    password, a rater of the organisation, a member of the study's pool), else the existing one
    (returns ``(participant, created)``). A vendor id is one participation per campaign: one that
    entered another study of the same campaign (whatever its state there) is refused with
    ``ParticipantInAnotherStudy`` rather than resumed, since that study's pool, target and code are not
    this one's. ``attributes`` (key -> value, read from the link by the study's ``attribute_parameters``)
    become the new account's rater attributes, source "vendor"; a returning participant's are left as
    they are (a manager may have corrected them). The database settles two entries racing with one id
    (the unique constraint on campaign, vendor and id): the second one's insert waits for the first and
    then finds its row, and gets the same answer as if it had come second."""
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
            for key, value in sorted((attributes or {}).items()):
                rater_attribute_set(
                    organization=study.organization,
                    rater=user,
                    key=key,
                    value=value,
                    actor=None,
                    source=RaterAttribute.Source.VENDOR,
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


@shared_task(base=TransactionAwareTask, name="battles.tasks.participants_time_out_task")
def participants_time_out_task() -> int:
    """Beat's sweep of crowd-study participants whose time ran out: each ended (and their open battle
    voided) in its organisation's scope; the service lists them unscoped on purpose."""
    return participants_time_out_due()


# --- Crowd studies over the API (docs/api/campaigns.md) ----------------------------

STUDY_FIELDS = (
    "name",
    "vendor",
    "target_votes",
    "time_limit_min",
    "completion_code",
    "completion_url",
    "instructions",
    "consent_text",
    "attribute_parameters",
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
