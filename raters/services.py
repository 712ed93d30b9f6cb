"""Every write about organisations, people and pools."""

from __future__ import annotations

import json
import logging
import random
import time
import uuid
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AnonymousUser, User
from django.core.exceptions import ValidationError
from django.core.serializers.json import DjangoJSONEncoder
from django.db import IntegrityError, models, transaction
from django.db.models.functions import Coalesce
from django.utils import timezone
from kombu.exceptions import OperationalError as KombuOperationalError
from redis.exceptions import RedisError

from arena.outbound import AddressRefused, Resolver

from . import hooks, selectors
from .errors import Conflict, Invalid, PermissionDenied
from .models import (
    FLAG_IN_FORCE,
    MANAGING_ROLES,
    ApiKey,
    AuditAction,
    AuditEvent,
    Invitation,
    Membership,
    Organization,
    RaterFlag,
    RaterPool,
    Role,
    WebhookDelivery,
    WebhookEndpoint,
    WebhookEvent,
    api_key_hash,
)
from .tenancy import organization_scope, scopes_disabled
from .webhook_signing import signature_header
from .webhook_transport import PostResult, webhook_post, webhook_target

logger = logging.getLogger(__name__)


class InvitationError(Invalid):
    pass


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
) -> Invitation:
    """An invitation link to ``pool``; its organisation is the pool's."""
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


# --- Webhooks (README, "Webhooks") -----------------------------------------------------------------


def _webhook_audit(
    endpoint: WebhookEndpoint, action: AuditAction, actor: User | AnonymousUser | None, **data: Any
) -> None:
    # Never the secret: the audit log is readable by every manager of the organisation.
    audit_record(
        organization=endpoint.organization,
        actor=actor,
        action=action,
        obj=endpoint,
        data={"url": endpoint.url, **data},
    )


@transaction.atomic
def webhook_endpoint_create(
    *,
    organization: Organization,
    url: str,
    events: Sequence[str],
    actor: User | AnonymousUser | None,
    description: str = "",
) -> WebhookEndpoint:
    """A new endpoint with a fresh secret (on the returned row; show it to the creator once). The URL
    must pass the outbound rule (``raters.webhook_transport``)."""
    endpoint = WebhookEndpoint(
        organization=organization,
        url=url,
        events=list(events),
        description=description,
        created_by=actor if actor is not None and actor.is_authenticated else None,
    )
    _full_clean(endpoint)
    endpoint.save()
    _webhook_audit(endpoint, AuditAction.WEBHOOK_CREATED, actor, events=endpoint.events)
    return endpoint


def _webhook_enabled_fields() -> dict[str, Any]:
    return {
        "active": True,
        "consecutive_failures": 0,
        "failing_since": None,
        "disabled_at": None,
        "disabled_reason": "",
    }


@transaction.atomic
def webhook_endpoint_update(
    *,
    endpoint: WebhookEndpoint,
    actor: User | AnonymousUser | None,
    url: str | None = None,
    events: Sequence[str] | None = None,
    description: str | None = None,
    active: bool | None = None,
) -> WebhookEndpoint:
    """Change what is given. ``active=True`` on a disabled endpoint re-enables it (its failure count
    starts again); ``active=False`` turns it off by hand."""
    changed: list[str] = []
    if url is not None and url != endpoint.url:
        endpoint.url = url
        changed.append("url")
    if events is not None and sorted(set(events)) != sorted(endpoint.events or []):
        endpoint.events = list(events)
        changed.append("events")
    if description is not None and description != endpoint.description:
        endpoint.description = description
        changed.append("description")
    if active is not None and active != endpoint.active:
        changed.append("active")
        if active:
            for name, value in _webhook_enabled_fields().items():
                setattr(endpoint, name, value)
        else:
            endpoint.active = False
            endpoint.disabled_at = timezone.now()
            endpoint.disabled_reason = "Turned off by a person."
    if not changed:
        return endpoint
    _full_clean(endpoint)
    endpoint.save()
    action = AuditAction.WEBHOOK_CHANGED
    if changed == ["active"]:
        action = AuditAction.WEBHOOK_ENABLED if endpoint.active else AuditAction.WEBHOOK_DISABLED
    _webhook_audit(endpoint, action, actor, fields=changed)
    return endpoint


@transaction.atomic
def webhook_endpoint_enable(*, endpoint: WebhookEndpoint, actor: User | AnonymousUser | None) -> WebhookEndpoint:
    return webhook_endpoint_update(endpoint=endpoint, actor=actor, active=True)


@transaction.atomic
def webhook_endpoint_delete(*, endpoint: WebhookEndpoint, actor: User | AnonymousUser | None) -> None:
    """Delete the endpoint and its delivery log."""
    _webhook_audit(endpoint, AuditAction.WEBHOOK_DELETED, actor)
    endpoint.delete()


def _json_native(payload: dict[str, Any]) -> dict[str, Any]:
    # Ids, datetimes and decimals as JSON has them, once, so that what is stored is what is sent.
    native: dict[str, Any] = json.loads(json.dumps(payload, cls=DjangoJSONEncoder))
    return native


def _deliveries_queue(deliveries: list[tuple[int, int]]) -> None:
    """Queue the first attempt of each (delivery id, organisation id). A broker that is down loses
    nothing: the deliveries are due, and beat's sweep sends them (``webhook_deliveries_due``)."""
    from .tasks import webhook_deliver_task

    for delivery_id, organization_id in deliveries:
        try:
            webhook_deliver_task.delay(delivery_id, organization_id=organization_id)
        except (KombuOperationalError, RedisError, OSError):
            logger.warning("webhook delivery %s not queued (broker down); beat's sweep will send it", delivery_id)
            return
        except Exception:
            # Run after the commit of someone's change (a vote): whatever went wrong with the queueing
            # (or, without a broker, with the attempt run in place) must not turn it into an error page.
            logger.exception("webhook delivery %s: queueing failed; beat's sweep will send it", delivery_id)


def _deliveries_create(
    *, endpoints: Iterable[WebhookEndpoint], event: str, payload: dict[str, Any]
) -> list[WebhookDelivery]:
    now = timezone.now()
    event_id = uuid.uuid4()
    deliveries = [
        WebhookDelivery(
            organization_id=endpoint.organization_id,
            endpoint=endpoint,
            event_id=event_id,
            event=event,
            payload=_json_native(payload),
            next_attempt_at=now,
            created_at=now,
        )
        for endpoint in endpoints
    ]
    if not deliveries:
        return []
    created = WebhookDelivery.objects.bulk_create(deliveries)
    ids = [(delivery.pk, delivery.organization_id) for delivery in created]
    # After commit only: a rolled-back change sends nothing (and its deliveries are gone with it).
    transaction.on_commit(lambda: _deliveries_queue(ids))
    return created


def webhook_event_emit(*, organization_id: int, event: str, payload: dict[str, Any]) -> list[WebhookDelivery]:
    """One delivery of ``event`` for each active endpoint of the organisation subscribed to it, written
    in the caller's transaction and sent after it commits (no network here: cheap enough to call inside
    a vote's transaction). All deliveries of one event share its ``event_id``, which receivers use to
    drop duplicates."""
    if event not in WebhookEvent.values or event == WebhookEvent.PING:
        raise ValueError(f"unknown webhook event {event!r}")
    with organization_scope(organization_id):
        endpoints = [
            endpoint
            for endpoint in WebhookEndpoint.objects.filter(organization_id=organization_id, active=True)
            if endpoint.subscribes_to(event)
        ]
        if not endpoints:  # the common case (a vote in an organisation without webhooks): no savepoint
            return []
        with transaction.atomic():
            return _deliveries_create(endpoints=endpoints, event=event, payload=payload)


@transaction.atomic
def webhook_ping(*, endpoint: WebhookEndpoint, actor: User | AnonymousUser | None) -> WebhookDelivery:
    """A test event (``ping``) for this endpoint alone, sent like any other."""
    if not endpoint.active:
        raise Conflict("This webhook is disabled: enable it before sending a test event.")
    payload = {"webhook_id": endpoint.pk, "message": "A test event from Arena."}
    return _deliveries_create(endpoints=[endpoint], event=WebhookEvent.PING, payload=payload)[0]


def _webhook_retry_delay_s(attempts: int) -> float:
    """Seconds until the next try after ``attempts`` failed ones: 30 s, 2 min, 8 min, 32 min, ... (times
    4 each, capped), each spread by +-20% so that deliveries that failed together do not retry together."""
    base = settings.ARENA_WEBHOOK_RETRY_BASE_S * 4 ** max(0, attempts - 1)
    return float(min(base, settings.ARENA_WEBHOOK_RETRY_MAX_S) * _webhook_rng.uniform(0.8, 1.2))


def webhook_body(delivery: WebhookDelivery) -> bytes:
    """The request body, exactly as signed and sent."""
    document = {
        "id": str(delivery.event_id),
        "type": delivery.event,
        "created": delivery.created_at.isoformat(),
        "data": delivery.payload,
    }
    return json.dumps(document, separators=(",", ":"), sort_keys=True).encode()


def _webhook_headers(delivery: WebhookDelivery, body: bytes) -> dict[str, str]:
    timestamp = int(time.time())
    return {
        "Content-Type": "application/json",
        "User-Agent": "Arena-Webhooks/1",
        "X-Arena-Event": delivery.event,
        "X-Arena-Delivery": str(delivery.pk),
        "X-Arena-Timestamp": str(timestamp),
        "X-Arena-Signature": signature_header(delivery.endpoint.secret, body, timestamp=timestamp),
    }


def webhook_deliver(*, delivery_id: int, resolver: Resolver | None = None) -> WebhookDelivery | None:
    """One attempt at one delivery, if it is due (the task's body, and the beat sweep's).

    The attempt is claimed with a conditional update that moves ``next_attempt_at`` a lease ahead, so of
    two workers handed the same delivery (a redelivered task, the sweep and the first task) one sends;
    a worker that dies mid-send leaves the delivery due again once the lease has passed. ``resolver``
    replaces DNS (tests)."""
    now = timezone.now()
    lease = now + timedelta(seconds=settings.ARENA_WEBHOOK_TIMEOUT_S * 2 + 60)
    claimed = WebhookDelivery.objects.filter(pk=delivery_id, status__in=_WEBHOOK_OPEN, next_attempt_at__lte=now).update(
        next_attempt_at=lease, attempts=models.F("attempts") + 1
    )
    if not claimed:
        return None
    delivery = WebhookDelivery.objects.select_related("endpoint", "endpoint__organization").get(pk=delivery_id)
    endpoint = delivery.endpoint
    if not endpoint.active:
        WebhookDelivery.objects.filter(pk=delivery.pk).update(
            status=WebhookDelivery.Status.GAVE_UP,
            attempts=models.F("attempts") - 1,
            next_attempt_at=None,
            error="Not sent: the webhook is disabled.",
        )
        delivery.refresh_from_db()
        return delivery
    body = webhook_body(delivery)
    try:
        # Checked again now (the name may resolve elsewhere than when it was entered), and the POST
        # connects to the address this check approved.
        target = webhook_target(endpoint.url, resolver=resolver)
    except AddressRefused as exc:
        result = PostResult(ok=False, status=None, excerpt="", error=f"Refused: {exc}"[:500], duration_ms=0)
    else:
        result = webhook_post(
            target,
            body=body,
            headers=_webhook_headers(delivery, body),
            timeout_s=settings.ARENA_WEBHOOK_TIMEOUT_S,
            max_response_bytes=settings.ARENA_WEBHOOK_RESPONSE_MAX_BYTES,
        )
    return _webhook_attempt_record(delivery=delivery, result=result)


_WEBHOOK_OPEN = (WebhookDelivery.Status.PENDING, WebhookDelivery.Status.FAILED)
_webhook_rng = random.SystemRandom()


@transaction.atomic
def _webhook_attempt_record(*, delivery: WebhookDelivery, result: PostResult) -> WebhookDelivery:
    now = timezone.now()
    fields: dict[str, Any] = {
        "response_status": result.status,
        "response_excerpt": result.excerpt,
        "error": result.error,
        "duration_ms": result.duration_ms,
    }
    endpoints = WebhookEndpoint.objects.filter(pk=delivery.endpoint_id)
    if result.ok:
        fields.update(status=WebhookDelivery.Status.SUCCEEDED, delivered_at=now, next_attempt_at=None)
        endpoints.update(consecutive_failures=0, failing_since=None)
    else:
        if delivery.attempts >= settings.ARENA_WEBHOOK_MAX_ATTEMPTS:
            fields.update(status=WebhookDelivery.Status.GAVE_UP, next_attempt_at=None)
        else:
            delay = _webhook_retry_delay_s(delivery.attempts)
            fields.update(status=WebhookDelivery.Status.FAILED, next_attempt_at=now + timedelta(seconds=delay))
        endpoints.update(
            consecutive_failures=models.F("consecutive_failures") + 1,
            failing_since=Coalesce("failing_since", models.Value(now)),
        )
    WebhookDelivery.objects.filter(pk=delivery.pk).update(**fields)
    if not result.ok:
        _webhook_disable_if_failing(endpoint_id=delivery.endpoint_id, now=now)
    delivery.refresh_from_db()
    return delivery


def _webhook_disable_if_failing(*, endpoint_id: int, now: datetime) -> None:
    endpoint = WebhookEndpoint.objects.select_related("organization").get(pk=endpoint_id)
    since = endpoint.failing_since or now
    if (
        not endpoint.active
        or endpoint.consecutive_failures < settings.ARENA_WEBHOOK_DISABLE_AFTER_FAILURES
        or (now - since).total_seconds() < settings.ARENA_WEBHOOK_DISABLE_AFTER_S
    ):
        return
    reason = (
        f"Disabled after {endpoint.consecutive_failures} failed attempts in a row since "
        f"{since.isoformat(timespec='seconds')}."
    )
    # Conditional: of two workers recording failures at once, one disables (and audits).
    if not WebhookEndpoint.objects.filter(pk=endpoint.pk, active=True).update(
        active=False, disabled_at=now, disabled_reason=reason
    ):
        return
    abandoned = WebhookDelivery.objects.filter(endpoint_id=endpoint.pk, status__in=_WEBHOOK_OPEN).update(
        status=WebhookDelivery.Status.GAVE_UP, next_attempt_at=None, error="Not sent: the webhook was disabled."
    )
    endpoint.refresh_from_db()
    _webhook_audit(
        endpoint,
        AuditAction.WEBHOOK_DISABLED,
        None,
        reason=reason,
        consecutive_failures=endpoint.consecutive_failures,
        abandoned_deliveries=abandoned,
    )


def webhook_deliveries_due(*, limit: int = 1000) -> int:
    """Beat's sweep, across organisations: queue an attempt for each delivery whose time has come (its
    retry, or a first attempt whose task was lost). Each task claims its delivery, so queueing one
    twice sends it once."""
    with scopes_disabled():  # every organisation's due deliveries, each then sent in its own scope
        due = list(
            WebhookDelivery.objects.filter(status__in=_WEBHOOK_OPEN, next_attempt_at__lte=timezone.now())
            .order_by("next_attempt_at")
            .values_list("pk", "organization_id")[:limit]
        )
    _deliveries_queue(due)
    return len(due)


_WEBHOOK_FINISHED = (WebhookDelivery.Status.SUCCEEDED, WebhookDelivery.Status.GAVE_UP)


def webhook_deliveries_purge(*, now: datetime | None = None, batch_size: int = 1000) -> int:
    """Delete finished deliveries (succeeded, gave up) created more than
    ARENA_WEBHOOK_DELIVERY_RETENTION_DAYS ago; 0 keeps them all. A delivery still waiting for an attempt
    (pending, failed) is never deleted, whatever its age. Across organisations: beat's task. Deleted
    ``batch_size`` rows at a time, each batch one statement (its own transaction: call it outside
    one), so the first purge of a long log does not hold its locks for minutes."""
    days = settings.ARENA_WEBHOOK_DELIVERY_RETENTION_DAYS
    if days <= 0:
        return 0
    cutoff = (now or timezone.now()) - timedelta(days=days)
    purged = 0
    with scopes_disabled():  # every organisation's log
        finished_old = WebhookDelivery.objects.filter(status__in=_WEBHOOK_FINISHED, created_at__lt=cutoff)
        while True:
            batch = list(finished_old.order_by("created_at", "pk").values_list("pk", flat=True)[:batch_size])
            if not batch:
                break
            # The status condition again: finished is final, but the delete must never take a
            # delivery that is not, whatever changed since the batch was read.
            deleted, _ = finished_old.filter(pk__in=batch).delete()
            purged += deleted
            if len(batch) < batch_size:
                break
    if purged:
        logger.info("webhook deliveries purged: %d finished before %s", purged, cutoff.isoformat(timespec="seconds"))
    return purged
