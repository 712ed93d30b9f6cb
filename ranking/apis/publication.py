"""Published boards: the publication of a campaign's leaderboard (read, publish, unpublish), and the public
read of a published board (no key, no session)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from django.http import Http404
from django.urls import reverse
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.parsers import JSONParser
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from battles.models import Campaign
from battles.selectors import campaign_writable_by
from core.api import ErrorOutput
from raters.authentication import ApiKeyPrincipal

from .. import selectors, services
from .access import PublicRateThrottle, _campaign, _principal
from .leaderboards import (
    FAMILIES_EXAMPLE,
    SELECTION_PARAMETERS,
    ExcludedOutput,
    FamiliesOutput,
    MethodOutput,
    SelectionInput,
)


class StrictBooleanField(serializers.BooleanField):
    """JSON true or false only (DRF's also takes 0, 1, "yes", ...: not what the schema says)."""

    def to_internal_value(self, data: Any) -> bool:
        if isinstance(data, bool):
            return data
        self.fail("invalid", input=data)
        raise AssertionError  # fail() raises


class PublicationInput(serializers.Serializer[Any]):
    show_prompts = StrictBooleanField(
        required=False, default=False, help_text="Also publish the texts of the campaign's active pool prompts."
    )
    listed = StrictBooleanField(
        required=False,
        default=False,
        help_text="Also list the board in the public index of published boards (/boards/, "
        "/api/v1/public/boards/); unlisted, only its address finds it.",
    )


class PublicationOutput(serializers.Serializer[Any]):
    slug = serializers.CharField(help_text="The random public address's last part.")
    url = serializers.CharField(help_text="The public page (no login).")
    api_url = serializers.CharField(help_text="The public JSON (no key).")
    published_at = serializers.DateTimeField()
    show_prompts = serializers.BooleanField()
    listed = serializers.BooleanField(help_text="Listed in the public index of published boards.")


def _publication_data(publication: Any) -> dict[str, Any]:
    return {
        "slug": publication.slug,
        "url": reverse("ranking:board-public", args=[publication.slug]),
        "api_url": reverse("api-public-board", args=[publication.slug]),
        "published_at": publication.published_at,
        "show_prompts": publication.show_prompts,
        "listed": publication.listed,
    }


PUBLICATION_EXAMPLE = OpenApiExample(
    "Published",
    response_only=True,
    value={
        "slug": "q3Zr1vB8mK0xYt2a",
        "url": "/boards/q3Zr1vB8mK0xYt2a/",
        "api_url": "/api/v1/public/boards/q3Zr1vB8mK0xYt2a/",
        "published_at": "2026-12-01T12:00:00Z",
        "show_prompts": False,
        "listed": False,
    },
)


class PublicationApi(APIView):
    """Read (any reader), publish and unpublish (a write key, or an owner or manager)."""

    parser_classes = [JSONParser]  # a JSON body only: a form's "0" is not a boolean

    def _writable(self, request: Request, campaign_id: int) -> Campaign:
        campaign = campaign_writable_by(user=_principal(request), campaign_id=campaign_id)
        if campaign is None:
            raise Http404("No such campaign.")
        return campaign

    @staticmethod
    def _actor(request: Request) -> tuple[User | None, str]:
        user = _principal(request)
        if isinstance(user, ApiKeyPrincipal):
            return None, f"api key {user.api_key.prefix}"
        return user, "api"

    @extend_schema(
        operation_id="campaign_publication_read",
        tags=["published boards"],
        summary="Whether and where the campaign's leaderboard is published",
        description="The publication (404 when the leaderboard is not published).",
        responses={200: PublicationOutput},
        examples=[PUBLICATION_EXAMPLE],
    )
    def get(self, request: Request, campaign_id: int) -> Response:
        campaign = _campaign(request, campaign_id)
        publication = getattr(campaign, "publication", None)
        if publication is None:
            raise Http404("The leaderboard is not published.")
        return Response(PublicationOutput(_publication_data(publication)).data)

    @extend_schema(
        operation_id="campaign_publication_publish",
        tags=["published boards"],
        summary="Publish the campaign's leaderboard",
        description="Publishes the leaderboard at a new random address (201), or changes the options of the "
        "existing publication, keeping its address (200). Audited. Needs a write key, or an owner or manager.",
        request=PublicationInput,
        responses={201: PublicationOutput, 200: PublicationOutput},
        examples=[PUBLICATION_EXAMPLE, OpenApiExample("Options", request_only=True, value={"show_prompts": False})],
    )
    def post(self, request: Request, campaign_id: int) -> Response:
        campaign = self._writable(request, campaign_id)
        body = PublicationInput(data=request.data)
        body.is_valid(raise_exception=True)
        actor, via = self._actor(request)
        publication, created = services.board_publish(
            campaign=campaign,
            actor=actor,
            show_prompts=body.validated_data["show_prompts"],
            listed=body.validated_data["listed"],
            via=via,
        )
        return Response(
            PublicationOutput(_publication_data(publication)).data,
            status=status.HTTP_201_CREATED if created else status.HTTP_200_OK,
        )

    @extend_schema(
        operation_id="campaign_publication_unpublish",
        tags=["published boards"],
        summary="Unpublish the campaign's leaderboard",
        description="The public address answers 404 from now on and is never reused. Audited. 404 when the "
        "leaderboard is not published.",
        request=None,
        responses={204: None},
    )
    def delete(self, request: Request, campaign_id: int) -> Response:
        campaign = self._writable(request, campaign_id)
        actor, via = self._actor(request)
        if not services.board_unpublish(campaign=campaign, actor=actor, via=via):
            raise Http404("The leaderboard is not published.")
        return Response(status=status.HTTP_204_NO_CONTENT)


# --- Public boards (no key, no session) ----------------------------------------------------------------


class PublicRowOutput(serializers.Serializer[Any]):
    competitor_id = serializers.IntegerField()
    label = serializers.CharField()  # type: ignore[assignment]
    model = serializers.CharField()
    version = serializers.CharField()
    retired = serializers.BooleanField()
    hidden = serializers.BooleanField()
    score = serializers.FloatField(allow_null=True)
    lower = serializers.FloatField(allow_null=True)
    upper = serializers.FloatField(allow_null=True)
    lower_open = serializers.BooleanField()
    upper_open = serializers.BooleanField()
    rank_best = serializers.IntegerField(allow_null=True)
    rank_worst = serializers.IntegerField(allow_null=True)
    votes = serializers.IntegerField()
    wins = serializers.IntegerField()
    ties = serializers.IntegerField()
    both_bad = serializers.IntegerField()
    losses = serializers.IntegerField()
    win_rate = serializers.FloatField(allow_null=True)


class PublicPolicyOutput(serializers.Serializer[Any]):
    min_decision_ms = serializers.IntegerField()
    exclude_identity_leaks = serializers.BooleanField()
    prompt_hash_cap = serializers.IntegerField(allow_null=True)
    rater_vote_cap = serializers.IntegerField(allow_null=True)


class PublicSnapshotOutput(serializers.Serializer[Any]):
    version = serializers.IntegerField()
    created_at = serializers.DateTimeField(help_text="Last updated.")
    votes_total = serializers.IntegerField()
    votes_used = serializers.IntegerField()
    method = MethodOutput()
    policy = PublicPolicyOutput()
    flagged_raters = serializers.IntegerField(help_text="How many raters are flagged (never who).")
    excluded = ExcludedOutput()
    components = serializers.IntegerField(allow_null=True)
    interval_choice = serializers.DictField(
        allow_null=True,
        required=False,
        help_text="The interval used for this board (chosen), the campaign's setting, why, the design effect and "
        "number of prompts behind it, and a warning when clustered votes get an interval that treats them as "
        "independent; null in snapshots from before it was recorded.",
    )


class PublicPromptOutput(serializers.Serializer[Any]):
    id = serializers.IntegerField()
    category = serializers.CharField()
    text = serializers.CharField()


class PublicPromptsOutput(serializers.Serializer[Any]):
    count = serializers.IntegerField()
    offset = serializers.IntegerField()
    limit = serializers.IntegerField()
    results = PublicPromptOutput(many=True)


class PublicBoardOutput(serializers.Serializer[Any]):
    slug = serializers.CharField()
    campaign = serializers.CharField(source="campaign_name")
    organization = serializers.CharField(source="organization_name")
    published_at = serializers.DateTimeField()
    category = serializers.CharField()
    view = serializers.CharField()
    categories = serializers.ListField(child=serializers.CharField(allow_blank=True))
    snapshot = PublicSnapshotOutput(allow_null=True, help_text="Null before the first recompute.")
    rows = PublicRowOutput(many=True)
    prompts = PublicPromptsOutput(
        allow_null=True, help_text="Only when the board is published with its prompts: one page of pool prompts."
    )
    families = FamiliesOutput(help_text="How many variants of each model family the campaign tested.")


class PublicBoardInput(SelectionInput):
    prompts_offset = serializers.IntegerField(required=False, default=0, min_value=0, max_value=10**9)


class PublicBoardApi(APIView):
    authentication_classes: list[Any] = []
    permission_classes = [AllowAny]
    throttle_classes = [PublicRateThrottle]

    @extend_schema(
        operation_id="public_board_read",
        tags=["published boards"],
        summary="A published leaderboard (public, no key)",
        description="The newest snapshot of a published board: every competitor (retired ones marked), scores, "
        "intervals, rank ranges, vote counts, the method and the exclusion counts. Never a rater; prompt texts "
        "only when the board is published with them (paged by prompts_offset, 100 a page). No key or session; "
        "throttled per IP (ARENA_PUBLIC_RATE). Unknown or unpublished: 404.",
        auth=[],
        parameters=[
            *SELECTION_PARAMETERS,
            OpenApiParameter("prompts_offset", int, description="First prompt of the page (with show_prompts)."),
        ],
        responses={200: PublicBoardOutput, 429: ErrorOutput},
        examples=[
            OpenApiExample(
                "A board",
                response_only=True,
                value={
                    "slug": "q3Zr1vB8mK0xYt2a",
                    "campaign": "Chat quality",
                    "organization": "Acme",
                    "published_at": "2026-12-01T12:00:00Z",
                    "category": "",
                    "view": "raw",
                    "categories": ["", "coding"],
                    "snapshot": None,
                    "rows": [],
                    "prompts": None,
                    "families": FAMILIES_EXAMPLE,
                },
            )
        ],
    )
    def get(self, request: Request, slug: str) -> Response:
        selection = PublicBoardInput(data=request.query_params)
        selection.is_valid(raise_exception=True)
        board = selectors.public_board(slug=slug, **selection.validated_data)
        if board is None:
            raise Http404("No such board.")
        return Response(PublicBoardOutput(board).data)
