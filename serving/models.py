"""Where a competitor's answers come from: a model on a Triton server."""

from __future__ import annotations

import re
from functools import lru_cache
from typing import TYPE_CHECKING

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.db import models

from core.outbound import AddressRefused, AllowEntry, Resolver, address_approve, allow_list_parse, host_port_split
from raters.models import Organization
from raters.tenancy import TenantManager

if TYPE_CHECKING:
    from .triton.client import EndpointSpec


URL_PATTERN = r"^(\[[0-9a-fA-F:]+\]|[A-Za-z0-9.-]+):[0-9]{1,5}$"


@lru_cache(maxsize=8)
def _model_hosts(items: tuple[str, ...]) -> tuple[AllowEntry, ...]:
    return allow_list_parse(items)


def endpoint_address_pin(url: str, *, resolver: Resolver | None = None) -> str | None:
    """Where to connect for a model server at ``url`` (host:port): the approved address as ``address:port``
    (``[v6]:port``), or None where the operator lists the host by name (the client resolves it). Raise
    ``AddressRefused`` unless the address is listed in ``ARENA_MODEL_HOSTS`` or resolves to public
    addresses only (core/outbound.py). The caller connects to the address returned, so the name is not
    resolved a second time between the check and the connection (DNS rebinding)."""
    try:
        host, port = host_port_split(url)
    except ValueError:
        raise AddressRefused("Enter host:port, for example triton:8001 (no scheme, no path).") from None
    if port is None:
        raise AddressRefused("Enter host:port, for example triton:8001 (no scheme, no path).")
    allowed = _model_hosts(tuple(settings.ARENA_MODEL_HOSTS))
    approved = address_approve(host, port, allowed=allowed, resolver=resolver)
    if not approved:
        return None
    first = approved[0].split("%", 1)[0]
    return f"[{first}]:{port}" if ":" in first else f"{first}:{port}"


def endpoint_address_check(url: str) -> None:
    """Raise ``AddressRefused`` unless a model server may be called at ``url`` (``endpoint_address_pin``)."""
    endpoint_address_pin(url)


class Health(models.TextChoices):
    UNKNOWN = "unknown", "Unknown"  # never checked: treated as available (battles void if it fails)
    READY = "ready", "Ready"
    DOWN = "down", "Down"


class ModelEndpoint(models.Model):
    class Protocol(models.TextChoices):
        GRPC = "grpc", "gRPC"
        HTTP = "http", "HTTP"

    Health = Health

    class Contract(models.TextChoices):
        # The wire contracts of serving/triton/client.py (its docstring says what each sends).
        ARENA = "arena", "Arena (text_input, typed parameters)"
        VLLM = "vllm", "Triton vLLM backend (gRPC stream)"
        TRTLLM = "trtllm", "TensorRT-LLM ensemble (gRPC stream)"

    class PromptFormat(models.TextChoices):
        # serving/triton/templates.py renders a conversation into the one text_input.
        RAW = "raw", "Raw: the last user message (system prompt in its own tensor, arena contract only)"
        CHATML = "chatml", "ChatML (SmolLM2, Qwen)"
        GEMMA = "gemma", "Gemma (<start_of_turn>)"
        LLAMA3 = "llama3", "Llama 3 Instruct"

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="endpoints")
    name = models.CharField(max_length=120, help_text="The model's public name, revealed after the vote.")
    url = models.CharField(
        max_length=255,
        help_text="Triton server address, host:port (no scheme).",
        validators=[RegexValidator(URL_PATTERN, "Enter host:port, for example triton:8001 (no scheme, no path).")],
    )
    protocol = models.CharField(max_length=8, choices=Protocol.choices, default=Protocol.GRPC)
    model_name = models.CharField(max_length=120, help_text="Model name in the Triton repository.")
    model_version = models.CharField(max_length=20, blank=True, help_text="Empty: the server's policy.")
    # Battles are generated inside the rater's request: the timeout stays below the web server's own
    # request timeout (120 s in docker/), or a slow model would kill the worker instead of voiding.
    timeout_s = models.FloatField(default=60.0, validators=[MinValueValidator(0.1), MaxValueValidator(110.0)])
    contract = models.CharField(
        max_length=8,
        choices=Contract.choices,
        default=Contract.ARENA,
        blank=True,  # left out of a form (or an older API client): the default
        help_text="What the server expects: the project's models, Triton's vLLM backend or a TensorRT-LLM ensemble.",
    )
    prompt_format = models.CharField(
        max_length=8,
        choices=PromptFormat.choices,
        default=PromptFormat.RAW,
        blank=True,
        help_text="How the system prompt and the conversation become the model's text input (its chat template).",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    # Written by the periodic readiness check only (services.endpoint_health_record), never by a form.
    health = models.CharField(max_length=8, choices=Health.choices, default=Health.UNKNOWN, editable=False)
    health_since = models.DateTimeField(null=True, blank=True, editable=False, help_text="When the state began.")
    health_checked_at = models.DateTimeField(null=True, blank=True, editable=False)
    health_detail = models.CharField(max_length=500, blank=True, editable=False)
    # Failed checks in a row (hysteresis: the endpoint goes down at ARENA_HEALTH_DOWN_AFTER of them).
    health_failures = models.PositiveIntegerField(default=0, editable=False)
    health_failing_since = models.DateTimeField(null=True, blank=True, editable=False)

    objects = TenantManager()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["organization", "name"], name="endpoint_unique_name")]
        ordering = ["organization", "name"]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        super().clean()
        self.contract = self.contract or self.Contract.ARENA
        self.prompt_format = self.prompt_format or self.PromptFormat.RAW
        if self.contract != self.Contract.ARENA and self.protocol != self.Protocol.GRPC:
            # Both GPU backends are decoupled models, which Triton serves over the gRPC stream only.
            raise ValidationError({"protocol": "The vLLM and TensorRT-LLM contracts need gRPC."})
        if re.match(URL_PATTERN, self.url or ""):  # otherwise the field's validator has said what is wrong
            try:
                endpoint_address_check(self.url)
            except AddressRefused as exc:
                allowed = [item for item in settings.ARENA_MODEL_HOSTS if "/" not in item]
                # Managers pick from the operator's list: name its servers (networks stay unsaid).
                listed = f" Model servers of this platform: {', '.join(allowed)}." if allowed else ""
                raise ValidationError({"url": f"{exc}{listed}"}) from None

    def spec(self) -> EndpointSpec:
        from .triton.client import EndpointSpec

        # The address is checked again at each call (what a name resolves to can change after it was saved),
        # and the call connects to the address that check approved.
        return EndpointSpec(
            url=self.url,
            protocol=self.protocol,  # type: ignore[arg-type]
            model_name=self.model_name,
            model_version=self.model_version,
            timeout_s=self.timeout_s,
            guard=endpoint_address_pin,
            contract=self.contract,  # type: ignore[arg-type]
            prompt_format=self.prompt_format,  # type: ignore[arg-type]
        )


class EndpointOutage(models.Model):
    """A period in which the endpoint was down, so its competitors got no new battles: opened when the
    readiness check declares it down, ended when a check finds it ready again. Rows are never deleted
    or rewritten; the one change a row sees is its ``ended_at``, set once (a conditional update)."""

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="endpoint_outages")
    endpoint = models.ForeignKey(ModelEndpoint, on_delete=models.CASCADE, related_name="outages")
    # From here on the endpoint's competitors were skipped (after the hysteresis' failed checks).
    started_at = models.DateTimeField()
    # The first failed check of the run that led to it (started_at minus the hysteresis delay).
    first_failed_at = models.DateTimeField()
    ended_at = models.DateTimeField(null=True, blank=True)
    reason = models.CharField(max_length=500, help_text="What the readiness check said when it went down.")

    objects = TenantManager()

    class Meta:
        constraints = [
            # One open outage per endpoint: two checkers racing to open one cannot both succeed.
            models.UniqueConstraint(
                fields=["endpoint"], condition=models.Q(ended_at__isnull=True), name="outage_one_open_per_endpoint"
            ),
            models.CheckConstraint(
                condition=models.Q(ended_at__isnull=True) | models.Q(ended_at__gte=models.F("started_at")),
                name="outage_ends_after_start",
            ),
        ]
        indexes = [models.Index(fields=["endpoint", "started_at"])]
        ordering = ["-started_at"]

    def __str__(self) -> str:
        return f"{self.endpoint} down from {self.started_at:%Y-%m-%d %H:%M}"
