"""Leaderboard snapshots: derived data, recomputed from the vote log, versioned, never edited."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from battles.models import Campaign, Judge, JudgeRun, Rubric
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


class JudgeBoard(models.Model):
    """A judge's leaderboard of one campaign: the same estimator as the human boards (``ranking.compute``),
    fitted on that judge's counterbalanced verdicts only (``battles.JudgeVerdict``), never on a human
    vote and never on another judge's. Versioned per (campaign, judge), like the human snapshots."""

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="judge_boards")
    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="judge_boards")
    judge = models.ForeignKey(Judge, on_delete=models.CASCADE, related_name="boards")
    rubric = models.ForeignKey(Rubric, on_delete=models.CASCADE, related_name="boards")
    run = models.ForeignKey(
        JudgeRun, on_delete=models.SET_NULL, null=True, blank=True, related_name="boards", help_text="The newest run."
    )
    # "battles": the newest verdict per battle, across the judge's runs; "golden": one golden run's verdicts.
    kind = models.CharField(max_length=8, choices=JudgeRun.Kind.choices, default=JudgeRun.Kind.BATTLES)
    version = models.PositiveIntegerField()
    created_at = models.DateTimeField(auto_now_add=True)
    last_verdict_id = models.BigIntegerField(default=0)
    verdicts_total = models.PositiveIntegerField(default=0, help_text="Pairs asked, refusals included.")
    verdicts_used = models.PositiveIntegerField(default=0, help_text="Counterbalanced verdicts ranked.")
    verdicts_refused = models.PositiveIntegerField(default=0)
    verdicts_inconsistent = models.PositiveIntegerField(default=0, help_text="Order disagreements, ranked as ties.")
    method = models.JSONField()
    rows = models.JSONField()
    pairwise = models.JSONField(default=dict)
    extra = models.JSONField(default=dict)

    objects = TenantManager()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["campaign", "judge", "kind", "version"], name="judge_board_unique_version")
        ]
        ordering = ["-version"]

    def __str__(self) -> str:
        return f"{self.judge} on {self.campaign} v{self.version}"


class CalibrationGate(models.TextChoices):
    INSUFFICIENT = "insufficient", "Too few battles to say"
    NEEDS_WORK = "needs_work", "Rubric needs work (agreement under 75%)"
    WITH_HUMANS = "with_humans", "Use alongside human votes (75% to 90%)"
    MAY_RUN_ALONE = "may_run_alone", "May run alone on this category (90% or more)"


class JudgeCalibration(models.Model):
    """How well one judge (so one rubric version) agrees with the human votes of one campaign, overall
    (``category`` empty) and per category: one row per category per calibration; a new rubric version is
    a new judge, hence a new calibration, and the old rows stay attached to the old version."""

    Gate = CalibrationGate

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="judge_calibrations")
    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="judge_calibrations")
    judge = models.ForeignKey(Judge, on_delete=models.CASCADE, related_name="calibrations")
    rubric = models.ForeignKey(Rubric, on_delete=models.CASCADE, related_name="calibrations")
    run = models.ForeignKey(JudgeRun, on_delete=models.SET_NULL, null=True, blank=True, related_name="calibrations")
    version = models.PositiveIntegerField(help_text="Counts up per (campaign, judge) with every calibration.")
    category = models.CharField(max_length=32, blank=True, help_text="Empty: all categories.")
    battles = models.PositiveIntegerField(help_text="Battles with a human vote and a judge verdict (not refused).")
    refused = models.PositiveIntegerField(default=0, help_text="Human-voted battles the judge refused.")
    agreement = models.FloatField(null=True, blank=True)
    agreement_lower = models.FloatField(null=True, blank=True)
    agreement_upper = models.FloatField(null=True, blank=True)
    kappa = models.FloatField(null=True, blank=True)
    kappa_lower = models.FloatField(null=True, blank=True)
    kappa_upper = models.FloatField(null=True, blank=True)
    kappa_note = models.CharField(max_length=300, blank=True, help_text="Why kappa is missing, when it is.")
    gate = models.CharField(max_length=16, choices=CalibrationGate.choices)
    table = models.JSONField(
        default=list, help_text="4 x 4 counts: rows human, columns judge (left, right, tie, both_bad)."
    )
    created_at = models.DateTimeField(auto_now_add=True)

    objects = TenantManager()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["campaign", "judge", "version", "category"], name="judge_calibration_unique_category"
            )
        ]
        ordering = ["-version", "category"]

    def __str__(self) -> str:
        return f"{self.judge} on {self.campaign} {self.category or 'overall'}: {self.gate}"
