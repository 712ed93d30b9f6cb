"""A campaign's competitors: added, changed, retired or deleted (each audited); one with battles is
retired, never deleted, since its votes name it."""

from __future__ import annotations

from django.contrib.auth.models import AnonymousUser, User
from django.db import models, transaction
from django.db.models import ProtectedError
from django.utils import timezone

from core.errors import Conflict, Invalid
from raters.models import AuditAction
from raters.services import audit_record
from serving.models import ModelEndpoint

from ..models import Battle, Competitor
from .buffer import buffer_refill_request
from .campaigns import _open_battles_void, leaderboards_refresh_request


def competitor_version_default(*, endpoint: ModelEndpoint) -> str:
    """The version label of a competitor added without one: the model version its endpoint pins on the
    Triton server (what the votes are really for), else today's date (ISO), which orders successive
    checkpoints of a model that is redeployed under the same name."""
    return endpoint.model_version or timezone.localdate().isoformat()


@transaction.atomic
def competitor_save(*, competitor: Competitor, actor: User | AnonymousUser | None, changed: list[str]) -> Competitor:
    created = competitor._state.adding
    if (competitor.endpoint is None) == (not competitor.external_model):
        raise Invalid(
            "Choose an endpoint, or name an external model, not both.",
            field_errors={"endpoint": "Choose an endpoint, or name an external model (one without an endpoint)."},
        )
    if not competitor.version_label:
        if competitor.endpoint is None:
            raise Invalid("An external model needs a version.", field_errors={"version_label": "Required."})
        competitor.version_label = competitor_version_default(endpoint=competitor.endpoint)
    if competitor.endpoint is not None and competitor.endpoint.organization_id != competitor.campaign.organization_id:
        raise Invalid(
            "The endpoint belongs to another organisation.",
            field_errors={"endpoint": "The endpoint must belong to the campaign's organisation."},
        )
    if not created:
        # Votes name the competitor: pointing it at another model or version would rewrite history.
        stored = (
            Competitor.objects.filter(pk=competitor.pk).values("endpoint_id", "external_model", "version_label").get()
        )
        identity_changed = (stored["endpoint_id"], stored["external_model"], stored["version_label"]) != (
            competitor.endpoint_id,
            competitor.external_model,
            competitor.version_label,
        )
        if identity_changed and competitor_has_battles(competitor):
            raise Conflict(
                "This competitor has battles: its model and version cannot change. "
                "Add a new competitor for the new version instead."
            )
        if competitor.active and Competitor.objects.filter(pk=competitor.pk, retired_at__isnull=False).exists():
            raise Conflict(
                f"{competitor} is retired, and retiring is final: add a new competitor to bring the model back.",
                field_errors={"active": "A retired competitor stays inactive."},
            )
    competitor.organization_id = competitor.campaign.organization_id
    competitor.save()
    if not competitor.active:
        # A withdrawn competitor gets no more votes, including on battles already handed out.
        _open_battles_void(
            Battle.objects.filter(models.Q(left=competitor) | models.Q(right=competitor)),
            "A competitor was withdrawn before the vote.",
        )
        buffer_refill_request(campaign=competitor.campaign)  # replace what was voided
    audit_record(
        organization=competitor.organization,
        actor=actor,
        action=AuditAction.COMPETITOR_ADDED if created else AuditAction.COMPETITOR_CHANGED,
        obj=competitor,
        data={
            "endpoint": competitor.endpoint_id,
            "external_model": competitor.external_model,
            "version": competitor.version_label,
            "fields": changed,
        },
    )
    return competitor


def competitor_has_battles(competitor: Competitor) -> bool:
    return Battle.objects.filter(models.Q(left=competitor) | models.Q(right=competitor)).exists()


def competitor_delete_refusal(competitor: Competitor) -> str | None:
    """Why the competitor cannot be deleted (it has battles, so votes may name it), or None."""
    if competitor.pk is not None and competitor_has_battles(competitor):
        return (
            f"{competitor} has battles and cannot be deleted: its votes name it, and the log is never rewritten. "
            "Retire it instead (the 'Retire' action): it gets no new battles and keeps its history on the board."
        )
    return None


@transaction.atomic
def competitor_retire(*, competitor: Competitor, actor: User | AnonymousUser | None) -> Competitor:
    """Retire a competitor for good: no new battles (its open ones are voided, as on a withdrawal), its
    votes and its row on the board kept, marked retired. Final: a retired competitor is never made
    active again (the model comes back as a new competitor). Audited as ``competitor.retired``."""
    # ``of``: the endpoint is an outer join (an external model has none), which FOR UPDATE cannot lock.
    locked = (
        Competitor.objects.select_for_update(of=("self",)).select_related("campaign", "endpoint").get(pk=competitor.pk)
    )
    if locked.gold:
        raise Conflict("The gold pseudo-competitors are the platform's own; they cannot be retired.")
    if locked.retired_at is not None:
        raise Conflict(f"{locked} is retired already (since {locked.retired_at:%Y-%m-%d %H:%M} UTC).")
    locked.active = False
    locked.retired_at = timezone.now()
    locked.save(update_fields=["active", "retired_at"])
    voided = _open_battles_void(
        Battle.objects.filter(models.Q(left=locked) | models.Q(right=locked)),
        "A competitor was retired before the vote.",
    )
    buffer_refill_request(campaign=locked.campaign)  # replace what was voided
    audit_record(
        organization=locked.organization,
        actor=actor,
        action=AuditAction.COMPETITOR_RETIRED,
        obj=locked,
        data={
            "endpoint": locked.endpoint_id,
            "external_model": locked.external_model,
            "version": locked.version_label,
            "battles_voided": voided,
        },
    )
    leaderboards_refresh_request(campaign=locked.campaign)  # a board computed now marks it retired
    competitor.active, competitor.retired_at = locked.active, locked.retired_at
    return locked


@transaction.atomic
def competitor_delete(*, competitor: Competitor, actor: User | AnonymousUser | None) -> None:
    """Only a competitor that never fought can be deleted; one with battles is retired instead
    (``competitor_retire``), since its votes name it."""
    refusal = competitor_delete_refusal(competitor)
    if refusal is not None:
        raise Conflict(refusal)
    audit_record(
        organization=competitor.organization,
        actor=actor,
        action=AuditAction.COMPETITOR_DELETED,
        obj=competitor,
        data={
            "endpoint": competitor.endpoint_id,
            "external_model": competitor.external_model,
            "version": competitor.version_label,
        },
    )
    try:
        with transaction.atomic():
            competitor.delete()
    except ProtectedError:
        raise Conflict(
            f"{competitor} is still referred to (by an experiment's variant, or the campaign's log): it cannot "
            "be deleted. Change the variant first, or retire the competitor."
        ) from None


def endpoint_has_battles(endpoint: ModelEndpoint) -> bool:
    """Registered with ``serving.hooks`` (see apps.py): whether any battle used the endpoint."""
    return Battle.objects.filter(models.Q(left__endpoint=endpoint) | models.Q(right__endpoint=endpoint)).exists()
