"""Campaign statistics over a time window, and the cadence check (pairs of active competitors short of new
votes)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from .. import selectors
from .access import _campaign
from .leaderboards import ExcludedOutput, PolicyOutput


class StatisticsInput(serializers.Serializer[Any]):
    since = serializers.DateTimeField(required=False, allow_null=True, default=None)
    until = serializers.DateTimeField(required=False, allow_null=True, default=None)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if attrs["since"] and attrs["until"] and attrs["since"] >= attrs["until"]:
            raise serializers.ValidationError({"until": "Must be later than since."})
        return attrs


class DayOutput(serializers.Serializer[Any]):
    day = serializers.DateField()
    votes = serializers.IntegerField()


class DistributionOutput(serializers.Serializer[Any]):
    count = serializers.IntegerField()
    mean = serializers.FloatField(allow_null=True)
    p50 = serializers.FloatField(allow_null=True, help_text="Median (linear between ranks, as percentile_cont).")
    p95 = serializers.FloatField(allow_null=True)


class TokensBySideOutput(serializers.Serializer[Any]):
    left = DistributionOutput(required=False)
    right = DistributionOutput(required=False)


class FinishShareOutput(serializers.Serializer[Any]):
    count = serializers.IntegerField()
    share = serializers.FloatField()


class CompetitorStatisticsOutput(serializers.Serializer[Any]):
    competitor_id = serializers.IntegerField()
    model = serializers.CharField()
    version = serializers.CharField()
    retired = serializers.BooleanField()
    battles_served = serializers.IntegerField(help_text="Battles shown to a rater in the window (voted or not).")
    battles_voted = serializers.IntegerField(help_text="Votes the competitor was in.")
    vote_share = serializers.FloatField(
        allow_null=True, help_text="battles_voted / (2 × votes): its share of all voted sides (sums to 1)."
    )
    tokens = DistributionOutput(allow_null=True, help_text="Output tokens of its answers.")
    latency_s = DistributionOutput(allow_null=True, help_text="Seconds of its serving calls.")
    finish_reasons = serializers.DictField(
        child=FinishShareOutput(), help_text="Per finish reason (stop, length, error, ...): count and share."
    )


class AnswerWallSecondsOutput(serializers.Serializer[Any]):
    total = serializers.FloatField()
    mean_per_vote = serializers.FloatField(allow_null=True)


class StatisticsOutput(serializers.Serializer[Any]):
    since = serializers.DateTimeField(allow_null=True)
    until = serializers.DateTimeField(allow_null=True)
    votes = serializers.IntegerField()
    votes_per_day = DayOutput(many=True)
    policy = PolicyOutput()
    excluded = ExcludedOutput()
    tokens_by_side = TokensBySideOutput()
    answer_wall_seconds = AnswerWallSecondsOutput(
        help_text="Both sides' latency_s per vote, summed: wall-clock seconds of the calls that produced the "
        "answers. Not GPU time: calls overlap, servers batch and queue."
    )
    competitors = CompetitorStatisticsOutput(many=True)


class StatisticsApi(APIView):
    @extend_schema(
        operation_id="campaign_statistics",
        tags=["statistics"],
        summary="Campaign statistics over a time window",
        description="For the votes with since ≤ created_at < until (both optional, ISO 8601): votes per day "
        "(UTC), votes each rule of the campaign's current exclusion policy excludes (caps counted over the "
        "whole log in order, as a recompute does), output tokens per side and per competitor (mean, median, "
        "p95), serving latency per competitor (mean, p50, p95), finish-reason shares per competitor, "
        "exposure (battles served and voted, share of voted sides) and answer wall seconds per vote: the sum "
        "of both sides' latency_s, wall-clock seconds of the calls that produced the answers (not GPU time: "
        "calls overlap, servers batch and queue).",
        parameters=[
            OpenApiParameter("since", OpenApiTypes.DATETIME, description="Inclusive."),
            OpenApiParameter("until", OpenApiTypes.DATETIME, description="Exclusive."),
        ],
        responses={200: StatisticsOutput},
        examples=[
            OpenApiExample(
                "Two days",
                response_only=True,
                value={
                    "since": None,
                    "until": None,
                    "votes": 5,
                    "votes_per_day": [{"day": "2026-11-02", "votes": 2}, {"day": "2026-11-03", "votes": 3}],
                    "policy": {
                        "min_decision_ms": 1000,
                        "exclude_identity_leaks": True,
                        "prompt_hash_cap": None,
                        "rater_vote_cap": None,
                        "flagged_raters": [],
                    },
                    "excluded": {
                        "too_fast": 1,
                        "identity_leak": 1,
                        "over_prompt_cap": 0,
                        "over_rater_cap": 0,
                        "flagged_rater": 0,
                        "total": 2,
                    },
                    "tokens_by_side": {
                        "left": {"count": 5, "mean": 38.0, "p50": 40.0, "p95": 58.0},
                        "right": {"count": 5, "mean": 24.0, "p50": 20.0, "p95": 38.0},
                    },
                    "answer_wall_seconds": {"total": 18.5, "mean_per_vote": 3.7},
                    "competitors": [
                        {
                            "competitor_id": 7,
                            "model": "a",
                            "version": "1",
                            "retired": False,
                            "battles_served": 5,
                            "battles_voted": 4,
                            "vote_share": 0.4,
                            "tokens": {"count": 4, "mean": 25.0, "p50": 25.0, "p95": 38.5},
                            "latency_s": {"count": 4, "mean": 1.75, "p50": 1.5, "p95": 2.85},
                            "finish_reasons": {
                                "length": {"count": 1, "share": 0.25},
                                "stop": {"count": 3, "share": 0.75},
                            },
                        }
                    ],
                },
            )
        ],
    )
    def get(self, request: Request, campaign_id: int) -> Response:
        campaign = _campaign(request, campaign_id)
        window = StatisticsInput(data=request.query_params)
        window.is_valid(raise_exception=True)
        stats = selectors.campaign_statistics(campaign=campaign, **window.validated_data)
        return Response(StatisticsOutput(stats).data)


# --- The cadence check (a figure of the managers' dashboard) -------------------------------------------


class CadencePairOutput(serializers.Serializer[Any]):
    competitor_a = serializers.IntegerField(source="a", help_text="The lower competitor id.")
    competitor_b = serializers.IntegerField(source="b")
    label_a = serializers.CharField(source="a_label", help_text="Model and version.")
    label_b = serializers.CharField(source="b_label")
    votes = serializers.IntegerField(help_text="Votes on this pair in the window (gold battles aside).")


class CadenceOutput(serializers.Serializer[Any]):
    campaign_id = serializers.IntegerField()
    threshold = serializers.IntegerField(help_text="The campaign's `cadence_threshold` (default 50).")
    window_days = serializers.IntegerField()
    since = serializers.DateTimeField(help_text="Votes at or after this time count.")
    active_competitors = serializers.IntegerField()
    pairs = serializers.IntegerField(help_text="Pairs of active competitors.")
    stale_pairs = serializers.IntegerField(help_text="How many of them had fewer than `threshold` votes.")
    stale = serializers.BooleanField(help_text="True when any pair is under the threshold: the board may be stale.")
    pairs_under_threshold = CadencePairOutput(many=True, help_text="Those pairs, fewest votes first.")


class CadenceApi(APIView):
    """``GET /api/v1/campaigns/<id>/cadence/``: pairs of active competitors short of new votes."""

    @extend_schema(
        operation_id="campaign_cadence",
        tags=["statistics"],
        summary="Cadence check: pairs with too few new votes in 7 days",
        description="Every pair of the campaign's active competitors with fewer than the campaign's "
        "`cadence_threshold` votes in the last 7 days, fewest first (a pair that never met counts 0). A stalled "
        "queue leaves the board stale while it still looks current. Owners, managers and viewers of the "
        "campaign's organisation, and its API keys.",
        responses={200: CadenceOutput},
        examples=[
            OpenApiExample(
                "One stale pair",
                response_only=True,
                value={
                    "campaign_id": 3,
                    "threshold": 50,
                    "window_days": 7,
                    "since": "2026-11-24T12:00:00Z",
                    "active_competitors": 3,
                    "pairs": 3,
                    "stale_pairs": 1,
                    "stale": True,
                    "pairs_under_threshold": [
                        {
                            "competitor_a": 5,
                            "competitor_b": 9,
                            "label_a": "zen-bigram 2026-11",
                            "label_b": "stdlib-trigram 2026-11",
                            "votes": 12,
                        }
                    ],
                },
            )
        ],
    )
    def get(self, request: Request, campaign_id: int) -> Response:
        campaign = _campaign(request, campaign_id)
        found = selectors.cadence(campaign=campaign)
        body = {
            "campaign_id": campaign.pk,
            "threshold": found.threshold,
            "window_days": found.window_days,
            "since": found.since,
            "active_competitors": found.active_competitors,
            "pairs": found.pairs,
            "stale_pairs": len(found.stale),
            "stale": bool(found.stale),
            "pairs_under_threshold": found.stale,
        }
        return Response(CadenceOutput(body).data)
