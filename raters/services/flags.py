"""Rater flags: raised by a person or an automatic check, cleared by a manager; each change audited
and announced to the ranking app (``hooks.rater_flag_changed``)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AnonymousUser, User
from django.db import IntegrityError, transaction
from django.utils import timezone

from core.errors import Invalid

from .. import hooks
from ..models import FLAG_IN_FORCE, AuditAction, Organization, RaterFlag
from .audit import _full_clean, audit_record


@transaction.atomic
def rater_flag_create(
    *,
    organization: Organization,
    rater: User,
    reason: str,
    actor: User | AnonymousUser | None,
    kind: str = RaterFlag.Kind.MANUAL,
    campaign_id: int | None = None,
    evidence: dict[str, Any] | None = None,
) -> RaterFlag:
    """Flag a rater: a new row (their votes stay in the log and leave the leaderboards at the next
    recompute, which the ranking app starts on ``hooks.rater_flag_changed``). One flag of a kind may be
    in force per rater: a second is refused (``Invalid``; the checks use ``rater_flag_raise``)."""
    flag = RaterFlag(
        organization=organization,
        rater=rater,
        kind=kind,
        campaign_id=campaign_id,
        reason=reason[:300],
        evidence=evidence or {},
        created_by=actor if actor is not None and actor.is_authenticated else None,
    )
    _full_clean(flag)
    if RaterFlag.objects.filter(FLAG_IN_FORCE, organization=organization, rater=rater, kind=kind).exists():
        raise Invalid(
            "This rater already has a flag of this kind in force; clear it before raising another.",
            field_errors={"rater": ["already flagged"]},
        )
    with transaction.atomic():  # a savepoint: a racing flag of the same kind makes the database refuse
        flag.save()
    audit_record(
        organization=organization,
        actor=actor,
        action=AuditAction.RATER_FLAGGED,
        obj=flag,
        data={"rater": rater.pk, "reason": flag.reason, "kind": kind, "campaign_id": campaign_id},
    )
    hooks.send_on_commit(hooks.rater_flag_changed, sender=RaterFlag, organization_id=organization.pk, rater_id=rater.pk)
    return flag


def rater_flag_raise(
    *,
    organization: Organization,
    rater: User,
    kind: str,
    reason: str,
    campaign_id: int | None = None,
    evidence: dict[str, Any] | None = None,
) -> RaterFlag | None:
    """What an automatic check calls: the new flag, or None when one of this kind is already in force
    (checked, and settled by the partial unique constraint when two checks race)."""
    try:
        return rater_flag_create(
            organization=organization,
            rater=rater,
            reason=reason,
            actor=None,
            kind=kind,
            campaign_id=campaign_id,
            evidence=evidence,
        )
    except (Invalid, IntegrityError):
        return None


@transaction.atomic
def rater_flag_clear(*, flag: RaterFlag, actor: User | AnonymousUser | None, note: str = "") -> bool:
    """A manager reviewed the flag and lets the rater back in: who and when are stamped on it once
    (a conditional update: a second clear, or one racing it, changes nothing and returns False), with
    an audit row. The flag's own words stay as they were raised."""
    by = actor if actor is not None and actor.is_authenticated else None
    now = timezone.now()
    cleared = RaterFlag.objects.filter(pk=flag.pk, cleared_at__isnull=True).update(
        cleared_at=now, cleared_by=by, clear_note=note[:300]
    )
    if not cleared:
        return False
    flag.cleared_at, flag.cleared_by, flag.clear_note = now, by, note[:300]
    audit_record(
        organization=flag.organization,
        actor=actor,
        action=AuditAction.RATER_FLAG_CLEARED,
        obj=flag,
        data={"rater": flag.rater_id, "kind": flag.kind, "reason": flag.reason, "note": note[:300]},
    )
    hooks.send_on_commit(
        hooks.rater_flag_changed, sender=RaterFlag, organization_id=flag.organization_id, rater_id=flag.rater_id
    )
    return True
