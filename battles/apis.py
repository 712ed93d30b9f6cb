"""REST endpoints for the vote log: the streamed export and the asynchronous export jobs."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime
from typing import Any

from django.contrib.auth.models import User
from django.http import FileResponse, Http404, StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.parsers import JSONParser
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from arena.api import cursor_page, page_of
from raters.authentication import ApiKeyPrincipal
from raters.errors import Conflict

from . import exporting, selectors, services
from .exporting import CSV_COLUMNS as CSV_COLUMNS  # the export's columns, where clients have always found them
from .exporting import VoteFilters
from .models import Campaign, ExportJob, Prompt
from .prompting import CATEGORIES


def _principal(request: Request) -> User | ApiKeyPrincipal:
    user = request.user
    # The API's default permission lets only a signed-in user or an API key through.
    assert isinstance(user, (User, ApiKeyPrincipal))
    return user


def _campaign(request: Request, campaign_id: int) -> Campaign:
    campaign = selectors.campaign_viewable_by(user=_principal(request), campaign_id=campaign_id)
    if campaign is None:
        raise Http404("No such campaign.")
    return campaign


# --- Renderers: the streamed formats pass content negotiation (an Accept of theirs is not a 406) ---


class _PassthroughRenderer(BaseRenderer):
    """The body of a streamed or file response is written by the view; only an error body (a dict)
    is rendered here, as JSON."""

    charset = "utf-8"

    def render(self, data: Any, accepted_media_type: str | None = None, renderer_context: Any = None) -> bytes:
        return json.dumps(data).encode() if data is not None else b""


class JSONLinesRenderer(_PassthroughRenderer):
    media_type = "application/x-ndjson"
    format = "jsonl"


class CSVRenderer(_PassthroughRenderer):
    media_type = "text/csv"
    format = "csv"


class BinaryRenderer(_PassthroughRenderer):
    media_type = "application/octet-stream"
    format = "bin"
    charset = None  # type: ignore[assignment]


# --- Filters shared by the streamed exports, the export jobs and the preference pairs --------------


class UtcDateTimeField(serializers.DateTimeField):
    """ISO 8601 with any offset, as UTC: PostgreSQL takes offsets up to 15:59 only, and a time at the edge
    of the calendar may have no UTC equivalent (a 400, not a 500)."""

    def to_internal_value(self, value: Any) -> datetime:
        parsed = super().to_internal_value(value)
        try:
            return parsed.astimezone(UTC)
        except OverflowError:
            raise serializers.ValidationError("The time is out of range.") from None


class ExportFiltersInput(serializers.Serializer[Any]):
    since = UtcDateTimeField(required=False, help_text="Votes cast at or after this time (ISO 8601).")
    until = UtcDateTimeField(required=False, help_text="Votes cast before this time (ISO 8601).")
    category = serializers.ChoiceField(choices=list(CATEGORIES), required=False, help_text="The prompt's category.")
    competitor = serializers.IntegerField(
        required=False, min_value=1, max_value=2**63 - 1, help_text="A competitor's id: votes with it on either side."
    )
    prompt_source = serializers.ChoiceField(
        choices=Prompt.Source.values, required=False, help_text="pool (the campaign's prompts) or rater (typed)."
    )

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if attrs.get("since") and attrs.get("until") and attrs["since"] >= attrs["until"]:
            raise serializers.ValidationError({"until": ["Must be later than since."]})
        return attrs

    @staticmethod
    def filters_of(data: dict[str, Any]) -> VoteFilters:
        return VoteFilters(
            since=data.get("since"),
            until=data.get("until"),
            category=data.get("category", ""),
            competitor=data.get("competitor"),
            prompt_source=data.get("prompt_source", ""),
        )


class StrictBooleanField(serializers.BooleanField):
    """In a JSON body a boolean is true or false, not 0, "yes" or "on" (the schema says boolean)."""

    def to_internal_value(self, data: Any) -> bool:
        if not isinstance(data, bool):
            self.fail("invalid", input=data)
        return data


class StrictIntegerField(serializers.IntegerField):
    """In a JSON body an integer is a number, not "12"."""

    def to_internal_value(self, data: Any) -> int:
        if isinstance(data, bool) or not isinstance(data, int):
            self.fail("invalid")
        value: int = super().to_internal_value(data)
        return value


class ExportFiltersBody(ExportFiltersInput):
    competitor = StrictIntegerField(
        required=False, min_value=1, max_value=2**63 - 1, help_text="A competitor's id: votes with it on either side."
    )


FILTER_PARAMETERS = [
    OpenApiParameter("since", OpenApiTypes.DATETIME, description="Votes cast at or after this time (ISO 8601)."),
    OpenApiParameter("until", OpenApiTypes.DATETIME, description="Votes cast before this time (exclusive)."),
    OpenApiParameter("category", str, enum=list(CATEGORIES), description="Only prompts of this category."),
    OpenApiParameter("competitor", int, description="Only votes with this competitor (id) on either side."),
    OpenApiParameter("prompt_source", str, enum=Prompt.Source.values, description="pool or rater prompts."),
]

EVENT_EXAMPLE = {
    "battle_id": "0b6f7c1e-4b1c-4c36-9d0e-6d2f1c9a8e11",
    "vote_id": 1812,
    "timestamp": "2026-11-30T14:03:11.402117+00:00",
    "campaign_id": 3,
    "rater_id": 41,
    "pool_id": 2,
    "prompt": {"id": 77, "hash": "9f2c…", "category": "coding", "language": "en", "source": "pool"},
    "left": {
        "competitor_id": 5,
        "model": "zen-bigram",
        "version": "2026-11",
        "output_tokens": 212,
        "finish_reason": "stop",
        "latency_s": 1.84,
        "style": {"tokens": 198, "headers": 1, "list_items": 4, "bold": 0, "code_blocks": 1},
    },
    "right": {"competitor_id": 6, "model": "stdlib-trigram", "version": "2026-11", "...": "..."},
    "params": {"temperature": 0.7, "top_p": 1.0, "max_tokens": 256, "system_prompt": "", "seed": 12},
    "vote": "left",
    "decision_ms": 8120,
    "identity": {"prompt_asks_identity": False, "answer_names_model": False},
    "conversation": [{"index": 0, "prompt": "Reverse a list in Python.", "left": "Use `xs[::-1]`…", "right": "…"}],
}


# --- The vote log, streamed ------------------------------------------------------------------------


class VoteLogExportApi(APIView):
    """The vote log of a campaign, streamed as JSON lines (``votes.jsonl``) or CSV (``votes.csv``).

    Streamed from a server-side cursor (on PostgreSQL the database renders each event's JSON), so a
    campaign of millions of votes is never held in memory. Owners, managers and viewers of the
    campaign's organisation and its API keys only; anyone else gets 404."""

    renderer_classes = [JSONRenderer, JSONLinesRenderer, CSVRenderer]

    class FilterInput(ExportFiltersInput):
        texts = serializers.BooleanField(
            required=False, default=False, help_text="Add the texts: every turn's prompt and both answers."
        )

    @extend_schema(
        operation_id="votes_export",
        summary="The vote log, streamed (JSON lines or CSV)",
        description=(
            "Every vote of the campaign in log order, one event per line (`votes.jsonl`) or row (`votes.csv`), "
            "streamed. Filters select by vote time (`since` inclusive, `until` exclusive), the prompt's "
            "category and source, and a competitor (either side). `texts=1` adds the battle's `conversation`: "
            "one entry per turn `{index, prompt, left, right}` (turn 0 is the prompt; a one-turn battle has one "
            "entry); in CSV the first turn is in `prompt_text`, `left_text`, `right_text` and later turns in "
            "`later_turns` (JSON). CSV cells that a spreadsheet would run as a formula are prefixed with `'`."
        ),
        parameters=[
            OpenApiParameter("kind", str, OpenApiParameter.PATH, enum=["jsonl", "csv"], description="The format."),
            *FILTER_PARAMETERS,
            OpenApiParameter("texts", bool, description="Add prompt and answer texts of every turn."),
        ],
        responses={
            (200, "application/x-ndjson"): OpenApiResponse(
                OpenApiTypes.STR,
                description="One JSON event per line.",
                examples=[OpenApiExample("An event (texts=1)", value=EVENT_EXAMPLE, media_type="application/x-ndjson")],
            ),
            (200, "text/csv"): OpenApiResponse(
                OpenApiTypes.STR,
                description="A header row of column names, then one row per vote.",
                examples=[
                    OpenApiExample(
                        "The first columns",
                        value="battle_id,vote_id,timestamp,campaign_id,...\r\n0b6f7c1e-…,1812,2026-11-30T14:03:11+00:00,3,...",
                        media_type="text/csv",
                    )
                ],
            ),
        },
        tags=["votes"],
    )
    def get(self, request: Request, campaign_id: int, kind: str) -> StreamingHttpResponse:
        campaign = _campaign(request, campaign_id)
        query = self.FilterInput(data=request.query_params)
        query.is_valid(raise_exception=True)
        texts = bool(query.validated_data["texts"])
        votes = selectors.votes_filtered(campaign=campaign, filters=ExportFiltersInput.filters_of(query.validated_data))
        if kind == "csv":
            body = exporting.csv_from_events(selectors.vote_events(votes=votes, texts=texts), texts=texts)
            response = StreamingHttpResponse(body, content_type="text/csv; charset=utf-8")
        else:
            response = StreamingHttpResponse(
                selectors.vote_event_jsonl(votes=votes, texts=texts), content_type="application/x-ndjson"
            )
        response["Content-Disposition"] = f'attachment; filename="campaign-{campaign.pk}-votes.{kind}"'
        return response


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
            OpenApiParameter("limit", int, description="Jobs per page (1-500, default 50)."),
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
