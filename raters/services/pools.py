"""Rater pools: their members (only members of the pool's organisation) and the invitation links that
join a newcomer to the organisation and the pool at once."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import datetime

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AnonymousUser, User
from django.core.exceptions import ImproperlyConfigured
from django.core.mail import send_mail
from django.db import models, transaction
from django.utils import timezone

from core.errors import Invalid
from core.site import site_url

from .. import selectors
from ..models import AuditAction, Invitation, Membership, Organization, RaterPool, Role
from .audit import _full_clean, audit_record, tenant_row_save

logger = logging.getLogger(__name__)


class InvitationError(Invalid):
    pass


def _not_members(*, organization: Organization, users: Iterable[User]) -> list[User]:
    users = list(users)
    member_ids = set(
        Membership.objects.filter(organization=organization, user__in=users).values_list("user_id", flat=True)
    )
    return [user for user in users if user.pk not in member_ids]


def _pool_members_check(*, pool: RaterPool, users: Iterable[User]) -> None:
    """The one rule for pools: only members of the pool's organisation rate in it. Newcomers join the
    organisation and the pool together through an invitation link (``invitation_accept``)."""
    outsiders = _not_members(organization=pool.organization, users=users)
    if outsiders:
        names = ", ".join(str(user) for user in outsiders)
        message = (
            f"Not members of {pool.organization}: {names}. Invite them to the pool with an invitation link instead."
        )
        raise Invalid(message, field_errors={"members": message})


@transaction.atomic
def pool_member_add(*, pool: RaterPool, user: User, actor: User | AnonymousUser | None) -> None:
    _pool_members_check(pool=pool, users=[user])
    pool.members.add(user)
    audit_record(
        organization=pool.organization,
        actor=actor,
        action=AuditAction.POOL_MEMBER_ADDED,
        obj=pool,
        data={"user": user.pk},
    )


@transaction.atomic
def pool_member_remove(*, pool: RaterPool, user: User, actor: User | AnonymousUser | None) -> None:
    pool.members.remove(user)
    audit_record(
        organization=pool.organization,
        actor=actor,
        action=AuditAction.POOL_MEMBER_REMOVED,
        obj=pool,
        data={"user": user.pk},
    )


@transaction.atomic
def pool_save(
    *, pool: RaterPool, members: Iterable[User] | None, actor: User | AnonymousUser | None, changed: list[str]
) -> RaterPool:
    """Create or change a pool and, when ``members`` is given, make them its members: each one added
    or removed is audited, and everyone must already belong to the pool's organisation."""
    tenant_row_save(obj=pool, actor=actor, changed=changed)
    if members is not None:
        wanted = {user.pk: user for user in members}
        _pool_members_check(pool=pool, users=wanted.values())
        current = set(pool.members.values_list("pk", flat=True))
        for pk in sorted(wanted.keys() - current):
            pool_member_add(pool=pool, user=wanted[pk], actor=actor)
        for user in get_user_model().objects.filter(pk__in=current - wanted.keys()).order_by("pk"):
            pool_member_remove(pool=pool, user=user, actor=actor)
    return pool


@transaction.atomic
def invitation_create(
    *,
    pool: RaterPool,
    actor: User | AnonymousUser | None,
    email: str = "",
    max_uses: int = 1,
    expires_at: datetime | None = None,
    site: str = "",
) -> Invitation:
    """An invitation link to ``pool``; its organisation is the pool's. One for an ``email`` is mailed there
    after the commit, with its absolute link: under ``site`` (the address the manager's request came to),
    else ``ARENA_SITE_URL`` (``core.site``); with neither it is not mailed (logged)."""
    invitation = Invitation(
        organization=pool.organization,
        pool=pool,
        email=email,
        max_uses=max_uses,
        created_by=actor if actor is not None and actor.is_authenticated else None,
    )
    if expires_at is not None:
        invitation.expires_at = expires_at
    _full_clean(invitation)
    invitation.save()
    audit_record(
        organization=pool.organization,
        actor=actor,
        action=AuditAction.INVITATION_CREATED,
        obj=invitation,
        data={"pool": pool.pk, "email": email, "max_uses": max_uses},
    )
    if email:
        try:
            link = site.rstrip("/") + invitation.path if site else site_url(invitation.path)
        except ImproperlyConfigured:
            # Made where no address is known (a script, no ARENA_SITE_URL): the console shows the link instead.
            logger.warning("invitation %s: not mailed, since the site's address is unknown", invitation.pk)
        else:
            transaction.on_commit(lambda: _invitation_mail(invitation, link))
    return invitation


def _invitation_mail(invitation: Invitation, link: str) -> None:
    """The invitation's e-mail (the configured backend; the demo's prints it in its terminal). A failed send
    is logged, not raised: the invitation exists, and the console shows its link to hand over instead."""
    pool, organization = invitation.pool, invitation.organization
    body = (
        f"{organization.name} invites you to rate answers as a member of {pool.name}.\n\n"
        f"Open this link to join (sign up or log in with this address, {invitation.email}):\n{link}\n\n"
        f"The link works until {invitation.expires_at:%Y-%m-%d %H:%M} UTC.\n"
    )
    try:
        send_mail(f"Invitation to {pool.name} ({organization.name})", body, None, [invitation.email])
    except Exception:
        logger.exception("invitation %s: the e-mail to its address was not sent", invitation.pk)


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
    pool = invitation.pool
    if pool.members.filter(pk=user.pk).exists():
        return pool
    claimed = Invitation.objects.filter(pk=invitation.pk, uses__lt=models.F("max_uses")).update(
        uses=models.F("uses") + 1
    )
    if not claimed:
        raise InvitationError("This invitation link has already been used.")
    # Accepting is how a newcomer joins the organisation (as a rater) and the pool at once.
    membership, created = Membership.objects.get_or_create(
        user=user, organization=pool.organization, defaults={"role": Role.RATER}
    )
    if created:
        audit_record(
            organization=pool.organization,
            actor=user,
            action=AuditAction.MEMBERSHIP_CREATED,
            obj=membership,
            data={"user": user.pk, "role": Role.RATER, "invitation": invitation.pk},
        )
    pool_member_add(pool=pool, user=user, actor=user)
    return pool
