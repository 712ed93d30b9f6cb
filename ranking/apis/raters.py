"""Rater quality: agreement and the outlier test (``rater-quality``), and the per-rater reports of the
managers' dashboard (pace, decision time, gold accuracy, agreement)."""

from __future__ import annotations

from typing import Any

import numpy as np
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core.api import CursorPage, limit_parameter

from .. import selectors, services
from ..quality import quality_report
from .access import _campaign


class RaterQualityInput(serializers.Serializer[Any]):
    alpha = serializers.FloatField(
        required=False, default=0.01, min_value=0.0001, max_value=0.5, help_text="Level of the outlier test."
    )
    min_common = serializers.IntegerField(
        required=False,
        default=10,
        min_value=1,
        max_value=100_000,
        help_text="Common items a pair of raters needs for its Cohen's kappa to be listed.",
    )


class AgreementCoefficientOutput(serializers.Serializer[Any]):
    """A chance-corrected coefficient: ``value`` null with a ``reason`` when not estimable or undefined."""

    value = serializers.FloatField(allow_null=True)
    lower = serializers.FloatField(allow_null=True)
    upper = serializers.FloatField(allow_null=True)
    confidence = serializers.FloatField()
    interval_method = serializers.CharField(allow_blank=True)
    reason = serializers.CharField(allow_null=True)
    interval_reason = serializers.CharField(allow_null=True)
    observed_agreement = serializers.FloatField(allow_null=True)
    chance_agreement = serializers.FloatField(allow_null=True)
    se = serializers.FloatField(allow_null=True)
    se_null = serializers.FloatField(allow_null=True)
    z = serializers.FloatField(allow_null=True)
    p_value = serializers.FloatField(allow_null=True)
    items = serializers.IntegerField()
    values = serializers.IntegerField()
    bootstrap_undefined = serializers.IntegerField()
    raters_per_item = serializers.ChoiceField(choices=["fixed", "varying"], allow_null=True)


class RaterPairAgreementOutput(serializers.Serializer[Any]):
    rater_a = serializers.IntegerField()
    rater_b = serializers.IntegerField()
    cohen_kappa = AgreementCoefficientOutput()


class AgreementSummaryOutput(serializers.Serializer[Any]):
    raters = serializers.IntegerField()
    items = serializers.IntegerField()
    shared_items = serializers.IntegerField()
    raw_agreement = serializers.FloatField(allow_null=True)
    raw_agreement_pairs = serializers.FloatField(allow_null=True)
    raw_agreement_reason = serializers.CharField(allow_null=True)
    fleiss_kappa = AgreementCoefficientOutput()
    krippendorff_alpha = AgreementCoefficientOutput()


class OverallAgreementOutput(AgreementSummaryOutput):
    repeat_votes = serializers.IntegerField()
    rater_pairs = RaterPairAgreementOutput(many=True)


class PoolAgreementOutput(AgreementSummaryOutput):
    pool_id = serializers.IntegerField()
    name = serializers.CharField()


class GoldAccuracyOutput(serializers.Serializer[Any]):
    answered = serializers.IntegerField(help_text="Votes on gold battles and attention checks.")
    correct = serializers.IntegerField(help_text="Of those, votes matching the item's known verdict.")
    accuracy = serializers.FloatField(allow_null=True, help_text="correct / answered; null with none answered.")
    lower = serializers.FloatField(allow_null=True, help_text="95% Wilson interval, lower bound.")
    upper = serializers.FloatField(allow_null=True, help_text="95% Wilson interval, upper bound.")
    attention_answered = serializers.IntegerField()
    attention_failed = serializers.IntegerField(help_text="Attention checks where the broken answer won or a tie.")


class RaterQualityRowOutput(serializers.Serializer[Any]):
    rater_id = serializers.IntegerField()
    votes = serializers.IntegerField()
    items = serializers.IntegerField()
    shared_items = serializers.IntegerField()
    agreement = serializers.FloatField(allow_null=True)
    agreeing_pairs = serializers.IntegerField()
    pairs = serializers.IntegerField()
    informative_votes = serializers.IntegerField()
    e_value = serializers.FloatField(allow_null=True)
    e_value_max = serializers.FloatField(allow_null=True)
    flagged = serializers.BooleanField()
    votes_to_flag = serializers.IntegerField(allow_null=True)
    flag_vote_id = serializers.IntegerField(allow_null=True)
    gold_accuracy = GoldAccuracyOutput()


class OutlierTestOutput(serializers.Serializer[Any]):
    alpha = serializers.FloatField()
    threshold = serializers.FloatField()
    ties = serializers.ChoiceField(choices=["skip", "half"])
    method = serializers.CharField()
    flagged = serializers.IntegerField()


class RaterQualityOutput(serializers.Serializer[Any]):
    campaign_id = serializers.IntegerField()
    item_key = serializers.CharField()
    votes = serializers.IntegerField()
    confidence = serializers.FloatField()
    bootstrap_rounds = serializers.IntegerField()
    seed = serializers.IntegerField()
    overall = OverallAgreementOutput()
    pools = PoolAgreementOutput(many=True)
    raters = RaterQualityRowOutput(many=True)
    outliers = OutlierTestOutput()


# The schema's example: the real answer for a campaign without votes (every coefficient null, with why).
_NO_VOTES = np.zeros(0, dtype=np.int64)
_EMPTY_REPORT = quality_report(
    vote_id=_NO_VOTES, rater=_NO_VOTES, item=_NO_VOTES, left=_NO_VOTES, right=_NO_VOTES, outcome=_NO_VOTES
)


class RaterQualityApi(APIView):
    """``GET /api/v1/campaigns/<id>/rater-quality/?alpha=&min_common=``: agreement and outlier raters."""

    @extend_schema(
        operation_id="rater_quality",
        summary="Rater agreement and outlier raters",
        description=(
            "Computed from the campaign's whole vote log on request. Items are shared battles (one answer pair "
            "shown to k raters, `Campaign.reviewers_per_item`), sides normalised. Raw agreement, Fleiss' "
            "kappa and Krippendorff's alpha (nominal; item-bootstrap intervals) "
            "overall and per pool of the campaign, Cohen's kappa for rater pairs with at least `min_common` "
            "common items, and per rater their agreement and the sequential outlier test (an e-value against "
            "the other raters' consensus; `flagged` once it reached 1/alpha). A coefficient that cannot be "
            "estimated is null with a `reason`. Raters are user ids. Owners, managers and viewers of the "
            "campaign's organisation, and its API keys."
        ),
        parameters=[RaterQualityInput],
        responses=RaterQualityOutput,
        tags=["rater quality"],
        examples=[
            OpenApiExample(
                "No votes yet",
                response_only=True,
                value={"campaign_id": 7, **_EMPTY_REPORT},
            )
        ],
    )
    def get(self, request: Request, campaign_id: int) -> Response:
        campaign = _campaign(request, campaign_id)
        params = RaterQualityInput(data=request.query_params)
        params.is_valid(raise_exception=True)
        report = selectors.rater_quality(campaign=campaign, **params.validated_data)
        return Response(RaterQualityOutput(report).data)


# --- Rater reports (the managers' dashboard's figures) -------------------------------------------------


class RaterReportOutput(serializers.Serializer[Any]):
    rater_id = serializers.IntegerField(help_text="The rater's user id (as in the vote log).")
    battles = serializers.IntegerField(help_text="Votes the rater cast in the campaign, gold battles included.")
    median_decision_s = serializers.FloatField(
        allow_null=True, help_text="Median decision time in seconds (shown to vote, measured by the server)."
    )
    active_hours = serializers.FloatField(
        help_text="Time spent rating: the gaps between consecutive votes up to 30 minutes, plus the decision "
        "time of each vote that starts a session."
    )
    battles_per_hour = serializers.FloatField(allow_null=True, help_text="battles / active_hours.")
    first_vote_at = serializers.DateTimeField(allow_null=True)
    last_vote_at = serializers.DateTimeField(allow_null=True)
    gold_answered = serializers.IntegerField()
    gold_correct = serializers.IntegerField()
    gold_accuracy = serializers.FloatField(allow_null=True, help_text="gold_correct / gold_answered; null: none.")
    gold_lower = serializers.FloatField(allow_null=True, help_text="95% Wilson interval, lower bound.")
    gold_upper = serializers.FloatField(allow_null=True, help_text="95% Wilson interval, upper bound.")
    attention_answered = serializers.IntegerField()
    attention_failed = serializers.IntegerField()
    agreement = serializers.FloatField(
        allow_null=True,
        help_text="Share of agreeing (rater, other rater) pairs on items two or more raters judged (an item: "
        "the copies of one shared battle, one answer pair shown to several raters; verdicts with sides "
        "normalised, a rater's first vote per item, gold votes aside); null: no shared item.",
    )
    agreement_items = serializers.IntegerField(help_text="Items the rater shares with another rater.")
    agreement_pairs = serializers.IntegerField(help_text="(rater, other rater) pairs on those items.")
    flagged = serializers.BooleanField(help_text="A rater flag is in force (their votes leave the rankings).")


RATER_REPORT_EXAMPLE = {
    "rater_id": 41,
    "battles": 212,
    "median_decision_s": 9.4,
    "active_hours": 1.35,
    "battles_per_hour": 157.04,
    "first_vote_at": "2026-11-30T09:00:00Z",
    "last_vote_at": "2026-11-30T10:21:00Z",
    "gold_answered": 20,
    "gold_correct": 18,
    "gold_accuracy": 0.9,
    "gold_lower": 0.699,
    "gold_upper": 0.9721,
    "attention_answered": 4,
    "attention_failed": 0,
    "agreement": 0.71,
    "agreement_items": 37,
    "agreement_pairs": 88,
    "flagged": False,
}


class RaterReportPageOutput(serializers.Serializer[Any]):
    next = serializers.URLField(allow_null=True, help_text="The next page, or null on the last.")
    previous = serializers.URLField(allow_null=True, help_text="The previous page, or null.")
    results = RaterReportOutput(many=True)
    as_of = serializers.DateTimeField(
        help_text="When the figures from the log (battles, median decision time, pace, agreement) were computed. "
        "Gold accuracy, attention checks and flags are read on each request."
    )
    as_of_votes = serializers.IntegerField(help_text="Votes in the campaign's log those figures stand on.")
    votes_behind = serializers.IntegerField(
        help_text="Votes cast since: 0 when the figures are the log's as it stands; more when the latest figures "
        "computed are served while a refresh runs (raters who first voted since are not listed yet)."
    )
    refreshing = serializers.BooleanField(help_text="A refresh of the figures is queued or running.")


class RaterReportApi(APIView):
    """``GET /api/v1/campaigns/<id>/raters/report/?limit=&cursor=``: one report per rater, by rater id."""

    class PageQuery(serializers.Serializer[Any]):
        limit = serializers.IntegerField(required=False, min_value=1, max_value=500)
        cursor = serializers.CharField(required=False)

    @extend_schema(
        operation_id="rater_reports",
        tags=["rater quality"],
        summary="Per-rater reports: pace, decision time, gold accuracy, agreement",
        description="One row per rater who voted in the campaign, in cursor pages by rater id: battles, median "
        "decision time, battles per hour over their active time, gold accuracy with its Wilson interval, "
        "attention checks, raw agreement with the other raters on shared items, and whether a flag is in force. "
        "Every figure is an SQL aggregate over the vote log. The figures from the log are cached per state of "
        "the log; after new votes the latest ones computed may be served while a worker refreshes them, and the "
        "page says how old they are (`as_of`, `as_of_votes`, `votes_behind`, `refreshing`). Owners, managers and "
        "viewers of the campaign's organisation, and its API keys.",
        parameters=[
            limit_parameter("Raters"),
            OpenApiParameter("cursor", str, description="From the previous page's `next`."),
        ],
        responses={200: RaterReportPageOutput},
        examples=[
            OpenApiExample(
                "One rater",
                value={
                    "next": None,
                    "previous": None,
                    "results": [RATER_REPORT_EXAMPLE],
                    "as_of": "2026-11-30T10:21:04Z",
                    "as_of_votes": 4210,
                    "votes_behind": 0,
                    "refreshing": False,
                },
                response_only=True,
            )
        ],
    )
    def get(self, request: Request, campaign_id: int) -> Response:
        campaign = _campaign(request, campaign_id)
        self.PageQuery(data=request.query_params).is_valid(raise_exception=True)  # a bad limit is 400, not ignored
        paginator = CursorPage()
        paginator.ordering = "id"
        page = paginator.paginate_queryset(selectors.raters_of(campaign=campaign), request, view=self) or []
        served = services.rater_reports_serve(campaign=campaign, rater_ids=[user.pk for user in page])
        response = paginator.get_paginated_response(RaterReportOutput(served.reports, many=True).data)
        # The age of the figures, next to the page's own fields (added: a client reading results is unaffected).
        response.data["as_of"] = serializers.DateTimeField().to_representation(served.as_of)
        response.data["as_of_votes"] = served.as_of_votes
        response.data["votes_behind"] = served.votes_behind
        response.data["refreshing"] = served.refreshing
        return response
