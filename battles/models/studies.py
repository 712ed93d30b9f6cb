"""Crowd studies: a campaign's public link for a vendor (Prolific or another) and its participants."""

from __future__ import annotations

import secrets
from datetime import timedelta
from typing import Any
from urllib.parse import quote, urlsplit

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.db import models
from django.utils import timezone

from raters.models import RATER_ATTRIBUTE_KEY, Organization, RaterPool
from raters.tenancy import TenantManager

from .campaigns import Campaign

# --- Crowd studies: entry from a vendor (Prolific or another) with a completion code ----------------

PROLIFIC_COMPLETION_URL = "https://app.prolific.com/submissions/complete?cc={code}"


def _study_slug() -> str:
    # The public link's only secret: 128 random bits, so links cannot be guessed or enumerated.
    return secrets.token_urlsafe(16)


# The vendor's own parameters, which an attribute parameter may not reuse.
STUDY_ID_PARAMETERS = ("PROLIFIC_PID", "STUDY_ID", "SESSION_ID", "worker_id", "assignment_id")
_PARAMETER = r"^[A-Za-z][A-Za-z0-9_]{0,39}$"
STUDY_ATTRIBUTE_PARAMETERS_MAX = 10


def attribute_parameters_validate(value: Any) -> None:
    """``{"<link parameter>": "<attribute key>"}``: at most ten, parameter names of letters, digits and _
    (not the vendor's id parameters), keys of the rater-attribute form, each key once."""
    import re

    from django.core.exceptions import ValidationError

    if not isinstance(value, dict):
        raise ValidationError('Write an object of link parameter -> attribute key, e.g. {"lang": "language"}.')
    if len(value) > STUDY_ATTRIBUTE_PARAMETERS_MAX:
        raise ValidationError(f"At most {STUDY_ATTRIBUTE_PARAMETERS_MAX} attribute parameters.")
    for parameter, key in value.items():
        if not isinstance(parameter, str) or not re.match(_PARAMETER, parameter):
            raise ValidationError(f"{parameter!r}: a parameter is letters, digits and _, a letter first, 40 at most.")
        if parameter in STUDY_ID_PARAMETERS:
            raise ValidationError(f"{parameter} carries the vendor's ids; it cannot also be an attribute.")
        if not isinstance(key, str) or not RATER_ATTRIBUTE_KEY.match(key):
            raise ValidationError(f"{key!r}: an attribute key is lower-case letters, digits and _, a letter first.")
    if len(set(value.values())) != len(value):
        raise ValidationError("Each attribute key may come from one parameter only.")


def completion_url_validate(value: str) -> None:
    """A tenant's completion URL is only ever a link for the participant's own browser (never fetched
    by the server), but it must still be https and carry the ``{code}`` placeholder exactly once."""
    from django.core.exceptions import ValidationError

    if not value:
        return
    parts = urlsplit(value)
    if parts.scheme != "https" or not parts.netloc:
        raise ValidationError("The completion URL must be an https:// address.")
    if value.count("{code}") != 1:
        raise ValidationError("Write {code} exactly once where the completion code goes.")
    if "{" in value.replace("{code}", "") or "}" in value.replace("{code}", ""):
        raise ValidationError("The only placeholder a completion URL may hold is {code}.")


class Study(models.Model):
    """A campaign's public link for a crowd vendor. Participants arrive with the vendor's ids in the
    URL, get an account without a password, join ``pool``, rate ``target_votes`` battles and leave
    with ``completion_code``. A separate table rather than fields on Campaign: one campaign may run
    several studies at once (a Prolific wave and another vendor's), each with its own code and target."""

    class Vendor(models.TextChoices):
        PROLIFIC = "prolific", "Prolific (PROLIFIC_PID, STUDY_ID, SESSION_ID)"
        GENERIC = "generic", "Other vendor (worker_id, assignment_id)"

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="studies")
    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="studies")
    name = models.CharField(max_length=200)
    vendor = models.CharField(max_length=16, choices=Vendor.choices, default=Vendor.PROLIFIC)
    slug = models.CharField(max_length=40, unique=True, default=_study_slug, editable=False)
    pool = models.ForeignKey(
        RaterPool,
        on_delete=models.PROTECT,
        related_name="studies",
        help_text="Participants join this pool; it must be one of the campaign's rater pools.",
    )
    target_votes = models.PositiveIntegerField(
        default=20, validators=[MinValueValidator(1)], help_text="Votes each participant casts to complete."
    )
    completion_code = models.CharField(
        max_length=64, validators=[RegexValidator(r"^[A-Za-z0-9_-]+$", "Letters, digits, - and _ only.")]
    )
    completion_url = models.CharField(
        max_length=500,
        blank=True,
        validators=[completion_url_validate],
        help_text="Other vendors: an https URL with {code} where the code goes (a link the participant "
        "follows; the server never fetches it). Prolific: leave empty.",
    )
    time_limit_min = models.PositiveIntegerField(
        default=60,
        validators=[MinValueValidator(1), MaxValueValidator(24 * 60)],
        help_text="Minutes a participant has from entering; after that their open battle is voided.",
    )
    instructions = models.TextField(blank=True, help_text="Markdown, shown before the first battle.")
    consent_text = models.TextField(
        blank=True, help_text="Markdown; when given, participants must agree before any battle is shown."
    )
    active = models.BooleanField(default=True, help_text="An inactive study's link answers 'not found'.")
    attribute_parameters = models.JSONField(
        default=dict,
        blank=True,
        validators=[attribute_parameters_validate],
        help_text='Rater attributes read from the link when a participant first arrives: {"link parameter": '
        '"attribute key"}, e.g. {"lang": "language", "expertise": "expertise"}; add the parameters to the link '
        "you give the vendor (a fixed value, or the vendor's placeholder).",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    objects = TenantManager()

    class Meta:
        ordering = ["organization", "campaign", "name"]
        verbose_name_plural = "studies"

    def __str__(self) -> str:
        return self.name

    @property
    def path(self) -> str:
        return f"/s/{self.slug}/"

    def completion_link(self) -> str:
        template = PROLIFIC_COMPLETION_URL if self.vendor == self.Vendor.PROLIFIC else self.completion_url
        return template.replace("{code}", quote(self.completion_code, safe="")) if template else ""

    def clean(self) -> None:
        from django.core.exceptions import ValidationError

        errors: dict[str, str] = {}
        campaign = getattr(self, "campaign", None)
        pool = getattr(self, "pool", None)
        if (
            campaign is not None
            and self.organization_id is not None
            and campaign.organization_id != self.organization_id
        ):
            errors["campaign"] = "The campaign must belong to the study's organisation."
        if pool is not None and self.organization_id is not None and pool.organization_id != self.organization_id:
            errors["pool"] = "The pool must belong to the study's organisation."
        elif pool is not None and campaign is not None and campaign.pk is not None:
            if not campaign.rater_pools.filter(pk=pool.pk).exists():
                errors["pool"] = "The pool must be one of the campaign's rater pools, or nobody in it can vote."
        if campaign is not None and "campaign" not in errors:
            caps = [campaign.session_cap] + ([campaign.rater_vote_cap] if campaign.rater_vote_cap else [])
            if self.target_votes is not None and self.target_votes > min(caps):
                errors["target_votes"] = (
                    f"The campaign stops a rater after {min(caps)} battles (session or rater cap): "
                    "raise that cap or lower the target."
                )
        if self.pk is not None and "campaign" not in errors:
            # A participant's id is unique per campaign and vendor (Participant carries both, copied from
            # its study): moving a study with participants would let one person count twice elsewhere.
            before = Study.objects.filter(pk=self.pk).values("campaign_id", "vendor").first()
            moved = before is not None and (before["campaign_id"], before["vendor"]) != (self.campaign_id, self.vendor)
            if moved and self.participants.exists():
                errors["campaign"] = "This study has participants: its campaign and vendor can no longer change."
        if self.vendor == self.Vendor.GENERIC and not self.completion_url:
            errors["completion_url"] = "Other vendors need a completion URL with {code}."
        if self.vendor == self.Vendor.PROLIFIC and self.completion_url:
            errors["completion_url"] = "Prolific's completion URL is fixed; leave this empty."
        if errors:
            raise ValidationError(errors)


class Participant(models.Model):
    """One vendor participant of a study: their account (no password), when they entered, agreed and
    completed. The vendor's id stays here (for the organisation's managers, who pay them); the vote
    log knows only the account's id. ``campaign`` and ``vendor`` are copied from the study so the
    database can hold a vendor's id to one participation per campaign, across all its studies."""

    class Status(models.TextChoices):
        ACTIVE = "active", "Rating"
        COMPLETED = "completed", "Completed"
        DECLINED = "declined", "Declined consent"
        TIMED_OUT = "timed_out", "Time ran out"
        LEFT = "left", "Left the study (returned)"

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="participants")
    study = models.ForeignKey(Study, on_delete=models.PROTECT, related_name="participants")
    campaign = models.ForeignKey(
        Campaign, on_delete=models.CASCADE, related_name="participants", editable=False, help_text="The study's."
    )
    vendor = models.CharField(max_length=16, choices=Study.Vendor.choices, editable=False, help_text="The study's.")
    vendor_participant_id = models.CharField(max_length=64)
    vendor_study_id = models.CharField(max_length=64, blank=True)
    external_session_id = models.CharField(max_length=128, blank=True, help_text="SESSION_ID or assignment_id.")
    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="participant")
    status = models.CharField(max_length=12, choices=Status.choices, default=Status.ACTIVE)
    entered_at = models.DateTimeField(default=timezone.now)
    consented_at = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True, help_text="Declined, timed out or left.")
    completed_at = models.DateTimeField(null=True, blank=True)

    objects = TenantManager()

    class Meta:
        constraints = [
            # One person, one participation per campaign: a second study of the same campaign would
            # otherwise give the same vendor id a second account rating the same battles.
            models.UniqueConstraint(
                fields=["campaign", "vendor", "vendor_participant_id"], name="participant_unique_per_campaign"
            )
        ]
        ordering = ["study", "-entered_at"]

    def __str__(self) -> str:
        return f"Participant {self.pk} of {self.study}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        self.campaign_id = self.study.campaign_id
        self.vendor = self.study.vendor
        super().save(*args, **kwargs)

    @property
    def deadline(self) -> Any:
        return self.entered_at + timedelta(minutes=self.study.time_limit_min)
