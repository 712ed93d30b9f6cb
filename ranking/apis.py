"""Read API for leaderboards (latest and historical snapshots per campaign, category and view) and for
rater quality (agreement and outlier raters)."""

from __future__ import annotations

from typing import Any

import numpy as np
from django.contrib.auth.models import User
from django.http import Http404
from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from arena.api import cursor_page, page_of
from battles.models import Campaign
from battles.selectors import campaign_viewable_by
from raters.authentication import ApiKeyPrincipal

from . import selectors
from .models import LeaderboardSnapshot
from .quality import quality_report


def _campaign(request: Request, campaign_id: int) -> Campaign:
    user = request.user
    # IsAuthenticated, the API's default permission, lets only a signed-in user or an API key through.
    assert isinstance(user, (User, ApiKeyPrincipal))
    campaign = campaign_viewable_by(user=user, campaign_id=campaign_id)
    if campaign is None:
        raise Http404("No such campaign.")
    return campaign


class SelectionInput(serializers.Serializer[Any]):
    category = serializers.CharField(required=False, allow_blank=True, default="")
    view = serializers.ChoiceField(choices=LeaderboardSnapshot.View.values, required=False, default="raw")


class SnapshotOutput(serializers.ModelSerializer[LeaderboardSnapshot]):
    class Meta:
        model = LeaderboardSnapshot
        fields = (
            "campaign",
            "category",
            "view",
            "version",
            "created_at",
            "last_vote_id",
            "votes_total",
            "votes_used",
            "method",
            "policy",
            "excluded",
            "rows",
            "pairwise",
            "extra",
            "compute_seconds",
        )


class SnapshotSummaryOutput(serializers.ModelSerializer[LeaderboardSnapshot]):
    class Meta:
        model = LeaderboardSnapshot
        fields = ("version", "created_at", "last_vote_id", "votes_total", "votes_used")


class LeaderboardLatestApi(APIView):
    """``GET /api/v1/campaigns/<id>/leaderboard/?category=&view=raw|style``: the newest snapshot."""

    @extend_schema(
        operation_id="leaderboard_latest",
        summary="The newest leaderboard",
        parameters=[SelectionInput],
        responses=SnapshotOutput,
        tags=["leaderboards"],
    )
    def get(self, request: Request, campaign_id: int) -> Response:
        campaign = _campaign(request, campaign_id)
        selection = SelectionInput(data=request.query_params)
        selection.is_valid(raise_exception=True)
        snapshot = selectors.snapshot_latest(campaign=campaign, **selection.validated_data)
        if snapshot is None:
            raise Http404("No leaderboard has been computed for this selection yet.")
        return Response(SnapshotOutput(snapshot).data)


class LeaderboardVersionApi(APIView):
    """``GET /api/v1/campaigns/<id>/leaderboard/<version>/?category=&view=``: one stored version."""

    @extend_schema(
        operation_id="leaderboard_version",
        summary="One stored version of a leaderboard",
        parameters=[SelectionInput],
        responses=SnapshotOutput,
        tags=["leaderboards"],
    )
    def get(self, request: Request, campaign_id: int, version: int) -> Response:
        campaign = _campaign(request, campaign_id)
        selection = SelectionInput(data=request.query_params)
        selection.is_valid(raise_exception=True)
        snapshot = (
            selectors.snapshot_history(campaign=campaign, **selection.validated_data).filter(version=version).first()
        )
        if snapshot is None:
            raise Http404("No such snapshot.")
        return Response(SnapshotOutput(snapshot).data)


class LeaderboardHistoryApi(APIView):
    """``GET /api/v1/campaigns/<id>/leaderboard/history/?category=&view=&limit=&cursor=``: versions,
    newest first (summaries; fetch a version for its rows)."""

    @extend_schema(
        operation_id="leaderboard_history",
        summary="The versions of a leaderboard, newest first",
        parameters=[SelectionInput],
        responses=page_of(SnapshotSummaryOutput),
        tags=["leaderboards"],
    )
    def get(self, request: Request, campaign_id: int) -> Response:
        campaign = _campaign(request, campaign_id)
        selection = SelectionInput(data=request.query_params)
        selection.is_valid(raise_exception=True)
        history = selectors.snapshot_history(campaign=campaign, **selection.validated_data)
        return cursor_page(  # type: ignore[no-any-return]
            request=request, view=self, queryset=history, output=SnapshotSummaryOutput, ordering="-version"
        )


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
    vote_id=_NO_VOTES, rater=_NO_VOTES, prompt=_NO_VOTES, left=_NO_VOTES, right=_NO_VOTES, outcome=_NO_VOTES
)


class RaterQualityApi(APIView):
    """``GET /api/v1/campaigns/<id>/rater-quality/?alpha=&min_common=``: agreement and outlier raters."""

    @extend_schema(
        operation_id="rater_quality",
        summary="Rater agreement and outlier raters",
        description=(
            "Computed from the campaign's whole vote log on request. Items shared by two or more raters are "
            "keyed by prompt hash and competitor pair with sides normalised (a stand-in until shared battles "
            "exist). Raw agreement, Fleiss' kappa and Krippendorff's alpha (nominal; item-bootstrap intervals) "
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
