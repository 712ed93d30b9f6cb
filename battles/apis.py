"""REST endpoints for the vote log."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from typing import Any

from django.contrib.auth.models import User
from django.http import Http404, StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.request import Request
from rest_framework.views import APIView

from raters.authentication import ApiKeyPrincipal

from . import selectors
from .models import Vote

CSV_COLUMNS = (
    "battle_id",
    "vote_id",
    "timestamp",
    "campaign_id",
    "rater_id",
    "pool_id",
    "prompt_id",
    "prompt_hash",
    "prompt_category",
    "prompt_language",
    "prompt_source",
    "left_competitor_id",
    "left_model",
    "left_version",
    "left_output_tokens",
    "left_finish_reason",
    "left_latency_s",
    "right_competitor_id",
    "right_model",
    "right_version",
    "right_output_tokens",
    "right_finish_reason",
    "right_latency_s",
    "temperature",
    "top_p",
    "max_tokens",
    "system_prompt",
    "seed",
    "vote",
    "decision_ms",
    "left_style",
    "right_style",
    "prompt_asks_identity",
    "answer_names_model",
)


def _cell(value: Any) -> Any:
    """Spreadsheets run a text cell starting with = + - @ (or a tab / carriage return) as a formula;
    model names and the system prompt are typed by people, so such text is prefixed with a quote."""
    if isinstance(value, str) and value[:1] in ("=", "+", "-", "@", "\t", "\r"):
        return "'" + value
    return value


def _flat(event: dict[str, Any]) -> list[Any]:
    row: dict[str, Any] = {k: v for k, v in event.items() if not isinstance(v, dict)}
    for group in ("prompt", "left", "right"):
        for key, value in event[group].items():
            name = f"{group}_{key}"
            row[name] = json.dumps(value, sort_keys=True) if isinstance(value, dict) else value
    row.update(event["params"])
    row.update(event["identity"])
    return [_cell(row.get(column, "")) for column in CSV_COLUMNS]


def _jsonl(votes: Iterator[Vote]) -> Iterator[str]:
    for vote in votes:
        yield json.dumps(vote.as_event(), sort_keys=True) + "\n"


def _csv(votes: Iterator[Vote]) -> Iterator[str]:
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(CSV_COLUMNS)
    for vote in votes:
        writer.writerow(_flat(vote.as_event()))
        if buffer.tell() > 64_000:
            yield buffer.getvalue()
            buffer.seek(0)
            buffer.truncate()
    yield buffer.getvalue()


class VoteLogExportApi(APIView):
    """The whole vote log of a campaign, streamed as JSON lines (``votes.jsonl``) or CSV (``votes.csv``).

    Streamed row by row from a server-side cursor, so a campaign of millions of votes is never held
    in memory. Owners, managers and viewers of the campaign's organisation only; anyone else gets 404."""

    @extend_schema(
        operation_id="votes_export",
        summary="The vote log, streamed",
        parameters=[OpenApiParameter("kind", str, OpenApiParameter.PATH, enum=["jsonl", "csv"])],
        responses={(200, "application/x-ndjson"): OpenApiTypes.STR, (200, "text/csv"): OpenApiTypes.STR},
        tags=["votes"],
    )
    def get(self, request: Request, campaign_id: int, kind: str) -> StreamingHttpResponse:
        user = request.user
        # IsAuthenticated, the API's default permission, lets only a signed-in user or an API key through.
        assert isinstance(user, (User, ApiKeyPrincipal))
        campaign = selectors.campaign_viewable_by(user=user, campaign_id=campaign_id)
        if campaign is None:
            raise Http404("No such campaign.")
        votes = selectors.votes_for_export(campaign=campaign)
        if kind == "csv":
            response = StreamingHttpResponse(_csv(votes), content_type="text/csv; charset=utf-8")
            response["Content-Disposition"] = f'attachment; filename="campaign-{campaign.pk}-votes.csv"'
        else:
            response = StreamingHttpResponse(_jsonl(votes), content_type="application/x-ndjson")
            response["Content-Disposition"] = f'attachment; filename="campaign-{campaign.pk}-votes.jsonl"'
        return response
