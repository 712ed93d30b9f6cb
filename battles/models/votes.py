"""The append-only vote log: one row per vote, everything a ranking needs, never updated or deleted."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models

from raters.models import Organization, RaterPool
from raters.tenancy import TenantManager

from .battles import Battle, BattleSource
from .campaigns import Campaign, Competitor, Prompt


class Choice(models.TextChoices):
    LEFT = "left", "A is better"
    RIGHT = "right", "B is better"
    TIE = "tie", "Tie"
    BOTH_BAD = "both_bad", "Both are bad"


class AppendOnlyError(Exception):
    pass


class AppendOnlyQuerySet(models.QuerySet["Vote"]):
    def update(self, **kwargs: Any) -> int:
        raise AppendOnlyError("The vote log is append-only: votes are never updated.")

    def delete(self) -> tuple[int, dict[str, int]]:
        raise AppendOnlyError("The vote log is append-only: votes are never deleted.")

    _raw_delete = delete  # type: ignore[assignment]


VoteManager = TenantManager.from_queryset(AppendOnlyQuerySet)


class Vote(models.Model):
    """One event of the vote log: everything needed to recompute any ranking later, denormalised so
    the log stands alone. Later judgements about a vote are new rows pointing at it, never edits."""

    organization = models.ForeignKey(Organization, on_delete=models.PROTECT, related_name="votes")
    campaign = models.ForeignKey(Campaign, on_delete=models.PROTECT, related_name="votes")
    battle = models.OneToOneField(Battle, on_delete=models.PROTECT, related_name="vote")
    created_at = models.DateTimeField(db_index=True)
    rater = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="votes")
    pool = models.ForeignKey(RaterPool, on_delete=models.PROTECT, related_name="votes")
    prompt = models.ForeignKey(Prompt, on_delete=models.PROTECT, related_name="votes")
    prompt_hash = models.CharField(max_length=64, db_index=True)
    category = models.CharField(max_length=32)
    language = models.CharField(max_length=8)
    prompt_source = models.CharField(max_length=8)
    left = models.ForeignKey(Competitor, on_delete=models.PROTECT, related_name="+")
    right = models.ForeignKey(Competitor, on_delete=models.PROTECT, related_name="+")
    left_model = models.CharField(max_length=120)
    left_version = models.CharField(max_length=80)
    left_tokens = models.PositiveIntegerField()
    left_finish_reason = models.CharField(max_length=16)
    left_latency_s = models.FloatField()
    right_model = models.CharField(max_length=120)
    right_version = models.CharField(max_length=80)
    right_tokens = models.PositiveIntegerField()
    right_finish_reason = models.CharField(max_length=16)
    right_latency_s = models.FloatField()
    params = models.JSONField()
    choice = models.CharField(max_length=8, choices=Choice.choices)
    decision_ms = models.PositiveIntegerField()
    left_style = models.JSONField()
    right_style = models.JSONField()
    prompt_asks_identity = models.BooleanField()
    answer_names_model = models.BooleanField()
    # A multi-turn battle: every turn, the first included, as {"index", "prompt_hash", "asks_identity",
    # "left": {"tokens", "finish_reason", "latency_s", "ttft_s", "names_model"}, "right": {...}}; the
    # *_tokens, *_latency_s and *_style fields above then sum all turns and the two flags cover every
    # turn. Null for a one-turn battle. (Nullable without a default, so adding it never rewrites the log.)
    turns = models.JSONField(null=True, blank=True)
    # Database defaults too: rows written by raw SQL (bulk loads, COPY) need not name the new columns.
    source = models.CharField(
        max_length=12, choices=BattleSource.choices, default=BattleSource.GENERATED, db_default=BattleSource.GENERATED
    )

    objects = VoteManager()

    class Meta:
        constraints = [models.CheckConstraint(condition=models.Q(choice__in=Choice.values), name="vote_known_choice")]
        indexes = [
            models.Index(fields=["campaign", "created_at"]),
            # The checks a claim makes against a log of a million votes: the prompt-hash cap, the rater's cap.
            models.Index(fields=["campaign", "prompt_hash"]),
            models.Index(fields=["campaign", "rater"]),
        ]
        ordering = ["id"]

    def __str__(self) -> str:
        return f"Vote {self.pk} on {self.battle_id}: {self.choice}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        if not self._state.adding:
            raise AppendOnlyError("The vote log is append-only: votes are never updated.")
        super().save(*args, **kwargs)

    def delete(self, *args: Any, **kwargs: Any) -> tuple[int, dict[str, int]]:
        raise AppendOnlyError("The vote log is append-only: votes are never deleted.")

    def as_event(self) -> dict[str, Any]:
        """The battle record as exported: the fields DESIGN.md §4 names, nothing derived later."""
        return {
            "battle_id": str(self.battle_id),
            "vote_id": self.pk,
            "timestamp": self.created_at.isoformat(),
            "campaign_id": self.campaign_id,
            "source": self.source,
            "rater_id": self.rater_id,
            "pool_id": self.pool_id,
            "prompt": {
                "id": self.prompt_id,
                "hash": self.prompt_hash,
                "category": self.category,
                "language": self.language,
                "source": self.prompt_source,
            },
            "left": {
                "competitor_id": self.left_id,
                "model": self.left_model,
                "version": self.left_version,
                "output_tokens": self.left_tokens,
                "finish_reason": self.left_finish_reason,
                "latency_s": self.left_latency_s,
                "style": self.left_style,
            },
            "right": {
                "competitor_id": self.right_id,
                "model": self.right_model,
                "version": self.right_version,
                "output_tokens": self.right_tokens,
                "finish_reason": self.right_finish_reason,
                "latency_s": self.right_latency_s,
                "style": self.right_style,
            },
            "params": self.params,
            "vote": self.choice,
            "decision_ms": self.decision_ms,
            "identity": {
                "prompt_asks_identity": self.prompt_asks_identity,
                "answer_names_model": self.answer_names_model,
            },
        }
