"""A/B experiments: list, one with its exposures, and the sticky assignment of a unit to a variant."""

from __future__ import annotations

import re
from typing import Any

import django_filters
from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, extend_schema
from rest_framework import generics, serializers
from rest_framework.exceptions import NotFound as ApiNotFound
from rest_framework.parsers import JSONParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core.api import CursorPage, ErrorOutput
from core.errors import Conflict, Invalid

from .. import selectors, services
from ..models import Experiment
from .access import _principal
from .fields import StrictCharField, _BooleanFilter, _FilterSet


class CompetitorRefOutput(serializers.Serializer[Any]):
    id = serializers.IntegerField()
    model = serializers.CharField(source="model_name")
    version = serializers.CharField(source="version_label")


class VariantOutput(serializers.Serializer[Any]):
    name = serializers.CharField()
    weight = serializers.FloatField()
    competitor = CompetitorRefOutput(allow_null=True)


class VariantExposureOutput(VariantOutput):
    units = serializers.IntegerField(help_text="Distinct units assigned to this variant.")
    exposures = serializers.IntegerField(help_text="Assignments counted (a unit asking again counts again).")


class RolloutOutput(serializers.Serializer[Any]):
    variant = serializers.CharField(help_text="The variant a staged rollout (a promotion) raises.")
    share = serializers.FloatField(help_text="Its share of units in the current stage.")


class ExperimentOutput(serializers.Serializer[Any]):
    key = serializers.CharField()
    name = serializers.CharField()
    description = serializers.CharField()
    organization = serializers.CharField(source="organization.slug")
    campaign = serializers.IntegerField(source="campaign_id", allow_null=True)
    active = serializers.BooleanField()
    created_at = serializers.DateTimeField()
    rollout = RolloutOutput(
        allow_null=True,
        help_text="A promotion's staged rollout in force: units move into the variant (never out of it) until "
        "it has this share; null: the weights alone decide.",
    )
    variants = VariantOutput(many=True)


class ExperimentDetailOutput(ExperimentOutput):
    variants = VariantExposureOutput(many=True)


class ExperimentFilter(_FilterSet):
    # A number, not a model choice: its choices' queryset would be read at import, outside any tenant scope.
    campaign = django_filters.NumberFilter(field_name="campaign_id")
    active = _BooleanFilter()

    class Meta:
        model = Experiment
        fields = ["active", "campaign"]


EXAMPLE_EXPERIMENT = {
    "key": "checkout-copy",
    "name": "Checkout copy",
    "description": "",
    "organization": "acme",
    "campaign": 12,
    "active": True,
    "created_at": "2026-12-01T09:00:00Z",
    "rollout": None,
    "variants": [
        {"name": "control", "weight": 1.0, "competitor": {"id": 3, "model": "prod-assistant", "version": "2026-11"}},
        {"name": "treatment", "weight": 1.0, "competitor": None},
    ],
}


class ExperimentListApi(generics.ListAPIView[Experiment]):
    serializer_class = ExperimentOutput
    pagination_class = CursorPage
    filterset_class = ExperimentFilter

    def get_queryset(self) -> QuerySet[Experiment]:
        if getattr(self, "swagger_fake_view", False):  # the schema generator, with no principal
            return Experiment.objects.none()
        return (
            selectors.experiments_viewable_by(_principal(self.request))
            .prefetch_related("variants__competitor__endpoint")
            .order_by("-id")
        )

    @extend_schema(
        operation_id="experiments_list",
        summary="A/B experiments",
        description="The organisation's experiments with their variants (configured in the admin).",
        examples=[OpenApiExample("A page", value={"next": None, "previous": None, "results": [EXAMPLE_EXPERIMENT]})],
        tags=["experiments"],
    )
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().get(request, *args, **kwargs)


ORGANIZATION_PARAMETER = OpenApiParameter(
    "organization",
    {"type": "string", "pattern": r"^[-a-zA-Z0-9_]{1,50}$", "maxLength": 50},
    OpenApiParameter.QUERY,
    required=False,
    description="Organisation slug, where the key names experiments of several of yours (sessions only).",
)


def _experiment(experiments: QuerySet[Experiment], request: Request, key: str) -> Experiment:
    organization = request.query_params.get("organization")
    if organization and not re.fullmatch(r"[-a-zA-Z0-9_]{1,50}", organization):
        # A slug is letters, digits, - and _: anything else (a NUL byte PostgreSQL refuses) is no slug.
        raise Invalid("organization must be an organisation's slug (letters, digits, - and _).")
    try:
        experiment = selectors.experiment_by_key(experiments, key=key, organization=organization or None)
    except selectors.ExperimentAmbiguous:
        raise Conflict(
            f"Experiments of several of your organisations use the key {key!r}: add ?organization=<slug>."
        ) from None
    if experiment is None:
        raise ApiNotFound("No such experiment.")
    return experiment


class ExperimentDetailApi(APIView):
    @extend_schema(
        operation_id="experiment_read",
        summary="An A/B experiment, with exposures",
        description="Its variants in assignment order, each with the units assigned to it and the exposures counted.",
        parameters=[ORGANIZATION_PARAMETER],
        responses={200: ExperimentDetailOutput, 409: ErrorOutput},
        examples=[
            OpenApiExample(
                "With exposures",
                value={
                    **EXAMPLE_EXPERIMENT,
                    "variants": [{**v, "units": 812, "exposures": 2301} for v in EXAMPLE_EXPERIMENT["variants"]],  # type: ignore[attr-defined]
                },
            )
        ],
        tags=["experiments"],
    )
    def get(self, request: Request, key: str) -> Response:
        experiment = _experiment(selectors.experiments_viewable_by(_principal(request)), request, key)
        variants = [
            {"name": row.variant.name, "weight": row.variant.weight, "competitor": row.variant.competitor, **counts}
            for row in selectors.experiment_exposures(experiment)
            for counts in [{"units": row.units, "exposures": row.exposures}]
        ]
        data = {
            "key": experiment.key,
            "name": experiment.name,
            "description": experiment.description,
            "organization": experiment.organization,
            "campaign_id": experiment.campaign_id,
            "active": experiment.active,
            "created_at": experiment.created_at,
            "rollout": experiment.rollout,
            "variants": variants,
        }
        return Response(ExperimentDetailOutput(data).data)


class AssignInput(serializers.Serializer[Any]):
    unit_id = StrictCharField(max_length=200, help_text="Your stable id of the unit: a user, a session...")


class AssignOutput(serializers.Serializer[Any]):
    experiment = serializers.CharField()
    unit_id = serializers.CharField()
    variant = serializers.CharField()
    competitor = CompetitorRefOutput(allow_null=True)
    exposures = serializers.IntegerField(help_text="This unit's exposures to this variant, this one included.")


class ExperimentAssignApi(APIView):
    parser_classes = [JSONParser]

    @extend_schema(
        operation_id="experiment_assign",
        summary="Assign a unit to a variant (sticky)",
        description="The variant is a deterministic weighted hash of (experiment key, unit_id): the same unit "
        "always gets the same variant while the variants and weights stay as they are. The exposure is counted. "
        "409 for an inactive experiment. Write key, or an owner/manager.",
        parameters=[ORGANIZATION_PARAMETER],
        request=AssignInput,
        responses={200: AssignOutput, 409: ErrorOutput},
        examples=[
            OpenApiExample("A unit", value={"unit_id": "user-8812"}, request_only=True),
            OpenApiExample(
                "Its variant",
                value={
                    "experiment": "checkout-copy",
                    "unit_id": "user-8812",
                    "variant": "treatment",
                    "competitor": None,
                    "exposures": 3,
                },
                response_only=True,
            ),
        ],
        tags=["experiments"],
    )
    def post(self, request: Request, key: str) -> Response:
        experiment = _experiment(selectors.experiments_writable_by(_principal(request)), request, key)
        body = AssignInput(data=request.data)
        body.is_valid(raise_exception=True)
        result = services.experiment_assign(experiment=experiment, unit_id=body.validated_data["unit_id"])
        data = {
            "experiment": experiment.key,
            "unit_id": body.validated_data["unit_id"],
            "variant": result.variant.name,
            "competitor": result.variant.competitor,
            "exposures": result.exposures,
        }
        return Response(AssignOutput(data).data)
