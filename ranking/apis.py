"""REST API v1 for rankings: leaderboards (latest, one version, history), the pairwise table, campaign
statistics, and published boards (the publication itself, and the public read of a published board).

Blocks, in this order: shared helpers; leaderboards; pairwise; statistics; publication; public boards;
rater quality.
Other areas (exports of preference pairs, ...) add their own blocks below."""

from __future__ import annotations

import json
from typing import Any

import django_filters
import numpy as np
from django.conf import settings
from django.contrib.auth.models import User
from django.core.cache import cache
from django.core.serializers.json import DjangoJSONEncoder
from django.http import Http404, HttpResponse, StreamingHttpResponse
from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import generics, serializers, status
from rest_framework.parsers import JSONParser
from rest_framework.permissions import AllowAny
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.throttling import SimpleRateThrottle
from rest_framework.views import APIView

from arena.api import CursorPage, ErrorOutput, UtcIsoDateTimeFilter
from battles.apis import FILTER_PARAMETERS, ExportFiltersInput, JSONLinesRenderer
from battles.exporting import jsonl_from_events
from battles.models import Campaign
from battles.selectors import campaign_viewable_by, campaign_writable_by
from raters.authentication import ApiKeyPrincipal

from . import selectors, services
from .models import LeaderboardSnapshot
from .quality import quality_report

# --- Shared -------------------------------------------------------------------------------------------


def _principal(request: Request) -> User | ApiKeyPrincipal:
    user = request.user
    # ScopedAccess, the API's default permission, lets only a signed-in user or an API key through.
    assert isinstance(user, (User, ApiKeyPrincipal))
    return user


def _campaign(request: Request, campaign_id: int) -> Campaign:
    campaign = campaign_viewable_by(user=_principal(request), campaign_id=campaign_id)
    if campaign is None:
        raise Http404("No such campaign.")
    return campaign


class SelectionInput(serializers.Serializer[Any]):
    category = serializers.CharField(
        required=False, allow_blank=True, default="", max_length=32, help_text="Empty: all categories."
    )
    view = serializers.ChoiceField(
        choices=LeaderboardSnapshot.View.values,
        required=False,
        default="raw",
        help_text="raw: Bradley-Terry on the votes; style: with style control.",
    )


SELECTION_PARAMETERS = [
    OpenApiParameter("category", str, description="A prompt category; empty or absent: all categories."),
    OpenApiParameter(
        "view",
        str,
        enum=LeaderboardSnapshot.View.values,
        description="raw (default), style or reliability (crowd Bradley-Terry).",
    ),
]


# --- Leaderboards ---------------------------------------------------------------------------------------


class LeaderboardRowOutput(serializers.Serializer[Any]):
    """One competitor of a snapshot. Hidden rows (under the vote threshold) have null score, bounds and
    ranks. An interval side the votes cannot bound (a one-sided record) is null with ``*_open`` true;
    the page shows it as "≥ lower" or "≤ upper"."""

    competitor_id = serializers.IntegerField()
    # "label" shadows Field.label in the stubs; as a serializer field it is just the output key.
    label = serializers.CharField(help_text="Model and version as the snapshot recorded them.")  # type: ignore[assignment]
    model = serializers.CharField(help_text="The competitor's endpoint name, now.")
    version = serializers.CharField(help_text="The competitor's version label, now.")
    retired = serializers.BooleanField(help_text="The competitor no longer gets new battles (inactive).")
    hidden = serializers.BooleanField(help_text="Under the vote threshold: not placed.")
    component = serializers.IntegerField(help_text="Connected group of the comparison graph (-1: hidden).")
    score = serializers.FloatField(allow_null=True, help_text="400·log10 strength + 1000.")
    lower = serializers.FloatField(allow_null=True, help_text="Interval lower bound; null when open or hidden.")
    upper = serializers.FloatField(allow_null=True, help_text="Interval upper bound; null when open or hidden.")
    lower_open = serializers.BooleanField(help_text="The votes do not bound the score from below.")
    upper_open = serializers.BooleanField(help_text="The votes do not bound the score from above.")
    interval_method = serializers.CharField(allow_null=True)
    rank_best = serializers.IntegerField(allow_null=True, help_text="Best rank the intervals allow.")
    rank_worst = serializers.IntegerField(allow_null=True, help_text="Worst rank the intervals allow.")
    votes = serializers.IntegerField(help_text="Votes the competitor was in (after the exclusion policy).")
    counted = serializers.IntegerField(help_text="Votes entering the fit (both-bad left out under 'drop').")
    wins = serializers.IntegerField()
    ties = serializers.IntegerField()
    both_bad = serializers.IntegerField()
    losses = serializers.IntegerField(help_text="votes − wins − ties − both_bad.")
    win_rate = serializers.FloatField(allow_null=True, help_text="Ties count half a win.")
    tie_rate = serializers.FloatField(allow_null=True)
    both_bad_rate = serializers.FloatField(allow_null=True)


class MethodOutput(serializers.Serializer[Any]):
    estimator = serializers.CharField()
    interval = serializers.CharField(help_text="bootstrap, cluster_bootstrap or sandwich.")
    confidence = serializers.FloatField()
    confidence_pct = serializers.IntegerField()
    rounds = serializers.IntegerField()
    seed = serializers.IntegerField()
    both_bad = serializers.CharField(help_text="tie or drop.")
    ties = serializers.CharField()
    anchor = serializers.CharField()
    min_votes = serializers.IntegerField()


class PolicyOutput(serializers.Serializer[Any]):
    min_decision_ms = serializers.IntegerField()
    exclude_identity_leaks = serializers.BooleanField()
    prompt_hash_cap = serializers.IntegerField(allow_null=True)
    rater_vote_cap = serializers.IntegerField(allow_null=True)
    flagged_raters = serializers.ListField(child=serializers.IntegerField(), help_text="User ids of flagged raters.")
    flag_ids = serializers.ListField(
        child=serializers.IntegerField(),
        required=False,
        help_text="The rater flags (ids) in force when the snapshot was computed "
        "(absent in snapshots from before flags were recorded).",
    )


class ExcludedOutput(serializers.Serializer[Any]):
    """Votes each rule left out; a vote may break several rules, ``total`` counts each once."""

    too_fast = serializers.IntegerField()
    identity_leak = serializers.IntegerField()
    over_prompt_cap = serializers.IntegerField()
    over_rater_cap = serializers.IntegerField()
    flagged_rater = serializers.IntegerField()
    total = serializers.IntegerField()


class SnapshotOutput(serializers.Serializer[Any]):
    campaign = serializers.IntegerField(source="campaign_id")
    category = serializers.CharField()
    view = serializers.CharField()
    version = serializers.IntegerField()
    created_at = serializers.DateTimeField()
    last_vote_id = serializers.IntegerField()
    votes_total = serializers.IntegerField()
    votes_used = serializers.IntegerField()
    method = MethodOutput()
    policy = PolicyOutput()
    excluded = ExcludedOutput()
    rows = LeaderboardRowOutput(many=True)
    extra = serializers.DictField(help_text="Style coefficients, components, live Elo, tie parameter.")
    pairwise = serializers.DictField(
        required=False,
        help_text="Only with ?include=pairwise: the stored matrices (k × k grids; use the pairwise endpoint "
        "for counts per pair).",
    )
    compute_seconds = serializers.FloatField()


class LeaderboardInput(SelectionInput):
    include = serializers.ChoiceField(choices=["", "pairwise"], required=False, default="")


LEADERBOARD_PARAMETERS = [
    *SELECTION_PARAMETERS,
    OpenApiParameter(
        "include", str, enum=["pairwise"], description="pairwise: also the stored k × k matrices (large)."
    ),
]

ROW_EXAMPLE = {
    "competitor_id": 7,
    "label": "gpt-small 2026-11",
    "model": "gpt-small",
    "version": "2026-11",
    "retired": False,
    "hidden": False,
    "component": 0,
    "score": 1082.4,
    "lower": 1061.0,
    "upper": None,
    "lower_open": False,
    "upper_open": True,
    "interval_method": "profile likelihood",
    "rank_best": 1,
    "rank_worst": 2,
    "votes": 412,
    "counted": 412,
    "wins": 240,
    "ties": 40,
    "both_bad": 12,
    "losses": 120,
    "win_rate": 0.6311,
    "tie_rate": 0.0971,
    "both_bad_rate": 0.0291,
}


def _snapshot_body(snapshot: LeaderboardSnapshot, *, include_pairwise: bool) -> bytes:
    names = selectors.competitor_names(campaign=snapshot.campaign)
    data = {
        "campaign_id": snapshot.campaign_id,
        "category": snapshot.category,
        "view": snapshot.view,
        "version": snapshot.version,
        "created_at": snapshot.created_at,
        "last_vote_id": snapshot.last_vote_id,
        "votes_total": snapshot.votes_total,
        "votes_used": snapshot.votes_used,
        "method": snapshot.method,
        "policy": snapshot.policy,
        "excluded": snapshot.excluded,
        "rows": selectors.snapshot_rows(snapshot=snapshot, names=names),
        "extra": snapshot.extra,
        "compute_seconds": snapshot.compute_seconds,
    }
    out = dict(SnapshotOutput(data).data)
    # The typed sub-serializers pick their documented keys; the stored method, policy and counts may
    # hold more (they are the snapshot's record), so those pass through whole.
    out["method"], out["policy"], out["excluded"] = snapshot.method, snapshot.policy, snapshot.excluded
    out.pop("pairwise", None)
    if include_pairwise:
        out["pairwise"] = snapshot.pairwise
    return json.dumps(out, cls=DjangoJSONEncoder, separators=(",", ":")).encode()


def _snapshot_response(snapshot_id: int, *, include_pairwise: bool) -> HttpResponse:
    """The serialized snapshot, cached by its id for ``ARENA_LEADERBOARD_CACHE_S``: a snapshot never
    changes, and a new version has a new id, so the cache cannot serve a stale version; only the
    live competitor fields (model, version, retired) may lag by that long."""
    key = f"ranking:api:snapshot:{snapshot_id}:{int(include_pairwise)}"
    body = cache.get(key)
    if body is None:
        snapshots = LeaderboardSnapshot.objects.select_related("campaign")
        # The stored matrices are most of the row (megabytes at 200 competitors): not read unless asked for.
        snapshot = (snapshots if include_pairwise else snapshots.defer("pairwise")).get(pk=snapshot_id)
        body = _snapshot_body(snapshot, include_pairwise=include_pairwise)
        cache.set(key, body, timeout=settings.ARENA_LEADERBOARD_CACHE_S)
    return HttpResponse(body, content_type="application/json")


class LeaderboardLatestApi(APIView):
    """``GET /api/v1/campaigns/<id>/leaderboard/?category=&view=raw|style|reliability``: the newest snapshot."""

    @extend_schema(
        operation_id="leaderboard_latest",
        tags=["leaderboards"],
        summary="The newest leaderboard of a campaign",
        description="The newest snapshot for the selection (overall or one category; raw, style-controlled or "
        "reliability-weighted): every competitor with score, interval (open sides null with *_open true), rank "
        "range, vote, win, tie and loss counts; the method and its parameters, the exclusion policy and how "
        "many votes each rule excluded. 404 before the first recompute. Cached per snapshot (a new version is "
        "a new snapshot).",
        parameters=LEADERBOARD_PARAMETERS,
        responses={200: SnapshotOutput},
        examples=[
            OpenApiExample(
                "A snapshot",
                response_only=True,
                value={
                    "campaign": 3,
                    "category": "",
                    "view": "raw",
                    "version": 12,
                    "created_at": "2026-12-01T12:00:00Z",
                    "last_vote_id": 90210,
                    "votes_total": 5000,
                    "votes_used": 4810,
                    "method": {"estimator": "Bradley-Terry", "interval": "bootstrap", "confidence_pct": 95},
                    "policy": {"min_decision_ms": 1500, "exclude_identity_leaks": True, "flagged_raters": []},
                    "excluded": {
                        "too_fast": 150,
                        "identity_leak": 40,
                        "over_prompt_cap": 0,
                        "over_rater_cap": 0,
                        "flagged_rater": 0,
                        "total": 190,
                    },
                    "rows": [ROW_EXAMPLE],
                    "extra": {"components": 1},
                    "compute_seconds": 0.42,
                },
            )
        ],
    )
    def get(self, request: Request, campaign_id: int) -> HttpResponse:
        campaign = _campaign(request, campaign_id)
        selection = LeaderboardInput(data=request.query_params)
        selection.is_valid(raise_exception=True)
        include = selection.validated_data.pop("include") == "pairwise"
        snapshot_id = selectors.snapshot_latest_id(campaign=campaign, **selection.validated_data)
        if snapshot_id is None:
            raise Http404("No leaderboard has been computed for this selection yet.")
        return _snapshot_response(snapshot_id, include_pairwise=include)


class LeaderboardVersionApi(APIView):
    """``GET /api/v1/campaigns/<id>/leaderboard/<version>/?category=&view=``: one stored version."""

    @extend_schema(
        operation_id="leaderboard_version",
        tags=["leaderboards"],
        summary="One stored version of a leaderboard",
        description="The snapshot of the selection at this version, exactly as computed then (a permalink).",
        parameters=LEADERBOARD_PARAMETERS,
        responses={200: SnapshotOutput},
        examples=[OpenApiExample("A row", response_only=True, value={"version": 3, "rows": [ROW_EXAMPLE]})],
    )
    def get(self, request: Request, campaign_id: int, version: int) -> HttpResponse:
        campaign = _campaign(request, campaign_id)
        selection = LeaderboardInput(data=request.query_params)
        selection.is_valid(raise_exception=True)
        include = selection.validated_data.pop("include") == "pairwise"
        snapshot_id = (
            selectors.snapshot_history(campaign=campaign, **selection.validated_data)
            .filter(version=version)
            .values_list("pk", flat=True)
            .first()
        )
        if snapshot_id is None:
            raise Http404("No such snapshot.")
        return _snapshot_response(snapshot_id, include_pairwise=include)


class SnapshotSummaryOutput(serializers.ModelSerializer[LeaderboardSnapshot]):
    excluded = ExcludedOutput()

    class Meta:
        model = LeaderboardSnapshot
        fields = ("version", "created_at", "last_vote_id", "votes_total", "votes_used", "excluded")


class HistoryPage(CursorPage):
    """Cursor pages by version, newest first."""

    ordering = "-version"


class SnapshotHistoryFilter(django_filters.FilterSet):  # type: ignore[misc]  # django-filter ships no types
    created_after = UtcIsoDateTimeFilter(field_name="created_at", lookup_expr="gte")
    created_before = UtcIsoDateTimeFilter(field_name="created_at", lookup_expr="lt")

    class Meta:
        model = LeaderboardSnapshot
        fields: list[str] = []


class LeaderboardHistoryApi(generics.ListAPIView[LeaderboardSnapshot]):
    """``GET /api/v1/campaigns/<id>/leaderboard/history/?category=&view=&limit=&cursor=``: versions,
    newest first (summaries; fetch a version for its rows)."""

    serializer_class = SnapshotSummaryOutput
    pagination_class = HistoryPage
    filterset_class = SnapshotHistoryFilter
    ordering = "-version"

    def get_queryset(self) -> Any:
        if getattr(self, "swagger_fake_view", False):  # schema generation: no request to scope by
            return LeaderboardSnapshot.objects.none()
        campaign = _campaign(self.request, self.kwargs["campaign_id"])
        selection = SelectionInput(data=self.request.query_params)
        selection.is_valid(raise_exception=True)
        return (
            selectors.snapshot_history(campaign=campaign, **selection.validated_data)
            .only("id", "version", "created_at", "last_vote_id", "votes_total", "votes_used", "excluded")
            .order_by("-version")
        )

    @extend_schema(
        operation_id="leaderboard_history",
        tags=["leaderboards"],
        summary="Versions of a leaderboard, newest first",
        description="One summary per stored version of the selection (no rows; fetch a version for those), "
        "cursor-paginated by version, newest first.",
        parameters=SELECTION_PARAMETERS,
        examples=[
            OpenApiExample(
                "A version (one item of the page's results)",
                response_only=True,
                value={
                    "version": 12,
                    "created_at": "2026-12-01T12:00:00Z",
                    "last_vote_id": 90210,
                    "votes_total": 5000,
                    "votes_used": 4810,
                    "excluded": {
                        "too_fast": 150,
                        "identity_leak": 40,
                        "over_prompt_cap": 0,
                        "over_rater_cap": 0,
                        "flagged_rater": 0,
                        "total": 190,
                    },
                },
            )
        ],
    )
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().get(request, *args, **kwargs)


# --- Pairwise -------------------------------------------------------------------------------------------


class PairOutput(serializers.Serializer[Any]):
    """Competitor against opponent (each pair appears twice, once from each side)."""

    competitor_id = serializers.IntegerField()
    opponent_id = serializers.IntegerField()
    battles = serializers.IntegerField()
    wins = serializers.IntegerField(help_text="Battles the competitor won against the opponent.")
    ties = serializers.IntegerField()
    both_bad = serializers.IntegerField()
    losses = serializers.IntegerField()
    win_rate = serializers.FloatField(allow_null=True, help_text="Ties (and both-bad under 'tie') count half.")
    wilson_lower = serializers.FloatField(allow_null=True)
    wilson_upper = serializers.FloatField(allow_null=True)
    p_value = serializers.FloatField(
        allow_null=True, help_text="Exact two-sided binomial test of decisive battles against 0.5; null without any."
    )
    p_holm = serializers.FloatField(
        allow_null=True, help_text="Holm-adjusted over the pairs the snapshot shows; null for a hidden competitor."
    )


class PairwiseCompetitorOutput(serializers.Serializer[Any]):
    competitor_id = serializers.IntegerField()
    label = serializers.CharField()  # type: ignore[assignment]
    model = serializers.CharField()
    version = serializers.CharField()
    retired = serializers.BooleanField()
    hidden = serializers.BooleanField()


class PairwiseOutput(serializers.Serializer[Any]):
    campaign = serializers.IntegerField()
    category = serializers.CharField()
    view = serializers.CharField()
    version = serializers.IntegerField(help_text="The snapshot whose votes the table counts.")
    confidence = serializers.FloatField()
    both_bad = serializers.CharField(help_text="tie (counted half) or drop.")
    votes_used = serializers.IntegerField()
    correction = serializers.CharField()
    intransitive_triads = serializers.IntegerField(allow_null=True)
    competitors = PairwiseCompetitorOutput(many=True)
    pairs = PairOutput(many=True)


PAIRWISE_CACHE_S = 3600


class PairwiseApi(APIView):
    @extend_schema(
        operation_id="leaderboard_pairwise",
        tags=["leaderboards"],
        summary="Pairwise battles, win rates and tests",
        description="For every pair that met in the votes of the newest snapshot of the selection: battles, "
        "wins, ties, both-bad and losses, the win rate with its Wilson interval, and the exact binomial p "
        "(unadjusted, and Holm-adjusted over the shown pairs). Counted from the vote log as that snapshot "
        "saw it: votes up to its last vote id, under the exclusion policy it recorded.",
        parameters=SELECTION_PARAMETERS,
        responses={200: PairwiseOutput},
        examples=[
            OpenApiExample(
                "One pair",
                response_only=True,
                value={
                    "campaign": 3,
                    "category": "",
                    "view": "raw",
                    "version": 12,
                    "confidence": 0.95,
                    "both_bad": "tie",
                    "votes_used": 3,
                    "correction": "Holm over the 1 pairs shown with decisive votes",
                    "intransitive_triads": 0,
                    "competitors": [
                        {
                            "competitor_id": 7,
                            "label": "a 1",
                            "model": "a",
                            "version": "1",
                            "retired": False,
                            "hidden": False,
                        }
                    ],
                    "pairs": [
                        {
                            "competitor_id": 7,
                            "opponent_id": 8,
                            "battles": 2,
                            "wins": 2,
                            "ties": 0,
                            "both_bad": 0,
                            "losses": 0,
                            "win_rate": 1.0,
                            "wilson_lower": 0.3424,
                            "wilson_upper": 1.0,
                            "p_value": 0.5,
                            "p_holm": 0.5,
                        }
                    ],
                },
            )
        ],
    )
    def get(self, request: Request, campaign_id: int) -> Response:
        campaign = _campaign(request, campaign_id)
        selection = SelectionInput(data=request.query_params)
        selection.is_valid(raise_exception=True)
        snapshot = selectors.snapshot_latest(campaign=campaign, **selection.validated_data)
        if snapshot is None:
            raise Http404("No leaderboard has been computed for this selection yet.")
        # The table depends on the snapshot alone (its votes, its recorded policy): cached by its id.
        key = f"ranking:api:pairwise:{snapshot.pk}"
        table = cache.get(key)
        if table is None:
            table = selectors.snapshot_pairwise(snapshot=snapshot)
            cache.set(key, table, timeout=PAIRWISE_CACHE_S)
        rows = selectors.snapshot_rows(snapshot=snapshot, names=selectors.competitor_names(campaign=campaign))
        data = {
            "campaign": campaign.pk,
            "category": snapshot.category,
            "view": snapshot.view,
            "version": snapshot.version,
            **table,
            "competitors": rows,
        }
        return Response(PairwiseOutput(data).data)


# --- Statistics -----------------------------------------------------------------------------------------


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


class ServingSecondsOutput(serializers.Serializer[Any]):
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
    serving_seconds = ServingSecondsOutput(
        help_text="Sum of both sides' latency_s per vote: wall-clock seconds of the serving calls. An upper "
        "bound of GPU time when the model servers batch requests (several calls share the GPU at once)."
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
        "exposure (battles served and voted, share of voted sides) and serving seconds per vote. Serving "
        "seconds are the sum of both sides' latency_s: wall-clock seconds of the serving call, an upper bound "
        "of GPU time when the servers batch.",
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
                    "serving_seconds": {"total": 18.5, "mean_per_vote": 3.7},
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


# --- Publication ----------------------------------------------------------------------------------------


class StrictBooleanField(serializers.BooleanField):
    """JSON true or false only (DRF's also takes 0, 1, "yes", ...: not what the schema says)."""

    def to_internal_value(self, data: Any) -> bool:
        if isinstance(data, bool):
            return data
        self.fail("invalid", input=data)
        raise AssertionError  # fail() raises


class PublicationInput(serializers.Serializer[Any]):
    show_prompts = StrictBooleanField(
        required=False, default=False, help_text="Also publish the texts of the campaign's active pool prompts."
    )


class PublicationOutput(serializers.Serializer[Any]):
    slug = serializers.CharField(help_text="The random public address's last part.")
    url = serializers.CharField(help_text="The public page (no login).")
    api_url = serializers.CharField(help_text="The public JSON (no key).")
    published_at = serializers.DateTimeField()
    show_prompts = serializers.BooleanField()


def _publication_data(publication: Any) -> dict[str, Any]:
    return {
        "slug": publication.slug,
        "url": reverse("ranking:board-public", args=[publication.slug]),
        "api_url": reverse("api-public-board", args=[publication.slug]),
        "published_at": publication.published_at,
        "show_prompts": publication.show_prompts,
    }


PUBLICATION_EXAMPLE = OpenApiExample(
    "Published",
    response_only=True,
    value={
        "slug": "q3Zr1vB8mK0xYt2a",
        "url": "/boards/q3Zr1vB8mK0xYt2a/",
        "api_url": "/api/v1/public/boards/q3Zr1vB8mK0xYt2a/",
        "published_at": "2026-12-01T12:00:00Z",
        "show_prompts": False,
    },
)


class PublicationApi(APIView):
    """Read (any reader), publish and unpublish (a write key, or an owner or manager)."""

    parser_classes = [JSONParser]  # a JSON body only: a form's "0" is not a boolean

    def _writable(self, request: Request, campaign_id: int) -> Campaign:
        campaign = campaign_writable_by(user=_principal(request), campaign_id=campaign_id)
        if campaign is None:
            raise Http404("No such campaign.")
        return campaign

    @staticmethod
    def _actor(request: Request) -> tuple[User | None, str]:
        user = _principal(request)
        if isinstance(user, ApiKeyPrincipal):
            return None, f"api key {user.api_key.prefix}"
        return user, "api"

    @extend_schema(
        operation_id="campaign_publication_read",
        tags=["published boards"],
        summary="Whether and where the campaign's leaderboard is published",
        description="The publication (404 when the leaderboard is not published).",
        responses={200: PublicationOutput},
        examples=[PUBLICATION_EXAMPLE],
    )
    def get(self, request: Request, campaign_id: int) -> Response:
        campaign = _campaign(request, campaign_id)
        publication = getattr(campaign, "publication", None)
        if publication is None:
            raise Http404("The leaderboard is not published.")
        return Response(PublicationOutput(_publication_data(publication)).data)

    @extend_schema(
        operation_id="campaign_publication_publish",
        tags=["published boards"],
        summary="Publish the campaign's leaderboard",
        description="Publishes the leaderboard at a new random address (201), or changes the options of the "
        "existing publication, keeping its address (200). Audited. Needs a write key, or an owner or manager.",
        request=PublicationInput,
        responses={201: PublicationOutput, 200: PublicationOutput},
        examples=[PUBLICATION_EXAMPLE, OpenApiExample("Options", request_only=True, value={"show_prompts": False})],
    )
    def post(self, request: Request, campaign_id: int) -> Response:
        campaign = self._writable(request, campaign_id)
        body = PublicationInput(data=request.data)
        body.is_valid(raise_exception=True)
        actor, via = self._actor(request)
        publication, created = services.board_publish(
            campaign=campaign, actor=actor, show_prompts=body.validated_data["show_prompts"], via=via
        )
        return Response(
            PublicationOutput(_publication_data(publication)).data,
            status=status.HTTP_201_CREATED if created else status.HTTP_200_OK,
        )

    @extend_schema(
        operation_id="campaign_publication_unpublish",
        tags=["published boards"],
        summary="Unpublish the campaign's leaderboard",
        description="The public address answers 404 from now on and is never reused. Audited. 404 when the "
        "leaderboard is not published.",
        request=None,
        responses={204: None},
    )
    def delete(self, request: Request, campaign_id: int) -> Response:
        campaign = self._writable(request, campaign_id)
        actor, via = self._actor(request)
        if not services.board_unpublish(campaign=campaign, actor=actor, via=via):
            raise Http404("The leaderboard is not published.")
        return Response(status=status.HTTP_204_NO_CONTENT)


# --- Public boards (no key, no session) -----------------------------------------------------------------


class PublicRateThrottle(SimpleRateThrottle):
    """Per client IP, for every request to a public board (signed in or not): the public endpoints have
    no key to throttle by. The rate is ``ARENA_PUBLIC_RATE`` (scope "public"; empty: none)."""

    scope = "public"

    def get_rate(self) -> str | None:
        rate = str(settings.ARENA_PUBLIC_RATE)
        return rate or None  # empty: no limit (the test settings)

    def get_cache_key(self, request: Request, view: Any) -> str | None:
        return self.cache_format % {"scope": self.scope, "ident": self.get_ident(request)}


class PublicRowOutput(serializers.Serializer[Any]):
    competitor_id = serializers.IntegerField()
    label = serializers.CharField()  # type: ignore[assignment]
    model = serializers.CharField()
    version = serializers.CharField()
    retired = serializers.BooleanField()
    hidden = serializers.BooleanField()
    score = serializers.FloatField(allow_null=True)
    lower = serializers.FloatField(allow_null=True)
    upper = serializers.FloatField(allow_null=True)
    lower_open = serializers.BooleanField()
    upper_open = serializers.BooleanField()
    rank_best = serializers.IntegerField(allow_null=True)
    rank_worst = serializers.IntegerField(allow_null=True)
    votes = serializers.IntegerField()
    wins = serializers.IntegerField()
    ties = serializers.IntegerField()
    both_bad = serializers.IntegerField()
    losses = serializers.IntegerField()
    win_rate = serializers.FloatField(allow_null=True)


class PublicPolicyOutput(serializers.Serializer[Any]):
    min_decision_ms = serializers.IntegerField()
    exclude_identity_leaks = serializers.BooleanField()
    prompt_hash_cap = serializers.IntegerField(allow_null=True)
    rater_vote_cap = serializers.IntegerField(allow_null=True)


class PublicSnapshotOutput(serializers.Serializer[Any]):
    version = serializers.IntegerField()
    created_at = serializers.DateTimeField(help_text="Last updated.")
    votes_total = serializers.IntegerField()
    votes_used = serializers.IntegerField()
    method = MethodOutput()
    policy = PublicPolicyOutput()
    flagged_raters = serializers.IntegerField(help_text="How many raters are flagged (never who).")
    excluded = ExcludedOutput()
    components = serializers.IntegerField(allow_null=True)


class PublicPromptOutput(serializers.Serializer[Any]):
    id = serializers.IntegerField()
    category = serializers.CharField()
    text = serializers.CharField()


class PublicPromptsOutput(serializers.Serializer[Any]):
    count = serializers.IntegerField()
    offset = serializers.IntegerField()
    limit = serializers.IntegerField()
    results = PublicPromptOutput(many=True)


class PublicBoardOutput(serializers.Serializer[Any]):
    slug = serializers.CharField()
    campaign = serializers.CharField(source="campaign_name")
    organization = serializers.CharField(source="organization_name")
    published_at = serializers.DateTimeField()
    category = serializers.CharField()
    view = serializers.CharField()
    categories = serializers.ListField(child=serializers.CharField(allow_blank=True))
    snapshot = PublicSnapshotOutput(allow_null=True, help_text="Null before the first recompute.")
    rows = PublicRowOutput(many=True)
    prompts = PublicPromptsOutput(
        allow_null=True, help_text="Only when the board is published with its prompts: one page of pool prompts."
    )


class PublicBoardInput(SelectionInput):
    prompts_offset = serializers.IntegerField(required=False, default=0, min_value=0, max_value=10**9)


class PublicBoardApi(APIView):
    authentication_classes: list[Any] = []
    permission_classes = [AllowAny]
    throttle_classes = [PublicRateThrottle]

    @extend_schema(
        operation_id="public_board_read",
        tags=["published boards"],
        summary="A published leaderboard (public, no key)",
        description="The newest snapshot of a published board: every competitor (retired ones marked), scores, "
        "intervals, rank ranges, vote counts, the method and the exclusion counts. Never a rater; prompt texts "
        "only when the board is published with them (paged by prompts_offset, 100 a page). No key or session; "
        "throttled per IP (ARENA_PUBLIC_RATE). Unknown or unpublished: 404.",
        auth=[],
        parameters=[
            *SELECTION_PARAMETERS,
            OpenApiParameter("prompts_offset", int, description="First prompt of the page (with show_prompts)."),
        ],
        responses={200: PublicBoardOutput, 429: ErrorOutput},
        examples=[
            OpenApiExample(
                "A board",
                response_only=True,
                value={
                    "slug": "q3Zr1vB8mK0xYt2a",
                    "campaign": "Chat quality",
                    "organization": "Acme",
                    "published_at": "2026-12-01T12:00:00Z",
                    "category": "",
                    "view": "raw",
                    "categories": ["", "coding"],
                    "snapshot": None,
                    "rows": [],
                    "prompts": None,
                },
            )
        ],
    )
    def get(self, request: Request, slug: str) -> Response:
        selection = PublicBoardInput(data=request.query_params)
        selection.is_valid(raise_exception=True)
        board = selectors.public_board(slug=slug, **selection.validated_data)
        if board is None:
            raise Http404("No such board.")
        return Response(PublicBoardOutput(board).data)


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


# --- Preference pairs (reward-model / DPO training data) and their length audit -------------------

PAIR_EXAMPLE = {
    "vote_id": 1812,
    "battle_id": "0b6f7c1e-4b1c-4c36-9d0e-6d2f1c9a8e11",
    "campaign_id": 3,
    "timestamp": "2026-11-30T14:03:11.402117+00:00",
    "category": "coding",
    "language": "en",
    "prompt_id": 77,
    "source": "pool",
    "system_prompt": "",
    "prompt": "Reverse a list in Python.",
    "chosen": "Use `xs[::-1]`, or `xs.reverse()` in place.",
    "rejected": "Lists cannot be reversed.",
    "chosen_model": "zen-bigram",
    "chosen_version": "2026-11",
    "chosen_competitor_id": 5,
    "chosen_side": "left",
    "rejected_model": "stdlib-trigram",
    "rejected_version": "2026-11",
    "rejected_competitor_id": 6,
    "turns": 1,
    "chosen_messages": [
        {"role": "user", "content": "Reverse a list in Python."},
        {"role": "assistant", "content": "Use `xs[::-1]`, or `xs.reverse()` in place."},
    ],
    "rejected_messages": [
        {"role": "user", "content": "Reverse a list in Python."},
        {"role": "assistant", "content": "Lists cannot be reversed."},
    ],
}


class PreferencePairsExportApi(APIView):
    """``GET /api/v1/campaigns/<id>/preference-pairs.jsonl``: one pair per vote with a winner, streamed."""

    renderer_classes = [JSONRenderer, JSONLinesRenderer]

    @extend_schema(
        operation_id="preference_pairs_export",
        summary="Preference pairs (chosen / rejected), streamed as JSON lines",
        description=(
            "One row per vote with a winner, in log order: ties and both_bad are left out (no winner), and so "
            "are the votes the campaign's exclusion policy leaves out of its leaderboards (too fast, identity "
            "leak, over the prompt or rater cap, flagged rater). `prompt` is the battle's first prompt; "
            "`chosen` / `rejected` are the winner's and the loser's answers to the last turn (the only one for a "
            "one-turn battle); `chosen_messages` / `rejected_messages` hold each side's whole conversation as "
            "`{role: user|assistant, content}` messages (each model answered its own history, so a multi-turn "
            "battle has two conversations, not one shared prompt); `turns` counts the turns. The stream is data "
            "only: the counts of what was left out and the length audit are at `preference-pairs/audit` (and in "
            "an async export job's `audit`). Filters as in the vote log export."
        ),
        parameters=FILTER_PARAMETERS,
        responses={
            (200, "application/x-ndjson"): OpenApiResponse(
                OpenApiTypes.STR,
                description="One JSON pair per line.",
                examples=[OpenApiExample("A pair", value=PAIR_EXAMPLE, media_type="application/x-ndjson")],
            )
        },
        tags=["preference pairs"],
    )
    def get(self, request: Request, campaign_id: int) -> StreamingHttpResponse:
        campaign = _campaign(request, campaign_id)
        query = ExportFiltersInput(data=request.query_params)
        query.is_valid(raise_exception=True)
        filters = ExportFiltersInput.filters_of(query.validated_data)
        rows = selectors.preference_pairs(campaign=campaign, filters=filters)
        response = StreamingHttpResponse(jsonl_from_events(rows), content_type="application/x-ndjson")
        response["Content-Disposition"] = f'attachment; filename="campaign-{campaign.pk}-preference-pairs.jsonl"'
        return response


class LengthOutput(serializers.Serializer[Any]):
    measure = serializers.CharField()
    chosen_longer = serializers.IntegerField()
    chosen_shorter = serializers.IntegerField()
    same_length = serializers.IntegerField(help_text="Ties in length: counted apart, not in the share.")
    share_chosen_longer = serializers.FloatField(
        allow_null=True, help_text="chosen_longer / (chosen_longer + chosen_shorter); null without such pairs."
    )
    lower = serializers.FloatField(allow_null=True, help_text="Wilson interval of the share.")
    upper = serializers.FloatField(allow_null=True)
    confidence = serializers.FloatField()


class StyleLengthOutput(serializers.Serializer[Any]):
    available = serializers.BooleanField()
    reason = serializers.CharField(allow_null=True, help_text='"not available: <why>" when there is no estimate.')
    coef = serializers.FloatField(required=False, help_text="Logit per SD of the normalised length gap (left - right).")
    lower = serializers.FloatField(required=False)
    upper = serializers.FloatField(required=False)
    snapshot_version = serializers.IntegerField(required=False)
    interval = serializers.CharField(required=False, allow_null=True)


class PreferencePairsAuditOutput(serializers.Serializer[Any]):
    votes = serializers.IntegerField(help_text="Votes the filters select.")
    pairs = serializers.IntegerField(help_text="Rows of the preference pairs export.")
    excluded = serializers.DictField(
        child=serializers.IntegerField(), help_text="Per exclusion rule (a vote may break several; total once)."
    )
    no_winner = serializers.DictField(child=serializers.IntegerField(), help_text="tie and both_bad, kept otherwise.")
    length = LengthOutput()
    style_length_coefficient = StyleLengthOutput()


AUDIT_EXAMPLE = {
    "votes": 5120,
    "pairs": 3801,
    "excluded": {
        "too_fast": 310,
        "identity_leak": 42,
        "over_prompt_cap": 0,
        "over_rater_cap": 0,
        "flagged_rater": 95,
        "total": 431,
    },
    "no_winner": {"tie": 702, "both_bad": 186},
    "length": {
        "measure": "tokens outside code blocks (the style counts the style-controlled view uses)",
        "chosen_longer": 2210,
        "chosen_shorter": 1402,
        "same_length": 189,
        "share_chosen_longer": 0.611849,
        "lower": 0.595838,
        "upper": 0.627617,
        "confidence": 0.95,
    },
    "style_length_coefficient": {
        "available": True,
        "reason": None,
        "coef": 0.2841,
        "lower": 0.2213,
        "upper": 0.3469,
        "snapshot_version": 48,
        "interval": "sandwich",
    },
}


class PreferencePairsAuditApi(APIView):
    """``GET /api/v1/campaigns/<id>/preference-pairs/audit``: what the pairs are made of, and their length bias."""

    @extend_schema(
        operation_id="preference_pairs_audit",
        summary="Length audit of the preference pairs",
        description=(
            "How many pairs the export holds, how many votes each rule left out, and whether the chosen answer "
            "tends to be the longer one: the share of pairs (of those whose lengths differ) where it is, with a "
            "95% Wilson interval; pairs of equal length are counted apart. Length is tokens outside code blocks, "
            "as the style-controlled leaderboard measures it; beside the share, that view's length coefficient "
            "and its interval from the latest style snapshot (of the category, or overall), or "
            '`"not available: <reason>"` when none was computed or the view was withheld (not estimable).'
        ),
        parameters=FILTER_PARAMETERS,
        responses={200: PreferencePairsAuditOutput},
        examples=[OpenApiExample("An audit", value=AUDIT_EXAMPLE, response_only=True)],
        tags=["preference pairs"],
    )
    def get(self, request: Request, campaign_id: int) -> Response:
        campaign = _campaign(request, campaign_id)
        query = ExportFiltersInput(data=request.query_params)
        query.is_valid(raise_exception=True)
        audit = selectors.preference_pairs_audit(
            campaign=campaign, filters=ExportFiltersInput.filters_of(query.validated_data)
        )
        return Response(PreferencePairsAuditOutput(audit).data)
