"""A/B experiments: sticky assignment of units to weighted variants, and the exposures counted."""

from __future__ import annotations

from django.db import models
from django.utils import timezone

from raters.models import Organization
from raters.tenancy import TenantManager

from .campaigns import Campaign, Competitor


class Experiment(models.Model):
    """A sticky A/B assignment: each unit (a user, a session, a device: the caller's id) gets one of
    the variants by a deterministic hash of (key, unit id), in proportion to the variants' weights.
    The decision needs no storage; exposures are recorded for the counts. With a campaign, the
    variants may name its competitors, so shadow battles can say which variant answered."""

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="experiments")
    key = models.SlugField(max_length=80, help_text="The name clients use (unique in the organisation).")
    name = models.CharField(max_length=200, blank=True)
    description = models.TextField(blank=True)
    campaign = models.ForeignKey(
        Campaign,
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="experiments",
        help_text="Where shadow battles of this experiment go (its variants then name competitors of it).",
    )
    active = models.BooleanField(default=True, help_text="Inactive experiments assign nothing.")
    # A staged rollout (a promotion, ranking.models.Promotion, sets and clears these): the variant's share of
    # units raised to ``rollout_share`` by moving units into it from the other variants, never out of it
    # (``battles.experimenting.rollout_index``). Both empty: the weights alone decide.
    rollout_variant = models.ForeignKey(
        "Variant",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        editable=False,
        help_text="The variant a staged rollout (a promotion) raises.",
    )
    rollout_share = models.FloatField(
        null=True, blank=True, editable=False, help_text="Its share of units in the current stage (0 to 1)."
    )
    created_at = models.DateTimeField(auto_now_add=True)

    objects = TenantManager()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["organization", "key"], name="experiment_unique_key"),
            # (A share without a variant is left when the promoted variant is deleted: it assigns nothing.)
            models.CheckConstraint(
                condition=models.Q(rollout_share__isnull=True) | models.Q(rollout_share__gt=0, rollout_share__lte=1),
                name="experiment_rollout_share",
            ),
        ]
        ordering = ["organization", "key"]

    def __str__(self) -> str:
        return self.key

    @property
    def rollout(self) -> dict[str, object] | None:
        """The staged rollout in force (variant name and share), or None."""
        if self.rollout_variant_id is None or self.rollout_share is None:
            return None
        variant = self.rollout_variant
        return {"variant": variant.name if variant is not None else "", "share": self.rollout_share}

    def clean(self) -> None:
        from django.core.exceptions import ValidationError

        campaign = getattr(self, "campaign", None)
        organization_id = self.organization_id
        if campaign is not None and organization_id is not None and campaign.organization_id != organization_id:
            raise ValidationError({"campaign": "The campaign must belong to the experiment's organisation."})


class VariantManager(TenantManager["Variant"]):
    tenant_path = "experiment__organization"


class Variant(models.Model):
    experiment = models.ForeignKey(Experiment, on_delete=models.CASCADE, related_name="variants")
    name = models.SlugField(max_length=80)
    weight = models.FloatField(default=1.0, help_text="Share of units, relative to the other variants' weights (> 0).")
    competitor = models.ForeignKey(
        Competitor,
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="variants",
        help_text="The campaign's competitor this variant's answers are (for shadow battles).",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    objects = VariantManager()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["experiment", "name"], name="variant_unique_name"),
            models.CheckConstraint(condition=models.Q(weight__gt=0), name="variant_positive_weight"),
        ]
        # The assignment's stable order: the cumulative weights are summed in this order.
        ordering = ["experiment", "id"]

    def __str__(self) -> str:
        return f"{self.experiment.key}/{self.name}"

    def clean(self) -> None:
        from django.core.exceptions import ValidationError

        if self.weight is not None and not self.weight > 0:
            raise ValidationError({"weight": "A variant's weight must be above 0."})
        experiment = getattr(self, "experiment", None)
        competitor = getattr(self, "competitor", None)
        if competitor is not None and experiment is not None and competitor.campaign_id != experiment.campaign_id:
            raise ValidationError({"competitor": "The competitor must be one of the experiment's campaign."})


class ExposureManager(TenantManager["Exposure"]):
    tenant_path = "experiment__organization"


class Exposure(models.Model):
    """One row per (experiment, unit, variant), counted up at each assignment: bounded by the units
    (not by the calls, as an append-only row per call would be), and enough for the A/B read-out
    (units and exposures per variant, first and last seen). A unit whose variant changes because a
    manager changed the weights gets a second row, so each variant's counts stay true."""

    experiment = models.ForeignKey(Experiment, on_delete=models.CASCADE, related_name="exposures")
    variant = models.ForeignKey(Variant, on_delete=models.CASCADE, related_name="exposures")
    unit_id = models.CharField(max_length=200)
    first_seen_at = models.DateTimeField(default=timezone.now)
    last_seen_at = models.DateTimeField(default=timezone.now)
    count = models.PositiveBigIntegerField(default=1)

    objects = ExposureManager()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["experiment", "unit_id", "variant"], name="exposure_unique_unit_variant")
        ]
        ordering = ["experiment", "id"]

    def __str__(self) -> str:
        return f"{self.unit_id} in {self.variant_id}"
