"""Read API for leaderboards: latest and historical snapshots per campaign, category and view."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from django.http import Http404
from drf_spectacular.utils import extend_schema
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
