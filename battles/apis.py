"""REST endpoints of battles: the vote log (the streamed export and the asynchronous export jobs);
campaigns, competitors, categories and prompts (read); the prompt import; shadow battles and A/B experiments."""

from __future__ import annotations

import base64
import json
import re
from datetime import UTC, datetime
from typing import Any

import django_filters
from django.conf import settings
from django.contrib.auth.models import User
from django.core.exceptions import RequestDataTooBig
from django.db.models import QuerySet
from django.http import FileResponse, Http404, StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiExample,
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    extend_schema_field,
)
from rest_framework import generics, serializers, status
from rest_framework.exceptions import NotFound as ApiNotFound
from rest_framework.exceptions import UnsupportedMediaType
from rest_framework.exceptions import ValidationError as ApiValidationError
from rest_framework.parsers import BaseParser, JSONParser, MultiPartParser
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.validators import ProhibitSurrogateCharactersValidator
from rest_framework.views import APIView

from arena.api import CursorPage, ErrorOutput, UtcIsoDateTimeFilter, cursor_page, page_of
from raters.authentication import ApiKeyPrincipal
from raters.errors import Conflict, Invalid, NotFound, PermissionDenied

from . import exporting, prompt_import, selectors, services
from .exporting import CSV_COLUMNS as CSV_COLUMNS  # the export's columns, where clients have always found them
from .exporting import VoteFilters
from .models import Battle, Campaign, Competitor, Experiment, ExportJob, JudgeRun, Participant, Prompt, Study
from .prompting import CATEGORIES, PROMPT_MAX_CHARS


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


# =====================================================================================================
# Campaigns, competitors, categories and prompts (read), and the prompt import (write).
# Reads are scoped by ``selectors.campaigns_viewable_by`` (a key: its organisation; a person: where they
# own, manage or view); the import by ``selectors.campaign_writable_by``. Another organisation's
# campaign is 404 on every endpoint.
# =====================================================================================================


class _FilterSet(django_filters.FilterSet):  # type: ignore[misc]  # django-filter ships no type information
    pass


@extend_schema_field(OpenApiTypes.BOOL)
class _BooleanFilter(django_filters.TypedChoiceFilter):  # type: ignore[misc]  # no types in django-filter
    """``true`` or ``false``, and anything else a 400: django-filter's ``BooleanFilter`` reads an unknown
    value as "not given", which would answer a typo with the unfiltered list."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(choices=[("true", "true"), ("false", "false")], coerce=lambda v: v == "true", **kwargs)


def _viewable_campaign(request: Request, campaign_id: int) -> Campaign:
    user = request.user
    assert isinstance(user, (User, ApiKeyPrincipal))  # ScopedAccess let only these through
    campaign = selectors.campaign_viewable_by(user=user, campaign_id=campaign_id)
    if campaign is None:
        raise NotFound("No such campaign.")
    return campaign


class CampaignParamsOutput(serializers.Serializer[Any]):
    temperature = serializers.FloatField()
    top_p = serializers.FloatField()
    max_tokens = serializers.IntegerField()
    system_prompt = serializers.CharField()


class CampaignCapsOutput(serializers.Serializer[Any]):
    session_cap = serializers.IntegerField(help_text="Battles per rater session.")
    rater_vote_cap = serializers.IntegerField(allow_null=True, help_text="Votes per rater; null: no cap.")
    prompt_hash_cap = serializers.IntegerField(
        allow_null=True, help_text="Votes per normalised prompt text; null: no cap."
    )
    min_decision_ms = serializers.IntegerField(help_text="Faster votes are left out of the rankings.")


class CampaignCountsOutput(serializers.Serializer[Any]):
    competitors = serializers.IntegerField(source="n_competitors")
    prompts = serializers.IntegerField(source="n_prompts")
    votes = serializers.IntegerField(source="n_votes")


class CampaignOutput(serializers.Serializer[Any]):
    id = serializers.IntegerField()
    organization = serializers.CharField(source="organization.slug")
    name = serializers.CharField()
    slug = serializers.CharField()
    description = serializers.CharField()
    status = serializers.ChoiceField(choices=Campaign.Status.choices)
    sampling = serializers.ChoiceField(choices=Campaign.Sampling.choices)
    params = CampaignParamsOutput(source="*", help_text="The one sampling parameter set both sides are generated with.")
    max_turns = serializers.IntegerField()
    allow_rater_prompts = serializers.BooleanField()
    identity_policy = serializers.ChoiceField(
        choices=Campaign.IdentityPolicy.values,
        help_text="flag: identity questions are answered and flagged in the log; refuse: no model answers one, "
        "and an answer naming a model voids its battle.",
    )
    caps = CampaignCapsOutput(source="*")
    counts = CampaignCountsOutput(source="*")
    created_at = serializers.DateTimeField()
    opened_at = serializers.DateTimeField(allow_null=True)
    closed_at = serializers.DateTimeField(allow_null=True)


_CAMPAIGN_EXAMPLE = {
    "id": 3,
    "organization": "acme",
    "name": "Support assistant, June release",
    "slug": "acme-chat",
    "description": "Pick the answer you would rather get.",
    "status": "open",
    "sampling": "uniform",
    "params": {"temperature": 0.7, "top_p": 1.0, "max_tokens": 256, "system_prompt": ""},
    "max_turns": 1,
    "allow_rater_prompts": False,
    "identity_policy": "flag",
    "caps": {"session_cap": 20, "rater_vote_cap": None, "prompt_hash_cap": None, "min_decision_ms": 1500},
    "counts": {"competitors": 2, "prompts": 120, "votes": 431},
    "created_at": "2026-11-02T09:00:00Z",
    "opened_at": "2026-11-03T08:30:00Z",
    "closed_at": None,
}


class CampaignFilter(_FilterSet):
    status = django_filters.ChoiceFilter(choices=Campaign.Status.choices)
    slug = django_filters.CharFilter()

    class Meta:
        model = Campaign
        fields = ["status", "slug"]


class CampaignListApi(generics.ListAPIView[Campaign]):
    serializer_class = CampaignOutput
    filterset_class = CampaignFilter
    pagination_class = CursorPage

    def get_queryset(self) -> QuerySet[Campaign]:
        if getattr(self, "swagger_fake_view", False):
            return Campaign.objects.none()
        user = self.request.user
        assert isinstance(user, (User, ApiKeyPrincipal))
        return selectors.campaigns_with_counts(user).select_related("organization")

    @extend_schema(
        operation_id="campaigns_list",
        summary="Campaigns",
        description="The campaigns the caller may read, newest first: an API key sees its organisation's, a "
        "person those of the organisations they own, manage or view. Cursor pages (`?limit=`, `?cursor=`).",
        responses={200: CampaignOutput(many=True)},
        examples=[OpenApiExample("A page of campaigns", value=_CAMPAIGN_EXAMPLE, response_only=True)],
        tags=["campaigns"],
    )
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().get(request, *args, **kwargs)


class CampaignDetailApi(APIView):
    @extend_schema(
        operation_id="campaigns_retrieve",
        summary="A campaign",
        description="One campaign: its state, sampling policy, generation parameters, caps and counts. "
        "Another organisation's campaign is 404.",
        responses={200: CampaignOutput},
        examples=[OpenApiExample("A campaign", value=_CAMPAIGN_EXAMPLE, response_only=True)],
        tags=["campaigns"],
    )
    def get(self, request: Request, campaign_id: int) -> Response:
        user = request.user
        assert isinstance(user, (User, ApiKeyPrincipal))
        campaign = selectors.campaigns_with_counts(user).select_related("organization").filter(pk=campaign_id).first()
        if campaign is None:
            raise NotFound("No such campaign.")
        return Response(CampaignOutput(campaign).data)


class CompetitorFilter(_FilterSet):
    active = _BooleanFilter(label="Only active (true) or inactive (false) competitors.")

    class Meta:
        model = Competitor
        fields = ["active"]


class CompetitorOutput(serializers.Serializer[Any]):
    id = serializers.IntegerField()
    model = serializers.CharField(source="model_name", help_text="The model's public name.")
    version = serializers.CharField(source="version_label")
    endpoint = serializers.IntegerField(
        source="endpoint_id",
        allow_null=True,
        help_text="Its model endpoint; null for an external model (its answers arrive as shadow battles).",
    )
    active = serializers.BooleanField(help_text="Inactive competitors get no new battles.")
    family = serializers.CharField(
        source="family_name", help_text="The model family the board's disclosure counts it in (else its model name)."
    )
    retired = serializers.BooleanField(help_text="Retired for good: no new battles, its votes and board row kept.")
    retired_at = serializers.DateTimeField(allow_null=True)
    created_at = serializers.DateTimeField()


class CompetitorListApi(generics.ListAPIView[Competitor]):
    serializer_class = CompetitorOutput
    filterset_class = CompetitorFilter
    pagination_class = CursorPage

    def get_queryset(self) -> QuerySet[Competitor]:
        if getattr(self, "swagger_fake_view", False):  # the schema generator, with no campaign
            return Competitor.objects.none()
        return selectors.competitors_of(_viewable_campaign(self.request, self.kwargs["campaign_id"]))

    @extend_schema(
        operation_id="campaigns_competitors_list",
        summary="A campaign's competitors",
        description="Each competitor is a model endpoint at one version; a new version is a new competitor "
        "with its own rating. Filter with `?active=true`.",
        examples=[
            OpenApiExample(
                "A competitor",
                value={
                    "id": 7,
                    "model": "Acme small",
                    "version": "2026-11",
                    "endpoint": 4,
                    "active": True,
                    "family": "acme",
                    "retired": False,
                    "retired_at": None,
                    "created_at": "2026-11-02T09:01:00Z",
                },
                response_only=True,
            )
        ],
        tags=["campaigns"],
    )
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().get(request, *args, **kwargs)


class CategoryCountOutput(serializers.Serializer[Any]):
    category = serializers.ChoiceField(choices=CATEGORIES)
    prompts = serializers.IntegerField(help_text="Prompts of the category, active or not.")
    active_prompts = serializers.IntegerField()
    votes = serializers.IntegerField(help_text="Votes the log records for the category.")


class CategoryListApi(APIView):
    class OutputSerializer(serializers.Serializer[Any]):
        campaign = serializers.IntegerField()
        results = CategoryCountOutput(many=True)

    @extend_schema(
        operation_id="campaigns_categories_list",
        summary="A campaign's categories",
        description="Every prompt category, in a fixed order, with how many prompts the campaign has in it and "
        "how many votes the log records for it (the category stored with each vote). Not paginated.",
        responses={200: OutputSerializer},
        examples=[
            OpenApiExample(
                "Categories",
                value={
                    "campaign": 3,
                    "results": [
                        {"category": "coding", "prompts": 40, "active_prompts": 38, "votes": 210},
                        {"category": "math", "prompts": 12, "active_prompts": 12, "votes": 51},
                    ],
                },
                response_only=True,
            )
        ],
        tags=["campaigns"],
    )
    def get(self, request: Request, campaign_id: int) -> Response:
        campaign = _viewable_campaign(request, campaign_id)
        rows = selectors.category_counts(campaign)
        return Response(self.OutputSerializer({"campaign": campaign.pk, "results": rows}).data)


class PromptOutput(serializers.Serializer[Any]):
    id = serializers.IntegerField()
    text = serializers.CharField()
    text_hash = serializers.CharField(help_text="SHA-256 of the normalised text (NFKC, case-folded, spaces).")
    category = serializers.ChoiceField(choices=CATEGORIES)
    language = serializers.CharField()
    # A field named "source" shadows Field.source for the type checker only (the serializer's metaclass
    # takes declared fields off the class).
    source = serializers.ChoiceField(choices=Prompt.Source.choices)  # type: ignore[assignment]
    external_id = serializers.CharField(help_text="The id given at import; empty when none.")
    active = serializers.BooleanField()
    created_at = serializers.DateTimeField()


class PromptFilter(_FilterSet):
    category = django_filters.ChoiceFilter(choices=[(c, c) for c in CATEGORIES])
    language = django_filters.CharFilter()
    source = django_filters.ChoiceFilter(choices=Prompt.Source.choices)
    active = _BooleanFilter(label="Only active (true) or inactive (false) prompts.")
    external_id = django_filters.CharFilter()
    created_after = UtcIsoDateTimeFilter(
        field_name="created_at", lookup_expr="gte", label="Created at or after (ISO 8601)."
    )
    created_before = UtcIsoDateTimeFilter(field_name="created_at", lookup_expr="lt", label="Created before (ISO 8601).")

    class Meta:
        model = Prompt
        fields = ["category", "language", "source", "active", "external_id", "created_after", "created_before"]


class PromptListApi(generics.ListAPIView[Prompt]):
    serializer_class = PromptOutput
    filterset_class = PromptFilter
    pagination_class = CursorPage

    def get_queryset(self) -> QuerySet[Prompt]:
        if getattr(self, "swagger_fake_view", False):  # the schema generator, with no campaign
            return Prompt.objects.none()
        return selectors.prompts_of(_viewable_campaign(self.request, self.kwargs["campaign_id"]))

    @extend_schema(
        operation_id="campaigns_prompts_list",
        summary="A campaign's prompts",
        description="The prompt pool and the prompts raters typed, newest first, in cursor pages. Filters: "
        "`category`, `language`, `source` (`pool`, `rater`), `active`, `external_id`, `created_after`, "
        "`created_before`. Owners, managers and viewers only (raters do not read the pool).",
        examples=[
            OpenApiExample(
                "A prompt",
                value={
                    "id": 981,
                    "text": "Why is the sky blue?",
                    "text_hash": "1f3870be274f6c49b3e31a0c6728957f0c1b7e8e5a5b6c2d4e9f8a7b6c5d4e3f",
                    "category": "knowledge",
                    "language": "en",
                    "source": "pool",
                    "external_id": "faq-17",
                    "active": True,
                    "created_at": "2026-11-02T09:05:00Z",
                },
                response_only=True,
            )
        ],
        tags=["prompts"],
    )
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().get(request, *args, **kwargs)


class _PromptFileParser(BaseParser):
    """The request body as bytes, for ``battles.prompt_import`` to read."""

    # DRF passes whatever ``parse`` returns on as ``request.data``: bytes here, which its stubs do not foresee.
    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> bytes:  # type: ignore[override]
        data: bytes = stream.read() if stream is not None else b""
        return data


class NdjsonParser(_PromptFileParser):
    media_type = "application/x-ndjson"


class JsonlParser(_PromptFileParser):
    media_type = "application/jsonl"


class CsvParser(_PromptFileParser):
    media_type = "text/csv"


class PromptImportApi(APIView):
    parser_classes = [NdjsonParser, JsonlParser, CsvParser, MultiPartParser]

    class QueryInput(serializers.Serializer[Any]):
        on_duplicate = serializers.ChoiceField(choices=["error", "skip"], default="error")

    class OutputSerializer(serializers.Serializer[Any]):
        campaign = serializers.IntegerField()
        imported = serializers.IntegerField(help_text="Prompts added.")
        prompt_ids = serializers.ListField(child=serializers.IntegerField(), help_text="In file order.")
        skipped = serializers.IntegerField(help_text="Rows left out (on_duplicate=skip).")
        skipped_external_ids = serializers.ListField(child=serializers.CharField())
        repeated_texts = serializers.IntegerField(
            help_text="Imported prompts whose normalised text the campaign (or an earlier row) already had."
        )

    @extend_schema(
        operation_id="campaigns_prompts_import",
        summary="Import prompts",
        description="Adds a file of prompts to the campaign's pool, **all or nothing**. The body is the file "
        "itself, as JSON lines (`application/x-ndjson` or `application/jsonl`: one object per line) or CSV "
        "(`text/csv`, a header row first), or a multipart form with the file in `file` (the format from its "
        "media type or name, .jsonl/.ndjson/.csv). Fields: `text` (required), `category` (coding, math, "
        "writing, knowledge, reasoning, advice, other), `language` (a tag such as en or pt-BR), `external_id` "
        "(unique per campaign). A category or language left out is set by the classifier. Any other field is "
        "an error.\n\n"
        "Every invalid row is reported (400, `fields` keyed `row N` or `row N.field`; rows are JSON-lines "
        "line numbers, or CSV record numbers with the header as row 1) and nothing is imported. An "
        "`external_id` the campaign already has is such an error, unless `?on_duplicate=skip`, which leaves "
        "those rows out. The same text twice is allowed (counted in `repeated_texts`). A closed campaign "
        "answers 409; a body over the API's size limit 413; more rows than `ARENA_PROMPT_IMPORT_MAX_ROWS` 400. "
        "A read-write key, or an owner or manager.",
        parameters=[
            OpenApiParameter(
                "on_duplicate",
                str,
                OpenApiParameter.QUERY,
                enum=["error", "skip"],
                description="An external id the campaign already has: an error (default), or skip the row.",
            )
        ],
        request={
            "application/x-ndjson": OpenApiTypes.STR,
            "application/jsonl": OpenApiTypes.STR,
            "text/csv": OpenApiTypes.STR,
            "multipart/form-data": {"type": "object", "properties": {"file": {"type": "string", "format": "binary"}}},
        },
        responses={201: OutputSerializer, 409: ErrorOutput, 413: ErrorOutput, 415: ErrorOutput},
        examples=[
            OpenApiExample(
                "JSON lines",
                value='{"text": "Why is the sky blue?", "category": "knowledge", "external_id": "faq-17"}\n'
                '{"text": "Write a limerick about Postgres", "language": "en"}\n',
                media_type="application/x-ndjson",
                request_only=True,
            ),
            OpenApiExample(
                "CSV",
                value="text,category,external_id\nWhy is the sky blue?,knowledge,faq-17\n",
                media_type="text/csv",
                request_only=True,
            ),
            OpenApiExample(
                "Imported",
                value={
                    "campaign": 3,
                    "imported": 2,
                    "prompt_ids": [981, 982],
                    "skipped": 0,
                    "skipped_external_ids": [],
                    "repeated_texts": 0,
                },
                response_only=True,
                status_codes=["201"],
            ),
            OpenApiExample(
                "Bad rows",
                value={
                    "error": {
                        "code": "invalid",
                        "message": "2 rows are invalid; nothing was imported.",
                        "fields": {
                            "row 2": ["Not valid JSON: Expecting ',' delimiter (column 31)."],
                            "row 4.category": ["Not a category; the categories are coding, math, ..."],
                        },
                    }
                },
                response_only=True,
                status_codes=["400"],
            ),
        ],
        tags=["prompts"],
    )
    def post(self, request: Request, campaign_id: int) -> Response:
        user = request.user
        assert isinstance(user, (User, ApiKeyPrincipal))
        campaign = selectors.campaign_writable_by(user=user, campaign_id=campaign_id)
        if campaign is None:
            if selectors.campaign_viewable_by(user=user, campaign_id=campaign_id) is not None:
                raise PermissionDenied("Only owners and managers (or a read-write key) import prompts.")
            raise NotFound("No such campaign.")
        query = self.QueryInput(data=request.query_params)
        query.is_valid(raise_exception=True)
        if campaign.status == Campaign.Status.CLOSED:  # before reading the file; the service checks again
            raise services.CampaignClosed("The campaign is closed; it takes no new prompts.")
        data, kind = self._file(request)
        if len(data) > settings.ARENA_API_MAX_BODY_BYTES:
            raise RequestDataTooBig("The file is over the API's size limit.")
        parsed = prompt_import.parse(data, kind=kind, max_rows=settings.ARENA_PROMPT_IMPORT_MAX_ROWS)
        if not parsed.ok:
            raise Invalid(parsed.summary(), field_errors=parsed.errors)
        result = services.prompts_import(
            campaign=campaign,
            rows=parsed.rows,
            actor=user,
            on_duplicate=query.validated_data["on_duplicate"],
            via="api",
        )
        body = {
            "campaign": campaign.pk,
            "imported": len(result.prompt_ids),
            "prompt_ids": result.prompt_ids,
            "skipped": len(result.skipped_external_ids),
            "skipped_external_ids": result.skipped_external_ids,
            "repeated_texts": result.repeated_texts,
        }
        return Response(self.OutputSerializer(body).data, status=201)

    def _file(self, request: Request) -> tuple[bytes, str]:
        """The file's bytes and format, from the body or the multipart form's ``file``."""
        data = request.data  # parsed first: a media type no parser takes is 415 here
        kind = prompt_import.format_for(request.content_type)
        if kind is not None:  # the body is the file (DRF gives an empty dict for an empty body)
            return (data if isinstance(data, bytes) else b""), kind
        upload = request.FILES.get("file")
        if upload is None:
            raise Invalid(
                "Send the file as the body (application/x-ndjson, application/jsonl or text/csv) or in a "
                "multipart form's file field.",
                field_errors={"file": "No file was sent."},
            )
        kind = prompt_import.format_for(upload.content_type or "", upload.name or "")
        if kind is None:
            raise UnsupportedMediaType(
                upload.content_type or "", detail="The file is neither JSON lines (.jsonl, .ndjson) nor CSV (.csv)."
            )
        if upload.size is not None and upload.size > settings.ARENA_API_MAX_BODY_BYTES:
            raise RequestDataTooBig("The file is over the API's size limit.")
        return upload.read(), kind


# === Shadow battles and A/B experiments ================================================================

IDEMPOTENCY_HEADER = "Idempotency-Key"


def _writable_campaign(request: Request, campaign_id: int) -> Campaign:
    campaign = selectors.campaign_writable_by(user=_principal(request), campaign_id=campaign_id)
    if campaign is None:
        raise ApiNotFound("No such campaign.")
    return campaign


_SURROGATE = re.compile("[\ud800-\udfff]")


class FastSurrogateCheck:
    """DRF's ``ProhibitSurrogateCharactersValidator`` with one regex search instead of a Python loop over
    every character (a batch of shadow battles carries megabytes of answer text): the same refusal."""

    message = "Surrogate characters are not allowed: U+{code_point:X}."

    def __call__(self, value: Any) -> None:
        found = _SURROGATE.search(str(value))
        if found is not None:
            message = self.message.format(code_point=ord(found.group()))
            raise ApiValidationError(message, code="surrogate_characters_not_allowed")


class LongTextField(serializers.CharField):
    """A CharField for long texts (answers, prompts) with the fast surrogate check."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.validators = [
            FastSurrogateCheck() if isinstance(v, ProhibitSurrogateCharactersValidator) else v for v in self.validators
        ]


class StrictCharField(LongTextField):
    """A string, and only a string: DRF's CharField would take 42 as "42" (the schema says string)."""

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictSlugField(serializers.SlugField):
    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictFloatField(serializers.FloatField):
    """A JSON number; not a string, not a boolean."""

    def to_internal_value(self, data: Any) -> float:
        if isinstance(data, bool) or not isinstance(data, (int, float)):
            self.fail("invalid")
        return super().to_internal_value(data)


class ShadowAnswerInput(serializers.Serializer[Any]):
    model = StrictCharField(
        max_length=120, required=False, default="", help_text="The model's public name (revealed after the vote)."
    )
    version = StrictCharField(max_length=80, required=False, default="")
    variant = StrictSlugField(
        max_length=80,
        required=False,
        default="",
        help_text="With `experiment`: the variant that answered; model and version then come from its competitor.",
    )
    text = StrictCharField(max_length=services.SHADOW_ANSWER_MAX_CHARS, trim_whitespace=False)
    output_tokens = StrictIntegerField(min_value=0, max_value=10_000_000)
    finish_reason = StrictCharField(max_length=16, help_text="e.g. `stop`, `length`.")
    latency_s = StrictFloatField(min_value=0, max_value=86_400)
    ttft_s = StrictFloatField(min_value=0, max_value=86_400, required=False, allow_null=True, default=None)


class ShadowBattleInput(serializers.Serializer[Any]):
    idempotency_key = StrictCharField(
        max_length=200,
        required=False,
        help_text="Required here or in the `Idempotency-Key` header: a retry with the same key and body returns "
        "the first result; the same key with another body is a 409.",
    )
    prompt = StrictCharField(max_length=PROMPT_MAX_CHARS + 1000, trim_whitespace=False)
    category = serializers.ChoiceField(choices=CATEGORIES, required=False, default="")
    language = StrictCharField(max_length=8, required=False, default="")
    system_prompt = StrictCharField(
        required=False,
        allow_blank=True,
        trim_whitespace=False,
        max_length=PROMPT_MAX_CHARS,
        default=None,
        help_text="The system prompt the answers were made with; omitted: the campaign's. Recorded with the vote.",
    )
    experiment = StrictSlugField(
        max_length=80, required=False, default="", help_text="An experiment key whose variants gave the answers."
    )
    answers = serializers.ListField(child=ShadowAnswerInput(), min_length=2, max_length=2)


class ShadowBatchInput(serializers.Serializer[Any]):
    battles = serializers.ListField(child=ShadowBattleInput(), min_length=1, max_length=services.SHADOW_BATCH_MAX)


class ShadowResultOutput(serializers.Serializer[Any]):
    id = serializers.UUIDField(source="battle_id")
    status = serializers.ChoiceField(choices=Battle.Status.choices)
    created = serializers.BooleanField(help_text="False: a replay of an earlier request with the same key and body.")


class ShadowBatchOutput(serializers.Serializer[Any]):
    created = serializers.IntegerField()
    replayed = serializers.IntegerField()
    battles = ShadowResultOutput(many=True)


def _shadow_item(data: dict[str, Any], key: str) -> services.ShadowBattleInput:
    answers = tuple(services.ShadowAnswer(**answer) for answer in data["answers"])
    return services.ShadowBattleInput(
        idempotency_key=key,
        prompt=data["prompt"],
        answers=(answers[0], answers[1]),
        category=data["category"],
        language=data["language"],
        system_prompt=data["system_prompt"],
        experiment=data["experiment"],
    )


EXAMPLE_ANSWERS = [
    {
        "model": "prod-assistant",
        "version": "2026-11-02",
        "text": "Water deeply once a week...",
        "output_tokens": 182,
        "finish_reason": "stop",
        "latency_s": 2.41,
        "ttft_s": 0.38,
    },
    {
        "model": "candidate-7b",
        "version": "rc3",
        "text": "- Morning watering\n- Mulch",
        "output_tokens": 96,
        "finish_reason": "stop",
        "latency_s": 1.12,
    },
]
EXAMPLE_SHADOW = {
    "idempotency_key": "req-2026-12-01-000042",
    "prompt": "How often should I water tomatoes?",
    "category": "advice",
    "language": "en",
    "answers": EXAMPLE_ANSWERS,
}
EXAMPLE_RESULT = {"id": "5d0c1f7e-3f0b-4b9e-9a57-2f0c8f3b1a10", "status": "ready", "created": True}


class ShadowBattleCreateApi(APIView):
    """Push one ready-made battle (a prompt and two answers from your own traffic) into the campaign's
    buffer. Raters get it like any battle: blind, sides chosen by the server, same page and caps."""

    parser_classes = [JSONParser]

    @extend_schema(
        operation_id="shadow_battle_create",
        summary="Push a shadow battle",
        description="Adds a battle with two ready answers to the campaign's buffer. The server picks which answer "
        "is shown left. Competitors are matched by (model, version), or created as external models. "
        "Idempotent: the key (body `idempotency_key` or header `Idempotency-Key`) with the same body returns "
        "the first result (200); with another body, 409 and nothing changes. Write key, or an owner/manager.",
        parameters=[OpenApiParameter(IDEMPOTENCY_HEADER, str, OpenApiParameter.HEADER, required=False)],
        request=ShadowBattleInput,
        responses={201: ShadowResultOutput, 200: ShadowResultOutput, 409: ErrorOutput},
        examples=[
            OpenApiExample("A shadow battle", value=EXAMPLE_SHADOW, request_only=True),
            OpenApiExample("Created", value=EXAMPLE_RESULT, response_only=True, status_codes=["201"]),
        ],
        tags=["shadow battles"],
    )
    def post(self, request: Request, campaign_id: int) -> Response:
        campaign = _writable_campaign(request, campaign_id)
        body = ShadowBattleInput(data=request.data)
        body.is_valid(raise_exception=True)
        header = request.headers.get(IDEMPOTENCY_HEADER, "").strip()
        key = body.validated_data.get("idempotency_key") or header
        if header and key != header:
            raise ApiValidationError({"idempotency_key": ["Differs from the Idempotency-Key header."]})
        if not key:
            raise ApiValidationError({"idempotency_key": ["Required (in the body or the Idempotency-Key header)."]})
        [result] = services.shadow_battles_import(
            campaign=campaign,
            items=[_shadow_item(body.validated_data, key)],
            actor=_principal(request),
            field_prefix=lambda index: "",
        )
        return Response(
            ShadowResultOutput(result).data, status=status.HTTP_201_CREATED if result.created else status.HTTP_200_OK
        )


class ShadowBattleBatchApi(APIView):
    """Up to 1,000 shadow battles in one call, all or none."""

    parser_classes = [JSONParser]

    @extend_schema(
        operation_id="shadow_battle_batch",
        summary="Push shadow battles in a batch",
        description="Each battle as in the single call, each with its own `idempotency_key` (required). All or "
        "none: a bad item is named with its field (`battles.3.answers.0.text`) and nothing is written; a key "
        "reused with another body is a 409 naming the items. Replayed items return their first result.",
        request=ShadowBatchInput,
        responses={201: ShadowBatchOutput, 200: ShadowBatchOutput, 409: ErrorOutput},
        examples=[
            OpenApiExample(
                "Two battles", value={"battles": [EXAMPLE_SHADOW, {**EXAMPLE_SHADOW, "idempotency_key": "r2"}]}
            ),
            OpenApiExample(
                "Imported",
                value={"created": 2, "replayed": 0, "battles": [EXAMPLE_RESULT, EXAMPLE_RESULT]},
                response_only=True,
                status_codes=["201"],
            ),
        ],
        tags=["shadow battles"],
    )
    def post(self, request: Request, campaign_id: int) -> Response:
        campaign = _writable_campaign(request, campaign_id)
        body = ShadowBatchInput(data=request.data)
        body.is_valid(raise_exception=True)
        missing = {
            f"battles.{index}.idempotency_key": ["Required for each battle of a batch."]
            for index, item in enumerate(body.validated_data["battles"])
            if not item.get("idempotency_key")
        }
        if missing:
            raise ApiValidationError(missing)
        results = services.shadow_battles_import(
            campaign=campaign,
            items=[_shadow_item(item, item["idempotency_key"]) for item in body.validated_data["battles"]],
            actor=_principal(request),
        )
        created = sum(result.created for result in results)
        output = {"created": created, "replayed": len(results) - created, "battles": results}
        return Response(
            ShadowBatchOutput(output).data, status=status.HTTP_201_CREATED if created else status.HTTP_200_OK
        )


class ModelVersionOutput(serializers.Serializer[Any]):
    model = serializers.CharField()
    version = serializers.CharField()


class ShadowVoteOutput(serializers.Serializer[Any]):
    choice = serializers.CharField(help_text="left, right, tie or both_bad (sides as the rater saw them).")
    left = ModelVersionOutput()
    right = ModelVersionOutput()
    preferred = ModelVersionOutput(allow_null=True, help_text="The answer the rater preferred; null for a tie.")
    decision_ms = serializers.IntegerField()
    voted_at = serializers.DateTimeField()


class ShadowBattleOutput(serializers.Serializer[Any]):
    id = serializers.UUIDField()
    status = serializers.ChoiceField(choices=Battle.Status.choices)
    # A field named "source" (DRF's metaclass takes declared fields out of the class: no clash with Field.source).
    source = serializers.CharField()  # type: ignore[assignment]
    idempotency_key = serializers.CharField()
    experiment = serializers.CharField(allow_null=True)
    created_at = serializers.DateTimeField()
    void_reason = serializers.CharField(allow_blank=True)
    vote = ShadowVoteOutput(allow_null=True)


def _model_version(competitor: Competitor) -> dict[str, str]:
    return {"model": competitor.model_name, "version": competitor.version_label}


class ShadowBattleDetailApi(APIView):
    @extend_schema(
        operation_id="shadow_battle_read",
        summary="A shadow battle's state",
        description="ready (waiting for or shown to a rater), voted (with the vote) or void (with why). Read or "
        "write key of the organisation, or its owners, managers and viewers.",
        responses={200: ShadowBattleOutput},
        examples=[
            OpenApiExample(
                "Voted",
                value={
                    "id": EXAMPLE_RESULT["id"],
                    "status": "voted",
                    "source": "shadow",
                    "idempotency_key": "req-2026-12-01-000042",
                    "experiment": None,
                    "created_at": "2026-12-01T10:00:00Z",
                    "void_reason": "",
                    "vote": {
                        "choice": "right",
                        "left": {"model": "candidate-7b", "version": "rc3"},
                        "right": {"model": "prod-assistant", "version": "2026-11-02"},
                        "preferred": {"model": "prod-assistant", "version": "2026-11-02"},
                        "decision_ms": 8120,
                        "voted_at": "2026-12-01T10:05:00Z",
                    },
                },
                response_only=True,
            )
        ],
        tags=["shadow battles"],
    )
    def get(self, request: Request, campaign_id: int, battle_id: str) -> Response:
        campaign = selectors.campaign_viewable_by(user=_principal(request), campaign_id=campaign_id)
        battle = selectors.shadow_battle_in_campaign(campaign=campaign, battle_id=battle_id) if campaign else None
        if battle is None:
            raise ApiNotFound("No such shadow battle.")
        vote = selectors.vote_of_battle(battle) if battle.status == Battle.Status.VOTED else None
        vote_data = None
        if vote is not None:
            preferred = {"left": battle.left, "right": battle.right}.get(vote.choice)
            vote_data = {
                "choice": vote.choice,
                "left": {"model": vote.left_model, "version": vote.left_version},
                "right": {"model": vote.right_model, "version": vote.right_version},
                "preferred": _model_version(preferred) if preferred is not None else None,
                "decision_ms": vote.decision_ms,
                "voted_at": vote.created_at,
            }
        data = {
            "id": battle.pk,
            "status": battle.status,
            "source": battle.source,
            "idempotency_key": battle.idempotency_key,
            "experiment": battle.experiment.key if battle.experiment else None,
            "created_at": battle.created_at,
            # Why a battle was voided is for its owner; no model names are in it
            # (battles/services/generation.py, _void_message).
            "void_reason": battle.void_reason,
            "vote": vote_data,
        }
        return Response(ShadowBattleOutput(data).data)


# --- A/B experiments ----------------------------------------------------------------------------------


class CompetitorRefOutput(serializers.Serializer[Any]):
    id = serializers.IntegerField()
    model = serializers.CharField(source="model_name")
    version = serializers.CharField(source="version_label")


class VariantOutput(serializers.Serializer[Any]):
    name = serializers.CharField()
    weight = serializers.FloatField()
    competitor = CompetitorRefOutput(allow_null=True)


class VariantExposureOutput(VariantOutput):
    units = serializers.IntegerField(help_text="Distinct units assigned to this variant.")
    exposures = serializers.IntegerField(help_text="Assignments counted (a unit asking again counts again).")


class ExperimentOutput(serializers.Serializer[Any]):
    key = serializers.CharField()
    name = serializers.CharField()
    description = serializers.CharField()
    organization = serializers.CharField(source="organization.slug")
    campaign = serializers.IntegerField(source="campaign_id", allow_null=True)
    active = serializers.BooleanField()
    created_at = serializers.DateTimeField()
    variants = VariantOutput(many=True)


class ExperimentDetailOutput(ExperimentOutput):
    variants = VariantExposureOutput(many=True)


class ExperimentFilter(_FilterSet):
    # A number, not a model choice: its choices' queryset would be read at import, outside any tenant scope.
    campaign = django_filters.NumberFilter(field_name="campaign_id")
    active = _BooleanFilter()

    class Meta:
        model = Experiment
        fields = ["active", "campaign"]


EXAMPLE_EXPERIMENT = {
    "key": "checkout-copy",
    "name": "Checkout copy",
    "description": "",
    "organization": "acme",
    "campaign": 12,
    "active": True,
    "created_at": "2026-12-01T09:00:00Z",
    "variants": [
        {"name": "control", "weight": 1.0, "competitor": {"id": 3, "model": "prod-assistant", "version": "2026-11"}},
        {"name": "treatment", "weight": 1.0, "competitor": None},
    ],
}


class ExperimentListApi(generics.ListAPIView[Experiment]):
    serializer_class = ExperimentOutput
    pagination_class = CursorPage
    filterset_class = ExperimentFilter

    def get_queryset(self) -> QuerySet[Experiment]:
        if getattr(self, "swagger_fake_view", False):  # the schema generator, with no principal
            return Experiment.objects.none()
        return (
            selectors.experiments_viewable_by(_principal(self.request))
            .prefetch_related("variants__competitor__endpoint")
            .order_by("-id")
        )

    @extend_schema(
        operation_id="experiments_list",
        summary="A/B experiments",
        description="The organisation's experiments with their variants (configured in the admin).",
        examples=[OpenApiExample("A page", value={"next": None, "previous": None, "results": [EXAMPLE_EXPERIMENT]})],
        tags=["experiments"],
    )
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().get(request, *args, **kwargs)


ORGANIZATION_PARAMETER = OpenApiParameter(
    "organization",
    str,
    OpenApiParameter.QUERY,
    required=False,
    description="Organisation slug, where the key names experiments of several of yours (sessions only).",
)


def _experiment(experiments: QuerySet[Experiment], request: Request, key: str) -> Experiment:
    organization = request.query_params.get("organization")
    if organization and not re.fullmatch(r"[-a-zA-Z0-9_]{1,50}", organization):
        # A slug is letters, digits, - and _: anything else (a NUL byte PostgreSQL refuses) is no slug.
        raise Invalid("organization must be an organisation's slug (letters, digits, - and _).")
    try:
        experiment = selectors.experiment_by_key(experiments, key=key, organization=organization or None)
    except selectors.ExperimentAmbiguous:
        raise Conflict(
            f"Experiments of several of your organisations use the key {key!r}: add ?organization=<slug>."
        ) from None
    if experiment is None:
        raise ApiNotFound("No such experiment.")
    return experiment


class ExperimentDetailApi(APIView):
    @extend_schema(
        operation_id="experiment_read",
        summary="An A/B experiment, with exposures",
        description="Its variants in assignment order, each with the units assigned to it and the exposures counted.",
        parameters=[ORGANIZATION_PARAMETER],
        responses={200: ExperimentDetailOutput, 409: ErrorOutput},
        examples=[
            OpenApiExample(
                "With exposures",
                value={
                    **EXAMPLE_EXPERIMENT,
                    "variants": [{**v, "units": 812, "exposures": 2301} for v in EXAMPLE_EXPERIMENT["variants"]],  # type: ignore[attr-defined]
                },
            )
        ],
        tags=["experiments"],
    )
    def get(self, request: Request, key: str) -> Response:
        experiment = _experiment(selectors.experiments_viewable_by(_principal(request)), request, key)
        variants = [
            {"name": row.variant.name, "weight": row.variant.weight, "competitor": row.variant.competitor, **counts}
            for row in selectors.experiment_exposures(experiment)
            for counts in [{"units": row.units, "exposures": row.exposures}]
        ]
        data = {
            "key": experiment.key,
            "name": experiment.name,
            "description": experiment.description,
            "organization": experiment.organization,
            "campaign_id": experiment.campaign_id,
            "active": experiment.active,
            "created_at": experiment.created_at,
            "variants": variants,
        }
        return Response(ExperimentDetailOutput(data).data)


class AssignInput(serializers.Serializer[Any]):
    unit_id = StrictCharField(max_length=200, help_text="Your stable id of the unit: a user, a session...")


class AssignOutput(serializers.Serializer[Any]):
    experiment = serializers.CharField()
    unit_id = serializers.CharField()
    variant = serializers.CharField()
    competitor = CompetitorRefOutput(allow_null=True)
    exposures = serializers.IntegerField(help_text="This unit's exposures to this variant, this one included.")


class ExperimentAssignApi(APIView):
    parser_classes = [JSONParser]

    @extend_schema(
        operation_id="experiment_assign",
        summary="Assign a unit to a variant (sticky)",
        description="The variant is a deterministic weighted hash of (experiment key, unit_id): the same unit "
        "always gets the same variant while the variants and weights stay as they are. The exposure is counted. "
        "409 for an inactive experiment. Write key, or an owner/manager.",
        parameters=[ORGANIZATION_PARAMETER],
        request=AssignInput,
        responses={200: AssignOutput, 409: ErrorOutput},
        examples=[
            OpenApiExample("A unit", value={"unit_id": "user-8812"}, request_only=True),
            OpenApiExample(
                "Its variant",
                value={
                    "experiment": "checkout-copy",
                    "unit_id": "user-8812",
                    "variant": "treatment",
                    "competitor": None,
                    "exposures": 3,
                },
                response_only=True,
            ),
        ],
        tags=["experiments"],
    )
    def post(self, request: Request, key: str) -> Response:
        experiment = _experiment(selectors.experiments_writable_by(_principal(request)), request, key)
        body = AssignInput(data=request.data)
        body.is_valid(raise_exception=True)
        result = services.experiment_assign(experiment=experiment, unit_id=body.validated_data["unit_id"])
        data = {
            "experiment": experiment.key,
            "unit_id": body.validated_data["unit_id"],
            "variant": result.variant.name,
            "competitor": result.variant.competitor,
            "exposures": result.exposures,
        }
        return Response(AssignOutput(data).data)


# --- Judges and judge runs -------------------------------------------------------------------------------


class RubricOutput(serializers.Serializer[Any]):
    id = serializers.IntegerField()
    name = serializers.CharField()
    version = serializers.IntegerField()
    kind = serializers.CharField()
    question = serializers.CharField()
    instructions = serializers.CharField()
    content_hash = serializers.CharField()
    created_at = serializers.DateTimeField()


class JudgeOutput(serializers.Serializer[Any]):
    id = serializers.IntegerField()
    name = serializers.CharField()
    model = serializers.CharField(source="endpoint.model_name")
    model_version = serializers.CharField(source="endpoint.model_version")
    family = serializers.CharField()
    excluded_families = serializers.SerializerMethodField()
    temperature = serializers.FloatField()
    max_tokens = serializers.IntegerField()
    active = serializers.BooleanField()
    rubric = RubricOutput()
    created_at = serializers.DateTimeField()

    def get_excluded_families(self, judge: Any) -> list[str]:
        return sorted(judge.families_excluded())


class JudgeRunStatsOutput(serializers.Serializer[Any]):
    order_disagreement_rate = serializers.FloatField(allow_null=True, help_text="Judged pairs whose orders disagreed.")
    position_bias = serializers.FloatField(
        allow_null=True, help_text="(first - second) / decisive replies: +1 always the first answer, 0 none."
    )
    first_position_share = serializers.FloatField(allow_null=True)
    refusal_rate = serializers.FloatField(allow_null=True, help_text="Replies that were not the strict JSON.")
    failure_rate = serializers.FloatField(allow_null=True, help_text="Calls that got no reply.")
    pair_refusal_rate = serializers.FloatField(allow_null=True)
    tokens = serializers.IntegerField()
    input_tokens = serializers.IntegerField()
    output_tokens = serializers.IntegerField()
    gpu_seconds = serializers.FloatField(help_text="Model time: the judge calls' summed latencies.")


class JudgeRunOutput(serializers.Serializer[Any]):
    id = serializers.IntegerField()
    campaign_id = serializers.IntegerField()
    judge_id = serializers.IntegerField()
    judge = serializers.CharField(source="judge.name")
    rubric_id = serializers.IntegerField()
    rubric_version = serializers.IntegerField(source="rubric.version")
    rubric_hash = serializers.CharField(source="rubric.content_hash")
    kind = serializers.CharField()
    status = serializers.CharField()
    seed = serializers.IntegerField()
    competitor_ids = serializers.ListField(child=serializers.IntegerField())
    created_at = serializers.DateTimeField()
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)
    error = serializers.CharField()
    pairs_total = serializers.IntegerField()
    pairs_judged = serializers.IntegerField()
    pairs_refused = serializers.IntegerField()
    pairs_inconsistent = serializers.IntegerField()
    pairs_excluded_family = serializers.IntegerField(
        help_text="Pairs skipped: a side served by the judge's own model (its endpoint, or the same model name), "
        "or of a family it excludes."
    )
    calls = serializers.IntegerField()
    calls_refused = serializers.IntegerField()
    calls_failed = serializers.IntegerField()
    stats = serializers.SerializerMethodField()

    @extend_schema_field(JudgeRunStatsOutput)
    def get_stats(self, run: Any) -> dict[str, Any]:
        # A run still going has no stored stats yet: the same rates, from its counters so far.
        return dict(run.stats or run.stats_derived())


JUDGE_RUN_EXAMPLE = {
    "id": 7,
    "campaign_id": 12,
    "judge_id": 3,
    "judge": "helpfulness judge",
    "rubric_id": 5,
    "rubric_version": 2,
    "rubric_hash": "9f2c...",
    "kind": "battles",
    "status": "done",
    "seed": 0,
    "competitor_ids": [],
    "created_at": "2026-12-01T12:00:00Z",
    "started_at": "2026-12-01T12:00:01Z",
    "finished_at": "2026-12-01T12:03:00Z",
    "error": "",
    "pairs_total": 200,
    "pairs_judged": 190,
    "pairs_refused": 10,
    "pairs_inconsistent": 21,
    "pairs_excluded_family": 0,
    "calls": 400,
    "calls_refused": 11,
    "calls_failed": 0,
    "stats": {
        "order_disagreement_rate": 0.1105,
        "position_bias": 0.08,
        "first_position_share": 0.54,
        "refusal_rate": 0.0275,
        "failure_rate": 0.0,
        "pair_refusal_rate": 0.05,
        "tokens": 160000,
        "input_tokens": 150000,
        "output_tokens": 10000,
        "gpu_seconds": 95.2,
    },
}


class _PageQuery(serializers.Serializer[Any]):
    limit = serializers.IntegerField(required=False, min_value=1, max_value=500)
    cursor = serializers.CharField(required=False)


PAGE_PARAMETERS = [
    OpenApiParameter("limit", int, description="Items per page (1-500, default 50)."),
    OpenApiParameter("cursor", str, description="From the previous page's `next`."),
]


class JudgeListApi(APIView):
    """``GET /api/v1/judges/``: the judges of the caller's organisations, each with its rubric version."""

    @extend_schema(
        operation_id="judges_list",
        summary="Judges",
        description="Judges (a served model, one rubric version, temperature 0) of the organisations the caller "
        "may read, newest first, in cursor pages. A retired judge (its rubric has a newer version) is inactive.",
        parameters=PAGE_PARAMETERS,
        responses={200: page_of(JudgeOutput)},
        tags=["judges"],
    )
    def get(self, request: Request) -> Response:
        _PageQuery(data=request.query_params).is_valid(raise_exception=True)
        return cursor_page(  # type: ignore[no-any-return]
            request=request,
            view=self,
            queryset=selectors.judges_viewable_by(_principal(request)),
            output=JudgeOutput,
            ordering="-id",
        )


class JudgeDetailApi(APIView):
    @extend_schema(
        operation_id="judge_read",
        summary="One judge",
        description="The judge, its model and its rubric version (404 outside the caller's organisations).",
        responses={200: JudgeOutput, 404: ErrorOutput},
        tags=["judges"],
    )
    def get(self, request: Request, judge_id: int) -> Response:
        judge = selectors.judge_viewable_by(user=_principal(request), judge_id=judge_id)
        if judge is None:
            raise Http404("No such judge.")
        return Response(JudgeOutput(judge).data)


class JudgeRunListCreateApi(APIView):
    """``GET``: the campaign's judge runs with their stats, newest first. ``POST``: start one (202)."""

    parser_classes = [JSONParser]

    class Input(serializers.Serializer[Any]):
        judge_id = serializers.IntegerField(min_value=1)
        kind = serializers.ChoiceField(choices=JudgeRun.Kind.values, default=JudgeRun.Kind.BATTLES)
        seed = serializers.IntegerField(min_value=0, max_value=2**31 - 1, default=0)
        competitor_ids = serializers.ListField(
            child=serializers.IntegerField(min_value=1),
            required=False,
            default=list,
            max_length=100,
            help_text="Golden runs: the competitors that answer (default: the campaign's active ones).",
        )

    @extend_schema(
        operation_id="judge_runs_list",
        summary="Judge runs of a campaign",
        description="Runs newest first, in cursor pages, each with its counters and rates: order disagreement, "
        "signed position bias, refusal rate, tokens and model seconds.",
        parameters=PAGE_PARAMETERS,
        responses={200: page_of(JudgeRunOutput)},
        examples=[
            OpenApiExample(
                "A finished run",
                value={"next": None, "previous": None, "results": [JUDGE_RUN_EXAMPLE]},
                response_only=True,
            )
        ],
        tags=["judges"],
    )
    def get(self, request: Request, campaign_id: int) -> Response:
        campaign = _campaign(request, campaign_id)
        _PageQuery(data=request.query_params).is_valid(raise_exception=True)
        return cursor_page(  # type: ignore[no-any-return]
            request=request,
            view=self,
            queryset=selectors.judge_runs_for(campaign=campaign),
            output=JudgeRunOutput,
            ordering="-id",
        )

    @extend_schema(
        operation_id="judge_runs_create",
        summary="Start a judge run",
        description="Queues a run of the judge over the campaign: `kind` battles (every judgeable battle, each "
        "judged in both presentation orders) or golden (each competitor answers every active pool prompt once, "
        "then every pair of answers is judged). Answers 202 with the run; poll it until `status` is done or "
        "failed. The judge's board and calibration follow. Audited; needs a write key, or an owner or manager.",
        request=Input,
        responses={202: JudgeRunOutput, 400: ErrorOutput, 404: ErrorOutput},
        examples=[
            OpenApiExample("Judge the battles", value={"judge_id": 3}, request_only=True),
            OpenApiExample("Queued", value={**JUDGE_RUN_EXAMPLE, "status": "queued"}, response_only=True),
        ],
        tags=["judges"],
    )
    def post(self, request: Request, campaign_id: int) -> Response:
        principal = _principal(request)
        campaign = selectors.campaign_writable_by(user=principal, campaign_id=campaign_id)
        if campaign is None:
            raise Http404("No such campaign.")
        data = self.Input(data=request.data)
        data.is_valid(raise_exception=True)
        judge = selectors.judge_viewable_by(user=principal, judge_id=data.validated_data["judge_id"])
        if judge is None or judge.organization_id != campaign.organization_id:
            raise ApiValidationError({"judge_id": ["No such judge in the campaign's organisation."]})
        run = services.judge_run_create(
            judge=judge,
            campaign=campaign,
            actor=principal if isinstance(principal, User) else None,
            kind=data.validated_data["kind"],
            seed=data.validated_data["seed"],
            competitor_ids=data.validated_data["competitor_ids"],
        )
        return Response(JudgeRunOutput(run).data, status=status.HTTP_202_ACCEPTED)


class JudgeRunDetailApi(APIView):
    @extend_schema(
        operation_id="judge_run_read",
        summary="One judge run",
        description="The run with its counters and rates.",
        responses={200: JudgeRunOutput, 404: ErrorOutput},
        examples=[OpenApiExample("A finished run", value=JUDGE_RUN_EXAMPLE, response_only=True)],
        tags=["judges"],
    )
    def get(self, request: Request, campaign_id: int, run_id: int) -> Response:
        run = selectors.judge_run_for(campaign=_campaign(request, campaign_id), run_id=run_id)
        if run is None:
            raise Http404("No such judge run.")
        return Response(JudgeRunOutput(run).data)


class JudgeVerdictOutput(serializers.Serializer[Any]):
    id = serializers.IntegerField()
    run_id = serializers.IntegerField()
    judge_id = serializers.IntegerField()
    rubric_id = serializers.IntegerField()
    rubric_version = serializers.IntegerField()
    rubric_hash = serializers.CharField()
    battle_id = serializers.UUIDField(allow_null=True, help_text="Null for a golden run's pair (no battle).")
    prompt_id = serializers.IntegerField()
    category = serializers.CharField()
    left_id = serializers.IntegerField(help_text="The competitor on the battle's left (golden: the lower id).")
    right_id = serializers.IntegerField()
    choice = serializers.CharField(
        help_text="The counterbalanced verdict on the sides: left, right, tie, both_bad; empty when refused."
    )
    consistent = serializers.BooleanField(help_text="Both presentation orders gave the same verdict.")
    refused = serializers.BooleanField(help_text="Either order's reply was not the strict JSON, or its call failed.")
    refusal = serializers.CharField(help_text="Why the pair was refused.")
    verdict_ab = serializers.CharField(
        help_text="Order ab (left answer shown first), in the judge's frame: A (first), B, tie, both_bad; "
        "empty when refused."
    )
    verdict_ba = serializers.CharField(help_text="Order ba (right answer shown first), in the judge's frame.")
    reply_ab = serializers.CharField(help_text="The judge's raw reply in order ab, verbatim.")
    reply_ba = serializers.CharField(help_text="The judge's raw reply in order ba, verbatim.")
    input_tokens = serializers.IntegerField()
    output_tokens = serializers.IntegerField()
    latency_s = serializers.FloatField(help_text="Both calls' model time.")
    created_at = serializers.DateTimeField()


JUDGE_VERDICT_EXAMPLE = {
    "id": 901,
    "run_id": 7,
    "judge_id": 3,
    "rubric_id": 5,
    "rubric_version": 2,
    "rubric_hash": "9f2c...",
    "battle_id": "6f1d2c3e-9a4b-4c1f-8d2e-1a2b3c4d5e6f",
    "prompt_id": 88,
    "category": "coding",
    "left_id": 40,
    "right_id": 41,
    "choice": "tie",
    "consistent": False,
    "refused": False,
    "refusal": "",
    "verdict_ab": "A",
    "verdict_ba": "A",
    "reply_ab": '{"verdict": "A", "reason": "answers the question"}',
    "reply_ba": '{"verdict": "A", "reason": "more complete"}',
    "input_tokens": 812,
    "output_tokens": 24,
    "latency_s": 0.61,
    "created_at": "2026-12-01T12:01:00Z",
}


class JudgeRunVerdictsApi(APIView):
    """``GET``: one judge run's verdicts, the judge votes' log (both orders' raw replies included)."""

    @extend_schema(
        operation_id="judge_run_verdicts_list",
        summary="A judge run's verdicts",
        description="Every pair the run asked its judge about, in the order they were appended, in cursor pages: "
        "both presentation orders' raw replies and verdicts, the counterbalanced verdict on the sides "
        "(an order disagreement is a tie, `consistent` false), refusals with their reason, tokens and model "
        "time. Read as the run itself is (404 outside the caller's organisations).",
        parameters=PAGE_PARAMETERS,
        responses={200: page_of(JudgeVerdictOutput), 404: ErrorOutput},
        examples=[
            OpenApiExample(
                "An order disagreement (counted a tie)",
                value={"next": None, "previous": None, "results": [JUDGE_VERDICT_EXAMPLE]},
                response_only=True,
            )
        ],
        tags=["judges"],
    )
    def get(self, request: Request, campaign_id: int, run_id: int) -> Response:
        run = selectors.judge_run_for(campaign=_campaign(request, campaign_id), run_id=run_id)
        if run is None:
            raise Http404("No such judge run.")
        _PageQuery(data=request.query_params).is_valid(raise_exception=True)
        return cursor_page(  # type: ignore[no-any-return]
            request=request,
            view=self,
            queryset=selectors.judge_verdicts_of(run),
            output=JudgeVerdictOutput,
            ordering="id",
        )


# =====================================================================================================
# Crowd studies: a campaign's studies (list, create, retrieve, close) and their participants' progress.
# People: owners and managers of the campaign's organisation (participants' vendor ids are for those who
# pay them); keys: their organisation's, a read key reading only. Another organisation's is 404.
# =====================================================================================================


def _study_campaign(request: Request, campaign_id: int, *, write: bool = False) -> Campaign:
    principal = _principal(request)
    if isinstance(principal, ApiKeyPrincipal) and not write:
        campaign = selectors.campaign_viewable_by(user=principal, campaign_id=campaign_id)
    else:
        campaign = selectors.campaign_writable_by(user=principal, campaign_id=campaign_id)
    if campaign is None:
        raise ApiNotFound("No such campaign.")
    return campaign


def _study(request: Request, campaign_id: int, study_id: int, *, write: bool = False) -> Study:
    study = selectors.study_of(campaign=_study_campaign(request, campaign_id, write=write), study_id=study_id)
    if study is None:
        raise ApiNotFound("No such study.")
    return study


class StudyProgressOutput(serializers.Serializer[Any]):
    participants = serializers.IntegerField(help_text="Everyone who entered through the link.")
    active = serializers.IntegerField(help_text="Rating now (entered, not completed, not ended).")
    completed = serializers.IntegerField(help_text="Reached the target and were shown the code.")
    declined = serializers.IntegerField(help_text="Did not agree to the consent text.")
    timed_out = serializers.IntegerField(help_text="Ran out of time before the target.")
    left = serializers.IntegerField(help_text="Left (returned) the study before the target: no code.")
    votes = serializers.IntegerField(help_text="Votes the participants cast in the campaign.")
    voided_battles = serializers.IntegerField(
        help_text="Their battles that were voided (time ran out, left, a model failed, an answer was refused)."
    )


class StudyOutput(serializers.Serializer[Any]):
    id = serializers.IntegerField()
    campaign = serializers.IntegerField(source="campaign_id")
    name = serializers.CharField()
    vendor = serializers.ChoiceField(choices=Study.Vendor.values)
    pool = serializers.IntegerField(source="pool_id", help_text="The rater pool participants join.")
    target_votes = serializers.IntegerField()
    time_limit_min = serializers.IntegerField()
    completion_code = serializers.CharField()
    completion_url = serializers.CharField(help_text="Other vendors: the template with {code}; Prolific: empty.")
    completion_link = serializers.SerializerMethodField(help_text="Where participants are sent at the end.")
    instructions = serializers.CharField(allow_blank=True)
    consent_text = serializers.CharField(allow_blank=True)
    active = serializers.BooleanField(help_text="False once closed: the link answers 'not found'.")
    entry_path = serializers.CharField(source="path", help_text="The link to hand out, after this site's address.")
    created_at = serializers.DateTimeField()
    progress = serializers.SerializerMethodField()

    def get_completion_link(self, study: Study) -> str:
        return study.completion_link()

    @extend_schema_field(StudyProgressOutput)
    def get_progress(self, study: Study) -> dict[str, int]:
        return selectors.study_progress(study)


class ParticipantQualificationOutput(serializers.Serializer[Any]):
    status = serializers.ChoiceField(
        choices=["passed", "failed", "pending"],
        help_text="pending: still answering the qualification's gold battles (no real battle yet).",
    )
    answered = serializers.IntegerField(help_text="Qualification battles answered (so far, while pending).")
    correct = serializers.IntegerField(help_text="Of those, answered as expected.")
    required_battles = serializers.IntegerField(help_text="The campaign's qualification battles (k).")
    pass_mark = serializers.FloatField(help_text="Share correct needed to pass (the one in force when decided).")


class ParticipantOutput(serializers.Serializer[Any]):
    id = serializers.IntegerField()
    vendor_participant_id = serializers.CharField(help_text="PROLIFIC_PID or worker_id (for approving and paying).")
    vendor_study_id = serializers.CharField(allow_blank=True)
    external_session_id = serializers.CharField(allow_blank=True, help_text="SESSION_ID or assignment_id.")
    status = serializers.ChoiceField(choices=Participant.Status.values)
    entered_at = serializers.DateTimeField()
    consented_at = serializers.DateTimeField(allow_null=True)
    completed_at = serializers.DateTimeField(allow_null=True)
    ended_at = serializers.DateTimeField(allow_null=True, help_text="Declined, timed out or left.")
    deadline = serializers.DateTimeField(help_text="Entry plus the study's time limit.")
    votes = serializers.IntegerField(help_text="Votes cast in the study's campaign.")
    target = serializers.IntegerField(source="study.target_votes")
    complete = serializers.SerializerMethodField(help_text="Completed (reached the target and got the code).")
    voided = serializers.IntegerField(help_text="Their battles that were voided.")
    qualification = serializers.SerializerMethodField(
        help_text="The outcome of the campaign's qualification; null when the campaign asks for none."
    )

    def get_complete(self, participant: Participant) -> bool:
        return participant.status == Participant.Status.COMPLETED

    @extend_schema_field(ParticipantQualificationOutput(allow_null=True))
    def get_qualification(self, participant: Participant) -> dict[str, Any] | None:
        # From selectors.participants_progress's annotations: no query per participant.
        campaign = participant.study.campaign
        status = getattr(participant, "qualification_status", None)
        if status is None and campaign.qualification_battles <= 0:
            return None
        if status is None:
            return {
                "status": "pending",
                "answered": min(participant.gold_answered, campaign.qualification_battles),  # type: ignore[attr-defined]
                "correct": min(participant.gold_correct, campaign.qualification_battles),  # type: ignore[attr-defined]
                "required_battles": campaign.qualification_battles,
                "pass_mark": campaign.qualification_pass,
            }
        return {
            "status": status,
            "answered": participant.qualification_answered,  # type: ignore[attr-defined]
            "correct": participant.qualification_correct,  # type: ignore[attr-defined]
            "required_battles": participant.qualification_answered,  # type: ignore[attr-defined]  # k when decided
            "pass_mark": participant.qualification_threshold,  # type: ignore[attr-defined]
        }


STUDY_EXAMPLE = {
    "id": 4,
    "campaign": 3,
    "name": "Prolific wave 1",
    "vendor": "prolific",
    "pool": 9,
    "target_votes": 20,
    "time_limit_min": 60,
    "completion_code": "C7X9QK2",
    "completion_url": "",
    "completion_link": "https://app.prolific.com/submissions/complete?cc=C7X9QK2",
    "instructions": "Pick the better answer.",
    "consent_text": "",
    "active": True,
    "entry_path": "/s/k3Jd9sQ0vX2mN8pLr4tY6w/",
    "created_at": "2026-12-01T10:00:00Z",
    "progress": {
        "participants": 12,
        "active": 3,
        "completed": 8,
        "declined": 0,
        "timed_out": 1,
        "left": 0,
        "votes": 181,
        "voided_battles": 1,
    },
}


class StudyListCreateApi(APIView):
    """``GET``: the campaign's studies. ``POST``: a new study (write key, or an owner/manager)."""

    parser_classes = [JSONParser]

    class Input(serializers.Serializer[Any]):
        name = StrictCharField(max_length=200)
        vendor = serializers.ChoiceField(choices=Study.Vendor.values, default=Study.Vendor.PROLIFIC)
        pool = StrictIntegerField(min_value=1, help_text="A rater pool of the campaign.")
        target_votes = StrictIntegerField(min_value=1, max_value=100_000, default=20)
        time_limit_min = StrictIntegerField(min_value=1, max_value=24 * 60, default=60)
        completion_code = StrictCharField(max_length=64)
        completion_url = StrictCharField(max_length=500, required=False, default="", allow_blank=True)
        instructions = StrictCharField(max_length=50_000, required=False, default="", allow_blank=True)
        consent_text = StrictCharField(max_length=50_000, required=False, default="", allow_blank=True)

    class PageQuery(serializers.Serializer[Any]):
        limit = serializers.IntegerField(required=False, min_value=1, max_value=500)
        cursor = serializers.CharField(required=False)

    @extend_schema(
        operation_id="studies_list",
        summary="A campaign's crowd studies",
        description="Each with its link, completion code and its participants' progress, newest first, in cursor "
        "pages. Owners and managers, or a key of the organisation.",
        parameters=[
            OpenApiParameter("limit", int, description="Studies per page (1-500, default 50)."),
            OpenApiParameter("cursor", str, description="From the previous page's `next`."),
        ],
        responses={200: page_of(StudyOutput)},
        examples=[
            OpenApiExample(
                "A study", value={"next": None, "previous": None, "results": [STUDY_EXAMPLE]}, response_only=True
            )
        ],
        tags=["studies"],
    )
    def get(self, request: Request, campaign_id: int) -> Response:
        campaign = _study_campaign(request, campaign_id)
        self.PageQuery(data=request.query_params).is_valid(raise_exception=True)
        return cursor_page(  # type: ignore[no-any-return]
            request=request, view=self, queryset=selectors.studies_of(campaign), output=StudyOutput, ordering="-id"
        )

    @extend_schema(
        operation_id="studies_create",
        summary="Create a crowd study",
        description="The same rules as the console: `pool` one of the campaign's rater pools, `target_votes` at "
        "most the campaign's session and per-rater caps, Prolific's completion URL fixed (leave it empty), another "
        "vendor's an https URL with `{code}`. Answers 201 with the study, its link in `entry_path`. Audited as "
        "`study.created`.",
        request=Input,
        responses={201: StudyOutput},
        examples=[
            OpenApiExample(
                "A Prolific wave",
                value={"name": "Prolific wave 1", "pool": 9, "target_votes": 20, "completion_code": "C7X9QK2"},
                request_only=True,
            ),
            OpenApiExample("Created", value={**STUDY_EXAMPLE, "progress": {}}, response_only=True),
        ],
        tags=["studies"],
    )
    def post(self, request: Request, campaign_id: int) -> Response:
        campaign = _study_campaign(request, campaign_id, write=True)
        body = self.Input(data=request.data)
        body.is_valid(raise_exception=True)
        fields = dict(body.validated_data)
        study = services.study_create(
            campaign=campaign, pool_id=fields.pop("pool"), actor=_principal(request), **fields
        )
        return Response(StudyOutput(study).data, status=status.HTTP_201_CREATED)


class StudyDetailApi(APIView):
    @extend_schema(
        operation_id="studies_retrieve",
        summary="A crowd study and its progress",
        responses={200: StudyOutput},
        examples=[OpenApiExample("A study", value=STUDY_EXAMPLE, response_only=True)],
        tags=["studies"],
    )
    def get(self, request: Request, campaign_id: int, study_id: int) -> Response:
        return Response(StudyOutput(_study(request, campaign_id, study_id)).data)


class StudyCloseApi(APIView):
    @extend_schema(
        operation_id="studies_close",
        summary="Close a crowd study",
        description="Its link answers 'not found' from now on (nobody enters or comes back through it); votes, "
        "progress and codes stay. 409 if it is closed already. Audited as `study.closed`. No body.",
        request=None,
        responses={200: StudyOutput, 409: ErrorOutput},
        examples=[OpenApiExample("Closed", value={**STUDY_EXAMPLE, "active": False}, response_only=True)],
        tags=["studies"],
    )
    def post(self, request: Request, campaign_id: int, study_id: int) -> Response:
        study = _study(request, campaign_id, study_id, write=True)
        study = services.study_close(study=study, actor=_principal(request))
        return Response(StudyOutput(study).data)


class ParticipantFilterQuery(serializers.Serializer[Any]):
    status = serializers.ChoiceField(choices=Participant.Status.values, required=False)
    limit = serializers.IntegerField(required=False, min_value=1, max_value=500)
    cursor = serializers.CharField(required=False)


class ParticipantListApi(APIView):
    @extend_schema(
        operation_id="studies_participants_list",
        summary="A study's participants and their progress",
        description="Each participant's status, times, votes toward the target, whether they completed, and their "
        "voided battles; newest entry first, in cursor pages. Filter with `?status=`.",
        parameters=[
            OpenApiParameter("status", str, enum=Participant.Status.values, description="Only this status."),
            OpenApiParameter("limit", int, description="Participants per page (1-500, default 50)."),
            OpenApiParameter("cursor", str, description="From the previous page's `next`."),
        ],
        responses={200: page_of(ParticipantOutput)},
        examples=[
            OpenApiExample(
                "A participant",
                response_only=True,
                value={
                    "next": None,
                    "previous": None,
                    "results": [
                        {
                            "id": 31,
                            "vendor_participant_id": "5f1a2b3c4d5e6f7a8b9c0d1e",
                            "vendor_study_id": "0123456789abcdef01234567",
                            "external_session_id": "fedcba9876543210fedcba98",
                            "status": "active",
                            "entered_at": "2026-12-01T10:05:00Z",
                            "consented_at": "2026-12-01T10:05:30Z",
                            "completed_at": None,
                            "ended_at": None,
                            "deadline": "2026-12-01T11:05:00Z",
                            "votes": 7,
                            "target": 20,
                            "complete": False,
                            "voided": 0,
                            "qualification": {
                                "status": "passed",
                                "answered": 4,
                                "correct": 4,
                                "required_battles": 4,
                                "pass_mark": 0.75,
                            },
                        }
                    ],
                },
            )
        ],
        tags=["studies"],
    )
    def get(self, request: Request, campaign_id: int, study_id: int) -> Response:
        study = _study(request, campaign_id, study_id)
        query = ParticipantFilterQuery(data=request.query_params)
        query.is_valid(raise_exception=True)
        participants = selectors.participants_progress(study)
        if "status" in query.validated_data:
            participants = participants.filter(status=query.validated_data["status"])
        return cursor_page(  # type: ignore[no-any-return]
            request=request, view=self, queryset=participants, output=ParticipantOutput, ordering="-id"
        )
