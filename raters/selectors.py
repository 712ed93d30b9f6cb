"""Reads about organisations and people; every one takes the user or organisation it is scoped to."""

from __future__ import annotations

from collections.abc import Iterable

from django.contrib.auth.models import AnonymousUser, User
from django.db.models import QuerySet

from .authentication import ApiKeyPrincipal
from .models import (
    MANAGING_ROLES,
    ApiKey,
    Invitation,
    Membership,
    Organization,
    RaterAttribute,
    Role,
    WebhookDelivery,
    WebhookEndpoint,
)
from .tenancy import scopes_disabled


def organizations_managed_by(user: User) -> QuerySet[Organization]:
    if user.is_superuser:
        return Organization.objects.all()
    return Organization.objects.filter(memberships__user=user, memberships__role__in=MANAGING_ROLES).distinct()


def organizations_owned_by(user: User | AnonymousUser) -> QuerySet[Organization]:
    """Organisations whose owner-only settings (webhooks: their secrets and delivery logs) the user may
    see and change: those they own; every one for a superuser."""
    if not user.is_authenticated or not user.is_active:
        return Organization.objects.none()
    if user.is_superuser:
        return Organization.objects.all()
    return Organization.objects.filter(memberships__user=user, memberships__role=Role.OWNER).distinct()


def user_owns_anything(user: User | AnonymousUser) -> bool:
    if not user.is_authenticated or not user.is_active:
        return False
    return user.is_superuser or Membership.objects.filter(user=user, role=Role.OWNER).exists()


def organizations_viewable_by(user: User | ApiKeyPrincipal) -> QuerySet[Organization]:
    """Organisations whose results the user may see: managers, owners and viewers; for a request
    made with an API key, the key's organisation only."""
    if isinstance(user, ApiKeyPrincipal):
        return Organization.objects.filter(pk=user.api_key.organization_id)
    if user.is_superuser:
        return Organization.objects.all()
    roles = (*MANAGING_ROLES, Role.VIEWER)
    return Organization.objects.filter(memberships__user=user, memberships__role__in=roles).distinct()


def organizations_writable_by(user: User | ApiKeyPrincipal) -> QuerySet[Organization]:
    """Organisations whose campaigns the principal may change through the API: a write (or owner) key's
    own organisation, by its effective scope; for a person, the ones they own or manage."""
    if isinstance(user, ApiKeyPrincipal):
        if not user.allows(ApiKey.Scope.WRITE):
            return Organization.objects.none()
        return Organization.objects.filter(pk=user.api_key.organization_id)
    return organizations_managed_by(user)


def user_manages_anything(user: User | AnonymousUser) -> bool:
    if not user.is_authenticated or not user.is_active:
        return False
    return user.is_superuser or Membership.objects.filter(user=user, role__in=MANAGING_ROLES).exists()


def invitation_by_token(token: str) -> Invitation | None:
    """The token is the credential (whoever holds the link may join), so this one lookup is made
    across tenants; the caller then works inside the invitation's organisation's scope."""
    with scopes_disabled():
        return Invitation.objects.select_related("pool", "organization").filter(token=token).first()


# --- Webhooks: an organisation's owners and its owner keys ---------------------------------------------


def webhooks_visible_to(principal: User | AnonymousUser | ApiKeyPrincipal) -> QuerySet[WebhookEndpoint]:
    """The webhooks a request may read: every one of an owner key's organisation (read and write keys:
    none, as managers see none in the console), those of the organisations a user owns (a superuser: all)."""
    if isinstance(principal, ApiKeyPrincipal):
        if not principal.allows(ApiKey.Scope.OWNER):
            return WebhookEndpoint.objects.none()
        return WebhookEndpoint.objects.filter(organization_id=principal.api_key.organization_id)
    return WebhookEndpoint.objects.filter(organization__in=organizations_owned_by(principal))


def webhook_visible_to(principal: User | AnonymousUser | ApiKeyPrincipal, webhook_id: int) -> WebhookEndpoint | None:
    return webhooks_visible_to(principal).select_related("organization").filter(pk=webhook_id).first()


def webhook_writable_by(principal: User | AnonymousUser | ApiKeyPrincipal, webhook_id: int) -> WebhookEndpoint | None:
    """A webhook the request may change: an owner key of its organisation, or an owner of it."""
    return webhook_visible_to(principal, webhook_id)


def organizations_for_webhooks(principal: User | AnonymousUser | ApiKeyPrincipal) -> QuerySet[Organization]:
    """Where the request may create webhooks: an owner key's organisation, the organisations a user owns."""
    if isinstance(principal, ApiKeyPrincipal):
        if not principal.allows(ApiKey.Scope.OWNER):
            return Organization.objects.none()
        return Organization.objects.filter(pk=principal.api_key.organization_id)
    return organizations_owned_by(principal)


def webhook_deliveries(endpoint: WebhookEndpoint) -> QuerySet[WebhookDelivery]:
    return WebhookDelivery.objects.filter(endpoint=endpoint)


def rater_attributes_by_key(*, organization_id: int, rater_ids: Iterable[int]) -> dict[str, dict[int, str]]:
    """The attributes of these raters in the organisation, key -> {rater id: value} (one query; raters
    with no attribute are simply absent)."""
    ids = {int(r) for r in rater_ids}
    out: dict[str, dict[int, str]] = {}
    if not ids:
        return out
    # The organisation's rows, filtered here: a campaign may have a hundred thousand raters, too many
    # for an IN list.
    rows = RaterAttribute.objects.filter(organization_id=organization_id).values_list("key", "rater_id", "value")
    for key, rater_id, value in rows.iterator(chunk_size=10_000):
        if rater_id in ids:
            out.setdefault(key, {})[rater_id] = value
    return out
