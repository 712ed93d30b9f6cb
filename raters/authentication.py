"""API-key authentication for DRF: ``Authorization: Api-Key arena_<prefix>_<secret>``."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AnonymousUser
from django.utils import timezone
from rest_framework import authentication, exceptions
from rest_framework.request import Request

from .models import ApiKey, api_key_hash

KEYWORD = "Api-Key"


class ApiKeyPrincipal(AnonymousUser):
    """The 'user' of a request made with an organisation's key: authenticated, and nobody."""

    def __init__(self, api_key: ApiKey) -> None:
        super().__init__()
        self.api_key = api_key

    @property
    def is_authenticated(self) -> bool:  # type: ignore[override]
        return True


class ApiKeyAuthentication(authentication.BaseAuthentication):
    def authenticate(self, request: Request) -> tuple[Any, ApiKey] | None:
        header = authentication.get_authorization_header(request).decode("latin-1")
        if not header.startswith(KEYWORD + " "):
            return None
        key = header[len(KEYWORD) + 1:].strip()
        api_key = (
            ApiKey.objects.select_related("organization")
            .filter(hashed_key=api_key_hash(key), revoked_at__isnull=True)
            .first()
        )
        if api_key is None:
            raise exceptions.AuthenticationFailed("Invalid or revoked API key.")
        ApiKey.objects.filter(pk=api_key.pk).update(last_used_at=timezone.now())
        return ApiKeyPrincipal(api_key), api_key

    def authenticate_header(self, request: Request) -> str:
        return KEYWORD
