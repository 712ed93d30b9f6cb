"""Promotions: a board's winning variant rolled out in stages through a sticky A/B experiment, watched on the
board (``ranking.services.promotions``). List and start, one with its decisions, and stop."""

from __future__ import annotations

import re
from typing import Any

from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import generics, serializers
from rest_framework.exceptions import NotFound as ApiNotFound
from rest_framework.parsers import JSONParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from battles.models import Variant
from battles.selectors import ExperimentAmbiguous, experiment_by_key, experiments_writable_by
from core.api import CursorPage, ErrorOutput
from core.errors import Conflict, Invalid

from .. import selectors, services
from ..models import Promotion
from .access import _actor_via, _principal


class DecisionOutput(serializers.Serializer[Any]):
    action = serializers.CharField(help_text="start, advance, hold, rollback, complete or stop.")
    reason = serializers.CharField()
    reason_code = serializers.CharField()
    stage = serializers.IntegerField(help_text="The stage in force after the decision (index into stages).")
    share = serializers.FloatField(help_text="The promoted variant's share in force after it (0: the weights').")
    board_version = serializers.IntegerField(allow_null=True, help_text="The board version the decision read.")
    figures = serializers.DictField(help_text="What the board said: new_votes, min_votes, difference.")
    created_at = serializers.DateTimeField()


class PromotionOutput(serializers.Serializer[Any]):
    id = serializers.IntegerField()
    campaign = serializers.IntegerField(source="campaign_id")
    experiment = serializers.CharField(source="experiment.key")
    variant = serializers.CharField(source="variant.name")
    baseline = serializers.CharField(source="baseline.name")
    stages = serializers.ListField(child=serializers.FloatField())
    stage = serializers.IntegerField()
    share = serializers.FloatField(help_text="The current stage's share of units.")
    min_votes = serializers.IntegerField()
    status = serializers.CharField(help_text="running, completed, rolled_back or stopped.")
    stage_started_at = serializers.DateTimeField()
    created_at = serializers.DateTimeField()
    ended_at = serializers.DateTimeField(allow_null=True)


class PromotionDetailOutput(PromotionOutput):
    decisions = DecisionOutput(many=True)


class PromotionInput(serializers.Serializer[Any]):
    experiment = serializers.SlugField(max_length=80, help_text="The experiment's key.")
    organization = serializers.RegexField(
        r"^[-a-zA-Z0-9_]{1,50}$", required=False, help_text="Its organisation's slug, where the key is ambiguous."
    )
    variant = serializers.SlugField(max_length=80, help_text="The variant to promote (it names the board's winner).")
    baseline = serializers.SlugField(max_length=80, help_text="The variant it is watched against.")
    stages = serializers.ListField(
        child=serializers.FloatField(), min_length=1, max_length=20, default=[0.05, 0.25, 0.5, 1.0]
    )
    min_votes = serializers.IntegerField(min_value=1, max_value=10_000_000, default=200)


EXAMPLE = {
    "id": 4,
    "campaign": 12,
    "experiment": "assistant-model",
    "variant": "candidate",
    "baseline": "production",
    "stages": [0.05, 0.25, 0.5, 1.0],
    "stage": 1,
    "share": 0.25,
    "min_votes": 200,
    "status": "running",
    "stage_started_at": "2026-12-04T10:00:00Z",
    "created_at": "2026-12-03T09:00:00Z",
    "ended_at": None,
}


def _detail(promotion: Promotion) -> dict[str, Any]:
    return {**PromotionOutput(promotion).data, "decisions": DecisionOutput(promotion.decisions.all(), many=True).data}


class PromotionListApi(generics.ListAPIView[Promotion]):
    serializer_class = PromotionOutput
    pagination_class = CursorPage
    parser_classes = [JSONParser]

    def get_queryset(self) -> QuerySet[Promotion]:
        if getattr(self, "swagger_fake_view", False):
            return Promotion.objects.none()
        found = selectors.promotions_viewable_by(_principal(self.request)).order_by("-id")
        campaign = self.request.query_params.get("campaign")
        if campaign is not None:
            if not re.fullmatch(r"\d{1,18}", campaign):
                raise Invalid("campaign: a campaign id.")
            found = found.filter(campaign_id=int(campaign))
        return found

    @extend_schema(
        operation_id="promotions_list",
        summary="Promotions (staged rollouts watched on a board)",
        description="The organisation's promotions, newest first; `?campaign=<id>` for one campaign's.",
        examples=[OpenApiExample("A page", value={"next": None, "previous": None, "results": [EXAMPLE]})],
        tags=["experiments"],
    )
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().get(request, *args, **kwargs)

    @extend_schema(
        operation_id="promotion_start",
        summary="Promote a variant in stages",
        description="Roll `variant` out in the experiment at `stages[0]` of units, watched against `baseline` on "
        "the overall raw board of the experiment's campaign (both variants must name its competitors). Beat "
        "then advances a stage when the variant has `min_votes` new votes on the board since the stage began "
        "and does not trail the baseline, holds otherwise, and rolls back when the board's difference interval "
        "is wholly below 0. A unit already assigned keeps its variant unless a stage moves it into the promoted "
        "one. 409 while the experiment has a running promotion. Write key, or an owner/manager.",
        request=PromotionInput,
        responses={201: PromotionDetailOutput, 409: ErrorOutput},
        examples=[
            OpenApiExample(
                "Four stages",
                value={"experiment": "assistant-model", "variant": "candidate", "baseline": "production"},
                request_only=True,
            )
        ],
        tags=["experiments"],
    )
    def post(self, request: Request) -> Response:
        writable = experiments_writable_by(_principal(request))
        if not writable.exists():  # a rater, a viewer, a read key: nothing to promote in, before the body
            raise ApiNotFound("No such experiment.")
        body = PromotionInput(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        try:
            experiment = experiment_by_key(
                writable,
                key=data["experiment"],
                organization=data.get("organization"),
            )
        except ExperimentAmbiguous:
            raise Conflict("Experiments of several of your organisations use that key: add organization.") from None
        if experiment is None:
            raise ApiNotFound("No such experiment.")
        variants = {v.name: v for v in Variant.objects.filter(experiment=experiment)}
        missing = {name: "No such variant." for name in (data["variant"], data["baseline"]) if name not in variants}
        if missing:
            raise Invalid("No such variant in the experiment.", field_errors=missing)
        actor, _ = _actor_via(request)
        promotion = services.promotion_start(
            experiment=experiment,
            variant=variants[data["variant"]],
            baseline=variants[data["baseline"]],
            stages=data["stages"],
            min_votes=data["min_votes"],
            actor=actor,
        )
        return Response(_detail(promotion), status=201)


class PromotionDetailApi(APIView):
    @extend_schema(
        operation_id="promotion_read",
        summary="A promotion, with its decisions",
        description="Its stages and state, and every decision in order (start, advance, hold when its reason "
        "changed, rollback, complete, stop) with the board version and figures it read.",
        responses={200: PromotionDetailOutput},
        tags=["experiments"],
    )
    def get(self, request: Request, promotion_id: int) -> Response:
        promotion = selectors.promotions_viewable_by(_principal(request)).filter(pk=promotion_id).first()
        if promotion is None:
            raise ApiNotFound("No such promotion.")
        return Response(_detail(promotion))


class PromotionStopApi(APIView):
    @extend_schema(
        operation_id="promotion_stop",
        summary="Stop a promotion",
        description="The rollout is cleared: the experiment assigns by its weights again, as before the promotion. "
        "409 when it is not running. Write key, or an owner/manager.",
        request=None,
        responses={200: PromotionDetailOutput, 409: ErrorOutput},
        tags=["experiments"],
    )
    def post(self, request: Request, promotion_id: int) -> Response:
        promotion = selectors.promotions_writable_by(_principal(request)).filter(pk=promotion_id).first()
        if promotion is None:
            raise ApiNotFound("No such promotion.")
        actor, _ = _actor_via(request)
        return Response(_detail(services.promotion_stop(promotion=promotion, actor=actor)))
