"""Campaigns, competitors, prompts, battles and the append-only vote log."""

from __future__ import annotations

import hashlib
import secrets
import uuid
from datetime import timedelta
from typing import Any
from urllib.parse import quote, urlsplit

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.db import models
from django.utils import timezone

from raters.models import Organization, RaterPool
from raters.tenancy import TenantManager
from serving.analysis import prompt_asks_identity
from serving.models import ModelEndpoint

from .prompting import CATEGORIES


class Campaign(models.Model):
    class Status(models.TextChoices):
        DRAFT = "draft", "Draft"
        OPEN = "open", "Open"
        CLOSED = "closed", "Closed"

    class Sampling(models.TextChoices):
        UNIFORM = "uniform", "Uniform over pairs"
        ACTIVE = "active", "Active: more battles where score intervals overlap, a floor for every pair"

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="campaigns")
    name = models.CharField(max_length=200)
    slug = models.SlugField(max_length=80)
    description = models.TextField(blank=True, help_text="Instructions shown to raters.")
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.DRAFT)
    rater_pools = models.ManyToManyField(RaterPool, related_name="campaigns", blank=True)
    sampling = models.CharField(max_length=16, choices=Sampling.choices, default=Sampling.UNIFORM)

    # The one parameter set both sides of every battle are generated with (parity).
    temperature = models.FloatField(default=0.7, validators=[MinValueValidator(0.0), MaxValueValidator(2.0)])
    top_p = models.FloatField(default=1.0, validators=[MinValueValidator(0.0), MaxValueValidator(1.0)])
    max_tokens = models.PositiveIntegerField(default=256, validators=[MinValueValidator(1)])
    system_prompt = models.TextField(blank=True)

    allow_rater_prompts = models.BooleanField(default=False, help_text="Raters may type their own prompts.")
    max_turns = models.PositiveSmallIntegerField(
        default=1,
        validators=[MinValueValidator(1), MaxValueValidator(10)],
        help_text="Turns in one battle: 1 is a single prompt; more lets the rater continue the conversation "
        "(each turn goes to both models, each with its own history) before the one vote.",
    )
    min_decision_ms = models.PositiveIntegerField(
        default=1500, help_text="Votes decided faster than this are excluded from rankings."
    )
    prompt_hash_cap = models.PositiveIntegerField(
        null=True, blank=True, help_text="Most votes on one (normalised) prompt; empty means no cap."
    )
    rater_vote_cap = models.PositiveIntegerField(
        null=True, blank=True, help_text="Most votes one rater may cast in this campaign; empty means no cap."
    )
    session_cap = models.PositiveIntegerField(
        default=20, validators=[MinValueValidator(1)], help_text="Battles per rater session."
    )
    # Pool prompts are generated ahead by workers (the generation queue) and claimed by raters.
    buffer_size = models.PositiveIntegerField(
        default=4,
        validators=[MaxValueValidator(500)],
        help_text="Battles kept generated ahead, not yet assigned (pool prompts); 0: generate each battle when "
        "a rater asks (the rater waits on a 'preparing' page).",
    )
    buffer_max_age_s = models.PositiveIntegerField(
        default=6 * 3600,
        validators=[MinValueValidator(60)],
        help_text="A battle unclaimed this long (seconds) is voided and replaced.",
    )

    # How the leaderboards are computed from the log (recorded in every snapshot).
    exclude_identity_leaks = models.BooleanField(
        default=True, help_text="Leave out battles whose prompt asks a model who it is or whose answer names one."
    )

    class IdentityPolicy(models.TextChoices):
        FLAG = "flag", "Flag: answer, record the identity signals in the log (the leaderboard setting decides)"
        REFUSE = "refuse", "Refuse: no model answers an identity question; an answer naming a model voids the battle"

    identity_policy = models.CharField(
        max_length=8,
        choices=IdentityPolicy.choices,
        default=IdentityPolicy.FLAG,
        help_text="What happens to a prompt that asks a model who it is, and to an answer that names a model or "
        "vendor: flagged in the log, or refused (nothing generated, nothing logged, the rater told why).",
    )
    both_bad_as_tie = models.BooleanField(
        default=True, help_text="Count 'both are bad' as a tie in the scores (otherwise it is left out)."
    )
    ranking_min_votes = models.PositiveIntegerField(
        default=30,
        validators=[MinValueValidator(1)],
        help_text="Competitors with fewer votes are hidden from leaderboards, not listed with huge intervals.",
    )
    # Each round refits every model of the leaderboard; the cap keeps one recompute within a task's time.
    ranking_bootstrap_rounds = models.PositiveIntegerField(
        default=100, validators=[MinValueValidator(10), MaxValueValidator(2000)]
    )

    class Interval(models.TextChoices):
        BOOTSTRAP = "bootstrap", "Bootstrap (percentile)"
        CLUSTER = "cluster_bootstrap", "Bootstrap by prompt (when prompts repeat)"
        SANDWICH = "sandwich", "Analytic (sandwich)"

    ranking_interval = models.CharField(
        max_length=20,
        choices=Interval.choices,
        default=Interval.BOOTSTRAP,
        help_text="Intervals of the raw leaderboard.",
    )
    ranking_anchor = models.ForeignKey(
        "Competitor",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        help_text="Pin this competitor at 1000 (e.g. a production baseline); empty: the geometric mean of "
        "all strengths is 1000.",
    )
    ranking_style_interval = models.CharField(
        max_length=20,
        choices=Interval.choices,
        default=Interval.SANDWICH,
        help_text="Intervals of the style-controlled leaderboard.",
    )

    class Ties(models.TextChoices):
        HALF = "half", "A tie is half a win each side"
        DAVIDSON = "davidson", "Davidson's tie model (a tie parameter, estimated)"

    ranking_ties = models.CharField(
        max_length=10, choices=Ties.choices, default=Ties.HALF, help_text="How ties enter the raw leaderboard's scores."
    )
    # Gold battles and attention checks (``GoldItem``): mixed into what raters are served, never ranked.
    gold_rate = models.FloatField(
        default=0.0,
        validators=[MinValueValidator(0.0), MaxValueValidator(1.0)],
        help_text="Share of the battles served to a rater that are gold battles or attention checks (0 = none).",
    )
    attention_warn_after = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(1)],
        help_text="Failed attention checks after which the rater is warned on their next page (empty = never).",
    )
    attention_block_after = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(1)],
        help_text="Failed attention checks after which the rater is flagged and gets no more battles here "
        "(empty = never).",
    )
    gold_feedback = models.BooleanField(
        default=False,
        help_text="After the vote on a gold battle, tell the rater it was a check and whether they matched it "
        "(off: the reveal shows neutral labels only).",
    )
    # The cadence check (managers' dashboard, leaderboard page, API): a board whose queue stalled still
    # looks current, so pairs of active competitors with fewer new votes than this in 7 days are named.
    cadence_threshold = models.PositiveIntegerField(
        default=50,
        validators=[MinValueValidator(1)],
        help_text="Flag a pair of active competitors with fewer new votes than this in the last 7 days "
        "(the board may be stale).",
    )
    gold_min_accuracy = models.FloatField(
        null=True,
        blank=True,
        validators=[MinValueValidator(0.0), MaxValueValidator(1.0)],
        help_text="Flag a rater whose gold accuracy is credibly below this: the upper end of its 95% Wilson "
        "interval under it (empty = never). Checked after each leaderboard recompute.",
    )
    outlier_alpha = models.FloatField(
        null=True,
        blank=True,
        default=None,
        validators=[MinValueValidator(1e-6), MaxValueValidator(0.5)],
        help_text="Flag a rater once the sequential test against the consensus reaches 1/alpha (empty = never). "
        "Checked after each leaderboard recompute.",
    )
    # Shared battles: one answer pair shown to this many raters (each their own battle of one item).
    reviewers_per_item = models.PositiveSmallIntegerField(
        default=1,
        db_default=1,
        validators=[MinValueValidator(1), MaxValueValidator(20)],
        help_text="How many different raters see each answer pair (k reviewers per item; 1 = each pair once).",
    )
    # Qualification: this many gold battles before any real one; passed at the threshold's share correct.
    qualification_battles = models.PositiveSmallIntegerField(
        default=0,
        db_default=0,
        validators=[MaxValueValidator(100)],
        help_text="Gold battles a rater must answer before real battles are shown (0 = no qualification).",
    )
    qualification_pass = models.FloatField(
        default=0.8,
        db_default=0.8,
        validators=[MinValueValidator(0.0), MaxValueValidator(1.0)],
        help_text="Share of the qualification's gold battles answered correctly needed to pass.",
    )
    # What every rater of the campaign reads first (markdown, sanitised like answers), and an optional
    # consent each rater agrees to once before their first battle (recorded per text: a changed text is
    # agreed to again). A crowd study's own instructions and consent are on the study.
    instructions = models.TextField(
        blank=True,
        default="",
        help_text="Markdown shown on the campaign's page to every rater, before the first battle.",
    )
    consent_text = models.TextField(
        blank=True,
        default="",
        help_text="Markdown. When set, each rater agrees to it once before their first battle (recorded; "
        "a changed text is asked again). Empty: no consent step.",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    opened_at = models.DateTimeField(null=True, blank=True, editable=False)
    closed_at = models.DateTimeField(null=True, blank=True, editable=False)

    objects = TenantManager()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["organization", "slug"], name="campaign_unique_slug")]
        ordering = ["organization", "name"]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        from django.core.exceptions import ValidationError

        if (
            self.attention_warn_after is not None
            and self.attention_block_after is not None
            and self.attention_warn_after > self.attention_block_after
        ):
            raise ValidationError({"attention_warn_after": "Warn before blocking: at most the block threshold."})
        if self.prompt_hash_cap is not None and self.prompt_hash_cap < self.reviewers_per_item:
            raise ValidationError(
                {"prompt_hash_cap": "Each reviewer's vote counts towards the prompt-hash cap: allow at least k."}
            )
        anchor = self.ranking_anchor
        if anchor is not None and anchor.campaign_id != self.pk:
            raise ValidationError({"ranking_anchor": "The anchor must be a competitor of this campaign."})

    def sampling_params(self) -> dict[str, Any]:
        return {
            "temperature": self.temperature,
            "top_p": self.top_p,
            "max_tokens": self.max_tokens,
            "system_prompt": self.system_prompt,
        }


class Competitor(models.Model):
    """A model at one version; a new version is a new competitor with its own rating.

    Either a model endpoint (Triton) that generates battles, or an external model known only by name:
    one whose answers arrive ready-made as shadow battles (pushed over the API), which cannot generate
    and so is never drawn for a generated battle."""

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="competitors")
    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="competitors")
    endpoint = models.ForeignKey(
        ModelEndpoint, on_delete=models.PROTECT, related_name="competitors", null=True, blank=True
    )
    external_model = models.CharField(
        max_length=120,
        blank=True,
        default="",
        db_default="",
        help_text="A model without an endpoint (answers arrive as shadow battles): its public name. "
        "Exactly one of endpoint and external model is set.",
    )
    version_label = models.CharField(max_length=80)
    family = models.CharField(
        max_length=80,
        blank=True,
        default="",
        db_default="",
        help_text="The model family (e.g. 'llama', 'qwen'): a judge never judges its own family, and the board "
        "discloses how many variants of one family a campaign tested.",
    )
    active = models.BooleanField(default=True, help_text="Inactive competitors get no new battles.")
    # Retiring is final (the console's "Retire" action, ``services.competitor_retire``): inactive for
    # good, kept on the board with its votes, never deleted (its votes name it).
    retired_at = models.DateTimeField(null=True, blank=True, editable=False)
    # The campaign's two pseudo-competitors that present gold answers (answer 1, answer 2): never
    # ranked, never drawn for a generated battle, never matched by a shadow battle.
    gold = models.BooleanField(default=False, db_default=False, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = TenantManager()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["campaign", "endpoint", "version_label"], name="competitor_unique"),
            models.UniqueConstraint(
                fields=["campaign", "external_model", "version_label"],
                condition=models.Q(endpoint__isnull=True),
                name="competitor_unique_external",
            ),
            models.CheckConstraint(
                condition=(models.Q(endpoint__isnull=False) & models.Q(external_model=""))
                | (models.Q(endpoint__isnull=True) & ~models.Q(external_model="")),
                name="competitor_endpoint_or_external",
            ),
        ]
        ordering = ["campaign", "id"]

    def __str__(self) -> str:
        return f"{self.model_name} {self.version_label}"

    @property
    def retired(self) -> bool:
        return self.retired_at is not None

    @property
    def family_name(self) -> str:
        """The family the board's disclosure counts it in: its family, else its own model name (lower case,
        so "Llama" and "llama" are one family)."""
        return (self.family.strip() or self.model_name).lower()

    @property
    def model_name(self) -> str:
        """The public name revealed after the vote and written to the log: the endpoint's, or the
        external model's."""
        return self.endpoint.name if self.endpoint_id is not None and self.endpoint else self.external_model

    @property
    def generates(self) -> bool:
        """Whether battles can be generated for it (it has an endpoint)."""
        return self.endpoint_id is not None

    def clean(self) -> None:
        from django.core.exceptions import ValidationError

        campaign = getattr(self, "campaign", None)
        endpoint = getattr(self, "endpoint", None)
        if (endpoint is None) == (not self.external_model):
            raise ValidationError(
                {"endpoint": "Choose an endpoint, or name an external model (one without an endpoint), not both."}
            )
        if campaign is not None and endpoint is not None and endpoint.organization_id != campaign.organization_id:
            raise ValidationError({"endpoint": "The endpoint must belong to the campaign's organisation."})


class Prompt(models.Model):
    class Source(models.TextChoices):
        POOL = "pool", "Prompt pool"
        RATER = "rater", "Typed by a rater"
        SHADOW = "shadow", "Of a shadow battle (pushed over the API)"
        GOLD = "gold", "Of a gold battle or attention check"

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="prompts")
    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="prompts")
    text = models.TextField()
    text_hash = models.CharField(max_length=64, editable=False, help_text="sha256 of the normalised text")
    category = models.CharField(max_length=32, choices=[(c, c) for c in CATEGORIES], default="other")
    language = models.CharField(max_length=8, default="und")
    source = models.CharField(max_length=8, choices=Source.choices, default=Source.POOL)
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    active = models.BooleanField(default=True)
    # Whether the text asks the model who it is (serving.analysis.prompt_asks_identity), kept up to date by
    # ``save`` (and set by the bulk imports): under the "refuse" identity policy such a prompt is never served.
    asks_identity = models.BooleanField(default=False, db_default=False, editable=False)
    # The prompt's id in the system it was imported from (empty: none); re-importing a file finds it.
    external_id = models.CharField(max_length=200, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)

    objects = TenantManager()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["campaign", "external_id"],
                condition=~models.Q(external_id=""),
                name="prompt_unique_external_id",
            )
        ]
        indexes = [models.Index(fields=["campaign", "text_hash"])]
        ordering = ["campaign", "id"]

    def __str__(self) -> str:
        return self.text[:60]

    def save(self, *args: Any, **kwargs: Any) -> None:
        self.asks_identity = prompt_asks_identity(self.text)
        update_fields = kwargs.get("update_fields")
        if update_fields is not None and "text" in update_fields:
            kwargs["update_fields"] = {*update_fields, "asks_identity"}
        super().save(*args, **kwargs)

    def clean(self) -> None:
        # A saved prompt stays in its organisation: it may move only to another campaign of that tenant.
        from django.core.exceptions import ValidationError

        campaign = getattr(self, "campaign", None)
        if campaign is None or self.organization_id is None:
            return
        if campaign.organization_id != self.organization_id:
            raise ValidationError({"campaign": "The campaign must belong to the prompt's organisation."})


class Side(models.TextChoices):
    LEFT = "left", "A (left)"
    RIGHT = "right", "B (right)"


class BattleSource(models.TextChoices):
    """Where a battle's answers came from (recorded on the battle and on its vote)."""

    GENERATED = "generated", "Generated by the platform"
    SHADOW = "shadow", "Shadow: answers pushed over the API"
    GOLD = "gold", "Gold: a known answer pair (gold battle or attention check), never ranked"


class Battle(models.Model):
    Source = BattleSource

    class Status(models.TextChoices):
        GENERATING = "generating", "Generating"
        READY = "ready", "Ready for a vote"
        VOID = "void", "Void"
        VOTED = "voted", "Voted"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="battles")
    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="battles")
    # Both empty while the battle waits in the campaign's buffer; set when a rater claims it.
    rater = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="battles", null=True, blank=True
    )
    pool = models.ForeignKey(RaterPool, on_delete=models.PROTECT, related_name="battles", null=True, blank=True)
    prompt = models.ForeignKey(Prompt, on_delete=models.PROTECT, related_name="battles")
    left = models.ForeignKey(Competitor, on_delete=models.PROTECT, related_name="+")
    right = models.ForeignKey(Competitor, on_delete=models.PROTECT, related_name="+")
    status = models.CharField(max_length=12, choices=Status.choices, default=Status.GENERATING)
    void_reason = models.TextField(blank=True)
    params = models.JSONField(default=dict, help_text="The one sampling parameter set used for both sides.")
    session_key = models.CharField(max_length=64, blank=True, db_index=True)
    created_at = models.DateTimeField(auto_now_add=True)
    ready_at = models.DateTimeField(null=True, blank=True)
    # When the answers now being generated were asked for: the battle's creation, or the rater's latest
    # turn (what "stale" counts from).
    requested_at = models.DateTimeField(default=timezone.now)
    generation_started_at = models.DateTimeField(null=True, blank=True)
    claimed_at = models.DateTimeField(null=True, blank=True, help_text="When a rater got it (from the buffer or not).")
    # Generated for its rater while they watch (typed prompts, later turns): streamed to the page at one
    # pace for both sides. Otherwise generated ahead in a worker and shown whole.
    live = models.BooleanField(default=False)
    shown_at = models.DateTimeField(null=True, blank=True)
    voted_at = models.DateTimeField(null=True, blank=True)
    # Database defaults too: rows written by raw SQL (bulk loads, COPY) need not name the new columns.
    source = models.CharField(
        max_length=12, choices=BattleSource.choices, default=BattleSource.GENERATED, db_default=BattleSource.GENERATED
    )
    # A shadow battle's idempotency key (unique per campaign) and the sha256 of the request it came
    # with: a retry with the same body gets this battle back, one with another body a conflict.
    idempotency_key = models.CharField(max_length=200, blank=True, default="", db_default="")
    request_digest = models.CharField(max_length=64, blank=True, default="", db_default="")
    experiment = models.ForeignKey(
        "Experiment",
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="battles",
        help_text="The A/B experiment whose variants the shadow battle's answers came from.",
    )
    # A gold battle's item and the choice that matches it in this battle's sides (left / right /
    # both_bad): the coin flip of the sides is already applied, so a vote is correct iff it equals this.
    gold_item = models.ForeignKey("GoldItem", on_delete=models.PROTECT, null=True, blank=True, related_name="battles")
    gold_expected = models.CharField(max_length=8, blank=True, default="", db_default="")
    # Shared battles: the copies of one answer pair handed to different raters share this key (the
    # first battle's id); empty for a battle that is its own item. Each copy has its own sides.
    item_key = models.UUIDField(null=True, blank=True, editable=False)

    objects = TenantManager()

    class Meta:
        constraints = [
            models.CheckConstraint(condition=~models.Q(left=models.F("right")), name="battle_two_competitors"),
            models.UniqueConstraint(
                fields=["campaign", "idempotency_key"],
                condition=~models.Q(idempotency_key=""),
                name="battle_unique_idempotency_key",
            ),
            # One open battle per rater and campaign: a second tab asking for "next" gets the same
            # battle, so nobody can hold several pairs and vote on the one they like.
            models.UniqueConstraint(
                fields=["campaign", "rater"],
                condition=models.Q(status__in=("generating", "ready")),
                name="battle_one_open_per_rater",
            ),
            # Never two copies of one shared item for one rater (the claim skips them; this settles races).
            models.UniqueConstraint(
                fields=["item_key", "rater"],
                condition=models.Q(item_key__isnull=False, rater__isnull=False),
                name="battle_one_copy_per_rater",
            ),
        ]
        indexes = [
            models.Index(fields=["campaign", "rater", "status"]),
            # The buffer: unassigned battles of a campaign, oldest first (the claim's scan).
            models.Index(
                fields=["campaign", "status", "created_at"],
                condition=models.Q(rater__isnull=True),
                name="battle_buffer",
            ),
            models.Index(fields=["item_key"], condition=models.Q(item_key__isnull=False), name="battle_item_key"),
        ]
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"Battle {self.pk}"

    @property
    def item(self) -> uuid.UUID:
        """What agreement counts as one item: the shared key, else the battle itself."""
        return self.item_key or self.id


class GenerationManager(TenantManager["Generation"]):
    tenant_path = "battle__organization"


class TurnManager(TenantManager["Turn"]):
    tenant_path = "battle__organization"


class Turn(models.Model):
    """A message the rater added to a multi-turn battle (turn 1, 2, ...; turn 0 is the battle's prompt).
    Both models answer it, each after its own earlier answers."""

    battle = models.ForeignKey(Battle, on_delete=models.CASCADE, related_name="turns")
    index = models.PositiveSmallIntegerField(validators=[MinValueValidator(1)])
    text = models.TextField()
    text_hash = models.CharField(max_length=64, help_text="sha256 of the normalised text")
    created_at = models.DateTimeField(auto_now_add=True)

    objects = TurnManager()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["battle", "index"], name="turn_unique_index")]
        ordering = ["battle", "index"]

    def __str__(self) -> str:
        return f"{self.battle_id} turn {self.index}"


class Generation(models.Model):
    battle = models.ForeignKey(Battle, on_delete=models.CASCADE, related_name="generations")
    side = models.CharField(max_length=8, choices=Side.choices)
    turn = models.PositiveSmallIntegerField(
        default=0, help_text="0: the answer to the prompt; n: to the rater's turn n."
    )
    competitor = models.ForeignKey(Competitor, on_delete=models.PROTECT, related_name="generations")
    text = models.TextField(blank=True)
    output_tokens = models.PositiveIntegerField(default=0)
    finish_reason = models.CharField(max_length=16, blank=True)
    latency_s = models.FloatField(default=0.0)
    # Null for a side that failed; never shown before the vote, like the latency.
    ttft_s = models.FloatField(null=True, blank=True, help_text="Seconds from the request to the first token.")
    tokens_per_s = models.FloatField(null=True, blank=True, help_text="Output tokens / total generation time.")
    error = models.TextField(blank=True)
    style = models.JSONField(default=dict, help_text="Style counts from the markdown parser.")
    model_mentions = models.JSONField(default=list, help_text="Model or vendor names found in the answer.")
    created_at = models.DateTimeField(auto_now_add=True)

    objects = GenerationManager()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["battle", "side", "turn"], name="generation_one_per_side_and_turn")
        ]
        ordering = ["battle", "turn", "side"]

    def __str__(self) -> str:
        return f"{self.battle_id} {self.side}"


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
    created_at = models.DateTimeField(auto_now_add=True)

    objects = TenantManager()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["organization", "key"], name="experiment_unique_key")]
        ordering = ["organization", "key"]

    def __str__(self) -> str:
        return self.key

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


class ExportJob(models.Model):
    """An export of a campaign's data written to a file by a worker (``battles.tasks.export_job_run_task``)
    and downloaded when done. The file lies under ``settings.ARENA_EXPORT_ROOT``; ``path`` is relative
    to it. Size, row count and sha256 are recorded so a download can be checked end to end."""

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"
        EXPIRED = "expired", "Expired (file deleted after the retention period)"

    class Kind(models.TextChoices):
        VOTES = "votes", "The vote log"
        PREFERENCE_PAIRS = "preference_pairs", "Preference pairs (chosen / rejected)"

    class Format(models.TextChoices):
        JSONL = "jsonl", "JSON lines"
        CSV = "csv", "CSV"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="export_jobs")
    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="export_jobs")
    # Who asked: a signed-in user or an organisation's API key (exactly one of the two, or neither once
    # the user or key is deleted).
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    requested_by_key = models.ForeignKey(
        "raters.ApiKey", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    kind = models.CharField(max_length=20, choices=Kind.choices, default=Kind.VOTES)
    format = models.CharField(max_length=8, choices=Format.choices, default=Format.JSONL)
    params = models.JSONField(default=dict, help_text="texts and the filters (since, until, category, ...).")
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.QUEUED)
    rows = models.BigIntegerField(null=True, blank=True)
    bytes = models.BigIntegerField(null=True, blank=True)
    sha256 = models.CharField(max_length=64, blank=True)
    path = models.CharField(max_length=300, blank=True, help_text="Relative to ARENA_EXPORT_ROOT.")
    error = models.TextField(blank=True)
    audit = models.JSONField(null=True, blank=True, help_text="Preference pairs: the length audit of the rows.")
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    objects = TenantManager()

    class Meta:
        indexes = [models.Index(fields=["campaign", "-created_at"])]
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"Export {self.pk} ({self.kind}.{self.format}, {self.status})"

    @property
    def filename(self) -> str:
        return f"campaign-{self.campaign_id}-{self.kind.replace('_', '-')}-{self.pk}.{self.format}"


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


# --- Crowd studies: entry from a vendor (Prolific or another) with a completion code ----------------

PROLIFIC_COMPLETION_URL = "https://app.prolific.com/submissions/complete?cc={code}"


def _study_slug() -> str:
    # The public link's only secret: 128 random bits, so links cannot be guessed or enumerated.
    return secrets.token_urlsafe(16)


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


# --- Judges: served models that vote, under a versioned rubric --------------------------------------

JUDGE_TEMPERATURE = 0.0  # a judge is a measuring instrument: the same pair gets the same verdict


def consent_hash(text: str) -> str:
    """SHA-256 of a consent text: what a recorded consent was given to."""
    return hashlib.sha256(text.encode()).hexdigest()


class RaterConsent(models.Model):
    """A rater's agreement to a campaign's consent text (``Campaign.consent_text``): one row per rater and
    text (its hash), written when they agree, never changed or deleted. A changed text has another hash,
    so raters agree again before their next battle; the rows say who agreed to which text and when."""

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="rater_consents")
    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="consents")
    rater = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="campaign_consents")
    text_hash = models.CharField(max_length=64, help_text="SHA-256 of the consent text agreed to.")
    agreed_at = models.DateTimeField(default=timezone.now)

    objects = TenantManager()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["campaign", "rater", "text_hash"], name="rater_consent_once_per_text")
        ]
        ordering = ["campaign", "-agreed_at"]

    def __str__(self) -> str:
        return f"{self.rater} agreed to the consent of {self.campaign} ({self.text_hash[:8]})"


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
    model families whose battles it may not judge (its own, by default); whatever the families say, it
    never judges a competitor served by its own model (``may_judge``)."""

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

    def families_excluded(self) -> set[str]:
        """Lower-cased families this judge may not judge: the configured list plus its own."""
        found = {str(item).strip().lower() for item in (self.excluded_families or []) if str(item).strip()}
        if self.family.strip():
            found.add(self.family.strip().lower())
        return found

    def may_judge(self, competitor: Competitor, excluded: set[str] | None = None) -> bool:
        """Never its own model, whatever the families say (they may be blank): not a competitor on the
        judge's endpoint, nor one serving the same model name on another endpoint (a shadow competitor:
        naming it); nor one of a family it excludes (``families_excluded``, or ``excluded`` as computed)."""
        if competitor.endpoint_id is not None and competitor.endpoint_id == self.endpoint_id:
            return False
        own = self.endpoint.model_name.strip().lower()
        served = competitor.endpoint.model_name if competitor.endpoint is not None else competitor.external_model
        if own and served.strip().lower() == own:
            return False
        families = self.families_excluded() if excluded is None else excluded
        return competitor.family.strip().lower() not in families

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
    gpu_seconds = models.FloatField(default=0.0, help_text="Model time: the sum of the judge calls' latencies.")
    generation_seconds = models.FloatField(default=0.0, help_text="Golden runs: the competitors' model time.")
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
            "gpu_seconds": round(self.gpu_seconds, 3),
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
