"""Who is asking and what they may reach, for every module of the API: the caller (a signed-in person or
an API key), a campaign the caller may read, the actor and channel an audit row names, and the per-IP
throttle of the public (keyless) endpoints."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.http import Http404
from rest_framework.request import Request
from rest_framework.throttling import SimpleRateThrottle

from battles.models import Campaign
from battles.selectors import campaign_viewable_by
from raters.authentication import ApiKeyPrincipal


def _principal(request: Request) -> User | ApiKeyPrincipal:
    user = request.user
    # ScopedAccess, the API's default permission, lets only a signed-in user or an API key through.
    assert isinstance(user, (User, ApiKeyPrincipal))
    return user


def _campaign(request: Request, campaign_id: int) -> Campaign:
    campaign = campaign_viewable_by(user=_principal(request), campaign_id=campaign_id)
    if campaign is None:
        raise Http404("No such campaign.")
    return campaign


def _actor_via(request: Request) -> tuple[User | None, str]:
    user = _principal(request)
    if isinstance(user, ApiKeyPrincipal):
        return None, f"api key {user.api_key.prefix}"
    return user, "api"


class PublicRateThrottle(SimpleRateThrottle):
    """Per client IP, for every request to a public board (signed in or not): the public endpoints have
    no key to throttle by. The rate is ``ARENA_PUBLIC_RATE`` (scope "public"; empty: none)."""

    scope = "public"

    def get_rate(self) -> str | None:
        rate = str(settings.ARENA_PUBLIC_RATE)
        return rate or None  # empty: no limit (the test settings)

    def get_cache_key(self, request: Request, view: Any) -> str | None:
        return self.cache_format % {"scope": self.scope, "ident": self.get_ident(request)}
