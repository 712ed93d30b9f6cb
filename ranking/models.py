"""Leaderboard snapshots: derived data, recomputed from the vote log, versioned, never edited."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from battles.models import Campaign
from raters.models import Organization
from raters.tenancy import TenantManager


class LeaderboardSnapshot(models.Model):
    class View(models.TextChoices):
        RAW = "raw", "Raw"
        STYLE = "style", "Style-controlled"
        RELIABILITY = "reliability", "Reliability-weighted"

    OVERALL = ""

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="snapshots")
    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="snapshots")
    category = models.CharField(max_length=32, blank=True, help_text="Empty: all categories.")
    view = models.CharField(max_length=16, choices=View.choices)
    version = models.PositiveIntegerField(help_text="Counts up per campaign with every recompute.")
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    last_vote_id = models.BigIntegerField(default=0, help_text="The newest vote the snapshot saw.")
    votes_total = models.PositiveIntegerField(default=0)
    votes_used = models.PositiveIntegerField(default=0)
    method = models.JSONField(help_text="Estimator and parameters: tie and both-bad rules, rounds, seed, anchor.")
    policy = models.JSONField(help_text="The exclusion policy applied when the votes were loaded.")
    excluded = models.JSONField(help_text="Votes each exclusion rule left out.")
    rows = models.JSONField(help_text="Per competitor: score, interval, rank range, votes, win and tie rates.")
    pairwise = models.JSONField(default=dict, help_text="Pairwise win rates with Wilson intervals.")
    extra = models.JSONField(default=dict, help_text="Style coefficients, components, Elo, intransitivity.")
    compute_seconds = models.FloatField(default=0.0)

    objects = TenantManager()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["campaign", "category", "view", "version"], name="snapshot_unique_version")
        ]
        indexes = [models.Index(fields=["campaign", "category", "view", "-version"])]
        ordering = ["-version"]

    def __str__(self) -> str:
        return f"{self.campaign} {self.category or 'overall'} {self.view} v{self.version}"


class BoardPublication(models.Model):
    """A campaign's leaderboard published at a public, unguessable address (``/boards/<slug>/``).

    The slug is random (not the campaign's or the organisation's slug), so an unpublished board cannot
    be found by guessing, and publishing again after an unpublish hands out a new address. A campaign
    has at most one publication; unpublishing deletes it (the audit log keeps the history). What a
    published board shows: scores, intervals, rank ranges, vote counts and the method of the newest
    snapshots; never a rater; prompt texts only when ``show_prompts`` is set."""

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="board_publications")
    campaign = models.OneToOneField(Campaign, on_delete=models.CASCADE, related_name="publication")
    slug = models.CharField(max_length=32, unique=True, editable=False)
    published_at = models.DateTimeField(auto_now_add=True)
    published_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    show_prompts = models.BooleanField(
        default=False, help_text="Also publish the texts of the campaign's active pool prompts."
    )

    objects = TenantManager()

    class Meta:
        ordering = ["-published_at"]
        verbose_name = "published board"

    def __str__(self) -> str:
        return f"{self.campaign} at /boards/{self.slug}/"
