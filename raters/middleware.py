"""The HTTP edge of tenancy: every request runs inside its principal's tenant scope."""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse, StreamingHttpResponse

from .authentication import api_key_principal_for_request
from .tenancy import TENANT_DIMENSION, principal_organization_ids, scope, scoped_iterator


class TenantScopeMiddleware:
    """Opens the request's tenant scope; place it after AuthenticationMiddleware. A request that
    carries an API key is scoped to the key's organisation (looked up once here and handed to the DRF
    authentication class on the request)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        principal = api_key_principal_for_request(request) or getattr(request, "user", None)
        value = principal_organization_ids(principal)
        with scope(**{TENANT_DIMENSION: value}):
            response = self.get_response(request)
        if isinstance(response, StreamingHttpResponse):
            response.streaming_content = scoped_iterator(response.streaming_content, value)
        return response
