"""API keys at the REST API's edge: authentication (``Authorization: Api-Key arena_<prefix>_<secret>``),
scoped access (a read key only reads; only an owner key reaches the owner-only webhooks) and the rate per
key; DRF's settings name these classes. A key acts with its *effective* scope: its own, capped by its
maker's role now (``ApiKey.effective_scope``); a key whose maker may no longer use the API is refused."""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.contrib.auth.models import AnonymousUser
from django.http import HttpRequest
from django.utils import timezone
from rest_framework import authentication, exceptions
from rest_framework.permissions import SAFE_METHODS, BasePermission
from rest_framework.request import Request
from rest_framework.throttling import SimpleRateThrottle

from .models import ApiKey, api_key_hash, api_key_scope_allows, api_keys_with_maker_role
from .tenancy import scopes_disabled

if TYPE_CHECKING:
    # Only a type here: importing DRF's views at run time would build APIView, whose class attributes read
    # the settings that name this module's classes (an import cycle).
    from rest_framework.views import APIView

KEYWORD = "Api-Key"
LAST_USED_RESOLUTION = timedelta(seconds=60)
_CACHE = "_arena_api_key"


class ApiKeyPrincipal(AnonymousUser):
    """The 'user' of a request made with an organisation's key: authenticated, and nobody."""

    def __init__(self, api_key: ApiKey) -> None:
        super().__init__()
        self.api_key = api_key
        self.scope = api_key.effective_scope()

    @property
    def organization(self) -> Any:
        return self.api_key.organization

    def allows(self, needed: str) -> bool:
        """Whether the key's effective scope reaches ``needed`` (``ApiKey.Scope``: read < write < owner)."""
        return api_key_scope_allows(self.scope, needed)

    @property
    def can_write(self) -> bool:
        return self.allows(ApiKey.Scope.WRITE)

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
    so this one lookup is made across tenants (nothing is known about the organisation before it). The
    same query brings the maker and the maker's role in the key's organisation (the effective scope)."""
    if hasattr(request, _CACHE):
        return getattr(request, _CACHE)  # type: ignore[no-any-return]
    key = _header_key(request)
    api_key = None
    if key:
        with scopes_disabled():
            api_key = (
                api_keys_with_maker_role(ApiKey.objects.select_related("organization", "created_by"))
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
        principal = ApiKeyPrincipal(api_key)
        if principal.scope is None:
            raise exceptions.AuthenticationFailed(
                "This API key's maker no longer has a role in its organisation that may use the API "
                "(a key never exceeds its maker); an owner can make a new key."
            )
        # "Last used" to the minute: one write a minute per busy key, not one per request.
        now = timezone.now()
        if api_key.last_used_at is None or now - api_key.last_used_at > LAST_USED_RESOLUTION:
            ApiKey.objects.filter(pk=api_key.pk).update(last_used_at=now)
        return principal, api_key

    def authenticate_header(self, request: Request) -> str:
        return KEYWORD


def principal_can_write(user: Any) -> bool:
    """A key whose effective scope is write or owner, or a signed-in person (whose role the selectors
    check per object)."""
    if isinstance(user, ApiKeyPrincipal):
        return user.allows(ApiKey.Scope.WRITE)
    return bool(getattr(user, "is_authenticated", False))


class ScopedAccess(BasePermission):
    """Authenticated (API key or session); a read-only key may only read. A view that takes a POST which
    changes nothing of the organisation's data (requesting an export, say) sets ``read_key_may_post``."""

    message = "This API key is read-only; writes need a read-write key."

    def has_permission(self, request: Request, view: APIView) -> bool:
        user = request.user
        if not getattr(user, "is_authenticated", False):
            return False
        if request.method in SAFE_METHODS:
            return True
        if request.method == "POST" and getattr(view, "read_key_may_post", False):
            return True
        return principal_can_write(user)


class OwnerKeyOnly(BasePermission):
    """For the owner-only resources (webhooks: their URLs, secrets and delivery logs): a key needs the
    owner scope, which only an owner can make (and which lapses to the maker's role if they are demoted).
    People pass here; the selectors let owners only reach the rows."""

    message = "Webhooks are for the organisation's owners: this needs an owner key, which only an owner can make."

    def has_permission(self, request: Request, view: APIView) -> bool:
        user = request.user
        return not isinstance(user, ApiKeyPrincipal) or user.allows(ApiKey.Scope.OWNER)


class ApiKeyThrottle(SimpleRateThrottle):
    """Requests per API key: the key's own ``rate_limit`` or ``ARENA_API_KEY_RATE`` (e.g. ``1200/m``).
    Sessions are people in a browser; their writes have the rater limits of the services."""

    scope = "api_key"

    def get_rate(self) -> str | None:
        return str(settings.ARENA_API_KEY_RATE) or None

    def allow_request(self, request: Request, view: APIView) -> bool:
        user = request.user
        if not isinstance(user, ApiKeyPrincipal):
            return True
        rate = user.api_key.rate_limit or self.get_rate()
        if not rate:
            return True
        self.rate = rate
        self.num_requests, self.duration = self.parse_rate(rate)
        return super().allow_request(request, view)

    def get_cache_key(self, request: Request, view: APIView) -> str | None:
        user = request.user
        if not isinstance(user, ApiKeyPrincipal):
            return None
        return f"throttle_api_key_{user.api_key.pk}"
