"""An organisation's API keys: created (the plaintext shown once, the scope no higher than its maker's role)
and revoked."""

from __future__ import annotations

from django.contrib.auth.models import AnonymousUser, User
from django.db import transaction
from django.utils import timezone

from core.errors import Invalid, PermissionDenied

from ..models import (
    API_KEY_SCOPES,
    ApiKey,
    AuditAction,
    Organization,
    api_key_hash,
    api_key_scope_allows,
    api_key_scope_cap_of,
)
from ..tenancy import scopes_disabled
from .audit import audit_record

API_KEY_PREFIX = "arena"


def api_key_scope_cap(*, organization: Organization, user: User | AnonymousUser | None) -> str | None:
    """The strongest scope ``user`` may give a key of ``organisation`` (``api_key_scope_cap_of``: the same
    rule caps the key at every use)."""
    return api_key_scope_cap_of(user, organization.pk)


def api_key_scopes_for(*, organization: Organization, user: User | AnonymousUser | None) -> list[str]:
    """The scopes ``user`` may give a key of ``organization``, weakest first (what a form offers)."""
    cap = api_key_scope_cap(organization=organization, user=user)
    return [scope for scope in API_KEY_SCOPES if api_key_scope_allows(cap, scope)]


@transaction.atomic
def api_key_create(
    *,
    organization: Organization,
    name: str,
    scope: str,
    actor: User | AnonymousUser | None,
    rate_limit: str = "",
) -> tuple[ApiKey, str]:
    """A new key and its plaintext, which is never stored and cannot be shown again. A key never exceeds
    its maker: a scope above the actor's role in the organisation is refused (``PermissionDenied`` on
    ``scope``), and the key is capped by the maker's role again at every use (``ApiKey.effective_scope``)."""
    import secrets

    if scope not in ApiKey.Scope.values:
        raise Invalid(f"No such scope: {scope}.", field_errors={"scope": "Choose read, write or owner."})
    cap = api_key_scope_cap(organization=organization, user=actor)
    if not api_key_scope_allows(cap, scope):
        allowed = ", ".join(api_key_scopes_for(organization=organization, user=actor)) or "none"
        message = (
            f"A key never exceeds its maker: your role in {organization.name} may make keys of scope {allowed}, "
            f"not {scope}."
        )
        raise PermissionDenied(message, field_errors={"scope": message})

    prefix = secrets.token_hex(4)
    key = f"{API_KEY_PREFIX}_{prefix}_{secrets.token_urlsafe(32)}"
    api_key = ApiKey.objects.create(
        organization=organization,
        name=name,
        scope=scope,
        rate_limit=rate_limit,
        prefix=prefix,
        hashed_key=api_key_hash(key),
        created_by=actor if actor is not None and actor.is_authenticated else None,
    )
    audit_record(
        organization=organization,
        actor=actor,
        action=AuditAction.API_KEY_CREATED,
        obj=api_key,
        data={"name": name, "scope": scope, "prefix": prefix, "rate_limit": rate_limit},
    )
    return api_key, key


@transaction.atomic
def api_key_revoke(*, api_key: ApiKey, actor: User | AnonymousUser | None) -> None:
    ApiKey.objects.filter(pk=api_key.pk, revoked_at__isnull=True).update(revoked_at=timezone.now())
    audit_record(organization=api_key.organization, actor=actor, action=AuditAction.API_KEY_REVOKED, obj=api_key)


def api_keys_revoke_made_by(*, user: User) -> int:
    """Revoke every live key ``user`` made (their account is being deleted: a key never outlives its
    maker's rights, and a deleted maker can no longer be checked at use). Audited per key."""
    with scopes_disabled():
        keys = list(ApiKey.objects.filter(created_by=user, revoked_at__isnull=True).select_related("organization"))
        for api_key in keys:
            api_key_revoke(api_key=api_key, actor=None)
    return len(keys)
