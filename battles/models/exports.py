"""Export jobs: a campaign's data written to a file by a worker, then downloaded."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models

from raters.models import Organization
from raters.tenancy import TenantManager

from .campaigns import Campaign


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
