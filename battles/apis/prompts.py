"""A campaign's prompts (read) and the prompt import (write).

Reads are scoped by ``selectors.campaigns_viewable_by`` (a key: its organisation; a person: where they
own, manage or view); the import by ``selectors.campaign_writable_by``. Another organisation's
campaign is 404 on every endpoint."""

from __future__ import annotations

from typing import Any

import django_filters
from django.conf import settings
from django.contrib.auth.models import User
from django.core.exceptions import RequestDataTooBig
from django.db.models import QuerySet
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, extend_schema
from rest_framework import generics, serializers
from rest_framework.exceptions import UnsupportedMediaType
from rest_framework.parsers import BaseParser, MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core.api import CursorPage, ErrorOutput, UtcIsoDateTimeFilter
from core.errors import Invalid, NotFound, PermissionDenied
from raters.authentication import ApiKeyPrincipal

from .. import prompt_import, selectors, services
from ..models import Campaign, Prompt
from ..prompting import CATEGORIES
from .access import _viewable_campaign
from .fields import _BooleanFilter, _FilterSet


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
            "multipart/form-data": {
                "type": "object",
                "properties": {"file": {"type": "string", "format": "binary"}},
                "required": ["file"],
            },
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
