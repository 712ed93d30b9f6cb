"""Tenants (organisations), who belongs to them and in which role, rater pools and the audit trail."""

from __future__ import annotations

import hashlib
import re
import secrets
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import models
from django.utils import timezone

from .tenancy import TenantManager, scopes_disabled
from .webhook_transport import webhook_url_check


class Organization(models.Model):
    name = models.CharField(max_length=200)
    slug = models.SlugField(max_length=80, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Role(models.TextChoices):
    OWNER = "owner", "Owner"
    MANAGER = "manager", "Manager"
    RATER = "rater", "Rater"
    VIEWER = "viewer", "Viewer"


MANAGING_ROLES = (Role.OWNER, Role.MANAGER)


class Membership(models.Model):
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.RATER)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = TenantManager()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "organization"], name="membership_unique_user_org")]

    def __str__(self) -> str:
        return f"{self.user} in {self.organization} ({self.role})"


class RaterPool(models.Model):
    class Kind(models.TextChoices):
        STAFF = "staff", "Internal staff"
        CROWD = "crowd", "Crowd vendor"
        EXPERT = "expert", "Domain experts"

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="pools")
    name = models.CharField(max_length=120)
    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.STAFF)
    members = models.ManyToManyField(settings.AUTH_USER_MODEL, related_name="rater_pools", blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = TenantManager()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["organization", "name"], name="pool_unique_name")]
        ordering = ["organization", "name"]

    def __str__(self) -> str:
        return f"{self.name} ({self.organization})"


def _invitation_token() -> str:
    return secrets.token_urlsafe(24)


def _invitation_expiry():  # type: ignore[no-untyped-def]
    return timezone.now() + timedelta(days=14)


class Invitation(models.Model):
    """A link a manager hands out; whoever opens it while logged in joins the pool as a rater."""

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="invitations")
    pool = models.ForeignKey(RaterPool, on_delete=models.CASCADE, related_name="invitations")
    token = models.CharField(max_length=64, unique=True, default=_invitation_token, editable=False)
    email = models.EmailField(blank=True, help_text="Optional: only this address may accept.")
    max_uses = models.PositiveIntegerField(default=1)
    uses = models.PositiveIntegerField(default=0, editable=False)
    expires_at = models.DateTimeField(default=_invitation_expiry)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    objects = TenantManager()

    class Meta:
        constraints = [
            models.CheckConstraint(condition=models.Q(uses__lte=models.F("max_uses")), name="invitation_uses_cap")
        ]

    def __str__(self) -> str:
        return f"Invitation to {self.pool}"

    @property
    def path(self) -> str:
        return f"/invite/{self.token}/"

    def clean(self) -> None:
        # An invitation's organisation is its pool's; once saved, it cannot be pointed at another
        # tenant's pool (a manager of two organisations sees both tenants' pools as choices).
        from django.core.exceptions import ValidationError

        pool = getattr(self, "pool", None)
        if pool is not None and self.organization_id is not None and pool.organization_id != self.organization_id:
            raise ValidationError({"pool": "The pool must belong to the invitation's organisation."})


class AuditAction(models.TextChoices):
    """Every kind of state change the audit log records (Zulip's RealmAuditLog event types): one
    enumeration for all apps, so a typo is an error and the console can filter by kind."""

    ORGANIZATION_CREATED = "organization.created", "Organisation created"
    ORGANIZATION_CHANGED = "organization.changed", "Organisation changed"
    MEMBERSHIP_CREATED = "membership.created", "Member added"
    MEMBERSHIP_CHANGED = "membership.changed", "Member's role changed"
    MEMBERSHIP_REMOVED = "membership.removed", "Member removed"
    POOL_CREATED = "pool.created", "Rater pool created"
    POOL_CHANGED = "pool.changed", "Rater pool changed"
    POOL_DELETED = "pool.deleted", "Rater pool deleted"
    POOL_MEMBER_ADDED = "pool.member_added", "Rater added to a pool"
    POOL_MEMBER_REMOVED = "pool.member_removed", "Rater removed from a pool"
    INVITATION_CREATED = "invitation.created", "Invitation created"
    INVITATION_CHANGED = "invitation.changed", "Invitation changed"
    INVITATION_DELETED = "invitation.deleted", "Invitation deleted"
    API_KEY_CREATED = "api_key.created", "API key created"
    API_KEY_REVOKED = "api_key.revoked", "API key revoked"
    API_KEY_DELETED = "api_key.deleted", "API key deleted"
    RATER_FLAGGED = "rater.flagged", "Rater flagged"
    RATER_UNFLAGGED = "rater.unflagged", "Rater flag lifted"
    RATER_FLAG_CLEARED = "rater.flag_cleared", "Rater flag reviewed and cleared"
    ENDPOINT_CREATED = "endpoint.created", "Endpoint created"
    ENDPOINT_CHANGED = "endpoint.changed", "Endpoint changed"
    ENDPOINT_DELETED = "endpoint.deleted", "Endpoint deleted"
    CAMPAIGN_CREATED = "campaign.created", "Campaign created"
    CAMPAIGN_CHANGED = "campaign.changed", "Campaign changed"
    CAMPAIGN_OPENED = "campaign.opened", "Campaign opened"
    CAMPAIGN_CLOSED = "campaign.closed", "Campaign closed"
    CAMPAIGN_DELETED = "campaign.deleted", "Campaign deleted"
    COMPETITOR_ADDED = "competitor.added", "Competitor added"
    COMPETITOR_CHANGED = "competitor.changed", "Competitor changed"
    COMPETITOR_DELETED = "competitor.deleted", "Competitor deleted"
    COMPETITOR_RETIRED = "competitor.retired", "Competitor retired"
    PROMPTS_IMPORTED = "prompts.imported", "Prompts imported"
    PROMPT_CREATED = "prompt.created", "Prompt created"
    PROMPT_CHANGED = "prompt.changed", "Prompt changed"
    PROMPT_DELETED = "prompt.deleted", "Prompt deleted"
    BOARD_PUBLISHED = "board.published", "Leaderboard published"
    BOARD_UNPUBLISHED = "board.unpublished", "Leaderboard unpublished"
    WEBHOOK_CREATED = "webhook.created", "Webhook created"
    WEBHOOK_CHANGED = "webhook.changed", "Webhook changed"
    WEBHOOK_DELETED = "webhook.deleted", "Webhook deleted"
    WEBHOOK_DISABLED = "webhook.disabled", "Webhook disabled after failed deliveries"
    WEBHOOK_ENABLED = "webhook.enabled", "Webhook re-enabled"
    EXPERIMENT_CREATED = "experiment.created", "Experiment created"
    EXPERIMENT_CHANGED = "experiment.changed", "Experiment changed"
    EXPERIMENT_DELETED = "experiment.deleted", "Experiment deleted"
    SHADOW_BATTLES_IMPORTED = "shadow_battles.imported", "Shadow battles imported"
    GOLD_ITEM_CREATED = "gold_item.created", "Gold item created"
    GOLD_ITEM_CHANGED = "gold_item.changed", "Gold item changed"
    GOLD_ITEM_DELETED = "gold_item.deleted", "Gold item deleted"
    STUDY_CREATED = "study.created", "Crowd study created"
    STUDY_CHANGED = "study.changed", "Crowd study changed"
    STUDY_DELETED = "study.deleted", "Crowd study deleted"
    RUBRIC_CREATED = "rubric.created", "Judge rubric version created"
    JUDGE_CREATED = "judge.created", "Judge created"
    JUDGE_CHANGED = "judge.changed", "Judge changed"
    JUDGE_RUN_CREATED = "judge_run.created", "Judge run started"
    STUDY_CLOSED = "study.closed", "Crowd study closed"
    ATTRIBUTE_BOARD_CREATED = "attribute_board.created", "Attribute board created"
    ATTRIBUTE_BOARD_CHANGED = "attribute_board.changed", "Attribute board changed"
    ATTRIBUTE_BOARD_DELETED = "attribute_board.deleted", "Attribute board deleted"
    ATTRIBUTE_ENTITIES_ADDED = "attribute_board.entities_added", "Entities added to an attribute board"
    ATTRIBUTE_RUN_STARTED = "attribute_board.run_started", "Attribute board run started"
    ATTRIBUTE_BOARD_PUBLISHED = "attribute_board.published", "Attribute board published"
    ATTRIBUTE_BOARD_UNPUBLISHED = "attribute_board.unpublished", "Attribute board unpublished"
    RATER_ATTRIBUTE_CREATED = "rater_attribute.created", "Rater attribute set"
    RATER_ATTRIBUTE_CHANGED = "rater_attribute.changed", "Rater attribute changed"
    RATER_ATTRIBUTE_DELETED = "rater_attribute.deleted", "Rater attribute removed"

    @classmethod
    def of(cls, obj: models.Model, verb: str) -> AuditAction:
        """The action for ``verb`` ("created", "changed", "deleted") on a row of ``obj``'s model;
        ``ValueError`` for a model or verb the enumeration does not know."""
        model = obj._meta.model_name or ""
        return cls(f"{_AUDIT_SUBJECTS.get(model, model)}.{verb}")


# Audit subjects named differently from their model.
_AUDIT_SUBJECTS = {
    "raterpool": "pool",
    "modelendpoint": "endpoint",
    "apikey": "api_key",
    "webhookendpoint": "webhook",
    "golditem": "gold_item",
    "judgerun": "judge_run",
    "attributeboard": "attribute_board",
    "raterattribute": "rater_attribute",
}


class AuditEvent(models.Model):
    """One row per state change a manager makes, written in the same transaction as the change."""

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="audit_events")
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    action = models.CharField(max_length=64, choices=AuditAction.choices)
    object_type = models.CharField(max_length=64)
    object_id = models.CharField(max_length=64)
    data = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    objects = TenantManager()

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.action} {self.object_type}:{self.object_id}"


class RaterFlag(models.Model):
    """A judgement that a rater's votes should not count (a script, a careless vendor account).

    The votes themselves are never touched; ranking leaves out votes of raters with a flag *in force*
    (not cleared) and records which flags those were. A flag is a new row each time it is raised, by a
    manager or by a check (attention checks, gold accuracy, the sequential outlier test), with what the
    check saw (``evidence``); what it says is never edited. A manager who reviews it and lets the rater
    back in *clears* it: ``cleared_at`` / ``cleared_by`` / ``clear_note`` are stamped once (a
    conditional update from "not cleared", audited), and the row stays as the record of both. A later
    problem raises a new row. At most one flag of each kind is in force per rater and organisation (a
    partial unique constraint), so two checks racing end with one row."""

    class Kind(models.TextChoices):
        MANUAL = "manual", "Raised by a manager"
        ATTENTION = "attention", "Failed attention checks"
        GOLD_ACCURACY = "gold_accuracy", "Gold accuracy below the campaign's minimum"
        OUTLIER = "outlier", "Sequential test against the consensus"

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="rater_flags")
    rater = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="flags")
    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.MANUAL, db_default=Kind.MANUAL)
    # The campaign whose votes raised it (an id, not a key: campaigns live in the battles app, which
    # depends on this one). The flag itself counts across the organisation, as a manager's always did.
    campaign_id = models.PositiveBigIntegerField(null=True, blank=True, editable=False)
    reason = models.CharField(max_length=300)
    evidence = models.JSONField(default=dict, blank=True, editable=False)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    cleared_at = models.DateTimeField(null=True, blank=True, editable=False)
    cleared_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+", editable=False
    )
    clear_note = models.CharField(max_length=300, blank=True, default="", editable=False)

    objects = TenantManager()

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["organization", "rater", "kind"],
                condition=models.Q(cleared_at__isnull=True),
                name="rater_flag_one_in_force_per_kind",
            )
        ]

    def __str__(self) -> str:
        return f"{self.rater} flagged: {self.reason}"

    @property
    def in_force(self) -> bool:
        return self.cleared_at is None

    def clean(self) -> None:
        from django.core.exceptions import ValidationError

        if (
            self.organization_id is not None
            and self.rater_id is not None
            and not Membership.objects.filter(organization_id=self.organization_id, user_id=self.rater_id).exists()
        ):
            raise ValidationError({"rater": "Only a member of the organisation can be flagged in it."})


# The flags that count: raised and not cleared.
FLAG_IN_FORCE = models.Q(cleared_at__isnull=True)


# An attribute's key: lower-case, a letter first (``expertise``, ``language``, ``occupation``, ``country``).
RATER_ATTRIBUTE_KEY = re.compile(r"^[a-z][a-z0-9_]{0,39}$")
# The keys the console suggests; any other key of the same form is allowed.
RATER_ATTRIBUTE_COMMON_KEYS = ("expertise", "language", "occupation")
RATER_ATTRIBUTE_VALUE_MAX = 100


def rater_attribute_key_validate(value: str) -> None:
    from django.core.exceptions import ValidationError

    if not RATER_ATTRIBUTE_KEY.match(value or ""):
        raise ValidationError("A key is lower-case letters, digits and _, a letter first, 40 at most (e.g. language).")


class RaterAttribute(models.Model):
    """One attribute of a rater in an organisation (``language = fr``, ``expertise = medicine``): set by a
    manager in the console, or taken from a crowd vendor's link when a participant first arrives (the
    study's ``attribute_parameters``). One value per rater and key; a change is a new value on the same
    row, audited. Leaderboards split the votes by these values (rater-segment boards,
    docs/statistics/segments.md); the vote log itself is never touched."""

    class Source(models.TextChoices):
        MANAGER = "manager", "Set by a manager"
        VENDOR = "vendor", "From a crowd vendor's link"

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="rater_attributes")
    rater = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="rater_attributes")
    key = models.CharField(
        max_length=40,
        validators=[rater_attribute_key_validate],
        help_text="e.g. " + ", ".join(RATER_ATTRIBUTE_COMMON_KEYS) + " (lower-case letters, digits and _).",
    )
    value = models.CharField(max_length=RATER_ATTRIBUTE_VALUE_MAX)
    source = models.CharField(max_length=16, choices=Source.choices, default=Source.MANAGER)
    updated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+", editable=False
    )
    updated_at = models.DateTimeField(auto_now=True)

    objects = TenantManager()

    class Meta:
        ordering = ["organization", "key", "value", "rater"]
        constraints = [
            models.UniqueConstraint(fields=["organization", "rater", "key"], name="rater_attribute_one_per_key")
        ]

    def __str__(self) -> str:
        return f"{self.rater}: {self.key} = {self.value}"

    def clean(self) -> None:
        from django.core.exceptions import ValidationError

        self.key = (self.key or "").strip().lower()
        self.value = (self.value or "").strip()
        if not self.value:
            raise ValidationError({"value": "Give a value."})
        if (
            self.organization_id is not None
            and self.rater_id is not None
            and not Membership.objects.filter(organization_id=self.organization_id, user_id=self.rater_id).exists()
        ):
            raise ValidationError({"rater": "Only a member of the organisation can carry its attributes."})


_RATE = re.compile(r"^[1-9][0-9]{0,6}/(s|m|h|d)$")


def rate_limit_validate(value: str) -> None:
    """``<count>/<s|m|h|d>``, the form DRF's throttles and django-ratelimit read."""
    from django.core.exceptions import ValidationError

    if value and not _RATE.match(value):
        raise ValidationError("Write a rate as <count>/<s|m|h|d>, e.g. 600/m.")


def api_key_hash(key: str) -> str:
    # Keys are 32 random bytes: a fast hash is enough (no dictionary to attack), and lookups stay cheap.
    return hashlib.sha256(key.encode()).hexdigest()


class ApiKey(models.Model):
    """An organisation's key for the REST API. Only a sha256 of the key is stored; the key itself is
    shown once, at creation. The prefix identifies a key in lists and logs without revealing it.

    Scopes are ordered, read < write < owner, and a key never exceeds the person who made it: its scope
    is capped by the maker's role when it is made (``API_KEY_SCOPE_OF_ROLE``: an owner may make any, a
    manager read or write, a viewer read) and again at every use, so a key whose maker was demoted acts
    at the maker's new level, and one whose maker left the organisation (or was deactivated) is refused.
    A key made by the operator's code (no maker) keeps its scope."""

    class Scope(models.TextChoices):
        READ = "read", "Read only"
        WRITE = "write", "Read and write"
        OWNER = "owner", "Owner: read, write and the organisation's webhooks"

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="api_keys")
    name = models.CharField(max_length=120)
    prefix = models.CharField(max_length=16, unique=True, editable=False)
    hashed_key = models.CharField(max_length=64, unique=True, editable=False)
    scope = models.CharField(max_length=8, choices=Scope.choices, default=Scope.READ)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)
    revoked_at = models.DateTimeField(null=True, blank=True)
    rate_limit = models.CharField(
        max_length=16,
        blank=True,
        validators=[rate_limit_validate],
        help_text="Requests allowed per second, minute, hour or day, e.g. 600/m; blank: the platform default.",
    )

    objects = TenantManager()

    class Meta:
        ordering = ["organization", "name"]
        verbose_name = "API key"

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"

    def effective_scope(self) -> str | None:
        """The scope this key acts with now: its own, capped by its maker's current role in its
        organisation (``None``: the maker may no longer use the API there, so neither may the key). A key
        made by the operator's own code (no maker) keeps its scope. Querysets annotated by
        ``api_keys_with_maker_role`` (the request's key, the console's list) spare the role's query."""
        if self.created_by_id is None:
            return self.scope
        cap = api_key_scope_cap_of(self.created_by, self.organization_id, role=getattr(self, "maker_role", _LOOK_UP))
        return api_key_scope_capped(self.scope, cap)


_LOOK_UP = object()


def api_key_scope_cap_of(user: Any, organization_id: int, *, role: object = _LOOK_UP) -> str | None:
    """The strongest scope ``user`` may give a key of the organisation, and use through one: an owner's is
    owner, a manager's write, a viewer's read, a rater's (or an outsider's, or an inactive account's) none;
    a superuser any. ``None`` as the user is the operator's own code (management commands, benchmarks): any.
    ``role``: the user's role there when the caller already read it (``None``: no membership)."""
    if user is None:
        return ApiKey.Scope.OWNER
    if not user.is_authenticated or not user.is_active:
        return None
    if user.is_superuser:
        return ApiKey.Scope.OWNER
    if role is _LOOK_UP:
        with scopes_disabled():  # the user's own role, as the request's scope itself is read (raters.tenancy)
            role = (
                Membership.objects.filter(user_id=user.pk, organization_id=organization_id)
                .values_list("role", flat=True)
                .first()
            )
    return API_KEY_SCOPE_OF_ROLE.get(str(role or ""))


def api_keys_with_maker_role(queryset: models.QuerySet[ApiKey]) -> models.QuerySet[ApiKey]:
    """``queryset`` with the role of each key's maker in the key's organisation (``maker_role``), read in
    the same query: ``ApiKey.effective_scope`` then makes none (select the maker too: ``created_by``)."""
    with scopes_disabled():  # the maker's own role, whatever the request's scope
        role = Membership.objects.filter(
            user_id=models.OuterRef("created_by_id"), organization_id=models.OuterRef("organization_id")
        ).values("role")[:1]
    return queryset.annotate(maker_role=models.Subquery(role))


API_KEY_SCOPES = (ApiKey.Scope.READ, ApiKey.Scope.WRITE, ApiKey.Scope.OWNER)  # weakest first
# The strongest key each role may make (and use): raters make none.
API_KEY_SCOPE_OF_ROLE: dict[str, str] = {
    Role.OWNER: ApiKey.Scope.OWNER,
    Role.MANAGER: ApiKey.Scope.WRITE,
    Role.VIEWER: ApiKey.Scope.READ,
}


def api_key_scope_allows(scope: str | None, needed: str) -> bool:
    """Whether a key of ``scope`` may do what needs ``needed`` (read < write < owner)."""
    return scope is not None and API_KEY_SCOPES.index(ApiKey.Scope(scope)) >= API_KEY_SCOPES.index(ApiKey.Scope(needed))


def api_key_scope_capped(scope: str, cap: str | None) -> str | None:
    """The weaker of a key's scope and a cap (``None``: no scope at all)."""
    if cap is None:
        return None
    return scope if api_key_scope_allows(cap, scope) else cap


class WebhookEvent(models.TextChoices):
    """What an organisation can subscribe to (docs/api/webhooks.md)."""

    LEADERBOARD_UPDATED = "leaderboard.updated", "Leaderboards recomputed"
    EXPORT_READY = "export.ready", "Export ready"
    CAMPAIGN_CLOSED = "campaign.closed", "Campaign closed"
    BATTLE_RATED = "battle.rated", "Battle rated"
    PING = "ping", "Test event"


def _webhook_secret() -> str:
    return f"whsec_{secrets.token_urlsafe(32)}"


def _webhook_events_default() -> list[str]:
    return [event for event in WebhookEvent.values if event != WebhookEvent.PING]


class WebhookEndpoint(models.Model):
    """An organisation's receiver of events: a URL the platform POSTs signed JSON to.

    The secret is stored in plain text because signing needs it (HMAC); it is returned once, to whoever
    creates the endpoint, and is shown afterwards to the organisation's owners only (the console's
    webhook pages are for owners). The URL is checked against the outbound rule (core/outbound.py)
    where it is entered and again before every send."""

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="webhooks")
    url = models.URLField(max_length=2000)
    description = models.CharField(max_length=200, blank=True)
    events = models.JSONField(default=_webhook_events_default, help_text="The event types this endpoint receives.")
    secret = models.CharField(max_length=100, default=_webhook_secret, editable=False)
    active = models.BooleanField(default=True)
    # Failed attempts in a row (any delivery) and when that run began; a success resets both.
    consecutive_failures = models.PositiveIntegerField(default=0, editable=False)
    failing_since = models.DateTimeField(null=True, blank=True, editable=False)
    disabled_at = models.DateTimeField(null=True, blank=True, editable=False)
    disabled_reason = models.CharField(max_length=500, blank=True, editable=False)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    objects = TenantManager()

    class Meta:
        ordering = ["organization", "created_at", "id"]
        verbose_name = "webhook"

    def __str__(self) -> str:
        return self.url

    def subscribes_to(self, event: str) -> bool:
        return event == WebhookEvent.PING or event in (self.events or [])

    def clean(self) -> None:
        from django.core.exceptions import ValidationError

        super().clean()
        events = self.events
        if not isinstance(events, list) or not events or not all(isinstance(e, str) for e in events):
            raise ValidationError({"events": "Choose at least one event."})
        subscribable = _webhook_events_default()  # every event but the test event, which is sent on request
        unknown = sorted(set(events) - set(subscribable))
        if unknown:
            raise ValidationError(
                {"events": f"Unknown events: {', '.join(unknown)}. Known: {', '.join(subscribable)}."}
            )
        self.events = sorted(set(events))
        if self.url:
            try:
                webhook_url_check(self.url)
            except ValueError as exc:
                raise ValidationError({"url": str(exc)}) from None


class WebhookDelivery(models.Model):
    """One event for one endpoint, and how sending it went. ``attempts`` counts tries; ``next_attempt_at``
    is when the next one is due (the beat sweep sends what is due), null once it is final.

    pending: not tried yet; failed: the last try failed and another is scheduled; succeeded: a 2xx;
    gave_up: final without success (out of attempts, the endpoint disabled or its URL refused)."""

    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        FAILED = "failed", "Failed, will retry"
        SUCCEEDED = "succeeded", "Succeeded"
        GAVE_UP = "gave_up", "Gave up"

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="webhook_deliveries")
    endpoint = models.ForeignKey(WebhookEndpoint, on_delete=models.CASCADE, related_name="deliveries")
    event_id = models.UUIDField(db_index=True)
    event = models.CharField(max_length=64, choices=WebhookEvent.choices)
    payload = models.JSONField(default=dict)
    attempts = models.PositiveIntegerField(default=0)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    response_status = models.PositiveIntegerField(null=True, blank=True)
    response_excerpt = models.CharField(max_length=1000, blank=True)
    error = models.CharField(max_length=500, blank=True)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    duration_ms = models.PositiveIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    delivered_at = models.DateTimeField(null=True, blank=True)

    objects = TenantManager()

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name_plural = "webhook deliveries"
        constraints = [
            models.UniqueConstraint(fields=["endpoint", "event_id"], name="webhook_delivery_unique_event"),
        ]
        indexes = [
            # The beat sweep: what is due, across organisations.
            models.Index(
                fields=["next_attempt_at"],
                name="webhook_delivery_due",
                condition=models.Q(status__in=["pending", "failed"]),
            ),
            models.Index(fields=["endpoint", "-created_at"], name="webhook_delivery_endpoint"),
            # The retention purge (``webhook_deliveries_purge``): finished deliveries, oldest first.
            models.Index(
                fields=["created_at"],
                name="webhook_delivery_finished",
                condition=models.Q(status__in=["succeeded", "gave_up"]),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.event} {self.event_id} to {self.endpoint_id} ({self.status})"
