"""Writes about model endpoints."""

from __future__ import annotations

from django.contrib.auth.models import AnonymousUser, User
from django.db import models, transaction

from raters.services import audit_record

from .models import ModelEndpoint

# What a vote's "model" means: once an endpoint has battles these cannot change (the server address
# and timeout can: the same model moved to another host is the same competitor).
FROZEN_WHEN_USED = ("name", "model_name", "model_version")


class EndpointInUse(Exception):
    pass


def endpoint_has_battles(endpoint: ModelEndpoint) -> bool:
    from battles.models import Battle

    return Battle.objects.filter(
        models.Q(left__endpoint=endpoint) | models.Q(right__endpoint=endpoint)
    ).exists()


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
    audit_record(organization=endpoint.organization, actor=actor,
                 action="endpoint.created" if created else "endpoint.changed", obj=endpoint,
                 data={"fields": changed, "model_name": endpoint.model_name, "model_version": endpoint.model_version,
                       "url": endpoint.url})
    return endpoint
