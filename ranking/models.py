"""Leaderboard snapshots: derived data, recomputed from the vote log, versioned, never edited."""

from __future__ import annotations

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
