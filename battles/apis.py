"""REST endpoints: the vote log export; shadow battles and A/B experiments."""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Iterator
from typing import Any

from django.contrib.auth.models import User
from django.db.models import QuerySet
from django.http import Http404, StreamingHttpResponse
from django_filters import rest_framework as filters
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, extend_schema
from rest_framework import generics, serializers, status
from rest_framework.exceptions import NotFound as ApiNotFound
from rest_framework.exceptions import ValidationError as ApiValidationError
from rest_framework.parsers import JSONParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.validators import ProhibitSurrogateCharactersValidator
from rest_framework.views import APIView

from arena.api import CursorPage, ErrorOutput
from raters.authentication import ApiKeyPrincipal
from raters.errors import Conflict

from . import selectors, services
from .models import Battle, Campaign, Competitor, Experiment, Vote
from .prompting import CATEGORIES, PROMPT_MAX_CHARS

CSV_COLUMNS = (
    "battle_id",
    "vote_id",
    "timestamp",
    "campaign_id",
    "source",
    "rater_id",
    "pool_id",
    "prompt_id",
    "prompt_hash",
    "prompt_category",
    "prompt_language",
    "prompt_source",
    "left_competitor_id",
    "left_model",
    "left_version",
    "left_output_tokens",
    "left_finish_reason",
    "left_latency_s",
    "right_competitor_id",
    "right_model",
    "right_version",
    "right_output_tokens",
    "right_finish_reason",
    "right_latency_s",
    "temperature",
    "top_p",
    "max_tokens",
    "system_prompt",
    "seed",
    "vote",
    "decision_ms",
    "left_style",
    "right_style",
    "prompt_asks_identity",
    "answer_names_model",
)


def _cell(value: Any) -> Any:
    """Spreadsheets run a text cell starting with = + - @ (or a tab / carriage return) as a formula;
    model names and the system prompt are typed by people, so such text is prefixed with a quote."""
    if isinstance(value, str) and value[:1] in ("=", "+", "-", "@", "\t", "\r"):
        return "'" + value
    return value


def _flat(event: dict[str, Any]) -> list[Any]:
    row: dict[str, Any] = {k: v for k, v in event.items() if not isinstance(v, dict)}
    for group in ("prompt", "left", "right"):
        for key, value in event[group].items():
            name = f"{group}_{key}"
            row[name] = json.dumps(value, sort_keys=True) if isinstance(value, dict) else value
    row.update(event["params"])
    row.update(event["identity"])
    return [_cell(row.get(column, "")) for column in CSV_COLUMNS]


def _jsonl(votes: Iterator[Vote]) -> Iterator[str]:
    for vote in votes:
        yield json.dumps(vote.as_event(), sort_keys=True) + "\n"


def _csv(votes: Iterator[Vote]) -> Iterator[str]:
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(CSV_COLUMNS)
    for vote in votes:
        writer.writerow(_flat(vote.as_event()))
        if buffer.tell() > 64_000:
            yield buffer.getvalue()
            buffer.seek(0)
            buffer.truncate()
    yield buffer.getvalue()


class VoteLogExportApi(APIView):
    """The whole vote log of a campaign, streamed as JSON lines (``votes.jsonl``) or CSV (``votes.csv``).

    Streamed row by row from a server-side cursor, so a campaign of millions of votes is never held
    in memory. Owners, managers and viewers of the campaign's organisation only; anyone else gets 404."""

    @extend_schema(
        operation_id="votes_export",
        summary="The vote log, streamed",
        parameters=[OpenApiParameter("kind", str, OpenApiParameter.PATH, enum=["jsonl", "csv"])],
        responses={(200, "application/x-ndjson"): OpenApiTypes.STR, (200, "text/csv"): OpenApiTypes.STR},
        tags=["votes"],
    )
    def get(self, request: Request, campaign_id: int, kind: str) -> StreamingHttpResponse:
        user = request.user
        # IsAuthenticated, the API's default permission, lets only a signed-in user or an API key through.
        assert isinstance(user, (User, ApiKeyPrincipal))
        campaign = selectors.campaign_viewable_by(user=user, campaign_id=campaign_id)
        if campaign is None:
            raise Http404("No such campaign.")
        votes = selectors.votes_for_export(campaign=campaign)
        if kind == "csv":
            response = StreamingHttpResponse(_csv(votes), content_type="text/csv; charset=utf-8")
            response["Content-Disposition"] = f'attachment; filename="campaign-{campaign.pk}-votes.csv"'
        else:
            response = StreamingHttpResponse(_jsonl(votes), content_type="application/x-ndjson")
            response["Content-Disposition"] = f'attachment; filename="campaign-{campaign.pk}-votes.jsonl"'
        return response


# === Shadow battles and A/B experiments ================================================================

IDEMPOTENCY_HEADER = "Idempotency-Key"


def _principal(request: Request) -> User | ApiKeyPrincipal:
    user = request.user
    # ScopedAccess, the API's default permission, lets only a signed-in user or an API key through.
    assert isinstance(user, (User, ApiKeyPrincipal))
    return user


def _writable_campaign(request: Request, campaign_id: int) -> Campaign:
    campaign = selectors.campaign_writable_by(user=_principal(request), campaign_id=campaign_id)
    if campaign is None:
        raise ApiNotFound("No such campaign.")
    return campaign


_SURROGATE = re.compile("[\ud800-\udfff]")


class FastSurrogateCheck:
    """DRF's ``ProhibitSurrogateCharactersValidator`` with one regex search instead of a Python loop over
    every character (a batch of shadow battles carries megabytes of answer text): the same refusal."""

    message = "Surrogate characters are not allowed: U+{code_point:X}."

    def __call__(self, value: Any) -> None:
        found = _SURROGATE.search(str(value))
        if found is not None:
            message = self.message.format(code_point=ord(found.group()))
            raise ApiValidationError(message, code="surrogate_characters_not_allowed")


class LongTextField(serializers.CharField):
    """A CharField for long texts (answers, prompts) with the fast surrogate check."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.validators = [
            FastSurrogateCheck() if isinstance(v, ProhibitSurrogateCharactersValidator) else v for v in self.validators
        ]


class StrictCharField(LongTextField):
    """A string, and only a string: DRF's CharField would take 42 as "42" (the schema says string)."""

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictSlugField(serializers.SlugField):
    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictIntegerField(serializers.IntegerField):
    """A JSON number without a fraction; not a string of digits, not a boolean."""

    def to_internal_value(self, data: Any) -> int:
        if isinstance(data, bool) or not isinstance(data, (int, float)):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictFloatField(serializers.FloatField):
    """A JSON number; not a string, not a boolean."""

    def to_internal_value(self, data: Any) -> float:
        if isinstance(data, bool) or not isinstance(data, (int, float)):
            self.fail("invalid")
        return super().to_internal_value(data)


class ShadowAnswerInput(serializers.Serializer[Any]):
    model = StrictCharField(
        max_length=120, required=False, default="", help_text="The model's public name (revealed after the vote)."
    )
    version = StrictCharField(max_length=80, required=False, default="")
    variant = StrictSlugField(
        max_length=80,
        required=False,
        default="",
        help_text="With `experiment`: the variant that answered; model and version then come from its competitor.",
    )
    text = StrictCharField(max_length=services.SHADOW_ANSWER_MAX_CHARS, trim_whitespace=False)
    output_tokens = StrictIntegerField(min_value=0, max_value=10_000_000)
    finish_reason = StrictCharField(max_length=16, help_text="e.g. `stop`, `length`.")
    latency_s = StrictFloatField(min_value=0, max_value=86_400)
    ttft_s = StrictFloatField(min_value=0, max_value=86_400, required=False, allow_null=True, default=None)


class ShadowBattleInput(serializers.Serializer[Any]):
    idempotency_key = StrictCharField(
        max_length=200,
        required=False,
        help_text="Required here or in the `Idempotency-Key` header: a retry with the same key and body returns "
        "the first result; the same key with another body is a 409.",
    )
    prompt = StrictCharField(max_length=PROMPT_MAX_CHARS + 1000, trim_whitespace=False)
    category = serializers.ChoiceField(choices=CATEGORIES, required=False, default="")
    language = StrictCharField(max_length=8, required=False, default="")
    system_prompt = StrictCharField(
        required=False,
        allow_blank=True,
        trim_whitespace=False,
        max_length=PROMPT_MAX_CHARS,
        default=None,
        help_text="The system prompt the answers were made with; omitted: the campaign's. Recorded with the vote.",
    )
    experiment = StrictSlugField(
        max_length=80, required=False, default="", help_text="An experiment key whose variants gave the answers."
    )
    answers = serializers.ListField(child=ShadowAnswerInput(), min_length=2, max_length=2)


class ShadowBatchInput(serializers.Serializer[Any]):
    battles = serializers.ListField(child=ShadowBattleInput(), min_length=1, max_length=services.SHADOW_BATCH_MAX)


class ShadowResultOutput(serializers.Serializer[Any]):
    id = serializers.UUIDField(source="battle_id")
    status = serializers.ChoiceField(choices=Battle.Status.choices)
    created = serializers.BooleanField(help_text="False: a replay of an earlier request with the same key and body.")


class ShadowBatchOutput(serializers.Serializer[Any]):
    created = serializers.IntegerField()
    replayed = serializers.IntegerField()
    battles = ShadowResultOutput(many=True)


def _shadow_item(data: dict[str, Any], key: str) -> services.ShadowBattleInput:
    answers = tuple(services.ShadowAnswer(**answer) for answer in data["answers"])
    return services.ShadowBattleInput(
        idempotency_key=key,
        prompt=data["prompt"],
        answers=(answers[0], answers[1]),
        category=data["category"],
        language=data["language"],
        system_prompt=data["system_prompt"],
        experiment=data["experiment"],
    )


EXAMPLE_ANSWERS = [
    {
        "model": "prod-assistant",
        "version": "2026-11-02",
        "text": "Water deeply once a week...",
        "output_tokens": 182,
        "finish_reason": "stop",
        "latency_s": 2.41,
        "ttft_s": 0.38,
    },
    {
        "model": "candidate-7b",
        "version": "rc3",
        "text": "- Morning watering\n- Mulch",
        "output_tokens": 96,
        "finish_reason": "stop",
        "latency_s": 1.12,
    },
]
EXAMPLE_SHADOW = {
    "idempotency_key": "req-2026-12-01-000042",
    "prompt": "How often should I water tomatoes?",
    "category": "advice",
    "language": "en",
    "answers": EXAMPLE_ANSWERS,
}
EXAMPLE_RESULT = {"id": "5d0c1f7e-3f0b-4b9e-9a57-2f0c8f3b1a10", "status": "ready", "created": True}


class ShadowBattleCreateApi(APIView):
    """Push one ready-made battle (a prompt and two answers from your own traffic) into the campaign's
    buffer. Raters get it like any battle: blind, sides chosen by the server, same page and caps."""

    parser_classes = [JSONParser]

    @extend_schema(
        operation_id="shadow_battle_create",
        summary="Push a shadow battle",
        description="Adds a battle with two ready answers to the campaign's buffer. The server picks which answer "
        "is shown left. Competitors are matched by (model, version), or created as external models. "
        "Idempotent: the key (body `idempotency_key` or header `Idempotency-Key`) with the same body returns "
        "the first result (200); with another body, 409 and nothing changes. Write key, or an owner/manager.",
        parameters=[OpenApiParameter(IDEMPOTENCY_HEADER, str, OpenApiParameter.HEADER, required=False)],
        request=ShadowBattleInput,
        responses={201: ShadowResultOutput, 200: ShadowResultOutput, 409: ErrorOutput},
        examples=[
            OpenApiExample("A shadow battle", value=EXAMPLE_SHADOW, request_only=True),
            OpenApiExample("Created", value=EXAMPLE_RESULT, response_only=True, status_codes=["201"]),
        ],
        tags=["shadow battles"],
    )
    def post(self, request: Request, campaign_id: int) -> Response:
        campaign = _writable_campaign(request, campaign_id)
        body = ShadowBattleInput(data=request.data)
        body.is_valid(raise_exception=True)
        header = request.headers.get(IDEMPOTENCY_HEADER, "").strip()
        key = body.validated_data.get("idempotency_key") or header
        if header and key != header:
            raise ApiValidationError({"idempotency_key": ["Differs from the Idempotency-Key header."]})
        if not key:
            raise ApiValidationError({"idempotency_key": ["Required (in the body or the Idempotency-Key header)."]})
        [result] = services.shadow_battles_import(
            campaign=campaign,
            items=[_shadow_item(body.validated_data, key)],
            actor=_principal(request),
            field_prefix=lambda index: "",
        )
        return Response(
            ShadowResultOutput(result).data, status=status.HTTP_201_CREATED if result.created else status.HTTP_200_OK
        )


class ShadowBattleBatchApi(APIView):
    """Up to 1,000 shadow battles in one call, all or none."""

    parser_classes = [JSONParser]

    @extend_schema(
        operation_id="shadow_battle_batch",
        summary="Push shadow battles in a batch",
        description="Each battle as in the single call, each with its own `idempotency_key` (required). All or "
        "none: a bad item is named with its field (`battles.3.answers.0.text`) and nothing is written; a key "
        "reused with another body is a 409 naming the items. Replayed items return their first result.",
        request=ShadowBatchInput,
        responses={201: ShadowBatchOutput, 200: ShadowBatchOutput, 409: ErrorOutput},
        examples=[
            OpenApiExample(
                "Two battles", value={"battles": [EXAMPLE_SHADOW, {**EXAMPLE_SHADOW, "idempotency_key": "r2"}]}
            ),
            OpenApiExample(
                "Imported",
                value={"created": 2, "replayed": 0, "battles": [EXAMPLE_RESULT, EXAMPLE_RESULT]},
                response_only=True,
                status_codes=["201"],
            ),
        ],
        tags=["shadow battles"],
    )
    def post(self, request: Request, campaign_id: int) -> Response:
        campaign = _writable_campaign(request, campaign_id)
        body = ShadowBatchInput(data=request.data)
        body.is_valid(raise_exception=True)
        missing = {
            f"battles.{index}.idempotency_key": ["Required for each battle of a batch."]
            for index, item in enumerate(body.validated_data["battles"])
            if not item.get("idempotency_key")
        }
        if missing:
            raise ApiValidationError(missing)
        results = services.shadow_battles_import(
            campaign=campaign,
            items=[_shadow_item(item, item["idempotency_key"]) for item in body.validated_data["battles"]],
            actor=_principal(request),
        )
        created = sum(result.created for result in results)
        output = {"created": created, "replayed": len(results) - created, "battles": results}
        return Response(
            ShadowBatchOutput(output).data, status=status.HTTP_201_CREATED if created else status.HTTP_200_OK
        )


class ModelVersionOutput(serializers.Serializer[Any]):
    model = serializers.CharField()
    version = serializers.CharField()


class ShadowVoteOutput(serializers.Serializer[Any]):
    choice = serializers.CharField(help_text="left, right, tie or both_bad (sides as the rater saw them).")
    left = ModelVersionOutput()
    right = ModelVersionOutput()
    preferred = ModelVersionOutput(allow_null=True, help_text="The answer the rater preferred; null for a tie.")
    decision_ms = serializers.IntegerField()
    voted_at = serializers.DateTimeField()


class ShadowBattleOutput(serializers.Serializer[Any]):
    id = serializers.UUIDField()
    status = serializers.ChoiceField(choices=Battle.Status.choices)
    # A field named "source" (DRF's metaclass takes declared fields out of the class: no clash with Field.source).
    source = serializers.CharField()  # type: ignore[assignment]
    idempotency_key = serializers.CharField()
    experiment = serializers.CharField(allow_null=True)
    created_at = serializers.DateTimeField()
    void_reason = serializers.CharField(allow_blank=True)
    vote = ShadowVoteOutput(allow_null=True)


def _model_version(competitor: Competitor) -> dict[str, str]:
    return {"model": competitor.model_name, "version": competitor.version_label}


class ShadowBattleDetailApi(APIView):
    @extend_schema(
        operation_id="shadow_battle_read",
        summary="A shadow battle's state",
        description="ready (waiting for or shown to a rater), voted (with the vote) or void (with why). Read or "
        "write key of the organisation, or its owners, managers and viewers.",
        responses={200: ShadowBattleOutput},
        examples=[
            OpenApiExample(
                "Voted",
                value={
                    "id": EXAMPLE_RESULT["id"],
                    "status": "voted",
                    "source": "shadow",
                    "idempotency_key": "req-2026-12-01-000042",
                    "experiment": None,
                    "created_at": "2026-12-01T10:00:00Z",
                    "void_reason": "",
                    "vote": {
                        "choice": "right",
                        "left": {"model": "candidate-7b", "version": "rc3"},
                        "right": {"model": "prod-assistant", "version": "2026-11-02"},
                        "preferred": {"model": "prod-assistant", "version": "2026-11-02"},
                        "decision_ms": 8120,
                        "voted_at": "2026-12-01T10:05:00Z",
                    },
                },
                response_only=True,
            )
        ],
        tags=["shadow battles"],
    )
    def get(self, request: Request, campaign_id: int, battle_id: str) -> Response:
        campaign = selectors.campaign_viewable_by(user=_principal(request), campaign_id=campaign_id)
        battle = selectors.shadow_battle_in_campaign(campaign=campaign, battle_id=battle_id) if campaign else None
        if battle is None:
            raise ApiNotFound("No such shadow battle.")
        vote = selectors.vote_of_battle(battle) if battle.status == Battle.Status.VOTED else None
        vote_data = None
        if vote is not None:
            preferred = {"left": battle.left, "right": battle.right}.get(vote.choice)
            vote_data = {
                "choice": vote.choice,
                "left": {"model": vote.left_model, "version": vote.left_version},
                "right": {"model": vote.right_model, "version": vote.right_version},
                "preferred": _model_version(preferred) if preferred is not None else None,
                "decision_ms": vote.decision_ms,
                "voted_at": vote.created_at,
            }
        data = {
            "id": battle.pk,
            "status": battle.status,
            "source": battle.source,
            "idempotency_key": battle.idempotency_key,
            "experiment": battle.experiment.key if battle.experiment else None,
            "created_at": battle.created_at,
            # Why a battle was voided is for its owner; no model names are in it (services._void_message).
            "void_reason": battle.void_reason,
            "vote": vote_data,
        }
        return Response(ShadowBattleOutput(data).data)


# --- A/B experiments ----------------------------------------------------------------------------------


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


class ExperimentOutput(serializers.Serializer[Any]):
    key = serializers.CharField()
    name = serializers.CharField()
    description = serializers.CharField()
    organization = serializers.CharField(source="organization.slug")
    campaign = serializers.IntegerField(source="campaign_id", allow_null=True)
    active = serializers.BooleanField()
    created_at = serializers.DateTimeField()
    variants = VariantOutput(many=True)


class ExperimentDetailOutput(ExperimentOutput):
    variants = VariantExposureOutput(many=True)


class ExperimentFilter(filters.FilterSet):  # type: ignore[misc]  # django-filter ships no types
    # A number, not a model choice: its choices' queryset would be read at import, outside any tenant scope.
    campaign = filters.NumberFilter(field_name="campaign_id")
    # true or false only (django-filter's boolean filter reads anything else, "null" included, as "not given").
    active = filters.TypedChoiceFilter(
        choices=[("true", "true"), ("false", "false")], coerce=lambda value: value == "true"
    )

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
    "variants": [
        {"name": "control", "weight": 1.0, "competitor": {"id": 3, "model": "prod-assistant", "version": "2026-11"}},
        {"name": "treatment", "weight": 1.0, "competitor": None},
    ],
}


class StrictCursorPage(CursorPage):
    """``?limit=`` that is not a whole number of at least 1 is refused (400), not silently replaced by the
    default: the schema says integer."""

    def get_page_size(self, request: Request) -> int | None:
        raw = request.query_params.getlist(self.page_size_query_param)
        if raw and raw[-1] != "":
            try:
                if int(raw[-1]) < 1:
                    raise ValueError
            except ValueError:
                raise ApiValidationError({"limit": ["A whole number from 1 (at most 500 are returned)."]}) from None
        return super().get_page_size(request)


class ExperimentListApi(generics.ListAPIView[Experiment]):
    serializer_class = ExperimentOutput
    pagination_class = StrictCursorPage
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
        parameters=[
            OpenApiParameter(
                "active", OpenApiTypes.BOOL, OpenApiParameter.QUERY, required=False, description="true or false."
            )
        ],
        description="The organisation's experiments with their variants (configured in the admin).",
        examples=[OpenApiExample("A page", value={"next": None, "previous": None, "results": [EXAMPLE_EXPERIMENT]})],
        tags=["experiments"],
    )
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().get(request, *args, **kwargs)


ORGANIZATION_PARAMETER = OpenApiParameter(
    "organization",
    str,
    OpenApiParameter.QUERY,
    required=False,
    description="Organisation slug, where the key names experiments of several of yours (sessions only).",
)


def _experiment(experiments: QuerySet[Experiment], request: Request, key: str) -> Experiment:
    try:
        experiment = selectors.experiment_by_key(
            experiments, key=key, organization=request.query_params.get("organization")
        )
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
