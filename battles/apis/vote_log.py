"""``GET /api/v1/campaigns/<id>/votes.jsonl|csv``: the vote log of a campaign, streamed."""

from __future__ import annotations

from django.http import StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.views import APIView

from .. import exporting, selectors
from .access import _campaign
from .renderers import CSVRenderer, JSONLinesRenderer
from .vote_filters import FILTER_PARAMETERS, ExportFiltersInput

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
