"""The HTTP edge of tenancy: every request runs inside its principal's tenant scope."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from asgiref.sync import iscoroutinefunction, markcoroutinefunction, sync_to_async
from django.contrib.auth.middleware import AuthenticationMiddleware
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.utils.functional import SimpleLazyObject

from .authentication import api_key_principal_for_request
from .principals import session_user
from .tenancy import TENANT_DIMENSION, ScopeValue, ascoped_iterator, principal_organization_ids, scope, scoped_iterator


def _principal_scope_value(request: HttpRequest) -> ScopeValue:
    principal = api_key_principal_for_request(request) or getattr(request, "user", None)
    return principal_organization_ids(principal)


def _rescope_stream(response: HttpResponse, value: ScopeValue) -> HttpResponse:
    # A streamed body is produced after this middleware returned: each chunk runs in the scope again.
    if isinstance(response, StreamingHttpResponse):
        if response.is_async:
            response.streaming_content = ascoped_iterator(response.streaming_content, value)
        else:
            response.streaming_content = scoped_iterator(response.streaming_content, value)
    return response


class TenantScopeMiddleware:
    """Opens the request's tenant scope; place it after AuthenticationMiddleware. A request that
    carries an API key is scoped to the key's organisation (looked up once here and handed to the DRF
    authentication class on the request).

    Sync and async: under ASGI an async view (the battle page's server-sent events) runs in the scope
    too (django-scopes keeps it in a context variable, which the ORM's ``sync_to_async`` threads
    inherit), and an async streamed body is re-scoped chunk by chunk like a sync one."""

    sync_capable = True
    async_capable = True

    def __init__(self, get_response: Callable[[HttpRequest], Any]) -> None:
        self.get_response = get_response
        self.is_async = iscoroutinefunction(get_response)
        if self.is_async:
            markcoroutinefunction(self)

    def __call__(self, request: HttpRequest) -> Any:
        if self.is_async:
            return self.__acall__(request)
        value = _principal_scope_value(request)
        with scope(**{TENANT_DIMENSION: value}):
            response = self.get_response(request)
        return _rescope_stream(response, value)

    async def __acall__(self, request: HttpRequest) -> HttpResponse:
        # The principal's lookups (session user, API key, memberships) are ORM calls: in a thread.
        value = await sync_to_async(_principal_scope_value)(request)
        get_response: Callable[[HttpRequest], Awaitable[HttpResponse]] = self.get_response
        with scope(**{TENANT_DIMENSION: value}):
            response = await get_response(request)
        return _rescope_stream(response, value)


class SessionUserMiddleware(AuthenticationMiddleware):
    """Django's AuthenticationMiddleware with the session's user read from the shared cache
    (raters.principals.session_user: the same checks, one Redis round trip instead of a query). The async
    ``request.auser`` stays Django's."""

    def process_request(self, request: HttpRequest) -> None:
        super().process_request(request)

        def user() -> Any:
            if not hasattr(request, "_cached_user"):
                request._cached_user = session_user(request)  # type: ignore[attr-defined]
            return request._cached_user  # type: ignore[attr-defined]

        request.user = SimpleLazyObject(user)  # type: ignore[assignment]
