"""Exports: a job written to a file by a worker (streamed, hashed, renamed into place), then
downloaded; purged after the retention period."""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from celery import shared_task
from django.conf import settings
from django.contrib.auth.models import User
from django.db import models, transaction
from django.utils import timezone

from core.errors import Invalid
from core.tasks import TransactionAwareTask
from raters.hooks import send_on_commit
from raters.models import ApiKey, WebhookEvent
from raters.services import webhook_event_emit
from raters.tenancy import TenantTask, scopes_disabled

from .. import exporting, hooks, selectors
from ..exporting import VoteFilters
from ..models import Campaign, ExportJob

logger = logging.getLogger(__name__)


# --- Exports: a job written to a file by a worker, then downloaded. -------------------------------


def export_job_create(
    *,
    campaign: Campaign,
    requested_by: User | None,
    api_key: ApiKey | None,
    kind: str,
    format: str,
    texts: bool,
    filters: VoteFilters,
) -> ExportJob:
    """Queue an export of the campaign's data. Reading the data is all it does, so anyone who may read
    the campaign's vote log may ask (read-only API keys included). The job is sent to a worker when the
    transaction commits (``export_job_run_task``, the ``exports`` queue)."""
    if kind not in ExportJob.Kind.values or (kind != ExportJob.Kind.VOTES and hooks.export_kind(kind) is None):
        raise Invalid(f"Unknown export kind {kind!r}.", field_errors={"kind": ["Unknown export kind."]})
    if kind == ExportJob.Kind.PREFERENCE_PAIRS and format != ExportJob.Format.JSONL:
        raise Invalid(
            "Preference pairs are exported as JSON lines only (a conversation does not fit a CSV row).",
            field_errors={"format": ["Preference pairs are exported as jsonl."]},
        )
    with transaction.atomic():
        job = ExportJob.objects.create(
            organization_id=campaign.organization_id,
            campaign=campaign,
            requested_by=requested_by,
            requested_by_key=api_key,
            kind=kind,
            format=format,
            params={"texts": texts, "filters": filters.as_params()},
        )
        export_job_run_task.delay(str(job.pk), organization_id=job.organization_id)
    return job


def export_event_payload(job: ExportJob) -> dict[str, Any]:
    """What the ``export.ready`` event (``hooks.export_ready``, the webhooks) says about a finished job."""
    return {
        "id": str(job.pk),
        "campaign_id": job.campaign_id,
        "kind": job.kind,
        "format": job.format,
        "status": job.status,
        "rows": job.rows,
        "bytes": job.bytes,
        "sha256": job.sha256,
        "error": job.error,
        "finished_at": job.finished_at.isoformat() if job.finished_at else None,
    }


def export_path(job: ExportJob) -> Path:
    return Path(settings.ARENA_EXPORT_ROOT) / job.path


def export_relative_path(job: ExportJob) -> Path:
    """Where the worker writes the job's file, relative to ARENA_EXPORT_ROOT (its ``path`` once done)."""
    return Path(str(job.organization_id)) / job.filename


def export_file_delete(relative: str | Path) -> None:
    """Delete an export's file (``relative`` to ARENA_EXPORT_ROOT); one already gone is no error."""
    (Path(settings.ARENA_EXPORT_ROOT) / relative).unlink(missing_ok=True)


def export_job_deleted(*, job: ExportJob, using: str) -> None:
    """A job's row is being deleted (by itself, or with its campaign or organisation): its file goes
    once the delete commits, so a rolled-back delete keeps a file its row still points at. Both its
    recorded ``path`` and where its worker writes it are removed: a job deleted while it ran records
    no path (and its worker, finding the row gone, removes what it wrote). The delete has committed
    by then, so a file that cannot be removed is logged, never raised."""
    paths = {str(path) for path in (job.path, export_relative_path(job)) if path}

    def delete() -> None:
        for path in paths:
            try:
                export_file_delete(path)
            except OSError:
                logger.exception("export %s: file %s not deleted with its job", job.pk, path)

    transaction.on_commit(delete, using=using)


def _export_content(job: ExportJob) -> tuple[Iterator[bytes | str], Callable[[], int] | None, dict[str, Any] | None]:
    """The job's encoded content in chunks; how many rows passed (None: count the lines, as JSON lines
    have one row per line); the kind's audit."""
    texts = bool(job.params.get("texts"))
    filters = VoteFilters.from_params(job.params.get("filters") or {})
    if job.kind == ExportJob.Kind.VOTES:
        votes = selectors.votes_filtered(campaign=job.campaign, filters=filters)
        if job.format == ExportJob.Format.CSV:
            events = exporting.Counted(selectors.vote_events(votes=votes, texts=texts))
            return exporting.csv_from_events(events, texts=texts), lambda: events.count, None
        return selectors.vote_event_jsonl(votes=votes, texts=texts), None, None
    kind = hooks.export_kind(job.kind)
    if kind is None:
        raise Invalid(f"Unknown export kind {job.kind!r}.")
    return exporting.jsonl_from_events(kind.rows(job.campaign, filters)), None, kind.audit(job.campaign, filters)


def export_job_run(*, job_id: str) -> ExportJob | None:
    """Write the job's file: streamed from the database to disk chunk by chunk (flat memory), hashed
    and counted on the way, renamed into place when complete; the job then records rows, bytes,
    sha256 and when it finished, and ``export.ready`` is sent. A failure marks the job failed with the
    reason and leaves no partial file. Claimed with a conditional update, so a redelivered task does
    nothing, unless the job has been running for longer than a task may run (its worker was killed:
    the redelivery starts it again). Not one transaction: the job shows ``running`` while it runs; a
    job deleted meanwhile (with its campaign) leaves no file and returns None."""
    now = timezone.now()
    abandoned = now - timedelta(seconds=settings.CELERY_TASK_TIME_LIMIT)
    claimed = (
        ExportJob.objects.filter(pk=job_id)
        .filter(
            models.Q(status=ExportJob.Status.QUEUED)
            | models.Q(status=ExportJob.Status.RUNNING, started_at__lt=abandoned)
        )
        .update(status=ExportJob.Status.RUNNING, started_at=now)
    )
    job = ExportJob.objects.select_related("campaign").filter(pk=job_id).first()
    if not claimed or job is None:
        return job
    relative = export_relative_path(job)
    target = Path(settings.ARENA_EXPORT_ROOT) / relative
    partial = target.with_name(target.name + ".part")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        chunks, counted, audit = _export_content(job)
        digest = hashlib.sha256()
        size = lines = 0
        with partial.open("wb") as out:
            for chunk in chunks:
                data = chunk.encode() if isinstance(chunk, str) else chunk
                out.write(data)
                digest.update(data)
                size += len(data)
                lines += data.count(b"\n")
        os.replace(partial, target)
        rows = counted() if counted is not None else lines
    except Exception as exc:
        with contextlib.suppress(OSError):
            partial.unlink(missing_ok=True)
        logger.exception("export %s failed", job.pk)
        changes: dict[str, Any] = {
            "status": ExportJob.Status.FAILED,
            "error": (f"{type(exc).__name__}: {exc}")[:2000],
            "finished_at": timezone.now(),
        }
    else:
        changes = {
            "status": ExportJob.Status.DONE,
            "rows": rows,
            "bytes": size,
            "sha256": digest.hexdigest(),
            "path": str(relative),
            "audit": audit,
            "finished_at": timezone.now(),
        }
    with transaction.atomic():
        if not ExportJob.objects.filter(pk=job.pk).update(**changes):
            # The job was deleted while it ran (with its campaign): the file has no row to own it.
            export_file_delete(relative)
            return None
        job.refresh_from_db()
        # The webhooks' deliveries are written with the job's final state and sent after the commit.
        webhook_event_emit(
            organization_id=job.organization_id, event=WebhookEvent.EXPORT_READY, payload=export_event_payload(job)
        )
        send_on_commit(
            hooks.export_ready,
            sender=ExportJob,
            organization_id=job.organization_id,
            event="export.ready",
            payload=export_event_payload(job),
        )
    return job


# Exports run on their own queue (core/queues.py: exports): long reads of the log, never in front of a
# leaderboard or behind model calls.
@shared_task(base=TenantTask, acks_late=True, name="battles.tasks.export_job_run_task")
def export_job_run_task(job_id: str, *, organization_id: int) -> str:
    job = export_job_run(job_id=job_id)
    return job.status if job is not None else "missing"


def export_jobs_purge(*, now: datetime | None = None) -> int:
    """Delete the files of finished exports older than ARENA_EXPORT_RETENTION_DAYS and mark their jobs
    expired (the job rows stay: who exported what, when). Across organisations: beat's task."""
    cutoff = (now or timezone.now()) - timedelta(days=settings.ARENA_EXPORT_RETENTION_DAYS)
    purged = 0
    with scopes_disabled():
        old = list(
            ExportJob.objects.filter(
                status__in=(ExportJob.Status.DONE, ExportJob.Status.FAILED), finished_at__lt=cutoff
            ).values_list("pk", "path")
        )
        for pk, path in old:
            if path:
                export_file_delete(path)
            purged += ExportJob.objects.filter(pk=pk).update(status=ExportJob.Status.EXPIRED, path="")
    return purged


@shared_task(base=TransactionAwareTask, name="battles.tasks.export_jobs_purge_task")
def export_jobs_purge_task() -> int:
    """Beat: files of exports past the retention period are deleted, their jobs marked expired."""
    return export_jobs_purge()
