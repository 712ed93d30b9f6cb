"""A/B experiments: a unit's sticky variant and its exposures; variants added, changed or deleted."""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth.models import AnonymousUser, User
from django.core.exceptions import ValidationError
from django.db import IntegrityError, models, transaction
from django.utils import timezone

from core.errors import Conflict, Invalid
from raters.models import AuditAction
from raters.services import audit_record

from ..experimenting import rollout_index, unit_position, variant_index
from ..models import Experiment, Exposure, Variant
from .errors import ExperimentInactive

# --- A/B experiments: sticky assignment ---------------------------------------------------------------


@dataclass(frozen=True)
class AssignmentResult:
    variant: Variant
    exposures: int  # this unit's exposures to this variant, this one included


def experiment_assign(*, experiment: Experiment, unit_id: str) -> AssignmentResult:
    """The unit's variant (``battles.experimenting``: a hash of the key and the unit id, weighted; under a
    staged rollout, ``rollout_index``),
    and its exposure counted: one row per (experiment, unit, variant), created on the first exposure
    and counted up by a conditional update after (concurrent first exposures: one insert wins, the
    other counts up)."""
    if not experiment.active:
        raise ExperimentInactive(f"Experiment {experiment.key} is not active.")
    if not unit_id or len(unit_id) > 200:
        raise Invalid("unit_id: 1 to 200 characters.", field_errors={"unit_id": "1 to 200 characters."})
    variants = list(Variant.objects.filter(experiment=experiment).select_related("competitor__endpoint").order_by("id"))
    if not variants:
        raise Conflict(f"Experiment {experiment.key} has no variants.")
    position, weights = unit_position(experiment.key, unit_id), [v.weight for v in variants]
    promoted = next((k for k, v in enumerate(variants) if v.pk == experiment.rollout_variant_id), None)
    if promoted is not None and experiment.rollout_share is not None:
        variant = variants[rollout_index(position, weights, promoted, experiment.rollout_share)]
    else:
        variant = variants[variant_index(position, weights)]
    now = timezone.now()
    exposures = Exposure.objects.filter(experiment=experiment, unit_id=unit_id, variant=variant)
    with transaction.atomic():
        if not exposures.update(count=models.F("count") + 1, last_seen_at=now):
            try:
                with transaction.atomic():  # a savepoint: a concurrent first exposure may win the insert
                    Exposure.objects.create(
                        experiment=experiment, variant=variant, unit_id=unit_id, first_seen_at=now, last_seen_at=now
                    )
            except IntegrityError:
                exposures.update(count=models.F("count") + 1, last_seen_at=now)
        count = exposures.values_list("count", flat=True).get()
    return AssignmentResult(variant=variant, exposures=count)


@transaction.atomic
def variant_save(*, variant: Variant, actor: User | AnonymousUser | None, changed: list[str]) -> Variant:
    """A variant added or changed (its experiment's change, in the audit log). Changing a weight moves
    some units to another variant from their next assignment on; the exposures say which."""
    created = variant._state.adding
    try:
        variant.full_clean()
    except ValidationError as exc:
        raise Invalid(" ".join(exc.messages), field_errors=exc.message_dict) from None
    variant.save()
    audit_record(
        organization=variant.experiment.organization,
        actor=actor,
        action=AuditAction.EXPERIMENT_CHANGED,
        obj=variant.experiment,
        data={"variant": variant.name, "created": created, "fields": changed, "weight": variant.weight},
    )
    return variant


@transaction.atomic
def variant_delete(*, variant: Variant, actor: User | AnonymousUser | None) -> None:
    audit_record(
        organization=variant.experiment.organization,
        actor=actor,
        action=AuditAction.EXPERIMENT_CHANGED,
        obj=variant.experiment,
        data={"variant": variant.name, "deleted": True},
    )
    variant.delete()
