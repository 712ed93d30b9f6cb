"""Shadow battles: ready-made battles (a prompt and two answers from your own traffic) pushed into a
campaign's buffer, one or a batch at a time, idempotently; and a shadow battle's state."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiExample, OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import NotFound as ApiNotFound
from rest_framework.exceptions import ValidationError as ApiValidationError
from rest_framework.parsers import JSONParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core.api import ErrorOutput

from .. import selectors, services
from ..models import Battle, Competitor
from ..prompting import CATEGORIES, PROMPT_MAX_CHARS
from .access import _principal, _writable_campaign
from .fields import StrictCharField, StrictFloatField, StrictIntegerField, StrictSlugField

IDEMPOTENCY_HEADER = "Idempotency-Key"


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
    prompt = StrictCharField(
        max_length=PROMPT_MAX_CHARS,
        trim_whitespace=False,
        help_text=f"At most {PROMPT_MAX_CHARS} characters (surrounding whitespace is stripped before it is stored).",
    )
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
            # Why a battle was voided is for its owner; no model names are in it
            # (battles/services/generation.py, _void_message).
            "void_reason": battle.void_reason,
            "vote": vote_data,
        }
        return Response(ShadowBattleOutput(data).data)
