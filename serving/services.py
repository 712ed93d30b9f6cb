"""Writes about model endpoints."""

from __future__ import annotations

from django.contrib.auth.models import AnonymousUser, User
from django.db import transaction

from raters.errors import Conflict
from raters.models import AuditAction
from raters.services import audit_record

from . import hooks
from .models import ModelEndpoint

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
    endpoint.save()
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
