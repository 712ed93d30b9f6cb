"""Judges: served models that vote under a versioned rubric, their runs, golden answers and verdict log."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

from raters.models import Organization
from raters.tenancy import TenantManager
from serving.models import ModelEndpoint

from .battles import Battle
from .campaigns import Campaign, Competitor, Prompt, model_family, name_in_family
from .votes import AppendOnlyError

# --- Judges: served models that vote, under a versioned rubric --------------------------------------

JUDGE_TEMPERATURE = 0.0  # a judge is a measuring instrument: the same pair gets the same verdict


class ImmutableError(Exception):
    """A write to a row the platform never rewrites (a rubric version, a judge's identity)."""


class RubricKind(models.TextChoices):
    PAIRWISE = "pairwise", "Pairwise verdict (A, B, tie, both bad)"
    RATIO = "ratio", "Ratio judgement (which has more of an attribute, and by what ratio)"


class Rubric(models.Model):
    """A judge's task: the question it answers and the strict output format it must reply in.
    Versions are immutable (a saved row is never rewritten); changing a rubric writes version n + 1,
    and a judge on the new version is a new judge. ``content_hash`` names the exact text a verdict was
    given under, so a ranking or a calibration can always say which wording it measured."""

    Kind = RubricKind

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="rubrics")
    name = models.CharField(max_length=80)
    version = models.PositiveIntegerField(default=1, validators=[MinValueValidator(1)])
    kind = models.CharField(max_length=10, choices=RubricKind.choices, default=RubricKind.PAIRWISE)
    question = models.TextField(
        help_text="The task-specific question, e.g. 'Which answer follows the instructions more faithfully?'"
    )
    instructions = models.TextField(
        blank=True, help_text="Optional criteria for the judge (what counts, what does not)."
    )
    content_hash = models.CharField(max_length=64, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = TenantManager()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["organization", "name", "version"], name="rubric_unique_version"),
        ]
        ordering = ["organization", "name", "-version"]

    def __str__(self) -> str:
        return f"{self.name} v{self.version}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        if self.pk is not None and not kwargs.get("force_insert"):
            raise ImmutableError("A rubric version is immutable: write a new version instead.")
        self.content_hash = self.content_digest()
        super().save(*args, **kwargs)

    def content_digest(self) -> str:
        import hashlib
        import json

        body = json.dumps([self.kind, self.question, self.instructions], ensure_ascii=False)
        return hashlib.sha256(body.encode()).hexdigest()


class Judge(models.Model):
    """A served model plus one rubric version, at temperature 0. Its identity (model and rubric) never
    changes: a new rubric version or another model is a new judge. ``excluded_families`` lists the
    model families whose battles it may not judge, its own always among them (``families_own``: its ``family``,
    else its model names); whatever the families say, it never judges a competitor served by its own model
    (``may_judge``)."""

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="judges")
    name = models.CharField(max_length=120)
    endpoint = models.ForeignKey(ModelEndpoint, on_delete=models.PROTECT, related_name="judges")
    rubric = models.ForeignKey(Rubric, on_delete=models.PROTECT, related_name="judges")
    family = models.CharField(
        max_length=80, blank=True, help_text="The judge model's family (e.g. 'llama'), matched against competitors'."
    )
    excluded_families = models.JSONField(
        default=list,
        blank=True,
        help_text="Model families this judge may not judge; its own family is always excluded.",
    )
    max_tokens = models.PositiveIntegerField(default=256, validators=[MinValueValidator(16), MaxValueValidator(4096)])
    active = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = TenantManager()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["organization", "name"], name="judge_unique_name")]
        ordering = ["organization", "name"]

    def __str__(self) -> str:
        return f"{self.name} ({self.rubric})"

    def save(self, *args: Any, **kwargs: Any) -> None:
        if self.pk is not None and not kwargs.get("force_insert"):
            before = type(self)._base_manager.filter(pk=self.pk).values("endpoint_id", "rubric_id").first()
            if before and (before["endpoint_id"], before["rubric_id"]) != (self.endpoint_id, self.rubric_id):
                raise ImmutableError("A judge's model and rubric are fixed: create a new judge instead.")
        super().save(*args, **kwargs)

    @property
    def temperature(self) -> float:
        return JUDGE_TEMPERATURE

    def families_own(self) -> set[str]:
        """The judge model's own family, lower case: its ``family`` when set, else (the default, blank) its model
        names, the public one and the served one, each its own family as the board's disclosure counts a
        competitor with no family (``model_family``)."""
        if self.family.strip():
            return {model_family(self.family, "")}
        names = {self.endpoint.name, self.endpoint.model_name}
        return {model_family("", name) for name in names if name.strip()}

    def families_excluded(self) -> set[str]:
        """Lower-cased families this judge may not judge: the configured list plus its own (``families_own``)."""
        found = {str(item).strip().lower() for item in (self.excluded_families or []) if str(item).strip()}
        return found | self.families_own()

    def may_judge(self, competitor: Competitor, excluded: set[str] | None = None) -> bool:
        """Never its own model, whatever the families say (they may be blank): not a competitor on the
        judge's endpoint, nor one serving the same model name on another endpoint (a shadow competitor:
        naming it). Never its own family nor one it excludes (``families_excluded``, or ``excluded`` as
        computed), the families falling back to the model names where they are blank (``name_in_family``):

        - a competitor with a family is of that family, and so is a judge with no family whose model names
          are of it (a judge on "gemma3-27b" never judges a competitor of family "gemma");
        - a competitor with no family is of every family its model names are of (a judge of family "llama",
          or one that excludes "llama", never judges "Llama-3-8B"; a judge with no family on "zen-bigram"
          never judges a competitor named "zen-bigram-v2").

        Two blank families whose names share only a stem ("llama-3-70b" judging "llama-3-8b") are not told
        apart: set the family on either side."""
        if competitor.endpoint_id is not None and competitor.endpoint_id == self.endpoint_id:
            return False
        own = self.endpoint.model_name.strip().lower()
        served = competitor.endpoint.model_name if competitor.endpoint is not None else competitor.external_model
        if own and served.strip().lower() == own:
            return False
        families = self.families_excluded() if excluded is None else excluded
        family = competitor.family.strip().lower()
        if family:
            if family in families:
                return False
            if not self.family.strip():
                return not any(name_in_family(name, family) for name in (self.endpoint.name, self.endpoint.model_name))
            return True
        return not any(name_in_family(name, other) for name in competitor.model_names for other in families)

    def clean(self) -> None:
        from django.core.exceptions import ValidationError

        for field in ("endpoint", "rubric"):
            related = getattr(self, field, None)
            org_id = self.organization_id
            if related is not None and org_id is not None and related.organization_id != org_id:
                raise ValidationError({field: "It must belong to the judge's organisation."})
        if not isinstance(self.excluded_families, list) or not all(
            isinstance(item, str) for item in self.excluded_families
        ):
            raise ValidationError({"excluded_families": 'A list of family names, e.g. ["llama", "qwen"].'})


class JudgeRunKind(models.TextChoices):
    BATTLES = "battles", "The campaign's battles (generated, shadow)"
    GOLDEN = "golden", "Offline golden set: every competitor answers every pool prompt once"


class JudgeRunStatus(models.TextChoices):
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    DONE = "done", "Done"
    FAILED = "failed", "Failed"


class JudgeRun(models.Model):
    """One pass of a judge over a campaign: its battles (``battles``), or a golden set it generates first
    (``golden``). Counters are written as verdicts land; ``stats`` holds the rates derived at the end."""

    Kind = JudgeRunKind
    Status = JudgeRunStatus

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="judge_runs")
    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="judge_runs")
    judge = models.ForeignKey(Judge, on_delete=models.PROTECT, related_name="runs")
    # The judge's rubric version when the run was made (a judge's rubric never changes, so this is a copy
    # for readers of the log who must not need a join to know which wording a verdict was given under).
    rubric = models.ForeignKey(Rubric, on_delete=models.PROTECT, related_name="runs")
    kind = models.CharField(max_length=8, choices=JudgeRunKind.choices, default=JudgeRunKind.BATTLES)
    status = models.CharField(max_length=8, choices=JudgeRunStatus.choices, default=JudgeRunStatus.QUEUED)
    seed = models.PositiveIntegerField(
        default=0, help_text="Sent with every judge call (the judge is at temperature 0)."
    )
    # Golden runs: the competitors that answer (empty: the campaign's active ones).
    competitor_ids = models.JSONField(default=list, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    error = models.TextField(blank=True)
    pairs_total = models.PositiveIntegerField(default=0, help_text="Pairs the run set out to judge.")
    pairs_judged = models.PositiveIntegerField(default=0, help_text="Pairs with a verdict from both orders.")
    pairs_refused = models.PositiveIntegerField(default=0, help_text="Pairs where an order was refused or failed.")
    pairs_inconsistent = models.PositiveIntegerField(default=0, help_text="Judged pairs whose two orders disagreed.")
    pairs_excluded_family = models.PositiveIntegerField(
        default=0, help_text="Pairs skipped: a competitor of a family this judge may not judge."
    )
    calls = models.PositiveIntegerField(default=0)
    calls_refused = models.PositiveIntegerField(default=0, help_text="Replies that were not the strict JSON asked for.")
    calls_failed = models.PositiveIntegerField(default=0, help_text="Calls with no reply (timeout, server error).")
    first_position = models.PositiveIntegerField(default=0, help_text="Decisive replies naming the answer shown first.")
    second_position = models.PositiveIntegerField(
        default=0, help_text="Decisive replies naming the answer shown second."
    )
    input_tokens = models.PositiveBigIntegerField(default=0, help_text="Judge prompt size, in whitespace words.")
    output_tokens = models.PositiveBigIntegerField(default=0)
    # Wall-clock seconds, summed: not GPU time (calls overlap, servers batch, queues wait), so named for what
    # they are.
    call_wall_seconds = models.FloatField(
        default=0.0, help_text="The judge calls' wall-clock latencies, summed (not GPU time)."
    )
    answer_wall_seconds = models.FloatField(
        default=0.0,
        help_text="Golden runs: the competitors' answer calls' wall-clock latencies, summed (not GPU time).",
    )
    stats = models.JSONField(default=dict, blank=True)

    objects = TenantManager()

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["campaign", "judge", "-created_at"])]

    def __str__(self) -> str:
        return f"{self.judge.name} on {self.campaign} ({self.kind} run {self.pk})"

    def stats_derived(self) -> dict[str, Any]:
        """The per-run rates, from the counters (what ``stats`` stores when the run ends)."""
        decisive = self.first_position + self.second_position
        both = self.pairs_judged
        return {
            "order_disagreement_rate": round(self.pairs_inconsistent / both, 4) if both else None,
            # +1: always the answer shown first; -1: always the second; 0: no position preference.
            "position_bias": round((self.first_position - self.second_position) / decisive, 4) if decisive else None,
            "first_position_share": round(self.first_position / decisive, 4) if decisive else None,
            "refusal_rate": round(self.calls_refused / self.calls, 4) if self.calls else None,
            "failure_rate": round(self.calls_failed / self.calls, 4) if self.calls else None,
            "pair_refusal_rate": round(self.pairs_refused / (both + self.pairs_refused), 4)
            if both + self.pairs_refused
            else None,
            "tokens": int(self.input_tokens + self.output_tokens),
            "input_tokens": int(self.input_tokens),
            "output_tokens": int(self.output_tokens),
            "call_wall_seconds": round(self.call_wall_seconds, 3),
        }


class GoldenAnswer(models.Model):
    """A golden run's answer: one competitor's one answer to one pool prompt (generated once per run)."""

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="golden_answers")
    run = models.ForeignKey(JudgeRun, on_delete=models.CASCADE, related_name="golden_answers")
    prompt = models.ForeignKey(Prompt, on_delete=models.PROTECT, related_name="golden_answers")
    competitor = models.ForeignKey(Competitor, on_delete=models.PROTECT, related_name="golden_answers")
    text = models.TextField(blank=True)
    output_tokens = models.PositiveIntegerField(default=0)
    finish_reason = models.CharField(max_length=16, blank=True)
    latency_s = models.FloatField(default=0.0)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = TenantManager()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["run", "prompt", "competitor"], name="golden_answer_once"),
        ]

    def __str__(self) -> str:
        return f"run {self.run_id}: competitor {self.competitor_id} on prompt {self.prompt_id}"


class JudgeVerdictQuerySet(models.QuerySet["JudgeVerdict"]):
    def update(self, **kwargs: Any) -> int:
        raise AppendOnlyError("The judge verdict log is append-only: verdicts are never updated.")

    def delete(self) -> tuple[int, dict[str, int]]:
        raise AppendOnlyError("The judge verdict log is append-only: verdicts are never deleted.")

    _raw_delete = delete  # type: ignore[assignment]


JudgeVerdictManager = TenantManager.from_queryset(JudgeVerdictQuerySet)


class JudgeVerdict(models.Model):
    """The judge votes' log, apart from the human one (``Vote``): one row per pair a judge was asked about,
    both presentation orders' raw replies kept verbatim. Append-only like the vote log; never read by a
    human leaderboard (those read ``Vote`` only), so judge votes cannot be mixed in by accident.

    ``choice`` is the counterbalanced verdict on the battle's sides (empty when refused). A pair is a
    refusal when either order's reply was not the strict JSON asked for, or its call failed."""

    organization = models.ForeignKey(Organization, on_delete=models.PROTECT, related_name="judge_verdicts")
    campaign = models.ForeignKey(Campaign, on_delete=models.PROTECT, related_name="judge_verdicts")
    run = models.ForeignKey(JudgeRun, on_delete=models.PROTECT, related_name="verdicts")
    judge = models.ForeignKey(Judge, on_delete=models.PROTECT, related_name="verdicts")
    rubric = models.ForeignKey(Rubric, on_delete=models.PROTECT, related_name="verdicts")
    rubric_version = models.PositiveIntegerField()
    rubric_hash = models.CharField(max_length=64)
    battle = models.ForeignKey(Battle, on_delete=models.PROTECT, null=True, blank=True, related_name="judge_verdicts")
    prompt = models.ForeignKey(Prompt, on_delete=models.PROTECT, related_name="judge_verdicts")
    category = models.CharField(max_length=32)
    left = models.ForeignKey(Competitor, on_delete=models.PROTECT, related_name="+")
    right = models.ForeignKey(Competitor, on_delete=models.PROTECT, related_name="+")
    choice = models.CharField(max_length=8, blank=True, help_text="left, right, tie, both_bad; empty: refused.")
    consistent = models.BooleanField(help_text="Both orders gave the same verdict.")
    refused = models.BooleanField()
    refusal = models.CharField(max_length=300, blank=True, help_text="Why the pair was refused.")
    # Order "ab": the left answer shown first; "ba": the right answer shown first. Verdicts in the judge's
    # own frame (A = shown first), empty when that order was refused.
    verdict_ab = models.CharField(max_length=8, blank=True)
    verdict_ba = models.CharField(max_length=8, blank=True)
    reply_ab = models.TextField(blank=True)
    reply_ba = models.TextField(blank=True)
    input_tokens = models.PositiveIntegerField(default=0)
    output_tokens = models.PositiveIntegerField(default=0)
    latency_s = models.FloatField(default=0.0, help_text="Both calls' model time.")
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    objects = JudgeVerdictManager()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["run", "battle"], condition=models.Q(battle__isnull=False), name="judge_verdict_once_per_battle"
            ),
            models.UniqueConstraint(
                fields=["run", "prompt", "left", "right"],
                condition=models.Q(battle__isnull=True),
                name="judge_verdict_once_per_golden_pair",
            ),
            models.CheckConstraint(
                condition=models.Q(choice__in=["left", "right", "tie", "both_bad", ""]), name="judge_verdict_choice"
            ),
        ]
        indexes = [models.Index(fields=["campaign", "judge", "id"])]
        ordering = ["id"]

    def __str__(self) -> str:
        return f"{self.judge_id} on {self.battle_id or self.prompt_id}: {self.choice or 'refused'}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        if not self._state.adding:
            raise AppendOnlyError("The judge verdict log is append-only: verdicts are never updated.")
        super().save(*args, **kwargs)

    def delete(self, *args: Any, **kwargs: Any) -> tuple[int, dict[str, int]]:
        raise AppendOnlyError("The judge verdict log is append-only: verdicts are never deleted.")
