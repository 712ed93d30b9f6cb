"""Published attribute boards: the publication (read, publish, unpublish), and the public read of a
published board and of its judgement ledger (no key, no session)."""

from __future__ import annotations

from typing import Any

from django.http import Http404
from django.urls import reverse
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.parsers import FormParser, JSONParser, MultiPartParser
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core.api import ErrorOutput, cursor_page, page_of
from raters.tenancy import organization_scope

from .. import selectors, services
from ..models import AttributeBoard, AttributeJudgement, AttributeRun, AttributeScore
from .access import PublicRateThrottle, _actor_via
from .attribute_boards import PAGE_PARAMETERS, EntityOutput, PageQuery, _attribute_board, _attribute_board_writable
from .attribute_runs import AttributeJudgementOutput, AttributeRunOutput, AttributeScoreOutput
from .publication import StrictBooleanField


class AttributePublicationOutput(serializers.Serializer[Any]):
    published = serializers.BooleanField()
    slug = serializers.CharField(allow_null=True)
    url = serializers.CharField(allow_null=True, help_text="The public page.")
    api_url = serializers.CharField(allow_null=True, help_text="The public API read.")
    published_at = serializers.DateTimeField(allow_null=True)
    listed = serializers.BooleanField(help_text="Listed in the public index of published boards.")


class AttributePublicationInput(serializers.Serializer[Any]):
    listed = StrictBooleanField(
        required=False,
        default=False,
        help_text="Also list the board in the public index of published boards (/boards/); unlisted, only its "
        "address finds it. Publishing again sets it anew.",
    )


def _attribute_publication(board: AttributeBoard) -> dict[str, Any]:
    slug = board.public_slug
    return {
        "published": slug is not None,
        "slug": slug,
        "url": reverse("ranking:attribute-board-public", args=[slug]) if slug else None,
        "api_url": reverse("api-public-attribute-board", args=[slug]) if slug else None,
        "published_at": board.published_at,
        "listed": bool(slug and board.public_listed),
    }


class AttributePublicationApi(APIView):
    # A JSON body sets the options; a POST with none (or an empty form, as before ``listed`` existed) publishes
    # with the defaults. A form's "listed" is a string, which the strict field refuses (400).
    parser_classes = [JSONParser, FormParser, MultiPartParser]

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
        request=AttributePublicationInput,
        responses={201: AttributePublicationOutput, 200: AttributePublicationOutput},
    )
    def post(self, request: Request, board_id: int) -> Response:
        board = _attribute_board_writable(request, board_id)
        body = AttributePublicationInput(data=request.data)
        body.is_valid(raise_exception=True)
        actor, via = _actor_via(request)
        _, created = services.attribute_board_publish(
            board=board, actor=actor, listed=body.validated_data["listed"], via=via
        )
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


# --- Public boards (no key, no session) ----------------------------------------------------------------


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
