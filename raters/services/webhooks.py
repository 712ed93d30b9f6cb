"""Webhooks: endpoints (created, changed, deleted), events emitted into deliveries, each delivery's
attempts, retries and the disabling of failing endpoints, the sweep, the purge, and the Celery tasks
that run them (named ``raters.tasks.<function>``, as before they moved here)."""

from __future__ import annotations

import json
import logging
import random
import time
import uuid
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from typing import Any

from celery import shared_task
from django.conf import settings
from django.contrib.auth.models import AnonymousUser, User
from django.core.serializers.json import DjangoJSONEncoder
from django.db import models, transaction
from django.db.models.functions import Coalesce
from django.utils import timezone
from kombu.exceptions import OperationalError as KombuOperationalError
from redis.exceptions import RedisError

from core.cached import cached_fact, cached_fact_drop
from core.errors import Conflict
from core.outbound import AddressRefused, Resolver
from core.slots import organization_slot
from core.tasks import TransactionAwareTask

from ..models import AuditAction, Organization, WebhookDelivery, WebhookEndpoint, WebhookEvent
from ..tenancy import TenantTask, organization_scope, scopes_disabled
from ..webhook_signing import signature_header
from ..webhook_transport import PostResult, webhook_post, webhook_target
from .audit import _full_clean, audit_record

logger = logging.getLogger(__name__)


# --- Webhooks (docs/api/webhooks.md) -----------------------------------------------------------------


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
    if event not in webhook_events_subscribed(organization_id):
        return []  # the common case (every vote of an organisation without webhooks): no query at all
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


def webhook_events_key(organization_id: int) -> str:
    return f"arena:fact:webhook-events:{organization_id}"


def webhook_events_subscribed(organization_id: int) -> set[str]:
    """The events some active endpoint of the organisation subscribes to, from the shared cache
    (core.cached): every vote asks. Dropped on every change of an endpoint (raters.signals), and by the
    conditional update that disables one."""

    def load() -> set[str]:
        with organization_scope(organization_id):
            rows = WebhookEndpoint.objects.filter(organization_id=organization_id, active=True)
            return {event for events in rows.values_list("events", flat=True) for event in (events or [])}

    events: set[str] = cached_fact(webhook_events_key(organization_id), load)
    return events


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


def _attempt_lease_s() -> int:
    """The longest one attempt may take (about two timeouts: connect, then read) and a margin: how long
    a claimed delivery, or a sending slot, outlives a worker that died holding it."""
    return settings.ARENA_WEBHOOK_TIMEOUT_S * 2 + 60


def webhook_deliver(*, delivery_id: int, resolver: Resolver | None = None) -> WebhookDelivery | None:
    """One attempt at one delivery, if it is due (the task's body, and the beat sweep's).

    The attempt is claimed with a conditional update that moves ``next_attempt_at`` a lease ahead, so of
    two workers handed the same delivery (a redelivered task, the sweep and the first task) one sends;
    a worker that dies mid-send leaves the delivery due again once the lease has passed. ``resolver``
    replaces DNS (tests)."""
    now = timezone.now()
    lease = now + timedelta(seconds=_attempt_lease_s())
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
    cached_fact_drop(webhook_events_key(endpoint.organization_id))  # update() sends no signal
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


# --- Tasks: each takes ids and calls one service above. Their Celery names are the ones they had in
# raters/tasks.py (beat's schedule and messages in flight name them); raters/tasks.py re-exports them.


def _webhook_due_next(*, organization_id: int) -> int | None:
    """The organisation's delivery that has waited longest for its attempt, if one is due."""
    return (
        WebhookDelivery.objects.filter(
            organization_id=organization_id, status__in=_WEBHOOK_OPEN, next_attempt_at__lte=timezone.now()
        )
        .order_by("next_attempt_at", "pk")
        .values_list("pk", flat=True)
        .first()
    )


def webhook_deliver_in_slot(*, delivery_id: int, organization_id: int) -> str:
    """The delivery task's body: one attempt at ``delivery_id`` in one of the organisation's sending
    slots (``ARENA_WEBHOOK_ORG_CONCURRENCY``), then the organisation's other due deliveries, one after
    another, for up to ``ARENA_WEBHOOK_DRAIN_S``; what is still due then is queued again (so no slot is
    held for ever) and beat's sweep remains the safety net.

    With every slot taken, nothing is sent and nothing waits: the delivery stays due and a slot holder
    of the same organisation sends it. So one organisation's slow or flooded receiver occupies at most
    its slots' worth of delivery workers, and another organisation's deliveries go out meanwhile."""
    drain_s = settings.ARENA_WEBHOOK_DRAIN_S
    # A slot outlives the longest drain (each attempt starts before the deadline), so two holders never
    # exceed the limit while both live.
    lease_s = drain_s + _attempt_lease_s()
    limit = settings.ARENA_WEBHOOK_ORG_CONCURRENCY
    with organization_slot("webhooks", organization_id, limit=limit, lease_s=lease_s) as held:
        if not held:
            return "busy"
        delivery = webhook_deliver(delivery_id=delivery_id)
        deadline = time.monotonic() + drain_s
        sent = 0
        while (next_id := _webhook_due_next(organization_id=organization_id)) is not None:
            if time.monotonic() >= deadline:
                webhook_deliver_task.delay_or_log(next_id, organization_id=organization_id)
                break
            if webhook_deliver(delivery_id=next_id) is not None:
                sent += 1
    status = delivery.status if delivery is not None else "not due"
    return f"{status} (+{sent} more)" if sent else status


@shared_task(base=TenantTask, acks_late=True, name="raters.tasks.webhook_deliver_task")
def webhook_deliver_task(delivery_id: int, *, organization_id: int) -> str:
    """One attempt at one webhook delivery, in one of its organisation's sending slots (then that
    organisation's other due deliveries); a delivery that is not due (already sent, claimed by another
    worker) is left alone, and one whose organisation has every slot busy is left to those slots."""
    return webhook_deliver_in_slot(delivery_id=delivery_id, organization_id=organization_id)


@shared_task(base=TransactionAwareTask, name="raters.tasks.webhook_deliveries_due_task")
def webhook_deliveries_due_task() -> int:
    """Beat's sweep, across organisations: retries whose time has come, first attempts whose task was lost."""
    return webhook_deliveries_due()


@shared_task(base=TransactionAwareTask, name="raters.tasks.webhook_deliveries_purge_task")
def webhook_deliveries_purge_task() -> int:
    """Beat: finished deliveries past the retention period are deleted (the delivery log's retention)."""
    return webhook_deliveries_purge()
