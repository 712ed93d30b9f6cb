"""Every write about organisations, people and pools."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AnonymousUser, User
from django.db import models, transaction
from django.utils import timezone

from . import selectors
from .models import (
    MANAGING_ROLES,
    ApiKey,
    AuditEvent,
    Invitation,
    Membership,
    Organization,
    RaterFlag,
    RaterPool,
    Role,
    api_key_hash,
)


class InvitationError(Exception):
    pass


def audit_record(
    *, organization: Organization, actor: User | AnonymousUser | None, action: str, obj: models.Model,
    data: dict[str, Any] | None = None,
) -> AuditEvent:
    return AuditEvent.objects.create(
        organization=organization,
        actor=actor if actor is not None and actor.is_authenticated else None,
        action=action,
        object_type=obj._meta.label_lower,
        object_id=str(obj.pk),
        data=data or {},
    )


@transaction.atomic
def organization_create(*, name: str, slug: str, owner: User) -> Organization:
    organization = Organization.objects.create(name=name, slug=slug)
    Membership.objects.create(user=owner, organization=organization, role=Role.OWNER)
    audit_record(organization=organization, actor=owner, action="organization.created", obj=organization)
    return organization


class MembershipError(Exception):
    pass


def _may_grant_managing_roles(actor: User | AnonymousUser | None, organization: Organization) -> bool:
    # ``None`` is the platform itself (management commands, data migrations), which is trusted; a
    # person needs to be a superuser or an owner of this organisation.
    if actor is None:
        return True
    if not actor.is_authenticated:
        return False
    return actor.is_superuser or Membership.objects.filter(
        user=actor, organization=organization, role=Role.OWNER
    ).exists()


def membership_change_check(
    *, organization: Organization, user: User, role: str | None, actor: User | AnonymousUser | None
) -> None:
    """Raise ``MembershipError`` when ``actor`` may not give ``user`` the ``role`` in ``organization``
    (``role=None``: remove the membership).

    Only owners (and superusers) grant or revoke the owner and manager roles, so a manager can neither
    promote themselves nor demote whoever appointed them; and an organisation always keeps an owner.
    Callers that write must hold the organisation's row lock (``_organization_lock``) so that two owners
    demoting each other at once cannot both pass the last-owner check."""
    current = Membership.objects.filter(organization=organization, user=user).values_list("role", flat=True).first()
    if current == role:
        return
    if (current in MANAGING_ROLES or role in MANAGING_ROLES) and not _may_grant_managing_roles(actor, organization):
        raise MembershipError("Only an owner of the organisation can grant or revoke the owner and manager roles.")
    if current == Role.OWNER and not Membership.objects.filter(
        organization=organization, role=Role.OWNER
    ).exclude(user=user).exists():
        raise MembershipError(f"{user} is the last owner of {organization}: make someone else an owner first.")


def _organization_lock(organization: Organization) -> None:
    # Serialises membership changes of one organisation (the last-owner rule reads other rows).
    Organization.objects.select_for_update().filter(pk=organization.pk).first()


@transaction.atomic
def membership_set(
    *, organization: Organization, user: User, role: str, actor: User | AnonymousUser | None
) -> Membership:
    _organization_lock(organization)
    membership_change_check(organization=organization, user=user, role=role, actor=actor)
    previous = Membership.objects.filter(user=user, organization=organization).values_list("role", flat=True).first()
    membership, created = Membership.objects.update_or_create(
        user=user, organization=organization, defaults={"role": role}
    )
    audit_record(
        organization=organization, actor=actor, action="membership.created" if created else "membership.changed",
        obj=membership, data={"user": user.pk, "role": role, "previous_role": previous},
    )
    return membership


@transaction.atomic
def membership_remove(*, organization: Organization, user: User, actor: User | AnonymousUser | None) -> None:
    """Remove ``user`` from ``organization``, and from its rater pools, since pool membership is what
    lets a rater vote."""
    _organization_lock(organization)
    membership = Membership.objects.filter(user=user, organization=organization).first()
    if membership is None:
        return
    membership_change_check(organization=organization, user=user, role=None, actor=actor)
    pools = list(RaterPool.objects.filter(organization=organization, members=user).values_list("pk", flat=True))
    for pool in RaterPool.objects.filter(pk__in=pools):
        pool.members.remove(user)
    audit_record(organization=organization, actor=actor, action="membership.removed", obj=membership,
                 data={"user": user.pk, "role": membership.role, "pools": pools})
    membership.delete()


@transaction.atomic
def pool_member_add(*, pool: RaterPool, user: User, actor: User | AnonymousUser | None) -> None:
    Membership.objects.get_or_create(user=user, organization=pool.organization, defaults={"role": Role.RATER})
    pool.members.add(user)
    audit_record(organization=pool.organization, actor=actor, action="pool.member_added", obj=pool,
                 data={"user": user.pk})


@transaction.atomic
def pool_member_remove(*, pool: RaterPool, user: User, actor: User | AnonymousUser | None) -> None:
    pool.members.remove(user)
    audit_record(organization=pool.organization, actor=actor, action="pool.member_removed", obj=pool,
                 data={"user": user.pk})


@transaction.atomic
def invitation_create(
    *, pool: RaterPool, actor: User | AnonymousUser | None, email: str = "", max_uses: int = 1
) -> Invitation:
    invitation = Invitation.objects.create(
        organization=pool.organization, pool=pool, email=email, max_uses=max_uses,
        created_by=actor if actor is not None and actor.is_authenticated else None,
    )
    audit_record(organization=pool.organization, actor=actor, action="invitation.created", obj=invitation,
                 data={"pool": pool.pk, "email": email, "max_uses": max_uses})
    return invitation


@transaction.atomic
def invitation_accept(*, token: str, user: User) -> RaterPool:
    """Join the invitation's pool. The use counter is claimed with a conditional update, so two people
    racing for the last use of a link cannot both get in."""
    invitation = selectors.invitation_by_token(token)
    if invitation is None:
        raise InvitationError("This invitation link is not valid.")
    if invitation.expires_at <= timezone.now():
        raise InvitationError("This invitation link has expired. Ask your manager for a new one.")
    if invitation.email and invitation.email.lower() != (user.email or "").lower():
        raise InvitationError("This invitation was sent to another email address.")
    if invitation.pool.members.filter(pk=user.pk).exists():
        return invitation.pool
    claimed = Invitation.objects.filter(pk=invitation.pk, uses__lt=models.F("max_uses")).update(
        uses=models.F("uses") + 1
    )
    if not claimed:
        raise InvitationError("This invitation link has already been used.")
    pool_member_add(pool=invitation.pool, user=user, actor=user)
    return invitation.pool


def user_create(*, email: str, password: str, is_superuser: bool = False) -> User:
    """A user who can log in with allauth's email login straight away (email marked verified)."""
    from allauth.account.models import EmailAddress

    User = get_user_model()
    username = email[:150]
    if is_superuser:
        user = User.objects.create_superuser(username=username, email=email, password=password)
    else:
        user = User.objects.create_user(username=username, email=email, password=password)
    EmailAddress.objects.create(user=user, email=email, primary=True, verified=True)
    return user


API_KEY_PREFIX = "arena"


@transaction.atomic
def api_key_create(*, organization: Organization, name: str, scope: str,
                   actor: User | AnonymousUser | None) -> tuple[ApiKey, str]:
    """A new key and its plaintext, which is never stored and cannot be shown again."""
    import secrets

    prefix = secrets.token_hex(4)
    key = f"{API_KEY_PREFIX}_{prefix}_{secrets.token_urlsafe(32)}"
    api_key = ApiKey.objects.create(
        organization=organization, name=name, scope=scope, prefix=prefix, hashed_key=api_key_hash(key),
        created_by=actor if actor is not None and actor.is_authenticated else None,
    )
    audit_record(organization=organization, actor=actor, action="api_key.created", obj=api_key,
                 data={"name": name, "scope": scope, "prefix": prefix})
    return api_key, key


@transaction.atomic
def api_key_revoke(*, api_key: ApiKey, actor: User | AnonymousUser | None) -> None:
    ApiKey.objects.filter(pk=api_key.pk, revoked_at__isnull=True).update(revoked_at=timezone.now())
    audit_record(organization=api_key.organization, actor=actor, action="api_key.revoked", obj=api_key)


def _leaderboards_of_rater_schedule(*, organization: Organization, rater: User) -> None:
    """After commit: recompute the leaderboards of every campaign the rater voted in."""
    from battles.models import Vote
    from ranking.services import leaderboards_schedule

    campaign_ids = list(Vote.objects.filter(organization=organization, rater=rater)
                        .values_list("campaign_id", flat=True).distinct())

    def schedule() -> None:
        for campaign_id in campaign_ids:
            leaderboards_schedule(campaign_id=campaign_id)

    transaction.on_commit(schedule)


@transaction.atomic
def rater_flag_create(*, organization: Organization, rater: User, reason: str,
                      actor: User | AnonymousUser | None) -> RaterFlag:
    """Flag a rater: their votes stay in the log and leave the leaderboards at the next recompute,
    which this schedules."""
    flag = RaterFlag(organization=organization, rater=rater, reason=reason,
                     created_by=actor if actor is not None and actor.is_authenticated else None)
    flag.full_clean()
    flag.save()
    audit_record(organization=organization, actor=actor, action="rater.flagged", obj=flag,
                 data={"rater": rater.pk, "reason": reason})
    _leaderboards_of_rater_schedule(organization=organization, rater=rater)
    return flag


@transaction.atomic
def rater_flag_remove(*, flag: RaterFlag, actor: User | AnonymousUser | None) -> None:
    audit_record(organization=flag.organization, actor=actor, action="rater.unflagged", obj=flag,
                 data={"rater": flag.rater_id, "reason": flag.reason})
    _leaderboards_of_rater_schedule(organization=flag.organization, rater=flag.rater)
    flag.delete()
