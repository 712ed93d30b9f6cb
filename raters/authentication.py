"""API-key authentication for DRF: ``Authorization: Api-Key arena_<prefix>_<secret>``."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.contrib.auth.models import AnonymousUser
from django.http import HttpRequest
from django.utils import timezone
from rest_framework import authentication, exceptions
from rest_framework.request import Request

from .models import ApiKey, api_key_hash
from .tenancy import scopes_disabled

KEYWORD = "Api-Key"
LAST_USED_RESOLUTION = timedelta(seconds=60)
_CACHE = "_arena_api_key"


class ApiKeyPrincipal(AnonymousUser):
    """The 'user' of a request made with an organisation's key: authenticated, and nobody."""

    def __init__(self, api_key: ApiKey) -> None:
        super().__init__()
        self.api_key = api_key

    @property
    def organization(self) -> Any:
        return self.api_key.organization

    @property
    def can_write(self) -> bool:
        return self.api_key.scope == ApiKey.Scope.WRITE

    @property
    def is_authenticated(self) -> bool:  # type: ignore[override]
        return True


def _header_key(request: HttpRequest) -> str | None:
    # DRF reads only ``request.META``, which a plain HttpRequest has too; its stubs ask for a Request.
    header = authentication.get_authorization_header(request).decode("latin-1")  # type: ignore[arg-type]
    if not header.startswith(KEYWORD + " "):
        return None
    return header[len(KEYWORD) + 1 :].strip()


def api_key_for_request(request: HttpRequest) -> ApiKey | None:
    """The live key a request presents, looked up once per request. The key itself is the credential,
    so this one lookup is made across tenants (nothing is known about the organisation before it)."""
    if hasattr(request, _CACHE):
        return getattr(request, _CACHE)  # type: ignore[no-any-return]
    key = _header_key(request)
    api_key = None
    if key:
        with scopes_disabled():
            api_key = (
                ApiKey.objects.select_related("organization")
                .filter(hashed_key=api_key_hash(key), revoked_at__isnull=True)
                .first()
            )
    setattr(request, _CACHE, api_key)
    return api_key


def api_key_principal_for_request(request: HttpRequest) -> ApiKeyPrincipal | None:
    api_key = api_key_for_request(request)
    return ApiKeyPrincipal(api_key) if api_key is not None else None


class ApiKeyAuthentication(authentication.BaseAuthentication):
    def authenticate(self, request: Request) -> tuple[Any, ApiKey] | None:
        if _header_key(request) is None:
            return None
        api_key = api_key_for_request(request._request)
        if api_key is None:
            raise exceptions.AuthenticationFailed("Invalid or revoked API key.")
        # "Last used" to the minute: one write a minute per busy key, not one per request.
        now = timezone.now()
        if api_key.last_used_at is None or now - api_key.last_used_at > LAST_USED_RESOLUTION:
            ApiKey.objects.filter(pk=api_key.pk).update(last_used_at=now)
        return ApiKeyPrincipal(api_key), api_key

    def authenticate_header(self, request: Request) -> str:
        return KEYWORD
