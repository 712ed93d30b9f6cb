"""Writes about model endpoints."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import datetime

from django.conf import settings
from django.contrib.auth.models import AnonymousUser, User
from django.db import transaction
from django.utils import timezone

from core.errors import Conflict
from raters.models import AuditAction
from raters.services import audit_record
from raters.tenancy import scopes_disabled

from . import hooks
from .models import EndpointOutage, Health, ModelEndpoint
from .triton.client import models_readiness

logger = logging.getLogger(__name__)

# What a vote's "model" means: once an endpoint has battles these cannot change (the server address,
# timeout and contract can: the same model moved to another host, or behind another backend, is the
# same competitor; its chat template is not: the same weights prompted differently answer differently).
FROZEN_WHEN_USED = ("name", "model_name", "model_version", "prompt_format")


class EndpointInUse(Conflict):
    pass


def endpoint_has_battles(endpoint: ModelEndpoint) -> bool:
    # Battles are the battles app's: it registers the check (serving.hooks), this app cannot import it.
    return hooks.endpoint_in_use(endpoint)


@transaction.atomic
def endpoint_save(*, endpoint: ModelEndpoint, actor: User | AnonymousUser | None, changed: list[str]) -> ModelEndpoint:
    created = endpoint._state.adding
    if not created:
        stored = ModelEndpoint.objects.select_for_update().get(pk=endpoint.pk)
        moved = [f for f in FROZEN_WHEN_USED if getattr(stored, f) != getattr(endpoint, f)]
        if moved and endpoint_has_battles(stored):
            raise EndpointInUse(
                f"This endpoint already served battles, so its {', '.join(moved)} cannot change: votes would "
                "silently move to another model. Create a new endpoint and a new competitor instead."
            )
    endpoint.full_clean()
    if created:
        endpoint.save()
    else:
        # The health fields belong to the readiness check: a manager's save must not write back what the
        # form's instance held when it was loaded.
        endpoint.save(
            update_fields=[f.name for f in ModelEndpoint._meta.concrete_fields if f.editable and not f.primary_key]
        )
    audit_record(
        organization=endpoint.organization,
        actor=actor,
        action=AuditAction.ENDPOINT_CREATED if created else AuditAction.ENDPOINT_CHANGED,
        obj=endpoint,
        data={
            "fields": changed,
            "model_name": endpoint.model_name,
            "model_version": endpoint.model_version,
            "url": endpoint.url,
            "contract": endpoint.contract,
            "prompt_format": endpoint.prompt_format,
        },
    )
    return endpoint


# --- Health: the periodic readiness check (serving/tasks.py) -----------------------------------------

DETAIL_MAX = 500


def endpoint_health_record(
    *, endpoint: ModelEndpoint, detail: str, now: datetime | None = None, on_save: bool = False
) -> str:
    """Record one readiness answer for ``endpoint``: ``detail`` is ``model_readiness``'s line ("" when
    the model is ready). Returns the transition it caused: "down" (an outage was opened), "ready" (the
    endpoint is ready and was not before: an open outage was closed), or "" (no change of state).

    Hysteresis: the endpoint goes down at ``ARENA_HEALTH_DOWN_AFTER`` failed answers in a row (one blip
    does not pull a model out of battles) and is ready again at the first ready answer (a model that
    says it is ready gets battles; if it fails them they void as before). The endpoint row is locked
    for the decision, so two checkers recording at once are applied one after the other; the database
    allows one open outage per endpoint. An answer older than the one recorded last is ignored.

    ``on_save``: the answer to the check a manager's save runs. An endpoint not seen ready yet then goes
    down at its first failed answer: it has no battles to keep through a blip, and the manager who just
    typed its address should read that it does not answer (and why), not "Unknown". A ready one keeps
    the hysteresis (saving its timeout during a blip does not pull it out of battles)."""
    now = now or timezone.now()
    detail = " ".join(detail.split())[:DETAIL_MAX]
    with transaction.atomic():
        stored = ModelEndpoint.objects.select_for_update().filter(pk=endpoint.pk).first()
        if stored is None:  # deleted while it was being checked
            return ""
        if stored.health_checked_at is not None and stored.health_checked_at > now:
            return ""
        change = ""
        update: dict[str, object] = {"health_checked_at": now}
        if not detail:
            update.update(health_failures=0, health_failing_since=None, health_detail="")
            if stored.health != Health.READY:
                update.update(health=Health.READY, health_since=now)
                change = "ready"
            # Whatever the state said: the outage table is what exposure is computed from.
            EndpointOutage.objects.filter(endpoint_id=stored.pk, ended_at__isnull=True).update(ended_at=now)
        else:
            failures = stored.health_failures + 1
            failing_since = stored.health_failing_since or now
            update.update(health_failures=failures, health_failing_since=failing_since, health_detail=detail)
            down_after = 1 if on_save and stored.health != Health.READY else settings.ARENA_HEALTH_DOWN_AFTER
            if stored.health != Health.DOWN and failures >= down_after:
                update.update(health=Health.DOWN, health_since=now)
                if not EndpointOutage.objects.filter(endpoint_id=stored.pk, ended_at__isnull=True).exists():
                    EndpointOutage.objects.create(
                        organization_id=stored.organization_id,
                        endpoint_id=stored.pk,
                        started_at=now,
                        first_failed_at=failing_since,
                        reason=detail,
                    )
                change = "down"
        ModelEndpoint.objects.filter(pk=stored.pk).update(**update)
    for name, value in update.items():
        setattr(endpoint, name, value)
    if change:
        logger.warning("endpoint %s (%s) is %s: %s", endpoint.pk, endpoint.name, change, detail or "ready")
    return change


def endpoints_health_check(*, endpoints: Iterable[ModelEndpoint], on_save: bool = False) -> dict[int, str]:
    """Ask Triton about every endpoint at once (short timeout each, the outbound-address rule applies:
    ``ModelEndpoint.spec()``), then record each answer. Returns endpoint id -> the transition.
    ``on_save``: see ``endpoint_health_record``."""
    endpoints = list(endpoints)
    answers = models_readiness(
        [endpoint.spec() for endpoint in endpoints],
        timeout_s=float(settings.ARENA_HEALTH_TIMEOUT_S),
        max_workers=settings.ARENA_HEALTH_CONCURRENCY,
    )
    # The network part is done, all at once; the writes follow, each in its own short transaction.
    now = timezone.now()
    return {
        endpoint.pk: endpoint_health_record(endpoint=endpoint, detail=detail, now=now, on_save=on_save)
        for endpoint, detail in zip(endpoints, answers, strict=True)
    }


def endpoint_health_check_on_save(*, endpoint: ModelEndpoint) -> str:
    """The console's check when a manager saves an endpoint: the periodic check's (bounded by
    ``ARENA_HEALTH_TIMEOUT_S``), recorded, so the endpoint's state is known from its first save. Call it
    after the save has committed. Returns the transition."""
    return endpoints_health_check(endpoints=[endpoint], on_save=True)[endpoint.pk]


def endpoints_watched_query() -> list[ModelEndpoint]:
    """The endpoints the apps above need watched (serving.hooks), in the current scope."""
    ids: set[int] = set()
    for source in hooks.endpoints_watched():
        ids.update(source)
    return list(ModelEndpoint.objects.filter(pk__in=ids).order_by("pk"))


def endpoints_health_check_watched() -> dict[int, str]:
    """One organisation's round (the tenant task runs it inside that organisation's scope)."""
    return endpoints_health_check(endpoints=endpoints_watched_query())


def endpoints_health_schedule() -> int:
    """Beat's tick, across organisations: one tenant task per organisation with watched endpoints, each
    checking its own endpoints in its own scope. Returns how many were queued."""
    from .tasks import endpoints_health_check_task

    with scopes_disabled():  # the one listing across organisations; each task then opens its own scope
        organizations = sorted({endpoint.organization_id for endpoint in endpoints_watched_query()})
    for organization_id in organizations:
        # Expires with the tick: a round nobody ran before the next one is dropped, not piled up.
        endpoints_health_check_task.apply_async(
            kwargs={"organization_id": organization_id}, expires=float(settings.ARENA_HEALTH_INTERVAL_S)
        )
    return len(organizations)
