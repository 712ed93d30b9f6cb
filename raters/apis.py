"""REST endpoints for an organisation's webhooks (docs/api/webhooks.md).

Owners only, as in the console: an owner key of the organisation (only an owner can make one) or an owner's
session, to read and to write. A read or write key gets 403 before any lookup (``OwnerKeyOnly``), a
manager's or rater's session 404 like another organisation's webhook."""

from __future__ import annotations

from typing import Any

import django_filters
from django.contrib.auth.models import AnonymousUser, User
from drf_spectacular.utils import OpenApiExample, OpenApiResponse, extend_schema
from rest_framework import generics, serializers, status
from rest_framework.parsers import JSONParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core.api import CursorPage, ErrorOutput
from core.errors import NotFound, PermissionDenied

from . import selectors, services
from .authentication import ApiKeyPrincipal, OwnerKeyOnly, ScopedAccess
from .models import Organization, WebhookDelivery, WebhookEndpoint, WebhookEvent

SUBSCRIBABLE = [value for value in WebhookEvent.values if value != WebhookEvent.PING]
TAGS = ["webhooks"]
# JSON bodies only: with form bodies DRF reads a blank optional field as "not given", so {"url": ""} would
# be accepted as a change of nothing.
JSON_ONLY = [JSONParser]
# Every view here: authenticated, a read key never writes, and a key needs the owner scope.
OWNER_ONLY = [ScopedAccess, OwnerKeyOnly]

Principal = User | AnonymousUser | ApiKeyPrincipal


class StrictBooleanField(serializers.BooleanField):
    """true or false, as the schema says (DRF's own also takes 0, 1, "yes", "on"...)."""

    def to_internal_value(self, data: Any) -> bool:
        if isinstance(data, bool):
            return data
        self.fail("invalid", input=data)
        raise AssertionError("unreachable")  # fail() raises


class StrictCharField(serializers.CharField):
    """A JSON string, as the schema says (DRF's own also takes numbers)."""

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictURLField(StrictCharField, serializers.URLField):
    pass


class StrictSlugField(StrictCharField, serializers.SlugField):
    pass


def _principal(request: Request) -> Principal:
    user = request.user
    assert isinstance(user, (User, AnonymousUser))  # ApiKeyPrincipal is an AnonymousUser
    return user


def _visible(request: Request, webhook_id: int) -> WebhookEndpoint:
    endpoint = selectors.webhook_visible_to(_principal(request), webhook_id)
    if endpoint is None:
        raise NotFound("No such webhook.")
    return endpoint


def _writable(request: Request, webhook_id: int) -> WebhookEndpoint:
    endpoint = selectors.webhook_writable_by(_principal(request), webhook_id)
    if endpoint is None:
        raise NotFound("No such webhook.")
    return endpoint


def _actor(request: Request) -> User | None:
    return request.user if isinstance(request.user, User) else None


class WebhookOutput(serializers.ModelSerializer[WebhookEndpoint]):
    organization: serializers.SlugRelatedField[Organization] = serializers.SlugRelatedField(
        slug_field="slug", read_only=True
    )
    events = serializers.ListField(child=serializers.ChoiceField(choices=SUBSCRIBABLE))

    class Meta:
        model = WebhookEndpoint
        fields: tuple[str, ...] = (
            "id",
            "organization",
            "url",
            "description",
            "events",
            "active",
            "consecutive_failures",
            "failing_since",
            "disabled_at",
            "disabled_reason",
            "created_at",
        )
        read_only_fields = fields


class WebhookCreatedOutput(WebhookOutput):
    secret = serializers.CharField(
        read_only=True, help_text="The signing secret. Shown here once; owners can read it again in the console."
    )

    class Meta(WebhookOutput.Meta):
        fields: tuple[str, ...] = (*WebhookOutput.Meta.fields, "secret")
        read_only_fields = fields


class DeliveryOutput(serializers.ModelSerializer[WebhookDelivery]):
    webhook = serializers.IntegerField(source="endpoint_id", read_only=True)

    class Meta:
        model = WebhookDelivery
        fields = (
            "id",
            "webhook",
            "event_id",
            "event",
            "payload",
            "status",
            "attempts",
            "response_status",
            "response_excerpt",
            "error",
            "next_attempt_at",
            "duration_ms",
            "created_at",
            "delivered_at",
        )
        read_only_fields = fields


_WEBHOOK_EXAMPLE = {
    "id": 7,
    "organization": "acme",
    "url": "https://hooks.example.com/arena",
    "description": "CI dashboards",
    "events": ["battle.rated", "leaderboard.updated"],
    "active": True,
    "consecutive_failures": 0,
    "failing_since": None,
    "disabled_at": None,
    "disabled_reason": "",
    "created_at": "2026-12-01T12:00:00Z",
}
_DELIVERY_EXAMPLE = {
    "id": 1234,
    "webhook": 7,
    "event_id": "4f1c9a52-5b1e-4b8e-9d55-0c1f3e2a7b10",
    "event": "leaderboard.updated",
    "payload": {"campaign_id": 3, "version": 12, "categories": ["", "coding"], "views": ["raw", "style"]},
    "status": "failed",
    "attempts": 2,
    "response_status": 503,
    "response_excerpt": "upstream unavailable",
    "error": "The receiver answered 503.",
    "next_attempt_at": "2026-12-01T12:10:00Z",
    "duration_ms": 41,
    "created_at": "2026-12-01T12:00:00Z",
    "delivered_at": None,
}


class WebhookPage(CursorPage):
    ordering = "-id"


class WebhookListApi(generics.ListAPIView[WebhookEndpoint]):
    """``GET /api/v1/webhooks/`` (list) and ``POST /api/v1/webhooks/`` (create)."""

    permission_classes = OWNER_ONLY

    serializer_class = WebhookOutput
    pagination_class = WebhookPage
    filter_backends: list[Any] = []
    parser_classes = JSON_ONLY

    class InputSerializer(serializers.Serializer[Any]):
        url = StrictURLField(max_length=2000, help_text="https:// (http:// only for operator-allowed hosts).")
        events = serializers.ListField(
            child=serializers.ChoiceField(choices=SUBSCRIBABLE), min_length=1, max_length=len(SUBSCRIBABLE)
        )
        description = StrictCharField(max_length=200, required=False, default="", allow_blank=True)
        organization = StrictSlugField(
            max_length=80,
            required=False,
            help_text="The organisation's slug: needed only by a person who owns several (a key's is its own).",
        )

    def get_queryset(self) -> Any:
        return selectors.webhooks_visible_to(_principal(self.request)).select_related("organization")

    @extend_schema(
        operation_id="webhooks_list",
        summary="List webhooks",
        description="The organisation's webhooks (for a person: those of the organisations they own), newest "
        "first. Secrets are never listed.",
        tags=TAGS,
        examples=[OpenApiExample("A webhook", value=_WEBHOOK_EXAMPLE, response_only=True)],
    )
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().get(request, *args, **kwargs)

    @extend_schema(
        operation_id="webhooks_create",
        summary="Create a webhook",
        description="Register a URL for events. The URL must be https:// and must not point at an internal "
        "address unless the operator allows it. The response carries the signing secret, once.",
        request=InputSerializer,
        responses={201: WebhookCreatedOutput},
        tags=TAGS,
        examples=[
            OpenApiExample(
                "Create",
                value={"url": "https://hooks.example.com/arena", "events": ["battle.rated", "leaderboard.updated"]},
                request_only=True,
            ),
            OpenApiExample(
                "Created",
                value={**_WEBHOOK_EXAMPLE, "secret": "whsec_3q2-7wVd…"},
                response_only=True,
                status_codes=["201"],
            ),
        ],
    )
    def post(self, request: Request) -> Response:
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        organization = self._organization(data.validated_data.get("organization"))
        endpoint = services.webhook_endpoint_create(
            organization=organization,
            url=data.validated_data["url"],
            events=data.validated_data["events"],
            description=data.validated_data["description"],
            actor=_actor(request),
        )
        return Response(WebhookCreatedOutput(endpoint).data, status=status.HTTP_201_CREATED)

    def _organization(self, slug: str | None) -> Organization:
        candidates = selectors.organizations_for_webhooks(_principal(self.request))
        if slug:
            organization = candidates.filter(slug=slug).first()
            if organization is None:
                raise NotFound("No such organisation among those whose webhooks you manage.")
            return organization
        found = list(candidates[:2])
        if not found:
            raise PermissionDenied("Only an organisation's owners (or its owner keys) manage its webhooks.")
        if len(found) > 1:
            raise serializers.ValidationError({"organization": ["You own several organisations: name one."]})
        return found[0]


class WebhookDetailApi(APIView):
    """``GET``, ``PATCH`` and ``DELETE /api/v1/webhooks/<id>/``."""

    permission_classes = OWNER_ONLY

    parser_classes = JSON_ONLY

    class InputSerializer(serializers.Serializer[Any]):
        url = StrictURLField(max_length=2000, required=False)
        events = serializers.ListField(
            child=serializers.ChoiceField(choices=SUBSCRIBABLE),
            min_length=1,
            max_length=len(SUBSCRIBABLE),
            required=False,
        )
        description = StrictCharField(max_length=200, required=False, allow_blank=True)
        active = StrictBooleanField(
            required=False, help_text="true re-enables a disabled webhook (its failure count starts again)."
        )

    @extend_schema(
        operation_id="webhooks_retrieve",
        summary="One webhook",
        description="A webhook with its state: failures in a row and, when disabled, when and why.",
        responses=WebhookOutput,
        tags=TAGS,
        examples=[OpenApiExample("A webhook", value=_WEBHOOK_EXAMPLE, response_only=True)],
    )
    def get(self, request: Request, webhook_id: int) -> Response:
        return Response(WebhookOutput(_visible(request, webhook_id)).data)

    @extend_schema(
        operation_id="webhooks_update",
        summary="Change a webhook",
        description="Change its URL, events or description, turn it off, or re-enable it with "
        '`{"active": true}`. Fields left out stay as they are.',
        request=InputSerializer,
        responses=WebhookOutput,
        tags=TAGS,
        examples=[
            OpenApiExample("Re-enable", value={"active": True}, request_only=True),
            OpenApiExample("Events", value={"events": ["campaign.closed"]}, request_only=True),
        ],
    )
    def patch(self, request: Request, webhook_id: int) -> Response:
        endpoint = _writable(request, webhook_id)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        endpoint = services.webhook_endpoint_update(endpoint=endpoint, actor=_actor(request), **data.validated_data)
        return Response(WebhookOutput(endpoint).data)

    @extend_schema(
        operation_id="webhooks_destroy",
        summary="Delete a webhook",
        description="The webhook and its delivery log are deleted; nothing more is sent to it.",
        responses={204: OpenApiResponse(description="Deleted.")},
        tags=TAGS,
    )
    def delete(self, request: Request, webhook_id: int) -> Response:
        services.webhook_endpoint_delete(endpoint=_writable(request, webhook_id), actor=_actor(request))
        return Response(status=status.HTTP_204_NO_CONTENT)


class DeliveryFilter(django_filters.FilterSet):  # type: ignore[misc]  # django-filter ships no types
    status = django_filters.ChoiceFilter(choices=WebhookDelivery.Status.choices)
    event = django_filters.ChoiceFilter(choices=WebhookEvent.choices)

    class Meta:
        model = WebhookDelivery
        fields = ("status", "event")


class WebhookDeliveryListApi(generics.ListAPIView[WebhookDelivery]):
    """``GET /api/v1/webhooks/<id>/deliveries/?status=&event=``: the delivery log, newest first."""

    permission_classes = OWNER_ONLY

    serializer_class = DeliveryOutput
    pagination_class = WebhookPage
    filterset_class = DeliveryFilter

    def get_queryset(self) -> Any:
        if getattr(self, "swagger_fake_view", False):  # the schema generator has no webhook
            return WebhookDelivery.objects.none()
        return selectors.webhook_deliveries(_visible(self.request, int(self.kwargs["webhook_id"])))

    @extend_schema(
        operation_id="webhooks_deliveries_list",
        summary="A webhook's deliveries",
        description="Each event sent (or to be sent) to this webhook: status (`pending`, `failed` with a retry "
        "scheduled at `next_attempt_at`, `succeeded`, `gave_up`), attempts, the receiver's status and the start "
        "of its answer. Filter with `?status=` and `?event=`.",
        tags=TAGS,
        examples=[OpenApiExample("A delivery being retried", value=_DELIVERY_EXAMPLE, response_only=True)],
    )
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().get(request, *args, **kwargs)


class WebhookPingApi(APIView):
    """``POST /api/v1/webhooks/<id>/ping``: send a test event."""

    permission_classes = OWNER_ONLY

    parser_classes = JSON_ONLY

    @extend_schema(
        operation_id="webhooks_ping",
        summary="Send a test event",
        description="Queues a `ping` event to this webhook alone, signed and retried like any other; follow it "
        "in the deliveries.",
        request=None,
        responses={202: DeliveryOutput, 409: OpenApiResponse(ErrorOutput, description="The webhook is disabled.")},
        tags=TAGS,
        examples=[
            OpenApiExample(
                "Queued",
                value={
                    **_DELIVERY_EXAMPLE,
                    "event": "ping",
                    "payload": {"webhook_id": 7, "message": "A test event from Arena."},
                    "status": "pending",
                    "attempts": 0,
                    "response_status": None,
                    "response_excerpt": "",
                    "error": "",
                    "duration_ms": None,
                },
                response_only=True,
                status_codes=["202"],
            )
        ],
    )
    def post(self, request: Request, webhook_id: int) -> Response:
        delivery = services.webhook_ping(endpoint=_writable(request, webhook_id), actor=_actor(request))
        return Response(DeliveryOutput(delivery).data, status=status.HTTP_202_ACCEPTED)
