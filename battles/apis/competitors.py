"""A campaign's competitors (read-only), scoped as campaigns are (``campaigns.py``)."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import generics, serializers
from rest_framework.request import Request
from rest_framework.response import Response

from core.api import CursorPage

from .. import selectors
from ..models import Competitor
from .access import _viewable_campaign
from .fields import _BooleanFilter, _FilterSet


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
