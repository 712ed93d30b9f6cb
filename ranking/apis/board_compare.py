"""Comparing two stored boards of a campaign: a judge board against the human board, a category against
overall, this week against last (``estimators.board_quality``; stored rows only, never a refit)."""

from __future__ import annotations

from typing import Any

from django.http import Http404
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from .. import selectors
from ..models import LeaderboardSnapshot
from .access import _campaign

SIDES = ("a", "b")


class CompareInput(serializers.Serializer[Any]):
    """Each side (prefix ``a_`` for the reference, ``b_`` for the candidate) names one stored board."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for side in SIDES:
            self.fields[f"{side}_category"] = serializers.CharField(
                required=False, allow_blank=True, default="", max_length=32
            )
            self.fields[f"{side}_view"] = serializers.ChoiceField(
                choices=LeaderboardSnapshot.View.values, required=False, default="raw"
            )
            self.fields[f"{side}_judge"] = serializers.IntegerField(
                required=False, allow_null=True, default=None, min_value=1, max_value=2**63 - 1
            )
            self.fields[f"{side}_version"] = serializers.IntegerField(
                required=False, allow_null=True, default=None, min_value=1, max_value=2**31 - 1
            )
            self.fields[f"{side}_before"] = serializers.DateTimeField(required=False, allow_null=True, default=None)


def _side_parameters(side: str, role: str) -> list[OpenApiParameter]:
    return [
        OpenApiParameter(f"{side}_category", str, description=f"The {role}'s category; empty: all categories."),
        OpenApiParameter(
            f"{side}_view", str, enum=LeaderboardSnapshot.View.values, description=f"The {role}'s view (raw default)."
        ),
        OpenApiParameter(
            f"{side}_judge",
            int,
            description=f"A judge id: the {role} is that judge's board on this campaign (category and view unused).",
        ),
        OpenApiParameter(f"{side}_version", int, description=f"The {role}'s version; absent: the newest."),
        OpenApiParameter(
            f"{side}_before",
            str,
            description=f"ISO date-time: the {role} is the newest version created before it ('last week': a week ago).",
        ),
    ]


class ComparedSideOutput(serializers.Serializer[Any]):
    kind = serializers.CharField(help_text="human or judge.")
    name = serializers.CharField()
    category = serializers.CharField()
    view = serializers.CharField()
    version = serializers.IntegerField()
    created_at = serializers.DateTimeField()
    judge_id = serializers.IntegerField(allow_null=True)


class CompareOutput(serializers.Serializer[Any]):
    reference = ComparedSideOutput(help_text="Board A: the one whose confident pairs are the standard.")
    candidate = ComparedSideOutput(help_text="Board B: the one that might stand in for A.")
    comparison = serializers.DictField(
        help_text="shared (competitors both place), kendall_tau (value, Fieller-Hartley-Pearson interval or a "
        "reason), resolved_by_reference (pairs A's intervals separate), agreement (share of those B orders the same "
        "way, Wilson interval), confirmed and contradicted (B's intervals separate them the same or the other way), "
        "brier (pair-rank Brier score of B's probabilities against A's resolved order, skill against 0.25), verdict "
        "(a sentence) and stands_in (true, false, or null when the evidence cannot tell)."
    )


class LeaderboardCompareApi(APIView):
    """``GET /api/v1/campaigns/<id>/leaderboards/compare/?a_...&b_...``: board B against board A."""

    @extend_schema(
        operation_id="leaderboards_compare",
        tags=["leaderboards"],
        summary="Compare two stored boards of a campaign",
        description="Whether board B (the candidate) can stand in for board A (the reference): rank agreement over "
        "the competitors both place, the share of A's confidently ordered pairs B orders the same way, the pair-rank "
        "Brier score and a verdict. Each side is a human snapshot (category, view, version or the newest before a "
        "date) or a judge's board (`*_judge`). Computed from the stored rows (no refit). 404 when a side has no "
        "board.",
        parameters=[*_side_parameters("a", "reference"), *_side_parameters("b", "candidate")],
        responses={200: CompareOutput},
        examples=[
            OpenApiExample(
                "A judge board against the human board",
                response_only=True,
                value={
                    "reference": {"kind": "human", "name": "the human board (overall, raw, v12)", "version": 12},
                    "candidate": {"kind": "judge", "name": "judge strict-4o's board (v3)", "version": 3, "judge_id": 2},
                    "comparison": {
                        "shared": 8,
                        "resolved_by_reference": 21,
                        "agreement": {"agree": 21, "share": 1.0, "lower": 0.845, "upper": 1.0},
                        "contradicted": 0,
                        "brier": {"score": 0.031, "skill": 0.876, "uninformed": 0.25},
                        "verdict": "Not yet: judge strict-4o's board orders 100% of the 21 pairs ...",
                        "stands_in": None,
                    },
                },
            )
        ],
    )
    def get(self, request: Request, campaign_id: int) -> Response:
        campaign = _campaign(request, campaign_id)
        params = CompareInput(data=request.query_params)
        params.is_valid(raise_exception=True)
        data = params.validated_data
        sides = []
        for side in SIDES:
            found = selectors.board_side(
                campaign=campaign,
                category=data[f"{side}_category"],
                view=data[f"{side}_view"],
                judge_id=data[f"{side}_judge"],
                version=data[f"{side}_version"],
                before=data[f"{side}_before"],
            )
            if found is None:
                raise Http404(f"No board for side {side}.")
            sides.append(found)
        out = selectors.boards_compared(reference=sides[0], candidate=sides[1])
        return Response(CompareOutput(out).data)
