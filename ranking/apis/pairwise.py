"""The pairwise table of a leaderboard: battles, win rates with Wilson intervals and exact binomial tests
per pair, counted from the log as the newest snapshot saw it."""

from __future__ import annotations

from typing import Any

from django.core.cache import cache
from django.http import Http404
from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from .. import selectors
from .access import _campaign
from .leaderboards import SELECTION_PARAMETERS, SelectionInput


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
    wilson_lower = serializers.FloatField(
        allow_null=True,
        help_text="Wilson interval of the win rate for this pair alone (not adjusted over the pairs: read p_holm, "
        "or the snapshot's simultaneous difference intervals, to compare several pairs).",
    )
    wilson_upper = serializers.FloatField(allow_null=True, help_text="See wilson_lower.")
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
