"""Leaderboards: the newest snapshot, one stored version, the history of versions; the selection (category,
view) and the snapshot serializers the other board endpoints share."""

from __future__ import annotations

import json
from typing import Any

import django_filters
from django.conf import settings
from django.core.cache import cache
from django.core.serializers.json import DjangoJSONEncoder
from django.http import Http404, HttpResponse
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, extend_schema
from rest_framework import generics, serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core.api import CursorPage, UtcIsoDateTimeFilter

from .. import selectors
from ..models import LeaderboardSnapshot
from .access import _campaign


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
    rank_best = serializers.IntegerField(
        allow_null=True,
        help_text="Best rank the competitor's own interval allows (not simultaneous: see extra.rank_ranges).",
    )
    rank_worst = serializers.IntegerField(allow_null=True, help_text="Worst rank the competitor's own interval allows.")
    rank_simultaneous = serializers.ListField(
        child=serializers.IntegerField(),
        allow_null=True,
        help_text="[best, worst] rank from the simultaneous difference intervals: these ranges hold all together "
        "at the stated confidence. Null where the raw view has no difference intervals (hidden, other views, more "
        "than 60 shown) and in snapshots from before it was computed.",
    )
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
    interval = serializers.CharField(
        help_text="The campaign's setting: auto, bootstrap, cluster_bootstrap or sandwich (what auto chose for "
        "this board, and why, is extra.interval_choice)."
    )
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
    extra = serializers.DictField(
        help_text="Style coefficients, components, tie parameter; live Elo (`elo`: each rating with `order_sd`, "
        "`order_min`, `order_max`, its spread over random orders of the same votes; `elo_order`: how many orders); "
        "interval_choice (the interval used, why, the design effect and a warning when votes are clustered) and "
        "rank_ranges (how rank ranges are read). "
        "Board analyses, each with what it was computed from and a `reason` where it cannot say. Raw boards: "
        "`robustness`, the fewest votes whose removal changes rank 1, the top 3 and the top 5 (verified by exact "
        "refits), with the votes to drop and their ids; `position` (left-side advantage, adjusted scores) and "
        "`pair_frequency` (pairs equally weighted); `quality` (separability: the share of pairs whose intervals do "
        "not overlap) and `cyclic` (the Hodge cyclic share of the pairwise log-odds flow, with its p-value against "
        "counting noise). The overall raw board also: `validation`, which model predicts later votes best, fitted "
        "on earlier ones (verdicts); `segments`, per rater attribute, one board per segment, offsets and a "
        "heterogeneity test; `planning`, battles to separate rank 1 from rank 2 at 80% power. The reliability view: "
        "`reliability_interval` (the rater bootstrap, or the sandwich by rater past 1,000 cells, and why)."
    )
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
    "rank_simultaneous": [1, 3],
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
        out["pairwise"] = selectors.snapshot_pairwise_stored(snapshot=snapshot)
    return json.dumps(out, cls=DjangoJSONEncoder, separators=(",", ":")).encode()


def _snapshot_response(snapshot_id: int, *, include_pairwise: bool) -> HttpResponse:
    """The serialized snapshot, cached by its id for ``ARENA_LEADERBOARD_CACHE_S``: a snapshot never
    changes, and a new version has a new id, so the cache cannot serve a stale version; only the
    live competitor fields (model, version, retired) may lag by that long."""
    key = f"ranking:api:snapshot:{snapshot_id}:{int(include_pairwise)}"
    body = cache.get(key)
    if body is None:
        snapshots = LeaderboardSnapshot.objects.select_related("campaign")
        # The stored matrices are most of the row (megabytes at 1,000 competitors): not read unless asked for.
        snapshot = (snapshots if include_pairwise else snapshots.defer("pairwise", "pairwise_arrays")).get(
            pk=snapshot_id
        )
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
