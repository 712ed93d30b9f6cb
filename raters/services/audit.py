"""The audit log's one writer (``audit_record``), and the audited save and delete of the tenant rows the
console edits with no rule of their own."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AnonymousUser, User
from django.core.exceptions import ValidationError
from django.db import models, transaction

from core.errors import Conflict, Invalid

from ..models import AuditAction, AuditEvent, Organization


def audit_record(
    *,
    organization: Organization,
    actor: User | AnonymousUser | None,
    action: AuditAction,
    obj: models.Model,
    data: dict[str, Any] | None = None,
) -> AuditEvent:
    """One audit row; call it inside the transaction of the change it records."""
    return AuditEvent.objects.create(
        organization=organization,
        actor=actor if actor is not None and actor.is_authenticated else None,
        action=action,
        object_type=obj._meta.label_lower,
        object_id=str(obj.pk),
        data=data or {},
    )


# --- Rows the console edits with no rule of their own ------------------------------------------------


def _full_clean(obj: models.Model, exclude: list[str] | None = None) -> None:
    try:
        obj.full_clean(exclude=exclude)
    except ValidationError as exc:
        fields = exc.message_dict if hasattr(exc, "error_dict") else {}
        raise Invalid(" ".join(exc.messages), field_errors=fields) from None


def _organization_of(obj: models.Model) -> Organization:
    return obj if isinstance(obj, Organization) else obj.organization  # type: ignore[attr-defined]


@transaction.atomic
def tenant_row_save(*, obj: models.Model, actor: User | AnonymousUser | None, changed: list[str]) -> models.Model:
    """Save a tenant-owned row (validated) with its audit row, ``<subject>.created`` or ``.changed``.
    For rows whose rules are only the model's own; the others have services of their own."""
    created = obj._state.adding
    _full_clean(obj, exclude=[f.name for f in obj._meta.many_to_many])
    obj.save()
    audit_record(
        organization=_organization_of(obj),
        actor=actor,
        action=AuditAction.of(obj, "created" if created else "changed"),
        obj=obj,
        data={"fields": changed},
    )
    return obj


@transaction.atomic
def tenant_row_delete(*, obj: models.Model, actor: User | AnonymousUser | None) -> None:
    """Delete a tenant-owned row with its audit row (``<subject>.deleted``). A row that others still
    point at (a pool with votes, an endpoint with competitors) is a ``Conflict``, not a crash."""
    if not isinstance(obj, Organization):  # an organisation's own audit rows go with it
        audit_record(
            organization=_organization_of(obj),
            actor=actor,
            action=AuditAction.of(obj, "deleted"),
            obj=obj,
            data={"name": str(obj)},
        )
    try:
        with transaction.atomic():
            obj.delete()
    except models.ProtectedError:
        raise Conflict(f"{obj} is still in use (it has battles or votes) and cannot be deleted.") from None
