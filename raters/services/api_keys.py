"""An organisation's API keys: created (the plaintext shown once) and revoked."""

from __future__ import annotations

from django.contrib.auth.models import AnonymousUser, User
from django.db import transaction
from django.utils import timezone

from ..models import ApiKey, AuditAction, Organization, api_key_hash
from .audit import audit_record

API_KEY_PREFIX = "arena"


@transaction.atomic
def api_key_create(
    *,
    organization: Organization,
    name: str,
    scope: str,
    actor: User | AnonymousUser | None,
    rate_limit: str = "",
) -> tuple[ApiKey, str]:
    """A new key and its plaintext, which is never stored and cannot be shown again."""
    import secrets

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
