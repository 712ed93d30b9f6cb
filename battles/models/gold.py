"""Gold battles and attention checks (answer pairs with a known verdict) and raters' qualification outcomes."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

from raters.models import Organization
from raters.tenancy import TenantManager

from ..prompting import CATEGORIES
from .campaigns import Campaign


class GoldItem(models.Model):
    """An answer pair with a known verdict, written by a manager: a **gold** item (one answer is known
    to be better, or both are known to be bad) or an **attention** check (one answer is obviously
    broken; ``attention_answer_corrupt`` makes one from any answer). Served to raters as ordinary-looking
    battles at the campaign's ``gold_rate``; its votes stay in the log (``source = gold``) and never
    reach a ranking. The answers are labelled answer 1 / answer 2, never by model."""

    class Expected(models.TextChoices):
        ANSWER_1 = "answer_1", "Answer 1 is better"
        ANSWER_2 = "answer_2", "Answer 2 is better"
        BOTH_BAD = "both_bad", "Both are bad"

    class Kind(models.TextChoices):
        GOLD = "gold", "Gold battle"
        ATTENTION = "attention", "Attention check (one answer obviously broken)"

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="gold_items")
    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="gold_items")
    prompt_text = models.TextField()
    category = models.CharField(max_length=32, choices=[(c, c) for c in CATEGORIES], default="other")
    language = models.CharField(max_length=8, default="und")
    answer_1 = models.TextField()
    answer_2 = models.TextField()
    expected = models.CharField(max_length=8, choices=Expected.choices)
    kind = models.CharField(max_length=10, choices=Kind.choices, default=Kind.GOLD)
    active = models.BooleanField(default=True, help_text="Inactive items are served no more.")
    note = models.CharField(max_length=300, blank=True, help_text="For managers: why this verdict.")
    created_at = models.DateTimeField(auto_now_add=True)

    objects = TenantManager()

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=models.Q(expected__in=["answer_1", "answer_2", "both_bad"]), name="gold_known_expected"
            ),
            # An attention check has a broken side, so the other one is the answer to pick.
            models.CheckConstraint(
                condition=~models.Q(kind="attention", expected="both_bad"), name="gold_attention_has_a_side"
            ),
        ]
        ordering = ["campaign", "id"]

    def __str__(self) -> str:
        return f"{self.get_kind_display()} {self.pk}: {self.prompt_text[:60]}"

    def clean(self) -> None:
        from django.core.exceptions import ValidationError

        if self.kind == self.Kind.ATTENTION and self.expected == self.Expected.BOTH_BAD:
            raise ValidationError({"expected": "An attention check has one good answer: choose answer 1 or 2."})
        if self.answer_1.strip() and self.answer_1.strip() == self.answer_2.strip():
            raise ValidationError({"answer_2": "The two answers are the same."})
        campaign = getattr(self, "campaign", None)
        if (
            campaign is not None
            and self.organization_id is not None
            and campaign.organization_id != self.organization_id
        ):
            raise ValidationError({"campaign": "The campaign must belong to the item's organisation."})


class Qualification(models.Model):
    """The outcome of a rater's qualification in a campaign (``Campaign.qualification_battles`` gold
    battles before any real one): one row, written when the last of them is voted on, never changed.
    A rater without a row is still qualifying; ``failed`` gets no real battle in the campaign."""

    class Status(models.TextChoices):
        PASSED = "passed", "Passed"
        FAILED = "failed", "Failed"

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="qualifications")
    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="qualifications")
    rater = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="qualifications")
    status = models.CharField(max_length=8, choices=Status.choices)
    answered = models.PositiveIntegerField()
    correct = models.PositiveIntegerField()
    score = models.FloatField(help_text="correct / answered")
    threshold = models.FloatField(help_text="The pass mark in force when it was decided.")
    last_vote_id = models.BigIntegerField(help_text="The vote that completed the qualification.")
    decided_at = models.DateTimeField(default=timezone.now)

    objects = TenantManager()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["campaign", "rater"], name="qualification_one_per_rater")]
        ordering = ["campaign", "-decided_at"]

    def __str__(self) -> str:
        return f"{self.rater} {self.status} the qualification of {self.campaign} ({self.correct}/{self.answered})"
