"""Preference pairs (reward-model / DPO training data), streamed as JSON lines, and their length audit."""

from __future__ import annotations

from typing import Any

from django.http import StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from battles.apis import FILTER_PARAMETERS, ExportFiltersInput, JSONLinesRenderer
from battles.exporting import jsonl_from_events

from .. import selectors
from .access import _campaign

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
