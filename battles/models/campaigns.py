"""Campaigns, their competitors and prompts, and the record of raters agreeing to a campaign's consent text."""

from __future__ import annotations

import hashlib
from typing import Any

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.utils import timezone

from raters.models import Organization, RaterPool
from raters.tenancy import TenantManager
from serving.analysis import prompt_asks_identity
from serving.models import ModelEndpoint

from ..prompting import CATEGORIES


class Campaign(models.Model):
    class Status(models.TextChoices):
        DRAFT = "draft", "Draft"
        OPEN = "open", "Open"
        CLOSED = "closed", "Closed"

    class Sampling(models.TextChoices):
        UNIFORM = "uniform", "Uniform over pairs"
        ACTIVE = "active", "Active: more battles where the leader is undecided, a floor for every pair"

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="campaigns")
    name = models.CharField(max_length=200)
    slug = models.SlugField(max_length=80)
    description = models.TextField(
        blank=True,
        help_text="What the campaign compares, in a sentence or two of plain text (no markup): the first lines "
        "on the campaign's page that raters open, and the description the API lists. How to judge goes in the "
        "instructions.",
    )
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.DRAFT)
    rater_pools = models.ManyToManyField(RaterPool, related_name="campaigns", blank=True)
    sampling = models.CharField(max_length=16, choices=Sampling.choices, default=Sampling.ACTIVE)

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
    # A rater's "session" is a rolling window of hours, not a login: logging out and in again must not
    # reset the cap (it would then bind nobody).
    session_cap = models.PositiveIntegerField(
        default=20,
        validators=[MinValueValidator(1)],
        help_text="Battles one rater may take in any session window (the hours below), whatever their logins.",
    )
    session_window_h = models.PositiveIntegerField(
        default=12,
        db_default=12,
        validators=[MinValueValidator(1), MaxValueValidator(24 * 30)],
        help_text="The session cap's window: a rater's battles of the last this many hours count against it.",
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
        AUTO = "auto", "Automatic (by prompt when prompts repeat or items are shared)"
        BOOTSTRAP = "bootstrap", "Bootstrap (percentile)"
        CLUSTER = "cluster_bootstrap", "Bootstrap by prompt (when prompts repeat)"
        SANDWICH = "sandwich", "Analytic (sandwich)"

    ranking_interval = models.CharField(
        max_length=20,
        choices=Interval.choices,
        default=Interval.AUTO,
        help_text="Intervals of the raw leaderboard. Automatic: the bootstrap by prompt when votes cluster on "
        "prompts (design effect at least 1.1 over at least 10 prompts), else the plain bootstrap; each snapshot "
        "records the choice and why.",
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
        help_text="Intervals of the style-controlled leaderboard (automatic: by prompt when votes cluster on "
        "prompts, else analytic).",
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
        help_text="How to judge (what 'better' means here), in markdown: shown to every rater on the "
        "campaign's page, under the description, before they start; not repeated on the battle page.",
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


def model_family(family: str, name: str) -> str:
    """The family a model counts in: its ``family`` when one is set, else its own model ``name`` (lower case, so
    "Llama" and "llama" are one family). The board's family disclosure groups competitors by it; a judge's own
    family is its ``family``, else its model names (``Judge.families_own``)."""
    return (family.strip() or name.strip()).lower()


def name_in_family(name: str, family: str) -> bool:
    """Whether a model ``name`` names a model of ``family`` (both compared in lower case): the name, or its last
    path segment ("meta-llama/Llama-3-8B"), is the family or starts with it, followed by anything that does not
    continue the family's last word: "Llama-3-8B", "llama3" and "llama 3" are in "llama", "gemma3-270m" is in
    "gemma", "qwen2.5-7b" in "qwen" and in "qwen2"; "llamaguard" is not in "llama", nor "model-50" in "model-5"."""
    family = family.strip().lower()
    if not family:
        return False
    for candidate in {name.strip().lower(), name.strip().lower().rsplit("/", 1)[-1]}:
        if candidate == family:
            return True
        if candidate.startswith(family):
            after = candidate[len(family)]
            if not after.isalnum() or (family[-1].isalpha() and after.isdigit()):
                return True
    return False


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
        """The family the board's disclosure counts it in: its family, else its own model name (``model_family``)."""
        return model_family(self.family, self.model_name)

    @property
    def model_names(self) -> set[str]:
        """Every name its model goes by, lower case: the public name and the served model's name (the endpoint's
        ``model_name``); a judge matches its families against them (``Judge.may_judge``)."""
        names = {self.model_name, self.endpoint.model_name if self.endpoint is not None else ""}
        return {name.strip().lower() for name in names if name.strip()}

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
