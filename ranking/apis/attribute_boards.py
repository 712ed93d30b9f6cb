"""Attribute boards (ratio judgements): the boards and their entities; the lookups and the page query the
attribute modules share. (Runs: ``attribute_runs``; publication: ``attribute_publication``.)"""

from __future__ import annotations

from typing import Any

from django.http import Http404
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.parsers import JSONParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from battles.apis import StrictCharField, StrictIntegerField
from core.api import cursor_page, limit_parameter, page_of
from core.errors import Invalid, PermissionDenied
from raters.selectors import organizations_writable_by

from .. import selectors, services
from ..models import AttributeBoard, AttributeEntity, AttributeRun
from .access import _actor_via, _principal


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
    limit_parameter("Items"),
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
