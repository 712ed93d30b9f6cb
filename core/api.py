"""The REST API's shared plumbing: one error body, cursor pages, filters, the body-size limit, the schema.

Every app's API (``apis``) builds on these, so that an external team meets one set of rules everywhere:

- **One error body.** Whatever goes wrong (a field, a parse, a key, a tenant, a rate, a size), the body is
  ``{"error": {"code": "...", "message": "...", "fields": {...}}}``: ``code`` is a stable snake_case word a
  program can switch on, ``message`` a sentence for a person, ``fields`` maps a field (``"answers.0.text"``,
  ``"row 4.category"``) to its messages and is empty when the error is not about fields.
- **Cursor pages** (``?limit=&cursor=``): stable under concurrent inserts, unlike offsets, and cheap on big tables.
- **Scoped access** (``raters.authentication.ScopedAccess``): an API key reads its organisation; only a
  read-write key writes (a read key writing gets 403). Which campaign a principal may see or change is the
  selectors' business (another organisation's object is 404, never 403).
- **A rate per key** (``raters.authentication.ApiKeyThrottle``: ``ApiKey.rate_limit`` or
  ``ARENA_API_KEY_RATE``), counted in the shared cache.
- **The schema**: drf-spectacular (``arena.api_schema``), with the error responses every operation can
  give added once. The exception handler that writes the error body is ``core.http.api_exception_handler``.

It sits in ``core``, below every app, next to ``core.http`` (which maps the services' domain errors to
statuses), because every app's API needs it and no app should depend on another, or on the project
package, for it. What depends on API keys (scoped access, the throttle per key) is the raters app's:
``raters.authentication``."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import django_filters
from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from drf_spectacular.utils import OpenApiParameter
from rest_framework import exceptions, serializers
from rest_framework.pagination import CursorPagination
from rest_framework.request import Request

from core.errors import Conflict, DomainError, Invalid, LimitReached, NotFound, PermissionDenied

if TYPE_CHECKING:
    # Only a type here: importing DRF's views at run time would build APIView, whose class attributes read
    # the settings that name this module's classes (an import cycle).
    from rest_framework.views import APIView

# --- The one error body ---------------------------------------------------------------------------


class ErrorDetailOutput(serializers.Serializer[Any]):
    # Built in get_fields: an attribute named ``fields`` would shadow the serializer's own ``fields``.
    def get_fields(self) -> dict[str, serializers.Field[Any, Any, Any, Any]]:
        return {
            "code": serializers.CharField(help_text="A stable snake_case word to switch on: `invalid`, `not_found`…"),
            "message": serializers.CharField(help_text="What went wrong, for a person."),
            "fields": serializers.DictField(
                child=serializers.ListField(child=serializers.CharField()),
                help_text='Messages per field or row (`"answers.0.text"`, `"row 4.category"`); empty when none.',
            ),
        }


class ErrorOutput(serializers.Serializer[Any]):
    error = ErrorDetailOutput()


def error_body(code: str, message: str, fields: dict[str, list[str]] | None = None) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "fields": fields or {}}}


DOMAIN_CODES: tuple[tuple[type[DomainError], str], ...] = (
    (NotFound, "not_found"),
    (PermissionDenied, "permission_denied"),
    (Conflict, "conflict"),
    (LimitReached, "limit_reached"),
    (Invalid, "invalid"),
)

# DRF's exceptions → our codes (DRF's own default codes differ in places: "invalid" vs "parse_error"...).
DRF_CODES: tuple[tuple[type[exceptions.APIException], str], ...] = (
    (exceptions.ValidationError, "invalid"),
    (exceptions.ParseError, "parse_error"),
    (exceptions.NotAuthenticated, "not_authenticated"),
    (exceptions.AuthenticationFailed, "authentication_failed"),
    (exceptions.PermissionDenied, "permission_denied"),
    (exceptions.NotFound, "not_found"),
    (exceptions.MethodNotAllowed, "method_not_allowed"),
    (exceptions.NotAcceptable, "not_acceptable"),
    (exceptions.UnsupportedMediaType, "unsupported_media_type"),
    (exceptions.Throttled, "throttled"),
)


def flatten(detail: Any, prefix: str = "") -> dict[str, list[str]]:
    """DRF's nested validation detail (dicts of lists of dicts...) as ``{"a.0.b": ["msg", ...]}``."""
    out: dict[str, list[str]] = {}
    if isinstance(detail, dict):
        for key, value in detail.items():
            for name, messages in flatten(value, f"{prefix}.{key}" if prefix else str(key)).items():
                out.setdefault(name, []).extend(messages)
    elif isinstance(detail, list):
        if all(not isinstance(item, (dict, list)) for item in detail):
            out[prefix or "non_field_errors"] = [str(item) for item in detail]
        else:
            for index, item in enumerate(detail):
                if item:  # DRF gives {} for the valid items of a list
                    for name, messages in flatten(item, f"{prefix}.{index}" if prefix else str(index)).items():
                        out.setdefault(name, []).extend(messages)
    else:
        out[prefix or "non_field_errors"] = [str(detail)]
    return out


def validation_message(fields: dict[str, list[str]]) -> str:
    general = fields.get("non_field_errors") or fields.get("detail")
    if general and len(fields) == 1:
        return general[0]
    named = [name for name in fields if name not in ("non_field_errors", "detail")]
    if len(named) == 1:
        return f"Invalid input: {named[0]}: {fields[named[0]][0]}"
    return f"Invalid input in {len(named)} fields." if named else "Invalid input."


def too_large_message() -> str:
    return f"The request body is larger than the limit of {settings.ARENA_API_MAX_BODY_BYTES} bytes."


@csrf_exempt  # it changes nothing; without this a POST with a session cookie got the HTML CSRF page
def api_not_found(request: HttpRequest, path: str = "") -> HttpResponse:
    """Unknown paths under ``/api/`` answer in the API's body, not with the site's HTML page."""
    return JsonResponse(error_body("not_found", "No such API endpoint."), status=404)


class ApiBodyLimitMiddleware:
    """Refuses an API request whose declared body is over ``ARENA_API_MAX_BODY_BYTES`` before anything
    reads it. DRF parses JSON from the raw stream, where Django's ``DATA_UPLOAD_MAX_MEMORY_SIZE`` does not
    apply, so without this a client could make a worker buffer any amount."""

    sync_capable = True
    async_capable = False

    def __init__(self, get_response: Any) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.path.startswith("/api/"):
            try:
                length = int(request.META.get("CONTENT_LENGTH") or 0)
            except ValueError:
                return JsonResponse(error_body("invalid", "Malformed Content-Length header."), status=400)
            if length > settings.ARENA_API_MAX_BODY_BYTES:
                return JsonResponse(error_body("payload_too_large", too_large_message()), status=413)
        response: HttpResponse = self.get_response(request)
        return response


# --- Pages, access, rates ---------------------------------------------------------------------------


PAGE_LIMIT_MAX = 500
PAGE_LIMIT_DEFAULT = 50


def limit_parameter(what: str = "Items") -> OpenApiParameter:
    """``?limit=`` as the schema states it for a plain ``APIView`` answering with ``cursor_page``: an integer
    from 1 to 500 (default 50), the range ``CursorPage`` enforces (0 or 501 is a 400). Generic views get the
    same from ``CursorPage.get_schema_operation_parameters``."""
    return OpenApiParameter(
        "limit",
        {"type": "integer", "minimum": 1, "maximum": PAGE_LIMIT_MAX, "default": PAGE_LIMIT_DEFAULT},
        description=f"{what} per page: a whole number from 1 to {PAGE_LIMIT_MAX} (default {PAGE_LIMIT_DEFAULT}); "
        "0 or more than the maximum is a 400.",
    )


class CursorPage(CursorPagination):
    """``?limit=`` (1–500, default 50) and an opaque ``?cursor=`` from the previous page's ``next``.

    A ``limit`` that is not a whole number from 1 to 500 is a 400 (DRF would quietly use the default, and
    a client would believe it got what it asked for), and the schema states the range."""

    page_size = PAGE_LIMIT_DEFAULT
    page_size_query_param = "limit"
    max_page_size = PAGE_LIMIT_MAX
    ordering = "-id"

    def get_page_size(self, request: Request) -> int:
        given = request.query_params.getlist(self.page_size_query_param or "limit")
        if len(given) > 1:  # which one was meant? QueryDict would quietly take the last
            raise serializers.ValidationError({"limit": ["Give limit once."]})
        raw = given[0] if given else ""
        if raw == "":  # an empty parameter means "not given"
            return int(self.page_size or 50)
        maximum = int(self.max_page_size or 500)
        try:
            size = int(raw)
        except ValueError:
            size = 0
        if not 1 <= size <= maximum:
            raise serializers.ValidationError({"limit": [f"A whole number from 1 to {maximum}."]})
        return size

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        parameters: list[dict[str, Any]] = super().get_schema_operation_parameters(view)
        for parameter in parameters:
            if parameter["name"] == self.page_size_query_param:
                parameter["schema"].update(minimum=1, maximum=self.max_page_size, default=self.page_size)
                parameter["description"] = (
                    f"Items per page: a whole number from 1 to {self.max_page_size} (default {self.page_size}); "
                    "0 or more than the maximum is a 400."
                )
        return parameters


class UtcIsoDateTimeFilter(django_filters.IsoDateTimeFilter):  # type: ignore[misc]  # django-filter ships no types
    """An ISO 8601 bound compared in UTC. PostgreSQL takes UTC offsets up to 15:59 only, and ISO allows
    23:59, so the value is converted first; a bound past the calendar's ends (year 1, year 9999 in UTC)
    bounds nothing, or everything."""

    def filter(self, qs: Any, value: datetime | None) -> Any:
        if value is None:
            return qs
        try:
            value = value.astimezone(UTC)
        except OverflowError:
            offset = value.utcoffset()
            before_year_1 = offset is not None and offset > timedelta(0)
            lower_bound = self.lookup_expr in ("gt", "gte")
            # "after a time before year 1" and "before a time after year 9999" exclude nothing.
            return qs if before_year_1 == lower_bound else qs.none()
        return super().filter(qs, value)


_PAGE_SCHEMAS: dict[type[serializers.BaseSerializer[Any]], type[serializers.Serializer[Any]]] = {}


def page_of(output: type[serializers.BaseSerializer[Any]]) -> type[serializers.Serializer[Any]]:
    """The schema of a cursor page of ``output`` items, for ``@extend_schema(responses=page_of(X))`` on a
    plain ``APIView`` that answers with ``cursor_page`` (generic views get it from their paginator)."""
    if output not in _PAGE_SCHEMAS:
        name = output.__name__.removesuffix("Serializer").removesuffix("Output") + "Page"
        _PAGE_SCHEMAS[output] = type(
            name,
            (serializers.Serializer,),
            {
                "__qualname__": name,
                "__module__": output.__module__,
                "next": serializers.URLField(allow_null=True, help_text="The next page, or null on the last."),
                "previous": serializers.URLField(allow_null=True, help_text="The previous page, or null."),
                "results": output(many=True),
            },
        )
    return _PAGE_SCHEMAS[output]


def cursor_page(
    *,
    request: Request,
    view: APIView,
    queryset: Any,
    output: type[serializers.BaseSerializer[Any]],
    ordering: str = "-id",
) -> Any:
    """One cursor page of ``queryset`` (ordered by ``ordering``, a unique, unchanging column), rendered with
    ``output``: ``{"next", "previous", "results"}``."""
    paginator = CursorPage()
    paginator.ordering = ordering
    page: Any = paginator.paginate_queryset(queryset, request, view=view)
    return paginator.get_paginated_response(output(page, many=True, context={"request": request}).data)
