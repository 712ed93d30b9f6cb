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
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, OpenApiResponse, extend_schema, extend_schema_field
from rest_framework import generics, serializers, status
from rest_framework.parsers import JSONParser
from rest_framework.permissions import AllowAny
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.throttling import SimpleRateThrottle
from rest_framework.views import APIView

from arena.api import CursorPage, ErrorOutput, UtcIsoDateTimeFilter, cursor_page, page_of
from battles.apis import (
    FILTER_PARAMETERS,
    ExportFiltersInput,
    JSONLinesRenderer,
    StrictCharField,
    StrictIntegerField,
)
from battles.exporting import jsonl_from_events
from battles.models import Campaign, Judge
from battles.selectors import campaign_viewable_by, campaign_writable_by
from raters.authentication import ApiKeyPrincipal
from raters.errors import Invalid, PermissionDenied
from raters.selectors import organizations_writable_by
from raters.tenancy import organization_scope

from . import selectors, services
from .compute import GATE_ALONE, GATE_NEEDS_WORK
from .models import (
    AttributeBoard,
    AttributeEntity,
    AttributeJudgement,
    AttributeRun,
    AttributeScore,
    JudgeCalibration,
    LeaderboardSnapshot,
)
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


class FamilyOutput(serializers.Serializer[Any]):
    family = serializers.CharField(help_text="The family (lower case); a competitor with none: its model name.")
    variants = serializers.IntegerField(help_text="Competitors of this family the campaign tested, retired included.")
    retired = serializers.IntegerField(help_text="Of those, how many no longer get battles.")
    competitors = serializers.ListField(child=serializers.IntegerField(), help_text="Their competitor ids.")


class FamiliesOutput(serializers.Serializer[Any]):
    """Next to every board: how many variants of each model family the campaign tested."""

    families = FamilyOutput(many=True)
    notice = serializers.CharField(
        allow_blank=True,
        help_text="The sentence the pages show, e.g. '3 variants of llama were tested here; the best of several "
        "variants of one family is favoured by selection.' Empty when no family has more than one variant.",
    )


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
    families = FamiliesOutput(help_text="The campaign's model families, now (not part of the stored snapshot).")


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


FAMILIES_EXAMPLE = {
    "families": [
        {"family": "llama", "variants": 3, "retired": 1, "competitors": [7, 9, 12]},
        {"family": "qwen", "variants": 1, "retired": 0, "competitors": [8]},
    ],
    "notice": "3 variants of llama were tested here (1 retired); the best of several variants of one family is "
    "favoured by selection.",
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
        "families": selectors.family_disclosure(campaign=snapshot.campaign),
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
                    "families": FAMILIES_EXAMPLE,
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
    families = FamiliesOutput(help_text="How many variants of each model family the campaign tested.")


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
                    "families": FAMILIES_EXAMPLE,
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


# --- Judge boards and calibration ---------------------------------------------------------------------


class CalibrationOutput(serializers.Serializer[Any]):
    """One category of a calibration (empty category: all of them)."""

    category = serializers.CharField(help_text="Empty: all categories.")
    version = serializers.IntegerField()
    rubric_id = serializers.IntegerField()
    rubric_version = serializers.IntegerField(source="rubric.version")
    rubric_hash = serializers.CharField(source="rubric.content_hash")
    run_id = serializers.IntegerField(allow_null=True)
    battles = serializers.IntegerField(help_text="Battles with a human vote and a verdict of the judge.")
    refused = serializers.IntegerField(help_text="Human-voted battles the judge refused (left out).")
    agreement = serializers.FloatField(allow_null=True, help_text="Share of battles where judge and human agree.")
    agreement_lower = serializers.FloatField(allow_null=True, help_text="95% Wilson interval.")
    agreement_upper = serializers.FloatField(allow_null=True)
    kappa = serializers.FloatField(allow_null=True, help_text="Cohen's kappa on left, right, tie, both_bad.")
    kappa_lower = serializers.FloatField(allow_null=True)
    kappa_upper = serializers.FloatField(allow_null=True)
    kappa_note = serializers.CharField(help_text="Why kappa is missing, when it is.")
    gate = serializers.ChoiceField(
        choices=JudgeCalibration.Gate.values,
        help_text="needs_work (< 75%), with_humans (75-90%), may_run_alone (>= 90%), insufficient (< 20 battles).",
    )
    table = serializers.ListField(
        child=serializers.ListField(child=serializers.IntegerField()),
        help_text="4 x 4 counts, rows human, columns judge: left, right, tie, both_bad.",
    )
    created_at = serializers.DateTimeField()


class JudgeCalibrationOutput(serializers.Serializer[Any]):
    campaign = serializers.IntegerField()
    judge = serializers.IntegerField()
    gates = serializers.DictField(child=serializers.FloatField(), help_text="The agreement thresholds.")
    results = CalibrationOutput(many=True)


class JudgeBoardOutput(serializers.Serializer[Any]):
    campaign = serializers.IntegerField(source="campaign_id")
    judge = serializers.IntegerField(source="judge_id")
    judge_name = serializers.CharField(source="judge.name")
    rubric_id = serializers.IntegerField()
    rubric_version = serializers.IntegerField(source="rubric.version")
    rubric_hash = serializers.CharField(source="rubric.content_hash")
    run_id = serializers.IntegerField(allow_null=True)
    kind = serializers.CharField(help_text="battles or golden.")
    version = serializers.IntegerField()
    created_at = serializers.DateTimeField()
    verdicts_total = serializers.IntegerField()
    verdicts_used = serializers.IntegerField()
    verdicts_refused = serializers.IntegerField()
    verdicts_inconsistent = serializers.IntegerField(help_text="Order disagreements, ranked as ties.")
    method = serializers.DictField()
    rows = LeaderboardRowOutput(many=True)
    extra = serializers.DictField()
    calibration = serializers.SerializerMethodField(help_text="The judge's newest calibration on this campaign.")

    @extend_schema_field(CalibrationOutput(many=True))
    def get_calibration(self, board: Any) -> Any:
        return CalibrationOutput(self.context["calibration"], many=True).data


class JudgeBoardInput(serializers.Serializer[Any]):
    kind = serializers.ChoiceField(choices=["battles", "golden"], required=False, default="battles")


def _judge_of(campaign: Campaign, judge_id: int) -> Judge:
    judge = selectors.judge_of_campaign(campaign=campaign, judge_id=judge_id)
    if judge is None:
        raise Http404("No such judge.")
    return judge


class JudgeBoardApi(APIView):
    @extend_schema(
        operation_id="judge_board",
        tags=["judges"],
        summary="A judge's leaderboard of a campaign",
        description="The newest board of the judge's counterbalanced verdicts (the human boards' estimator; no "
        "human vote in it, and no human board has a judge's verdict), with the judge's newest calibration. "
        "`kind` golden: the newest golden run's board. 404 before the judge's first run.",
        parameters=[OpenApiParameter("kind", str, enum=["battles", "golden"], description="Default battles.")],
        responses={200: JudgeBoardOutput, 404: ErrorOutput},
    )
    def get(self, request: Request, campaign_id: int, judge_id: int) -> Response:
        campaign = _campaign(request, campaign_id)
        judge = _judge_of(campaign, judge_id)
        query = JudgeBoardInput(data=request.query_params)
        query.is_valid(raise_exception=True)
        board = selectors.judge_board_latest(campaign=campaign, judge=judge, kind=query.validated_data["kind"])
        if board is None:
            raise Http404("This judge has no board on this campaign yet.")
        names = selectors.competitor_names(campaign=campaign)
        board.rows = selectors.snapshot_rows(snapshot=board, names=names)
        calibration = selectors.judge_calibration_latest(campaign=campaign, judge=judge)
        return Response(JudgeBoardOutput(board, context={"calibration": calibration}).data)


class JudgeCalibrationApi(APIView):
    @extend_schema(
        operation_id="judge_calibration",
        tags=["judges"],
        summary="A judge's agreement with the human votes",
        description="The newest calibration of the judge on the campaign: per category (and overall, empty "
        "category), agreement with the human votes on the battles both judged, Cohen's kappa, and the gate. "
        "A calibration belongs to the judge's rubric version; `results` is empty before the first.",
        responses={200: JudgeCalibrationOutput, 404: ErrorOutput},
    )
    def get(self, request: Request, campaign_id: int, judge_id: int) -> Response:
        campaign = _campaign(request, campaign_id)
        judge = _judge_of(campaign, judge_id)
        rows = selectors.judge_calibration_latest(campaign=campaign, judge=judge)
        return Response(
            JudgeCalibrationOutput(
                {
                    "campaign": campaign.pk,
                    "judge": judge.pk,
                    "gates": {"needs_work_below": GATE_NEEDS_WORK, "may_run_alone_from": GATE_ALONE},
                    "results": rows,
                }
            ).data
        )


# --- Attribute boards (ratio judgements) ---------------------------------------------------------------


def _actor_via(request: Request) -> tuple[User | None, str]:
    user = _principal(request)
    if isinstance(user, ApiKeyPrincipal):
        return None, f"api key {user.api_key.prefix}"
    return user, "api"


def _attribute_board(request: Request, board_id: int) -> AttributeBoard:
    board = selectors.attribute_board_viewable_by(user=_principal(request), board_id=board_id)
    if board is None:
        raise Http404("No such attribute board.")
    return board


def _attribute_board_writable(request: Request, board_id: int) -> AttributeBoard:
    board = selectors.attribute_board_writable_by(user=_principal(request), board_id=board_id)
    if board is None:
        raise Http404("No such attribute board.")
    return board


def _attribute_run(request: Request, run_id: int) -> AttributeRun:
    run = selectors.attribute_run_viewable_by(user=_principal(request), run_id=run_id)
    if run is None:
        raise Http404("No such run.")
    return run


class PageQuery(serializers.Serializer[Any]):
    limit = serializers.IntegerField(required=False, min_value=1, max_value=500)
    cursor = serializers.CharField(required=False)


PAGE_PARAMETERS = [
    OpenApiParameter("limit", int, description="Items per page (1-500, default 50)."),
    OpenApiParameter("cursor", str, description="From the previous page's `next`."),
]


class JudgeRefOutput(serializers.Serializer[Any]):
    id = serializers.IntegerField()
    name = serializers.CharField()
    model = serializers.CharField(source="endpoint.model_name")
    rubric = serializers.CharField(source="rubric.name")
    rubric_version = serializers.IntegerField(source="rubric.version")
    rubric_hash = serializers.CharField(source="rubric.content_hash")


class AttributeBoardOutput(serializers.Serializer[Any]):
    id = serializers.IntegerField()
    name = serializers.CharField()
    attribute = serializers.CharField()
    judge = JudgeRefOutput()
    seed = serializers.IntegerField()
    calls_per_entity = serializers.IntegerField()
    top_k = serializers.IntegerField()
    batch_size = serializers.IntegerField()
    entities = serializers.IntegerField(source="entities.count")
    published = serializers.SerializerMethodField()
    created_at = serializers.DateTimeField()

    def get_published(self, board: AttributeBoard) -> bool:
        return board.public_slug is not None


# Per request: at most 250 entities of at most 8,000 characters, so that even a body of the longest
# texts escaped as JSON (12 bytes a character at worst) stays under the API's body limit: a request over
# these limits is a 400 naming the field, never a 413. Larger boards take several requests.
API_ENTITIES_MAX = 250
API_ENTITY_TEXT_MAX = 8000


class EntityInputSerializer(serializers.Serializer[Any]):
    text = StrictCharField(max_length=API_ENTITY_TEXT_MAX, help_text="The text ranked (shown to the judge).")
    label = StrictCharField(max_length=200, required=False, default="", allow_blank=True)  # type: ignore[assignment]


class EntityOutput(serializers.Serializer[Any]):
    id = serializers.IntegerField()
    position = serializers.IntegerField(help_text="Index in the board (0, 1, ...).")
    label = serializers.CharField()  # type: ignore[assignment]
    text = serializers.CharField()
    created_at = serializers.DateTimeField()


BOARD_EXAMPLE = {
    "id": 4,
    "name": "Formality of support replies",
    "attribute": "how formal the reply is",
    "judge": {
        "id": 2,
        "name": "qwen ratio judge",
        "model": "qwen2.5-7b",
        "rubric": "formality",
        "rubric_version": 1,
        "rubric_hash": "9c1f" + "0" * 60,
    },
    "seed": 0,
    "calls_per_entity": 8,
    "top_k": 10,
    "batch_size": 16,
    "entities": 50,
    "published": False,
    "created_at": "2026-12-01T12:00:00Z",
}


class AttributeBoardListApi(APIView):
    """``GET``: the boards the caller may read. ``POST``: create one with its entities (a write key, or an
    owner or manager of the judge's organisation)."""

    parser_classes = [JSONParser]

    class Input(serializers.Serializer[Any]):
        name = StrictCharField(max_length=120)
        attribute = StrictCharField(max_length=2000, help_text="The attribute in words.")
        judge_id = StrictIntegerField(help_text="A judge of your organisation whose rubric is of kind ratio.")
        seed = StrictIntegerField(required=False, default=0, min_value=0, max_value=2**31 - 1)
        calls_per_entity = StrictIntegerField(required=False, default=8, min_value=2, max_value=200)
        top_k = StrictIntegerField(required=False, default=10, min_value=1, max_value=10_000)
        batch_size = StrictIntegerField(required=False, default=16, min_value=1, max_value=500)
        entities = serializers.ListField(
            child=EntityInputSerializer(), max_length=API_ENTITIES_MAX, help_text="Up to 250 per request."
        )

    @extend_schema(
        operation_id="attribute_boards_list",
        tags=["attribute boards"],
        summary="Attribute boards",
        description="The attribute boards of your organisations, newest first, in cursor pages.",
        parameters=PAGE_PARAMETERS,
        responses={200: page_of(AttributeBoardOutput)},
        examples=[OpenApiExample("A page", value={"next": None, "previous": None, "results": [BOARD_EXAMPLE]})],
    )
    def get(self, request: Request) -> Response:
        PageQuery(data=request.query_params).is_valid(raise_exception=True)
        return cursor_page(  # type: ignore[no-any-return]
            request=request,
            view=self,
            queryset=selectors.attribute_boards_viewable_by(_principal(request)),
            output=AttributeBoardOutput,
        )

    @extend_schema(
        operation_id="attribute_board_create",
        tags=["attribute boards"],
        summary="Create an attribute board with its entities",
        description="A board of the judge's organisation. The judge's rubric must be of kind ratio. Audited. "
        "Needs a write key, or an owner or manager.",
        request=Input,
        responses={201: AttributeBoardOutput},
        examples=[
            OpenApiExample(
                "Three texts",
                request_only=True,
                value={
                    "name": "Formality",
                    "attribute": "how formal the text is",
                    "judge_id": 2,
                    "entities": [{"text": "Dear Sir,"}, {"text": "hey"}, {"text": "Hello,", "label": "t3"}],
                },
            ),
            OpenApiExample("Created", response_only=True, value=BOARD_EXAMPLE),
        ],
    )
    def post(self, request: Request) -> Response:
        # Who may create comes before what they sent: a rater or viewer learns nothing from validation.
        if not organizations_writable_by(_principal(request)).exists():
            raise PermissionDenied("Creating an attribute board needs a write key, or an owner or manager.")
        body = self.Input(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        judge = selectors.judge_writable_by(user=_principal(request), judge_id=data["judge_id"])
        if judge is None:
            raise Invalid("No such judge.", field_errors={"judge_id": "Not a judge of yours."})
        actor, via = _actor_via(request)
        board = services.attribute_board_create(
            organization=judge.organization,
            name=data["name"],
            attribute=data["attribute"],
            judge=judge,
            entities=[services.EntityInput(text=e["text"], label=e["label"]) for e in data["entities"]],
            seed=data["seed"],
            calls_per_entity=data["calls_per_entity"],
            top_k=data["top_k"],
            batch_size=data["batch_size"],
            actor=actor,
            via=via,
        )
        return Response(AttributeBoardOutput(board).data, status=status.HTTP_201_CREATED)


class AttributeBoardDetailApi(APIView):
    @extend_schema(
        operation_id="attribute_board_read",
        tags=["attribute boards"],
        summary="An attribute board",
        responses={200: AttributeBoardOutput},
        examples=[OpenApiExample("A board", value=BOARD_EXAMPLE)],
    )
    def get(self, request: Request, board_id: int) -> Response:
        return Response(AttributeBoardOutput(_attribute_board(request, board_id)).data)


class AttributeEntitiesApi(APIView):
    parser_classes = [JSONParser]

    class Input(serializers.Serializer[Any]):
        entities = serializers.ListField(child=EntityInputSerializer(), min_length=1, max_length=API_ENTITIES_MAX)

    @extend_schema(
        operation_id="attribute_board_entities_list",
        tags=["attribute boards"],
        summary="A board's entities",
        description="In position order (the estimator's index), in cursor pages.",
        parameters=PAGE_PARAMETERS,
        responses={200: page_of(EntityOutput)},
    )
    def get(self, request: Request, board_id: int) -> Response:
        board = _attribute_board(request, board_id)
        PageQuery(data=request.query_params).is_valid(raise_exception=True)
        return cursor_page(  # type: ignore[no-any-return]
            request=request,
            view=self,
            queryset=AttributeEntity.objects.filter(board=board),
            output=EntityOutput,
            ordering="position",
        )

    @extend_schema(
        operation_id="attribute_board_entities_add",
        tags=["attribute boards"],
        summary="Add entities to a board",
        description="Appended after the existing ones; runs started from now on see them. Audited.",
        request=Input,
        responses={201: EntityOutput(many=True)},
    )
    def post(self, request: Request, board_id: int) -> Response:
        board = _attribute_board_writable(request, board_id)
        body = self.Input(data=request.data)
        body.is_valid(raise_exception=True)
        actor, via = _actor_via(request)
        added = services.attribute_entities_add(
            board=board,
            entities=[services.EntityInput(text=e["text"], label=e["label"]) for e in body.validated_data["entities"]],
            actor=actor,
            via=via,
        )
        return Response(EntityOutput(added, many=True).data, status=status.HTTP_201_CREATED)


class RunProvenanceFields(serializers.Serializer[Any]):
    """What a run was made by and of: the fields a run and each of its score rows both carry."""

    judge = JudgeRefOutput()
    model_name = serializers.CharField(help_text="The judge's served model, as called.")
    rubric_hash = serializers.CharField()
    template_hash = serializers.CharField(help_text="SHA-256 of the judge prompt's template.")
    seed = serializers.IntegerField()
    entities = serializers.IntegerField()
    calls = serializers.IntegerField()
    accepted = serializers.IntegerField()
    refused = serializers.IntegerField()
    malformed = serializers.IntegerField()
    call_errors = serializers.IntegerField(help_text="Calls that failed (no reply).")
    pairs = serializers.IntegerField()
    output_tokens = serializers.IntegerField()
    call_seconds = serializers.FloatField(help_text="Sum of the judge calls' latencies (the run's cost).")
    degraded = serializers.BooleanField()
    finished_at = serializers.DateTimeField(allow_null=True)


class AttributeRunOutput(RunProvenanceFields):
    id = serializers.IntegerField()
    board_id = serializers.IntegerField()
    attribute = serializers.CharField()
    top_k = serializers.IntegerField()
    batch_size = serializers.IntegerField()
    budget_calls = serializers.IntegerField()
    status = serializers.ChoiceField(choices=AttributeRun.Status.values)
    stop_reason = serializers.CharField(help_text="separated, budget, exhausted, or failed.")
    failure_reason = serializers.CharField()
    pairs_refused = serializers.IntegerField()
    checks = serializers.IntegerField()
    solve = serializers.DictField(help_text="The final fit: hash, dispersion, cyclic share, components, method.")
    created_at = serializers.DateTimeField()
    started_at = serializers.DateTimeField(allow_null=True)


RUN_EXAMPLE = {
    "id": 12,
    "board_id": 4,
    "judge": BOARD_EXAMPLE["judge"],
    "attribute": "how formal the reply is",
    "rubric_hash": "9c1f" + "0" * 60,
    "template_hash": "51aa" + "0" * 60,
    "model_name": "qwen2.5-7b",
    "seed": 0,
    "top_k": 10,
    "batch_size": 16,
    "entities": 50,
    "budget_calls": 400,
    "status": "done",
    "stop_reason": "budget",
    "failure_reason": "",
    "calls": 400,
    "accepted": 382,
    "refused": 10,
    "malformed": 8,
    "call_errors": 0,
    "pairs": 200,
    "pairs_refused": 11,
    "checks": 14,
    "output_tokens": 9120,
    "call_seconds": 61.2,
    "degraded": False,
    "solve": {"hash": "e3b0" + "0" * 60, "components": 1, "cyclic_share": 0.04},
    "created_at": "2026-12-01T12:00:00Z",
    "started_at": "2026-12-01T12:00:01Z",
    "finished_at": "2026-12-01T12:01:10Z",
}


class AttributeRunsApi(APIView):
    parser_classes = [JSONParser]

    class Input(serializers.Serializer[Any]):
        judge_id = StrictIntegerField(
            required=False, help_text="Another ratio judge of the board's organisation (default: the board's)."
        )
        seed = StrictIntegerField(
            required=False, min_value=0, max_value=2**31 - 1, help_text="Default: the board's seed."
        )

    @extend_schema(
        operation_id="attribute_board_runs_list",
        tags=["attribute boards"],
        summary="A board's runs",
        description="Newest first, with their provenance and counts.",
        parameters=PAGE_PARAMETERS,
        responses={200: page_of(AttributeRunOutput)},
    )
    def get(self, request: Request, board_id: int) -> Response:
        board = _attribute_board(request, board_id)
        PageQuery(data=request.query_params).is_valid(raise_exception=True)
        return cursor_page(  # type: ignore[no-any-return]
            request=request,
            view=self,
            queryset=AttributeRun.objects.filter(board=board).select_related("judge__rubric", "judge__endpoint"),
            output=AttributeRunOutput,
        )

    @extend_schema(
        operation_id="attribute_board_run_start",
        tags=["attribute boards"],
        summary="Start a run",
        description="Queues a run (202); a worker judges pairs chosen by the adaptive design until the "
        "certified stopping rule or the budget. Another judge or seed makes a replication (compare the "
        "runs). Audited. Needs a write key, or an owner or manager.",
        request=Input,
        responses={202: AttributeRunOutput},
        examples=[
            OpenApiExample("A replication with another seed", request_only=True, value={"seed": 7}),
            OpenApiExample("Queued", response_only=True, value={**RUN_EXAMPLE, "status": "queued", "calls": 0}),
        ],
    )
    def post(self, request: Request, board_id: int) -> Response:
        board = _attribute_board_writable(request, board_id)
        body = self.Input(data=request.data)
        body.is_valid(raise_exception=True)
        judge = None
        if "judge_id" in body.validated_data:
            judge = selectors.judge_writable_by(user=_principal(request), judge_id=body.validated_data["judge_id"])
            if judge is None or judge.organization_id != board.organization_id:
                raise Invalid("No such judge.", field_errors={"judge_id": "Not a judge of this board's organisation."})
        actor, via = _actor_via(request)
        run = services.attribute_run_start(
            board=board, actor=actor, judge=judge, seed=body.validated_data.get("seed"), via=via
        )
        return Response(AttributeRunOutput(run).data, status=status.HTTP_202_ACCEPTED)


class AttributeRunDetailApi(APIView):
    @extend_schema(
        operation_id="attribute_run_read",
        tags=["attribute boards"],
        summary="A run, with its provenance",
        responses={200: AttributeRunOutput},
        examples=[OpenApiExample("Finished", value=RUN_EXAMPLE)],
    )
    def get(self, request: Request, run_id: int) -> Response:
        return Response(AttributeRunOutput(_attribute_run(request, run_id)).data)


class ScoreProvenanceOutput(RunProvenanceFields):
    """The run a score row comes from, on the row itself: a row copied out of the API (into a sheet, a
    report) still says which judge, template, seed and counts made it."""

    run_id = serializers.IntegerField(source="id")
    solve_hash = serializers.SerializerMethodField(help_text="Hash of the final solve (same observations: same hash).")

    def get_solve_hash(self, run: AttributeRun) -> str:
        return str((run.solve or {}).get("hash", ""))


class AttributeScoreOutput(serializers.Serializer[Any]):
    id = serializers.IntegerField()
    entity_id = serializers.IntegerField()
    position = serializers.IntegerField(source="entity.position")
    label = serializers.CharField(source="entity.label")  # type: ignore[assignment]
    rank = serializers.IntegerField()
    score = serializers.FloatField(help_text="Natural-log attribute; the lowest entity of a component is 0.")
    std = serializers.FloatField(allow_null=True)
    z_score = serializers.FloatField(allow_null=True, help_text="Standard deviations above the top-k boundary.")
    percentile = serializers.FloatField()
    lower = serializers.FloatField(allow_null=True, help_text="95% interval.")
    upper = serializers.FloatField(allow_null=True)
    in_top_k = serializers.BooleanField()
    comparisons = serializers.IntegerField()
    stop_reason = serializers.CharField()
    provenance = ScoreProvenanceOutput(source="run")


class AttributeRunScoresApi(APIView):
    @extend_schema(
        operation_id="attribute_run_scores",
        tags=["attribute boards"],
        summary="A run's scores",
        description="Best first (by rank), in cursor pages. Empty for a run that has not finished or failed.",
        parameters=PAGE_PARAMETERS,
        responses={200: page_of(AttributeScoreOutput)},
    )
    def get(self, request: Request, run_id: int) -> Response:
        run = _attribute_run(request, run_id)
        PageQuery(data=request.query_params).is_valid(raise_exception=True)
        return cursor_page(  # type: ignore[no-any-return]
            request=request,
            view=self,
            queryset=AttributeScore.objects.filter(run=run).select_related(
                "entity", "run__judge__endpoint", "run__judge__rubric"
            ),
            output=AttributeScoreOutput,
            ordering="rank",
        )


class AttributeJudgementOutput(serializers.Serializer[Any]):
    id = serializers.IntegerField()
    run_id = serializers.IntegerField()
    first_id = serializers.IntegerField(help_text="The entity shown as A.")
    second_id = serializers.IntegerField(help_text="The entity shown as B.")
    order = serializers.IntegerField(help_text="1: the pair's first presentation, 2: swapped.")
    batch = serializers.IntegerField()
    status = serializers.ChoiceField(choices=AttributeJudgement.Status.values)
    raw_reply = serializers.CharField()
    more = serializers.CharField()
    ratio = serializers.FloatField(allow_null=True)
    log_ratio = serializers.FloatField(allow_null=True, help_text="log(A / B).")
    confidence = serializers.FloatField(allow_null=True, help_text="As stated; never a weight.")
    used = serializers.BooleanField(help_text="Reached the estimator (both orders of the pair accepted).")
    reason = serializers.CharField()
    output_tokens = serializers.IntegerField()
    latency_s = serializers.FloatField()
    created_at = serializers.DateTimeField()


class AttributeRunJudgementsApi(APIView):
    @extend_schema(
        operation_id="attribute_run_judgements",
        tags=["attribute boards"],
        summary="A run's judgement ledger",
        description="Every judge call of the run in the order made: both presentation orders, the raw reply, "
        "the parse (or the refusal, the malformed reply, the call's error), tokens and latency. Append-only.",
        parameters=PAGE_PARAMETERS,
        responses={200: page_of(AttributeJudgementOutput)},
    )
    def get(self, request: Request, run_id: int) -> Response:
        run = _attribute_run(request, run_id)
        PageQuery(data=request.query_params).is_valid(raise_exception=True)
        return cursor_page(  # type: ignore[no-any-return]
            request=request,
            view=self,
            queryset=AttributeJudgement.objects.filter(run=run),
            output=AttributeJudgementOutput,
            ordering="id",
        )


class RunComparisonOutput(serializers.Serializer[Any]):
    run = serializers.IntegerField()
    other = serializers.IntegerField()
    kind = serializers.ChoiceField(choices=["seeds", "judges"], help_text="Same judge (seeds) or two judges.")
    entities = serializers.IntegerField(help_text="Entities both runs scored.")
    spearman = serializers.FloatField(allow_null=True)
    top_k_overlap = serializers.FloatField(allow_null=True)
    shared_pairs = serializers.IntegerField()
    pair_sign_agreement = serializers.FloatField(allow_null=True)


class AttributeRunCompareApi(APIView):
    @extend_schema(
        operation_id="attribute_run_compare",
        tags=["attribute boards"],
        summary="Replication between two runs of one board",
        description="Spearman's rho of the scores, top-k overlap, and on pairs both runs judged the share whose "
        "log-ratios agree in sign. Two seeds of one judge, or two judges (their agreement). 404 when the runs "
        "are of different boards.",
        responses={200: RunComparisonOutput},
    )
    def get(self, request: Request, run_id: int, other_id: int) -> Response:
        run, other = _attribute_run(request, run_id), _attribute_run(request, other_id)
        if run.board_id != other.board_id:
            raise Http404("The runs are of different boards.")
        return Response(RunComparisonOutput(selectors.attribute_runs_compare(run=run, other=other)).data)


class AttributePublicationOutput(serializers.Serializer[Any]):
    published = serializers.BooleanField()
    slug = serializers.CharField(allow_null=True)
    url = serializers.CharField(allow_null=True, help_text="The public page.")
    api_url = serializers.CharField(allow_null=True, help_text="The public API read.")
    published_at = serializers.DateTimeField(allow_null=True)


def _attribute_publication(board: AttributeBoard) -> dict[str, Any]:
    slug = board.public_slug
    return {
        "published": slug is not None,
        "slug": slug,
        "url": reverse("ranking:attribute-board-public", args=[slug]) if slug else None,
        "api_url": reverse("api-public-attribute-board", args=[slug]) if slug else None,
        "published_at": board.published_at,
    }


class AttributePublicationApi(APIView):
    parser_classes = [JSONParser]

    @extend_schema(
        operation_id="attribute_board_publication_read",
        tags=["attribute boards"],
        summary="Whether and where the board is published",
        responses={200: AttributePublicationOutput},
    )
    def get(self, request: Request, board_id: int) -> Response:
        return Response(AttributePublicationOutput(_attribute_publication(_attribute_board(request, board_id))).data)

    @extend_schema(
        operation_id="attribute_board_publish",
        tags=["attribute boards"],
        summary="Publish the board",
        description="Its newest finished run (scores, provenance, the whole judgement ledger) at a random public "
        "address: 201 when new, 200 when it was published already (the address stays). Audited.",
        request=None,
        responses={201: AttributePublicationOutput, 200: AttributePublicationOutput},
    )
    def post(self, request: Request, board_id: int) -> Response:
        board = _attribute_board_writable(request, board_id)
        actor, via = _actor_via(request)
        _, created = services.attribute_board_publish(board=board, actor=actor, via=via)
        return Response(
            AttributePublicationOutput(_attribute_publication(board)).data,
            status=status.HTTP_201_CREATED if created else status.HTTP_200_OK,
        )

    @extend_schema(
        operation_id="attribute_board_unpublish",
        tags=["attribute boards"],
        summary="Unpublish the board",
        description="The address answers 404 from now on and is never reused. Audited. 404 when not published.",
        request=None,
        responses={204: None},
    )
    def delete(self, request: Request, board_id: int) -> Response:
        board = _attribute_board_writable(request, board_id)
        actor, via = _actor_via(request)
        if not services.attribute_board_unpublish(board=board, actor=actor, via=via):
            raise Http404("The board is not published.")
        return Response(status=status.HTTP_204_NO_CONTENT)


class PublicAttributeBoardOutput(serializers.Serializer[Any]):
    slug = serializers.CharField()
    name = serializers.CharField()
    organization = serializers.CharField()
    attribute = serializers.CharField()
    published_at = serializers.DateTimeField()
    run = AttributeRunOutput(allow_null=True, help_text="The newest finished run; null before the first.")
    scores = AttributeScoreOutput(many=True)
    entities = EntityOutput(many=True)


def _public_attribute_board(slug: str) -> tuple[AttributeBoard, AttributeRun | None]:
    board = selectors.attribute_board_public(slug=slug)
    if board is None:
        raise Http404("No such board.")
    with organization_scope(board.organization_id):
        return board, selectors.attribute_board_latest_run(board)


PUBLIC_SCORES_MAX = 1000


class PublicAttributeBoardApi(APIView):
    authentication_classes: list[Any] = []
    permission_classes = [AllowAny]
    throttle_classes = [PublicRateThrottle]

    @extend_schema(
        operation_id="public_attribute_board_read",
        tags=["attribute boards"],
        summary="A published attribute board (public, no key)",
        description="The board, its newest finished run with its provenance, the first 1,000 score rows and the "
        "entities they name. The judgement ledger is at `judgements/`. Throttled per IP. Unknown or "
        "unpublished: 404.",
        auth=[],
        responses={200: PublicAttributeBoardOutput, 429: ErrorOutput},
    )
    def get(self, request: Request, slug: str) -> Response:
        board, run = _public_attribute_board(slug)
        with organization_scope(board.organization_id):
            scores = (
                list(
                    AttributeScore.objects.filter(run=run).select_related(
                        "entity", "run__judge__endpoint", "run__judge__rubric"
                    )[:PUBLIC_SCORES_MAX]
                )
                if run
                else []
            )
            data = {
                "slug": slug,
                "name": board.name,
                "organization": board.organization.name,
                "attribute": board.attribute,
                "published_at": board.published_at,
                "run": run,
                "scores": scores,
                "entities": [s.entity for s in scores],
            }
            return Response(PublicAttributeBoardOutput(data).data)


class PublicAttributeJudgementsApi(APIView):
    authentication_classes: list[Any] = []
    permission_classes = [AllowAny]
    throttle_classes = [PublicRateThrottle]

    @extend_schema(
        operation_id="public_attribute_board_judgements",
        tags=["attribute boards"],
        summary="The judgement ledger of a published board (public, no key)",
        description="Every judge call of the board's newest finished run, in cursor pages. Unknown or "
        "unpublished: 404.",
        auth=[],
        parameters=PAGE_PARAMETERS,
        responses={200: page_of(AttributeJudgementOutput), 429: ErrorOutput},
    )
    def get(self, request: Request, slug: str) -> Response:
        board, run = _public_attribute_board(slug)
        PageQuery(data=request.query_params).is_valid(raise_exception=True)
        with organization_scope(board.organization_id):
            return cursor_page(  # type: ignore[no-any-return]
                request=request,
                view=self,
                queryset=AttributeJudgement.objects.filter(run=run) if run else AttributeJudgement.objects.none(),
                output=AttributeJudgementOutput,
                ordering="id",
            )


# --- Rater reports and the cadence check (the managers' dashboard's figures) ----------------------


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
            OpenApiParameter("limit", int, description="Raters per page (1-500, default 50)."),
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
