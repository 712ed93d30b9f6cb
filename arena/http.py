"""Request types shared by every app's views and admin.

This sits in the project package, next to ``arena.admin_site``, rather than in one app: battles,
raters and ranking all have views behind ``@login_required`` and admin actions behind
``ArenaAdminSite.has_permission``, and each app should be able to import it without depending on
another app for a type.
"""

from __future__ import annotations

import ipaddress

from django.contrib.auth.models import User
from django.http import HttpRequest


class AuthenticatedHttpRequest(HttpRequest):
    """An ``HttpRequest`` whose user is known to be logged in (django-stubs' documented pattern).

    ``HttpRequest.user`` is ``User | AnonymousUser``. Annotate a view's request with this class only
    where Django has already turned anonymous users away: views decorated with ``@login_required``,
    and admin actions, which ``ArenaAdminSite`` reaches only after ``has_permission`` admitted an
    authenticated manager. It is a static type only; nothing checks it at run time.
    """

    user: User


def client_ip(request: HttpRequest) -> str:
    """The address of the client behind ``settings.ARENA_TRUSTED_PROXY_COUNT`` proxies of our own.

    Each proxy appends the address it was connected from to ``X-Forwarded-For``, so with N trusted
    proxies the client is the N-th entry from the right; anything to its left was written by the
    client and is ignored (an attacker who writes random addresses there stays one address). With no
    trusted proxy, or a request that did not pass through all of them, ``REMOTE_ADDR`` is the client.
    Login throttling (allauth) and django-ratelimit's ``ip`` keys both use this."""
    from django.conf import settings

    remote = request.META.get("REMOTE_ADDR", "") or ""
    depth = settings.ARENA_TRUSTED_PROXY_COUNT
    if depth <= 0:
        return remote
    hops = [hop.strip() for hop in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",") if hop.strip()]
    if len(hops) < depth:
        return remote
    candidate = hops[-depth]
    if candidate.startswith("[") and "]" in candidate:  # [v6]:port
        candidate = candidate[1:candidate.index("]")]
    elif candidate.count(":") == 1:  # v4:port
        candidate = candidate.split(":", 1)[0]
    try:
        return str(ipaddress.ip_address(candidate))
    except ValueError:
        return remote
