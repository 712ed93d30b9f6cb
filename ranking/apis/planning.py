"""The sample-size planner: ``GET /api/v1/campaigns/<id>/plan/?margin=...&power=...`` (battles for a margin or
a power under uniform pair sampling, with the campaign's figures as defaults, and the newest board's battles to
separate rank 1 from rank 2)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core.errors import Invalid

from .. import selectors
from .access import _campaign


class PlanInput(serializers.Serializer[Any]):
    margin = serializers.FloatField(min_value=0.1, max_value=2000.0, help_text="Elo points on the board's scale.")
    power = serializers.FloatField(min_value=0.5, max_value=0.999, default=0.8)
    confidence = serializers.FloatField(min_value=0.5, max_value=0.999, default=0.95)
    tie_rate = serializers.FloatField(min_value=0.0, max_value=0.95, required=False, allow_null=True, default=None)
    competitors = serializers.IntegerField(min_value=2, max_value=10000, required=False, allow_null=True, default=None)


class PlanOutput(serializers.Serializer[Any]):
    competitors = serializers.IntegerField()
    margin = serializers.FloatField()
    tie_rate = serializers.FloatField()
    ties = serializers.CharField(help_text="The campaign's tie rule: half (a win each side) or davidson.")
    confidence = serializers.FloatField()
    power = serializers.FloatField()
    alpha = serializers.FloatField(help_text="Level of the two-sided test: 1 - confidence.")
    information_per_vote = serializers.FloatField(
        help_text="Fisher (half: sandwich) information per vote about a pair's gap at equal strength, natural units."
    )
    battles_for_margin = serializers.IntegerField(
        help_text="Battles in all, evenly over every pair, for a pair's interval half-width <= margin."
    )
    battles_for_power = serializers.IntegerField(
        help_text="Battles in all, evenly over every pair, to detect a true gap of `margin` at `power`."
    )
    battles_per_pair_for_margin = serializers.FloatField()
    battles_per_pair_for_power = serializers.FloatField()


class CampaignPlanOutput(serializers.Serializer[Any]):
    campaign_id = serializers.IntegerField()
    plan = PlanOutput(allow_null=True)
    reason = serializers.CharField(help_text="Why there is no plan (empty when there is one).")
    sources = serializers.DictField(child=serializers.CharField(), help_text="Where each default came from.")
    board_version = serializers.IntegerField(allow_null=True)
    board = serializers.JSONField(
        allow_null=True,
        help_text="The newest overall raw board's `extra.planning`: more battles to separate rank 1 from rank 2 "
        "at 80% power, spread evenly (`uniform`), like the battles so far (`as_so_far`) or all on the pair "
        "(`pair_only`); `reason` where it cannot say.",
    )


class CampaignPlanApi(APIView):
    @extend_schema(
        operation_id="campaign_plan",
        tags=["statistics"],
        summary="Sample-size planner: battles for a margin or a power",
        description="Battles needed under uniform pair sampling so that one pair's interval half-width is at most "
        "`margin` Elo points, and so that a true gap of `margin` is detected at `power` by the two-sided test at "
        "1 - `confidence`, ties taken into account (information per vote under the campaign's tie rule). "
        "`competitors` and `tie_rate` default to the newest board's. Also the board's own plan for rank 1 against "
        "rank 2. Owners, managers and viewers of the campaign's organisation, and its API keys.",
        parameters=[
            OpenApiParameter("margin", OpenApiTypes.FLOAT, required=True, description="Elo points (0.1 to 2000)."),
            OpenApiParameter("power", OpenApiTypes.FLOAT, description="0.5 to 0.999 (default 0.8)."),
            OpenApiParameter("confidence", OpenApiTypes.FLOAT, description="0.5 to 0.999 (default 0.95)."),
            OpenApiParameter("tie_rate", OpenApiTypes.FLOAT, description="0 to 0.95 (default: the board's)."),
            OpenApiParameter("competitors", OpenApiTypes.INT, description="At least 2 (default: the board's)."),
        ],
        responses={200: CampaignPlanOutput},
        examples=[
            OpenApiExample(
                "A 30-point margin among 8 competitors",
                response_only=True,
                value={
                    "campaign_id": 3,
                    "plan": {
                        "competitors": 8,
                        "margin": 30.0,
                        "tie_rate": 0.2,
                        "ties": "half",
                        "confidence": 0.95,
                        "power": 0.8,
                        "alpha": 0.05,
                        "information_per_vote": 0.3125,
                        "battles_for_margin": 2886,
                        "battles_for_power": 5910,
                        "battles_per_pair_for_margin": 103.1,
                        "battles_per_pair_for_power": 211.1,
                    },
                    "reason": "",
                    "sources": {"competitors": "shown on board version 12", "tie_rate": "board version 12"},
                    "board_version": 12,
                    "board": {
                        "power": 0.8,
                        "alpha": 0.05,
                        "ties": "half",
                        "tie_rate": 0.2,
                        "first": 5,
                        "second": 9,
                        "first_label": "zen-bigram 2026-11",
                        "second_label": "stdlib-trigram 2026-11",
                        "computed_from": "raw view, all categories: 2400 fitted votes among the 8 shown competitors "
                        "(votes with a hidden competitor left out)",
                        "gap": 21.4,
                        "se": 14.2,
                        "power_now": 0.33,
                        "uniform": {"additional": 6810},
                        "as_so_far": {"additional": 5920},
                        "pair_only": {"additional": 1250},
                    },
                },
            )
        ],
    )
    def get(self, request: Request, campaign_id: int) -> Response:
        campaign = _campaign(request, campaign_id)
        query = PlanInput(data=request.query_params)
        query.is_valid(raise_exception=True)
        try:
            body = selectors.campaign_plan(campaign=campaign, **query.validated_data)
        except ValueError as exc:  # e.g. a power not above the test's level
            raise Invalid(str(exc)) from None
        return Response(CampaignPlanOutput(body).data)
