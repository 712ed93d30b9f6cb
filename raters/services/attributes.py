"""Rater attributes (expertise, language, occupation, ...): set by a manager or from a crowd vendor's link,
each change audited. The ranking app reads them for its rater-segment boards."""

from __future__ import annotations

from django.contrib.auth.models import AnonymousUser, User
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction

from core.errors import Invalid

from ..models import AuditAction, Organization, RaterAttribute
from .audit import audit_record


@transaction.atomic
def rater_attribute_set(
    *,
    organization: Organization,
    rater: User,
    key: str,
    value: str,
    actor: User | AnonymousUser | None,
    source: str = RaterAttribute.Source.MANAGER,
) -> RaterAttribute:
    """The rater's value for ``key`` in ``organization``, created or changed (one row per rater and key;
    the database settles two writers racing). Unchanged values write nothing; a change is audited
    (``rater_attribute.created`` / ``.changed``, with the value before). Refused (``Invalid``) for a key
    of the wrong form, an empty or too long value, or a rater who is not a member of the organisation."""
    by = actor if actor is not None and actor.is_authenticated else None
    candidate = RaterAttribute(
        organization=organization,
        rater=rater,
        key=(key or "").strip().lower(),
        value=(value or "").strip(),
        source=source,
        updated_by=by,
    )
    try:  # the row's own rules; one row per (rater, key) is settled below, not refused
        candidate.full_clean(validate_unique=False, validate_constraints=False)
    except ValidationError as exc:
        fields = exc.message_dict if hasattr(exc, "error_dict") else {}
        raise Invalid(" ".join(exc.messages), field_errors=fields) from None
    existing = (
        RaterAttribute.objects.select_for_update()
        .filter(organization=organization, rater=rater, key=candidate.key)
        .first()
    )
    before = None
    if existing is None:
        try:
            with transaction.atomic():  # a savepoint: a racing first write makes the database refuse
                candidate.save()
            attribute = candidate
        except IntegrityError:
            existing = RaterAttribute.objects.select_for_update().get(
                organization=organization, rater=rater, key=candidate.key
            )
    if existing is not None:
        if existing.value == candidate.value:
            return existing
        before = existing.value
        existing.value, existing.source, existing.updated_by = candidate.value, source, by
        existing.save(update_fields=["value", "source", "updated_by", "updated_at"])
        attribute = existing
    audit_record(
        organization=organization,
        actor=actor,
        action=AuditAction.RATER_ATTRIBUTE_CREATED if before is None else AuditAction.RATER_ATTRIBUTE_CHANGED,
        obj=attribute,
        data={"rater": rater.pk, "key": attribute.key, "value": attribute.value, "before": before, "source": source},
    )
    return attribute


@transaction.atomic
def rater_attribute_remove(*, attribute: RaterAttribute, actor: User | AnonymousUser | None) -> None:
    """Remove one attribute of a rater, audited (``rater_attribute.deleted``, with what it was)."""
    audit_record(
        organization=attribute.organization,
        actor=actor,
        action=AuditAction.RATER_ATTRIBUTE_DELETED,
        obj=attribute,
        data={"rater": attribute.rater_id, "key": attribute.key, "value": attribute.value},
    )
    attribute.delete()
