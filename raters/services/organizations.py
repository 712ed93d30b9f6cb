"""Organisations and memberships: creating one, granting and removing roles (owners and managers
guarded), and the users who log in."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AnonymousUser, User
from django.db import transaction

from core.errors import Conflict, PermissionDenied

from ..models import MANAGING_ROLES, AuditAction, Membership, Organization, RaterPool, Role
from .audit import audit_record


@transaction.atomic
def organization_create(*, name: str, slug: str, owner: User) -> Organization:
    organization = Organization.objects.create(name=name, slug=slug)
    Membership.objects.create(user=owner, organization=organization, role=Role.OWNER)
    audit_record(organization=organization, actor=owner, action=AuditAction.ORGANIZATION_CREATED, obj=organization)
    return organization


def _may_grant_managing_roles(actor: User | AnonymousUser | None, organization: Organization) -> bool:
    # ``None`` is the platform itself (management commands, data migrations), which is trusted; a
    # person needs to be a superuser or an owner of this organisation.
    if actor is None:
        return True
    if not actor.is_authenticated:
        return False
    return (
        actor.is_superuser or Membership.objects.filter(user=actor, organization=organization, role=Role.OWNER).exists()
    )


def membership_change_check(
    *, organization: Organization, user: User, role: str | None, actor: User | AnonymousUser | None
) -> None:
    """Raise ``PermissionDenied`` or ``Conflict`` when ``actor`` may not give ``user`` the ``role`` in ``organization``
    (``role=None``: remove the membership).

    Only owners (and superusers) grant or revoke the owner and manager roles, so a manager can neither
    promote themselves nor demote whoever appointed them; and an organisation always keeps an owner.
    Callers that write must hold the organisation's row lock (``_organization_lock``) so that two owners
    demoting each other at once cannot both pass the last-owner check."""
    current = Membership.objects.filter(organization=organization, user=user).values_list("role", flat=True).first()
    if current == role:
        return
    if (current in MANAGING_ROLES or role in MANAGING_ROLES) and not _may_grant_managing_roles(actor, organization):
        raise PermissionDenied("Only an owner of the organisation can grant or revoke the owner and manager roles.")
    if (
        current == Role.OWNER
        and not Membership.objects.filter(organization=organization, role=Role.OWNER).exclude(user=user).exists()
    ):
        raise Conflict(f"{user} is the last owner of {organization}: make someone else an owner first.")


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
        organization=organization,
        actor=actor,
        action=AuditAction.MEMBERSHIP_CREATED if created else AuditAction.MEMBERSHIP_CHANGED,
        obj=membership,
        data={"user": user.pk, "role": role, "previous_role": previous},
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
    audit_record(
        organization=organization,
        actor=actor,
        action=AuditAction.MEMBERSHIP_REMOVED,
        obj=membership,
        data={"user": user.pk, "role": membership.role, "pools": pools},
    )
    membership.delete()


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
