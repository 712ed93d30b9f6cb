"""Leaderboard snapshots: derived data, recomputed from the vote log, versioned, never edited."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models
from django.utils import timezone

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
    pairwise = models.JSONField(
        default=dict,
        help_text="The pairwise section: competitors, Holm correction, triads, the anytime-valid rule, difference "
        "intervals (up to 60 competitors); the per-pair grids are in pairwise_arrays.",
    )
    pairwise_arrays = models.BinaryField(
        default=b"",
        blank=True,
        help_text="Every pair's win rate, Wilson interval, p-values, battles and anytime-valid sequence: k x k "
        "grids, compact (ranking.board_pairwise.PairwiseGrids); empty before they were stored apart.",
    )
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
    listed = models.BooleanField(
        default=False,
        help_text="Listed in the public index of published boards (/boards/); unlisted: reachable only by its address.",
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
    pairwise_arrays = models.BinaryField(default=b"", blank=True, help_text="As LeaderboardSnapshot's.")
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
    """Read from the agreement's 95% Wilson interval, never its point estimate alone (``GATE_RULE``)."""

    INSUFFICIENT = "insufficient", "Too few battles to tell (under 20, or the interval spans 75%)"
    NEEDS_WORK = "needs_work", "Rubric needs work (the interval lies under 75%)"
    WITH_HUMANS = "with_humans", "Use alongside human votes (the interval's lower end 75% or more)"
    MAY_RUN_ALONE = "may_run_alone", "May run alone on this category (the interval's lower end 90% or more)"


class JudgeCalibration(models.Model):
    """How well one judge (so one rubric version) agrees with the human votes of one campaign, overall
    (``category`` empty) and per category: one row per category per calibration; a new rubric version is
    a new judge, hence a new calibration, and the old rows stay attached to the old version. The human
    votes are exactly those the human board uses (the campaign's exclusion policy); ``extra`` says how many
    were used and how many were left out, by which rule."""

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
    extra = models.JSONField(
        default=dict,
        blank=True,
        help_text="The human votes' account (human_votes, used, refused, excluded per rule of the board's "
        "exclusion policy, the policy itself) and the gate rule the gate was read under.",
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


# --- Attribute boards (ratio judgements) ---------------------------------------------------------------


class LedgerAppendOnlyError(Exception):
    pass


class AttributeBoard(models.Model):
    """A set of entities (texts) ranked on one natural-language attribute by a judge's ratio judgements.

    The judge (a ``battles.Judge`` whose rubric is of kind ratio) sees two entities and says which has
    more of the attribute and by roughly what ratio. A run spends at most ``calls_per_entity`` judge
    calls per entity (each pair is judged in both orders: two calls), chosen by the adaptive design
    near the ``top_k`` boundary. ``public_slug`` is set while the board is published (a random
    address, like a campaign's published board; a new one after each unpublish)."""

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="attribute_boards")
    name = models.CharField(max_length=120)
    attribute = models.TextField(help_text="The attribute, in words: e.g. 'how formal the text is'.")
    judge = models.ForeignKey(Judge, on_delete=models.PROTECT, related_name="attribute_boards")
    seed = models.PositiveIntegerField(default=0, help_text="Seeds the design's exploration and the sd probes.")
    calls_per_entity = models.PositiveIntegerField(default=8, help_text="Judge calls a run may spend per entity.")
    top_k = models.PositiveIntegerField(default=10, help_text="The boundary the design concentrates on.")
    batch_size = models.PositiveIntegerField(default=16, help_text="Pairs proposed per batch (two calls each).")
    public_slug = models.CharField(max_length=32, null=True, blank=True, unique=True, editable=False)
    published_at = models.DateTimeField(null=True, blank=True, editable=False)
    public_listed = models.BooleanField(
        default=False,
        editable=False,
        help_text="While published: listed in the public index of published boards (/boards/).",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    objects = TenantManager()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["organization", "name"], name="attribute_board_unique_name"),
            models.CheckConstraint(condition=models.Q(calls_per_entity__gte=2), name="attribute_board_budget_min"),
            models.CheckConstraint(condition=models.Q(top_k__gte=1), name="attribute_board_top_k_min"),
            models.CheckConstraint(condition=models.Q(batch_size__gte=1), name="attribute_board_batch_min"),
        ]
        ordering = ["organization", "name"]

    def __str__(self) -> str:
        return self.name


class AttributeEntity(models.Model):
    """One thing ranked on a board. ``position`` (0, 1, ...) is its index in the estimator's arrays."""

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="attribute_entities")
    board = models.ForeignKey(AttributeBoard, on_delete=models.CASCADE, related_name="entities")
    position = models.PositiveIntegerField()
    label = models.CharField(max_length=200, blank=True, help_text="An optional external id or short name.")
    text = models.TextField()
    created_at = models.DateTimeField(auto_now_add=True)

    objects = TenantManager()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["board", "position"], name="attribute_entity_unique_position"),
        ]
        ordering = ["board", "position"]
        verbose_name_plural = "attribute entities"

    def __str__(self) -> str:
        if self.label:
            return self.label
        return self.text if len(self.text) <= 60 else self.text[:59] + "…"


class AttributeRun(models.Model):
    """One run of a board's judge over its entities, with its provenance: which judge (and rubric hash),
    which prompt template, which seed, how many calls of each outcome, tokens, cost, how it stopped.
    Another judge may run on the same board (their agreement is a replication check)."""

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="attribute_runs")
    board = models.ForeignKey(AttributeBoard, on_delete=models.PROTECT, related_name="runs")
    judge = models.ForeignKey(Judge, on_delete=models.PROTECT, related_name="attribute_runs")
    attribute = models.TextField(help_text="The board's attribute as the judge read it in this run.")
    rubric_hash = models.CharField(max_length=64)
    template_hash = models.CharField(max_length=64)
    model_name = models.CharField(max_length=200, help_text="The judge's served model, as called.")
    seed = models.PositiveIntegerField()
    top_k = models.PositiveIntegerField()
    batch_size = models.PositiveIntegerField()
    entities = models.PositiveIntegerField(default=0)
    budget_calls = models.PositiveIntegerField()
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    stop_reason = models.CharField(max_length=20, blank=True, help_text="separated, budget or exhausted.")
    failure_reason = models.TextField(blank=True)
    calls = models.PositiveIntegerField(default=0)
    accepted = models.PositiveIntegerField(default=0)
    refused = models.PositiveIntegerField(default=0)
    malformed = models.PositiveIntegerField(default=0)
    call_errors = models.PositiveIntegerField(default=0, help_text="Calls that failed (no reply).")
    pairs = models.PositiveIntegerField(default=0, help_text="Pairs judged (each in both orders).")
    pairs_refused = models.PositiveIntegerField(default=0)
    checks = models.PositiveIntegerField(default=0, help_text="Stopping-rule looks.")
    output_tokens = models.PositiveIntegerField(default=0)
    call_seconds = models.FloatField(default=0.0, help_text="Sum of the calls' latencies: the judge's cost.")
    degraded = models.BooleanField(default=False)
    solve = models.JSONField(default=dict, help_text="The final fit: hash, dispersion, cyclic share, components.")
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    objects = TenantManager()

    class Meta:
        ordering = ["-id"]
        indexes = [models.Index(fields=["board", "-id"])]

    def __str__(self) -> str:
        return f"{self.board} run {self.pk} ({self.status})"


class LedgerQuerySet(models.QuerySet["AttributeJudgement"]):
    def update(self, **kwargs: Any) -> int:
        raise LedgerAppendOnlyError("The judgement ledger is append-only: judgements are never updated.")

    def delete(self) -> tuple[int, dict[str, int]]:
        raise LedgerAppendOnlyError("The judgement ledger is append-only: judgements are never deleted.")

    _raw_delete = delete  # type: ignore[assignment]


LedgerManager = TenantManager.from_queryset(LedgerQuerySet)


class AttributeJudgement(models.Model):
    """One judge call of a run, exactly as it happened: which entity was shown as A and which as B, the
    raw reply, what the strict parse made of it, tokens and latency. Append-only: a later view of a
    judgement is never an edit (``refused`` covers the judge's refusals, ``malformed`` replies that did
    not parse, ``error`` calls that failed; none of them reaches the estimator)."""

    class Status(models.TextChoices):
        ACCEPTED = "accepted", "Accepted"
        REFUSED = "refused", "Refused"
        MALFORMED = "malformed", "Malformed (a refusal)"
        ERROR = "error", "Call failed"

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="attribute_judgements")
    run = models.ForeignKey(AttributeRun, on_delete=models.PROTECT, related_name="judgements")
    first = models.ForeignKey(AttributeEntity, on_delete=models.PROTECT, related_name="+", help_text="Shown as A.")
    second = models.ForeignKey(AttributeEntity, on_delete=models.PROTECT, related_name="+", help_text="Shown as B.")
    order = models.PositiveSmallIntegerField(help_text="1: the pair's first presentation; 2: swapped.")
    batch = models.PositiveIntegerField()
    status = models.CharField(max_length=10, choices=Status.choices)
    raw_reply = models.TextField(blank=True)
    more = models.CharField(max_length=1, blank=True, help_text="A or B, as the judge said.")
    ratio = models.FloatField(null=True, blank=True)
    log_ratio = models.FloatField(null=True, blank=True, help_text="log(first / second).")
    confidence = models.FloatField(null=True, blank=True, help_text="As stated; recorded, never a weight.")
    used = models.BooleanField(
        default=False, help_text="Reached the estimator: accepted, and so was the pair's other order."
    )
    reason = models.TextField(blank=True, help_text="The refusal, the parse failure, or the call's error.")
    output_tokens = models.PositiveIntegerField(default=0)
    latency_s = models.FloatField(default=0.0)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = LedgerManager()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["run", "first", "second"], name="attribute_judgement_once_per_order"),
            # Only an accepted judgement with a value can reach the estimator.
            models.CheckConstraint(
                condition=models.Q(used=False) | models.Q(status="accepted", log_ratio__isnull=False),
                name="attribute_judgement_used_is_accepted",
            ),
        ]
        ordering = ["id"]

    def __str__(self) -> str:
        return f"run {self.run_id}: {self.first_id} vs {self.second_id} ({self.status})"

    def save(self, *args: Any, **kwargs: Any) -> None:
        if not self._state.adding:
            raise LedgerAppendOnlyError("The judgement ledger is append-only: judgements are never updated.")
        super().save(*args, **kwargs)

    def delete(self, *args: Any, **kwargs: Any) -> tuple[int, dict[str, int]]:
        raise LedgerAppendOnlyError("The judgement ledger is append-only: judgements are never deleted.")


class AttributeScore(models.Model):
    """An entity's place in a finished run: score (natural-log attribute, component minimum 0), sd,
    z-score against the top-k boundary, percentile, 95% interval and the run's stop reason."""

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="attribute_scores")
    run = models.ForeignKey(AttributeRun, on_delete=models.CASCADE, related_name="scores")
    entity = models.ForeignKey(AttributeEntity, on_delete=models.PROTECT, related_name="scores")
    rank = models.PositiveIntegerField()
    score = models.FloatField()
    std = models.FloatField(null=True, help_text="Null when the entity was never compared.")
    z_score = models.FloatField(null=True)
    percentile = models.FloatField()
    lower = models.FloatField(null=True)
    upper = models.FloatField(null=True)
    in_top_k = models.BooleanField()
    comparisons = models.PositiveIntegerField()
    stop_reason = models.CharField(max_length=20)

    objects = TenantManager()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["run", "entity"], name="attribute_score_unique_entity"),
            models.UniqueConstraint(fields=["run", "rank"], name="attribute_score_unique_rank"),
        ]
        ordering = ["run", "rank"]

    def __str__(self) -> str:
        return f"run {self.run_id} #{self.rank}: {self.entity_id}"


class PromotionDecisionAppendOnlyError(Exception):
    """A promotion's decisions are a record: never updated, never deleted (but with their promotion)."""


class Promotion(models.Model):
    """A board's winner rolled out in stages through a sticky A/B experiment, as a canary: the promoted
    variant's share of units is raised stage by stage (``Experiment.rollout_share``), each stage advancing
    only when the campaign's overall raw board still supports the variant against its baseline and has
    enough new votes on it, and rolled back when the board turns against it. The state here changes; every
    decision is a new ``PromotionDecision`` row."""

    class Status(models.TextChoices):
        RUNNING = "running", "Running"
        COMPLETED = "completed", "Completed"
        ROLLED_BACK = "rolled_back", "Rolled back (the board turned against it)"
        STOPPED = "stopped", "Stopped by a manager"

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="promotions")
    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="promotions")
    experiment = models.ForeignKey("battles.Experiment", on_delete=models.CASCADE, related_name="promotions")
    variant = models.ForeignKey(
        "battles.Variant", on_delete=models.CASCADE, related_name="promotions", help_text="The variant promoted."
    )
    baseline = models.ForeignKey(
        "battles.Variant",
        on_delete=models.CASCADE,
        related_name="+",
        help_text="The variant it is watched against on the board (their competitors' difference).",
    )
    stages = models.JSONField(help_text="Shares of units, increasing, each in (0, 1]: e.g. [0.05, 0.25, 0.5, 1].")
    stage = models.PositiveSmallIntegerField(default=0, help_text="Index of the current stage in stages.")
    min_votes = models.PositiveIntegerField(
        default=200, help_text="New votes on the promoted competitor (on the board) a stage needs before it advances."
    )
    status = models.CharField(max_length=12, choices=Status.choices, default=Status.RUNNING)
    stage_started_at = models.DateTimeField(default=timezone.now)
    stage_votes_at_start = models.PositiveIntegerField(
        default=0, help_text="The promoted competitor's votes on the board when the stage began."
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    ended_at = models.DateTimeField(null=True, blank=True)

    objects = TenantManager()

    class Meta:
        constraints = [
            # One rollout at a time per experiment: its overlay holds one variant.
            models.UniqueConstraint(
                fields=["experiment"], condition=models.Q(status="running"), name="promotion_one_running"
            ),
        ]
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"promotion of {self.variant_id} in {self.experiment_id} ({self.status})"

    @property
    def share(self) -> float:
        return float(self.stages[self.stage])


class PromotionDecisionQuerySet(models.QuerySet["PromotionDecision"]):
    def update(self, **kwargs: Any) -> int:
        raise PromotionDecisionAppendOnlyError("A promotion's decisions are never updated.")


PromotionDecisionManager = TenantManager.from_queryset(PromotionDecisionQuerySet)


class PromotionDecision(models.Model):
    """One decision of a promotion, as it was taken: the stage and share it left in force, what the board
    said (its version and figures) and why. A hold is recorded when its reason changes, not at every check."""

    class Action(models.TextChoices):
        START = "start", "Started"
        ADVANCE = "advance", "Advanced to the next stage"
        HOLD = "hold", "Held at this stage"
        ROLLBACK = "rollback", "Rolled back"
        COMPLETE = "complete", "Completed"
        STOP = "stop", "Stopped by a manager"

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="+")
    promotion = models.ForeignKey(Promotion, on_delete=models.CASCADE, related_name="decisions")
    action = models.CharField(max_length=10, choices=Action.choices)
    reason_code = models.CharField(max_length=40, blank=True)
    reason = models.TextField(blank=True)
    stage = models.PositiveSmallIntegerField(help_text="The stage in force after the decision.")
    share = models.FloatField(help_text="The promoted variant's share in force after it (0: the weights' again).")
    board_version = models.PositiveIntegerField(null=True, blank=True)
    figures = models.JSONField(default=dict, blank=True)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)

    objects = PromotionDecisionManager()

    class Meta:
        ordering = ["promotion", "id"]

    def __str__(self) -> str:
        return f"{self.promotion_id}: {self.action} at stage {self.stage}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        if not self._state.adding:
            raise PromotionDecisionAppendOnlyError("A promotion's decisions are never updated.")
        super().save(*args, **kwargs)


class LogPrompt(models.Model):
    """One (campaign, prompt hash, category) of the vote log: the key ``LogVote`` rows name, so that the log's
    narrow copy holds integers only. Written by the database (the trigger of migration 0010), never edited."""

    campaign_id = models.BigIntegerField()
    prompt_hash = models.CharField(max_length=64)
    category = models.CharField(max_length=32)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["campaign_id", "prompt_hash", "category"], name="logprompt_unique_key")
        ]

    def __str__(self) -> str:
        return f"campaign {self.campaign_id}: {self.prompt_hash[:12]} ({self.category})"


class LogVote(models.Model):
    """The columns of one vote that the recompute reads, as integers (issue 23.3): the vote log's narrow copy.

    Written by the database in the statement that appends the vote (an AFTER INSERT trigger with a transition
    table on ``battles_vote``, migration 0010), so every path that writes votes keeps it whole: the rater's
    vote, shadow and judge battles, bulk inserts and COPY. Gold votes are not copied (no ranking reads them).
    The exclusion policy is applied when it is read, so a policy that changes (a flagged rater, a new
    decision-time floor) needs nothing rewritten here. A load that bypasses triggers
    (``session_replication_role = replica``) must call ``ranking.services.log_copy_backfill`` afterwards."""

    vote_id = models.BigIntegerField(primary_key=True)
    campaign_id = models.BigIntegerField()
    prompt_key = models.BigIntegerField(help_text="LogPrompt.id: the vote's prompt hash and category.")
    left_id = models.BigIntegerField()
    right_id = models.BigIntegerField()
    outcome = models.SmallIntegerField(help_text="0 left wins, 1 right wins, 2 tie, 3 both bad.")
    decision_ms = models.IntegerField()
    rater_id = models.BigIntegerField()
    identity = models.BooleanField(help_text="The prompt asks the model who it is, or an answer names a model.")
    left_tokens = models.IntegerField()
    left_headers = models.IntegerField()
    left_list_items = models.IntegerField()
    left_bold = models.IntegerField()
    right_tokens = models.IntegerField()
    right_headers = models.IntegerField()
    right_list_items = models.IntegerField()
    right_bold = models.IntegerField()

    class Meta:
        indexes = [models.Index(fields=["campaign_id", "vote_id"], name="logvote_campaign")]

    def __str__(self) -> str:
        return f"vote {self.vote_id} (campaign {self.campaign_id})"
