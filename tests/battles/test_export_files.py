"""An export's file goes with its job's row, however the row goes (the campaign's or the organisation's
delete cascades to it), once the delete commits; a rolled-back delete keeps the file."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.db import transaction

from battles import services, tasks
from battles.exporting import VoteFilters
from battles.models import Competitor, ExportJob
from battles.services import exports as export_services
from tests.conftest import Tenant


@pytest.fixture
def export_root(settings, tmp_path):  # type: ignore[no-untyped-def]
    settings.ARENA_EXPORT_ROOT = tmp_path / "exports"
    return Path(settings.ARENA_EXPORT_ROOT)


def _export_done(tenant: Tenant, owner) -> tuple[ExportJob, Path]:  # type: ignore[no-untyped-def]
    # A real job run by its task (a campaign without battles, so that it may be deleted: an empty file).
    job = services.export_job_create(
        campaign=tenant.campaign, requested_by=owner, api_key=None, kind="votes", format="jsonl", texts=False,
        filters=VoteFilters(),
    )  # fmt: skip
    tasks.export_job_run_task(str(job.pk), organization_id=job.organization_id)
    job.refresh_from_db()
    assert job.status == ExportJob.Status.DONE
    path = services.export_path(job)
    assert path.is_file()
    return job, path


def test_deleting_the_campaign_deletes_its_export_files_after_the_commit(
    acme, alice, export_root, django_capture_on_commit_callbacks
):
    job, path = _export_done(acme, alice)
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        services.campaign_delete(campaign=acme.campaign, actor=alice)
        assert path.is_file()  # not before the commit
    assert callbacks
    assert not ExportJob.objects.filter(pk=job.pk).exists()
    assert not path.exists()


def test_deleting_the_organisation_deletes_its_export_files(
    acme, globex, alice, charlie, export_root, django_capture_on_commit_callbacks
):
    _, ours = _export_done(acme, alice)
    _, theirs = _export_done(globex, charlie)
    # An organisation whose competitors hold endpoints cannot go (PROTECT): one that never had any.
    Competitor.objects.filter(organization=acme.organization).delete()
    with django_capture_on_commit_callbacks(execute=True):
        acme.organization.delete()
    assert not ours.exists()
    assert theirs.is_file()  # another organisation's export is untouched


def test_a_bulk_delete_of_jobs_deletes_their_files(acme, alice, export_root, django_capture_on_commit_callbacks):
    # A queryset delete: one statement, and still the signal for each row.
    files = [_export_done(acme, alice)[1] for _ in range(2)]
    with django_capture_on_commit_callbacks(execute=True):
        ExportJob.objects.filter(campaign=acme.campaign).delete()
    assert not any(path.exists() for path in files)


def test_a_rolled_back_delete_keeps_the_file(acme, alice, export_root, django_capture_on_commit_callbacks):
    job, path = _export_done(acme, alice)

    class Abort(Exception):
        pass

    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        with pytest.raises(Abort), transaction.atomic():
            services.campaign_delete(campaign=acme.campaign, actor=alice)
            raise Abort
    assert not callbacks  # the deletion's callback went with its rollback
    assert ExportJob.objects.filter(pk=job.pk).exists()
    assert path.is_file()


def test_a_file_already_gone_does_not_fail_the_delete(acme, alice, export_root, django_capture_on_commit_callbacks):
    job, path = _export_done(acme, alice)
    path.unlink()
    with django_capture_on_commit_callbacks(execute=True):
        job.delete()
    assert not ExportJob.objects.filter(pk=job.pk).exists()


def test_an_expired_job_is_deleted_without_a_file(acme, alice, export_root, django_capture_on_commit_callbacks):
    job, path = _export_done(acme, alice)
    ExportJob.objects.filter(pk=job.pk).update(status=ExportJob.Status.EXPIRED, path="")
    path.unlink()
    with django_capture_on_commit_callbacks(execute=True):
        services.campaign_delete(campaign=acme.campaign, actor=alice)
    assert not ExportJob.objects.exists()


def test_a_job_deleted_while_it_runs_leaves_no_file(
    acme, alice, export_root, monkeypatch, django_capture_on_commit_callbacks
):
    job = services.export_job_create(
        campaign=acme.campaign, requested_by=alice, api_key=None, kind="votes", format="jsonl", texts=False,
        filters=VoteFilters(),
    )  # fmt: skip
    content = export_services._export_content

    def campaign_deleted_meanwhile(running: ExportJob):  # type: ignore[no-untyped-def]
        # The campaign goes while the worker streams its rows (no file in place yet, no path recorded).
        services.campaign_delete(campaign=acme.campaign, actor=alice)
        return content(running)

    monkeypatch.setattr(export_services, "_export_content", campaign_deleted_meanwhile)
    with django_capture_on_commit_callbacks(execute=True):
        assert tasks.export_job_run_task(str(job.pk), organization_id=job.organization_id) == "missing"
    assert not ExportJob.objects.filter(pk=job.pk).exists()
    assert not [p for p in export_root.rglob("*") if p.is_file()]
