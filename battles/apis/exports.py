"""Asynchronous exports (the vote log, preference pairs) written to a file by a worker: ask for one,
follow its status, download its file."""

from __future__ import annotations

import base64
from typing import Any

from django.contrib.auth.models import User
from django.http import FileResponse, Http404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.parsers import JSONParser
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core.api import cursor_page, limit_parameter, page_of
from core.errors import Conflict
from raters.authentication import ApiKeyPrincipal

from .. import selectors, services
from ..models import ExportJob
from .access import _campaign, _principal
from .fields import StrictBooleanField
from .renderers import BinaryRenderer, CSVRenderer, JSONLinesRenderer
from .vote_filters import ExportFiltersBody, ExportFiltersInput

# --- Asynchronous exports: a job, its status, its file ------------------------------------------------


class ExportJobOutput(serializers.ModelSerializer[ExportJob]):
    download_url = serializers.SerializerMethodField(help_text="Where the file is, once the job is done.")

    class Meta:
        model = ExportJob
        fields = (
            "id",
            "campaign",
            "kind",
            "format",
            "params",
            "status",
            "rows",
            "bytes",
            "sha256",
            "error",
            "audit",
            "created_at",
            "started_at",
            "finished_at",
            "download_url",
        )

    def get_download_url(self, job: ExportJob) -> str | None:
        if job.status != ExportJob.Status.DONE:
            return None
        return f"/api/v1/campaigns/{job.campaign_id}/exports/{job.pk}/download"


JOB_EXAMPLE = {
    "id": "6d1f0a52-7f0e-4c55-a2b5-3f3f3e1d2c10",
    "campaign": 3,
    "kind": "votes",
    "format": "jsonl",
    "params": {"texts": True, "filters": {"since": "2026-11-01T00:00:00+00:00", "until": None, "category": ""}},
    "status": "done",
    "rows": 120345,
    "bytes": 398120331,
    "sha256": "3a7bd3e2360a3d29eea436fcfb7e44c735d117c42d1c1835420b6b9942dd4f1b",
    "error": "",
    "audit": None,
    "created_at": "2026-11-30T14:00:00+00:00",
    "started_at": "2026-11-30T14:00:01+00:00",
    "finished_at": "2026-11-30T14:00:09+00:00",
    "download_url": "/api/v1/campaigns/3/exports/6d1f0a52-7f0e-4c55-a2b5-3f3f3e1d2c10/download",
}


class ExportJobListCreateApi(APIView):
    """``GET``: the campaign's export jobs, newest first. ``POST``: ask for one (202, the job queued).

    Requesting an export reads data and changes none, so it is open to whoever may read the vote
    log, read-only API keys included (``read_key_may_post``)."""

    read_key_may_post = True
    parser_classes = [JSONParser]  # the filters are a nested object: JSON bodies only (a form is 415)

    class Input(serializers.Serializer[Any]):
        kind = serializers.ChoiceField(choices=ExportJob.Kind.values, default=ExportJob.Kind.VOTES)
        format = serializers.ChoiceField(choices=ExportJob.Format.values, default=ExportJob.Format.JSONL)
        texts = StrictBooleanField(default=False, help_text="Votes: add the texts of every turn.")
        filters = ExportFiltersBody(required=False)

    class PageQuery(serializers.Serializer[Any]):
        limit = serializers.IntegerField(required=False, min_value=1, max_value=500)
        cursor = serializers.CharField(required=False)

    @extend_schema(
        operation_id="exports_list",
        summary="Export jobs of a campaign",
        description="The campaign's export jobs, newest first, in cursor pages (`?limit=`, then `next`).",
        parameters=[
            limit_parameter("Jobs"),
            OpenApiParameter("cursor", str, description="From the previous page's `next`."),
        ],
        responses={200: page_of(ExportJobOutput)},
        examples=[
            OpenApiExample(
                "A finished job", value={"next": None, "previous": None, "results": [JOB_EXAMPLE]}, response_only=True
            )
        ],
        tags=["exports"],
    )
    def get(self, request: Request, campaign_id: int) -> Response:
        campaign = _campaign(request, campaign_id)
        self.PageQuery(data=request.query_params).is_valid(raise_exception=True)  # a bad limit is 400, not ignored
        return cursor_page(  # type: ignore[no-any-return]
            request=request,
            view=self,
            queryset=selectors.export_jobs_for(campaign=campaign),
            output=ExportJobOutput,
            ordering="-created_at",
        )

    @extend_schema(
        operation_id="exports_create",
        summary="Ask for an export",
        description=(
            "Queues an export written to a file by a worker: `kind` votes (the vote log, `format` jsonl or csv, "
            "`texts` as in the streamed export) or preference_pairs (jsonl; see the preference pairs endpoint; "
            "the job's `audit` holds their length audit). `filters` as in the streamed export. Answers 202 with "
            "the job; poll it until `status` is done (or failed, with `error`), then download the file. An "
            "`export.ready` event is sent when it finishes. Allowed for read-only API keys: it changes no data."
        ),
        request=Input,
        responses={202: ExportJobOutput},
        examples=[
            OpenApiExample(
                "The vote log since November, with texts",
                value={"kind": "votes", "format": "jsonl", "texts": True, "filters": {"since": "2026-11-01T00:00:00Z"}},
                request_only=True,
            ),
            OpenApiExample(
                "Preference pairs", value={"kind": "preference_pairs", "format": "jsonl"}, request_only=True
            ),
            OpenApiExample("Queued", value={**JOB_EXAMPLE, "status": "queued", "rows": None}, response_only=True),
        ],
        tags=["exports"],
    )
    def post(self, request: Request, campaign_id: int) -> Response:
        campaign = _campaign(request, campaign_id)
        data = self.Input(data=request.data)
        data.is_valid(raise_exception=True)
        principal = _principal(request)
        job = services.export_job_create(
            campaign=campaign,
            requested_by=principal if isinstance(principal, User) else None,
            api_key=principal.api_key if isinstance(principal, ApiKeyPrincipal) else None,
            kind=data.validated_data["kind"],
            format=data.validated_data["format"],
            texts=data.validated_data["texts"],
            filters=ExportFiltersInput.filters_of(data.validated_data.get("filters") or {}),
        )
        return Response(ExportJobOutput(job).data, status=status.HTTP_202_ACCEPTED)


def _job(request: Request, campaign_id: int, job_id: str) -> ExportJob:
    job = selectors.export_job_for(campaign=_campaign(request, campaign_id), job_id=job_id)
    if job is None:
        raise Http404("No such export.")
    return job


class ExportJobDetailApi(APIView):
    @extend_schema(
        operation_id="exports_retrieve",
        summary="An export job's status",
        description="queued, running, done (rows, bytes, sha256, finished_at; download it), failed (error), or "
        "expired (the file was deleted after the retention period).",
        responses={200: ExportJobOutput},
        examples=[OpenApiExample("Done", value=JOB_EXAMPLE, response_only=True)],
        tags=["exports"],
    )
    def get(self, request: Request, campaign_id: int, job_id: str) -> Response:
        return Response(ExportJobOutput(_job(request, campaign_id, job_id)).data)


class ExportJobDownloadApi(APIView):
    renderer_classes = [JSONRenderer, JSONLinesRenderer, CSVRenderer, BinaryRenderer]

    @extend_schema(
        operation_id="exports_download",
        summary="Download an export's file",
        description=(
            "The file, streamed from disk. `X-Checksum-Sha256` (hex) and `Digest: sha-256=<base64>` carry the "
            "sha256 recorded when it was written; compare them with what you received. 409 while the job is "
            "not done (or after its file expired)."
        ),
        responses={
            (200, "application/x-ndjson"): OpenApiResponse(OpenApiTypes.BINARY, description="JSON lines."),
            (200, "text/csv"): OpenApiResponse(OpenApiTypes.BINARY, description="CSV."),
            409: OpenApiResponse(description="The job is not done, or its file has expired."),
        },
        tags=["exports"],
    )
    def get(self, request: Request, campaign_id: int, job_id: str) -> FileResponse:
        job = _job(request, campaign_id, job_id)
        if job.status != ExportJob.Status.DONE:
            raise Conflict(f"The export is {job.status}; its file can be downloaded when it is done.")
        path = services.export_path(job)
        if not path.is_file():
            raise Conflict("The export's file is gone (deleted after the retention period); ask for a new one.")
        content_type = "text/csv; charset=utf-8" if job.format == ExportJob.Format.CSV else "application/x-ndjson"
        response = FileResponse(path.open("rb"), as_attachment=True, filename=job.filename, content_type=content_type)
        response["X-Checksum-Sha256"] = job.sha256
        response["Digest"] = "sha-256=" + base64.b64encode(bytes.fromhex(job.sha256)).decode()
        return response
