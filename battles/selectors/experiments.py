"""Shadow battles and A/B experiments, as the API reads them: a shadow battle and its vote, experiments
by scope and key, exposures per variant."""

from __future__ import annotations

from dataclasses import dataclass
from uuid import UUID

from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db.models import Count, QuerySet, Sum

from raters.authentication import ApiKeyPrincipal
from raters.selectors import organizations_viewable_by, organizations_writable_by

from ..models import Battle, Campaign, Experiment, Exposure, Variant, Vote

# --- Shadow battles and A/B experiments (the API's reads) ----------------------------------------------


def shadow_battle_in_campaign(*, campaign: Campaign, battle_id: UUID | str) -> Battle | None:
    """A shadow battle of the campaign (any other id, or a generated battle's, is not found)."""
    try:
        return (
            Battle.objects.filter(campaign=campaign, pk=battle_id, source=Battle.Source.SHADOW)
            .select_related("left__endpoint", "right__endpoint", "experiment")
            .first()
        )
    except (ValueError, TypeError, ValidationError):
        return None


def vote_of_battle(battle: Battle) -> Vote | None:
    return Vote.objects.filter(battle=battle).first()


def experiments_viewable_by(user: User | ApiKeyPrincipal) -> QuerySet[Experiment]:
    return Experiment.objects.filter(organization__in=organizations_viewable_by(user)).select_related(
        "organization", "campaign", "rollout_variant"
    )


def experiments_writable_by(user: User | ApiKeyPrincipal) -> QuerySet[Experiment]:
    """Experiments the principal may assign units in: a read-write key's organisation's, or those of the
    organisations a person owns or manages (``organizations_writable_by``, as for campaigns)."""
    return Experiment.objects.filter(organization__in=organizations_writable_by(user)).select_related(
        "organization", "campaign", "rollout_variant"
    )


class ExperimentAmbiguous(Exception):
    """The key names experiments of several of the principal's organisations."""


def experiment_by_key(
    experiments: QuerySet[Experiment], *, key: str, organization: str | None = None
) -> Experiment | None:
    """The experiment of that key among ``experiments``; ``organization`` (a slug) picks one where the
    principal belongs to several organisations that use the key (``ExperimentAmbiguous`` otherwise)."""
    found = experiments.filter(key=key)
    if organization:
        found = found.filter(organization__slug=organization)
    matches = list(found[:2])
    if len(matches) > 1:
        raise ExperimentAmbiguous(key)
    return matches[0] if matches else None


@dataclass(frozen=True)
class VariantExposure:
    variant: Variant
    units: int
    exposures: int


def experiment_exposures(experiment: Experiment) -> list[VariantExposure]:
    """Per variant (in the assignment's order): distinct units exposed and exposures counted."""
    counts: dict[int, tuple[int, int]] = {
        variant_id: (units, exposures or 0)
        for variant_id, units, exposures in Exposure.objects.filter(experiment=experiment)
        .values("variant_id")
        .annotate(units=Count("id"), exposures=Sum("count"))
        .values_list("variant_id", "units", "exposures")
    }
    return [
        VariantExposure(variant, *counts.get(variant.pk, (0, 0)))
        for variant in Variant.objects.filter(experiment=experiment)
        .select_related("competitor__endpoint")
        .order_by("id")
    ]
