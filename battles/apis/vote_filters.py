"""The vote filters (time, category, competitor, prompt source) shared by the streamed vote log, the export
jobs and ranking's preference pairs: the query-string and JSON-body serializers and their OpenAPI
parameters."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter
from rest_framework import serializers

from ..exporting import VoteFilters
from ..models import Prompt
from ..prompting import CATEGORIES
from .fields import StrictIntegerField

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


class ExportFiltersBody(ExportFiltersInput):
    competitor = StrictIntegerField(
        required=False, min_value=1, max_value=2**63 - 1, help_text="A competitor's id: votes with it on either side."
    )


FILTER_PARAMETERS = [
    OpenApiParameter("since", OpenApiTypes.DATETIME, description="Votes cast at or after this time (ISO 8601)."),
    OpenApiParameter("until", OpenApiTypes.DATETIME, description="Votes cast before this time (exclusive)."),
    OpenApiParameter("category", str, enum=list(CATEGORIES), description="Only prompts of this category."),
    OpenApiParameter(
        "competitor",
        {"type": "integer", "minimum": 1, "maximum": 2**63 - 1},
        description="Only votes with this competitor (id) on either side.",
    ),
    OpenApiParameter("prompt_source", str, enum=Prompt.Source.values, description="pool or rater prompts."),
]
