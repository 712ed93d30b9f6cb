"""Campaigns (list, one) and a campaign's categories with their counts, read-only.

Reads are scoped by ``selectors.campaigns_viewable_by`` (a key: its organisation; a person: where they
own, manage or view). Another organisation's campaign is 404 on every endpoint."""

from __future__ import annotations

from typing import Any

import django_filters
from django.contrib.auth.models import User
from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import generics, serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core.api import CursorPage
from core.errors import NotFound
from raters.authentication import ApiKeyPrincipal

from .. import selectors
from ..models import Campaign
from ..prompting import CATEGORIES
from .access import _viewable_campaign
from .fields import _FilterSet


class CampaignParamsOutput(serializers.Serializer[Any]):
    temperature = serializers.FloatField()
    top_p = serializers.FloatField()
    max_tokens = serializers.IntegerField()
    system_prompt = serializers.CharField()


class CampaignCapsOutput(serializers.Serializer[Any]):
    session_cap = serializers.IntegerField(
        help_text="Battles one rater may take in any session window, whatever their logins."
    )
    session_window_h = serializers.IntegerField(
        help_text="The session cap's window in hours: a rater's battles of the last this many hours count."
    )
    rater_vote_cap = serializers.IntegerField(allow_null=True, help_text="Votes per rater; null: no cap.")
    prompt_hash_cap = serializers.IntegerField(
        allow_null=True, help_text="Votes per normalised prompt text; null: no cap."
    )
    min_decision_ms = serializers.IntegerField(help_text="Faster votes are left out of the rankings.")


class CampaignCountsOutput(serializers.Serializer[Any]):
    competitors = serializers.IntegerField(
        source="n_competitors",
        help_text="The competitors the competitors route lists (active or retired; gold pseudo-competitors are "
        "no competitors and are neither counted nor listed).",
    )
    prompts = serializers.IntegerField(source="n_prompts")
    votes = serializers.IntegerField(
        source="n_votes",
        help_text="Every vote in the log, gold ones included: the number the dashboard and the leaderboard page show.",
    )
    gold_votes = serializers.IntegerField(
        source="n_gold_votes", help_text="Of `votes`, those cast on gold battles: never ranked."
    )


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
    "sampling": "active",
    "params": {"temperature": 0.7, "top_p": 1.0, "max_tokens": 256, "system_prompt": ""},
    "max_turns": 1,
    "allow_rater_prompts": False,
    "identity_policy": "flag",
    "caps": {
        "session_cap": 20,
        "session_window_h": 12,
        "rater_vote_cap": None,
        "prompt_hash_cap": None,
        "min_decision_ms": 1500,
    },
    "counts": {"competitors": 2, "prompts": 120, "votes": 431, "gold_votes": 12},
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
