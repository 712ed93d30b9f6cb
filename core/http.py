"""Request types shared by every app's views and admin, the mapping of domain errors to HTTP, the
middleware that keeps private responses out of caches (``PrivateNoStoreMiddleware``), and the site's
500 handler, which answers a database that cannot serve the request with 503 + Retry-After
(``server_error``).

This sits in ``core``, below every app, rather than in one app or in the project package (``arena``,
which stands above the apps): battles, raters and ranking all have views behind ``@login_required`` and
admin actions behind ``arena.admin_site.ArenaAdminSite.has_permission``, and each app imports it
without depending on another app, or on the project, for a type.
"""

from __future__ import annotations

import ipaddress
import sys
from functools import lru_cache
from typing import Any, cast

from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import RequestDataTooBig
from django.db import InterfaceError, OperationalError
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBase, JsonResponse
from django.shortcuts import render
from django.template import loader
from django.utils.cache import patch_cache_control
from django.utils.deprecation import MiddlewareMixin
from django.views import defaults
from rest_framework import exceptions
from rest_framework.response import Response
from rest_framework.views import exception_handler

from core.errors import Conflict, DomainError, Invalid, LimitReached, NotFound, PermissionDenied

from .api import DOMAIN_CODES, DRF_CODES, error_body, flatten, too_large_message, validation_message


class AuthenticatedHttpRequest(HttpRequest):
    """An ``HttpRequest`` whose user is known to be logged in (django-stubs' documented pattern).

    ``HttpRequest.user`` is ``User | AnonymousUser``. Annotate a view's request with this class only
    where Django has already turned anonymous users away: views decorated with ``@login_required``,
    and admin actions, which ``ArenaAdminSite`` reaches only after ``has_permission`` admitted an
    authenticated manager. It is a static type only; nothing checks it at run time.
    """

    user: User


def admin_user(request: HttpRequest) -> User:
    """The user behind a request that reached a ModelAdmin of this site: an authenticated manager.

    ``AdminSite.admin_view`` runs ``arena.admin_site.ArenaAdminSite.has_permission``
    (``user_manages_anything``: logged in, active, and a manager or superuser) before any admin view, so
    every ModelAdmin method sees such a user. Those methods must keep Django's ``HttpRequest`` signature
    (a narrower argument type would break the override), so this cast states the guarantee once; it
    checks nothing at run time. Admin actions, which are not overrides, take ``AuthenticatedHttpRequest``
    instead.
    """
    return cast(User, request.user)


def _address(raw: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """An address as a proxy writes it (``1.2.3.4``, ``1.2.3.4:5555``, ``[v6]:443``, ``v6``), or None."""
    candidate = raw.strip()
    if candidate.startswith("[") and "]" in candidate:  # [v6]:port
        candidate = candidate[1 : candidate.index("]")]
    elif candidate.count(":") == 1:  # v4:port
        candidate = candidate.split(":", 1)[0]
    try:
        address = ipaddress.ip_address(candidate.split("%", 1)[0])
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped  # a dual-stack socket's ::ffff:10.20.0.2 is 10.20.0.2
    return address


@lru_cache(maxsize=8)
def _networks(items: tuple[str, ...]) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    return tuple(ipaddress.ip_network(item.strip(), strict=False) for item in items)


def client_ip(request: HttpRequest) -> str:
    """The address of the client behind our own proxies (``settings.ARENA_TRUSTED_PROXIES``).

    ``X-Forwarded-For`` is believed only when the connecting address (``REMOTE_ADDR``) is one of those
    proxies: anyone else who reaches the web port writes what they like there, so for them the connecting
    address is the client. Behind a trusted proxy, each proxy appended the address it was connected from,
    so the entries are read from the right, skipping our own proxies: the first that is not one of them is
    the client, and anything to its left was written by the client and is ignored (an attacker who writes
    random addresses there stays one address). An entry that is not an address ends the walk at the last
    proxy read, as does a header with only our proxies in it. Login throttling (allauth) and
    django-ratelimit's ``ip`` keys both use this."""
    from django.conf import settings

    remote = request.META.get("REMOTE_ADDR", "") or ""
    trusted = _networks(tuple(settings.ARENA_TRUSTED_PROXIES))
    peer = _address(remote)
    if peer is None or not any(peer in network for network in trusted):
        return remote
    client = peer
    for hop in reversed(request.META.get("HTTP_X_FORWARDED_FOR", "").split(",")):
        address = _address(hop)
        if address is None:
            break
        client = address
        if not any(address in network for network in trusted):
            break
    return str(client)


# --- Private responses are never stored ---------------------------------------------------------------


def response_is_private(request: HttpRequest) -> bool:
    """Whether a response to ``request`` holds something only its asker may see: every API response (keyed
    or not: a published board's API is reached by its secret slug), anything answered to a signed-in person
    (the console, dashboards, boards, downloads such as raters.csv and snapshot.csv), and anything asked
    with an ``Authorization`` header."""
    if request.path.startswith("/api/") or "HTTP_AUTHORIZATION" in request.META:
        return True
    user = getattr(request, "user", None)
    return bool(getattr(user, "is_authenticated", False))


class PrivateNoStoreMiddleware(MiddlewareMixin):
    """``Cache-Control: no-store`` on every private response (``response_is_private``), so that neither a
    shared proxy nor the browser's disk cache keeps a tenant's leaderboard, vote log, rater report or
    webhook secret after the session ends. A response whose view declared itself ``public`` is left as it
    is; static files (WhiteNoise answers before authentication) are not touched. It sits near the top of
    ``MIDDLEWARE``, so its ``process_response`` also sees the answers of the middleware below it (a 413,
    a 429), and by then ``AuthenticationMiddleware`` has set ``request.user``."""

    def process_response(self, request: HttpRequest, response: HttpResponseBase) -> HttpResponseBase:
        if not response_is_private(request):
            return response
        if "public" in response.get("Cache-Control", ""):
            return response
        patch_cache_control(response, no_store=True)
        return response


# --- Domain errors at the HTTP edges ---------------------------------------------------------------
# The one table from the services' errors (``core.errors``) to HTTP: used by the HTML views through
# ``error_response`` and by the REST API through ``core.http.api_exception_handler``.

_STATUS: tuple[tuple[type[DomainError], int], ...] = (
    (NotFound, 404),
    (PermissionDenied, 403),
    (Conflict, 409),
    (LimitReached, 429),
    (Invalid, 400),
)


def status_for(exc: DomainError) -> int:
    for kind, status in _STATUS:
        if isinstance(exc, kind):
            return status
    return 400


def error_response(
    request: HttpRequest,
    exc: DomainError,
    template: str = "battles/message.html",
    context: dict[str, Any] | None = None,
) -> HttpResponse:
    """The page for a refused request: ``NotFound`` becomes the site's plain 404 (so "not yours" and
    "not there" look the same); anything else renders ``template`` with the message and its status."""
    if isinstance(exc, NotFound):
        raise Http404(exc.message)
    page = {"title": "Not possible", "message": exc.message, **(context or {})}
    return render(request, template, page, status=status_for(exc))


def api_exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """DRF's ``EXCEPTION_HANDLER``: every refusal in the one error body, with DRF's headers kept
    (``WWW-Authenticate`` on 401, ``Retry-After`` on 429). Anything unexpected stays a 500."""
    if isinstance(exc, DomainError):
        code = next((name for kind, name in DOMAIN_CODES if isinstance(exc, kind)), "invalid")
        return Response(error_body(code, exc.message, exc.field_errors or None), status=status_for(exc))
    if isinstance(exc, RequestDataTooBig):
        return Response(error_body("payload_too_large", too_large_message()), status=413)
    if isinstance(exc, Http404):
        exc = exceptions.NotFound(str(exc) or "Not found.")
    elif isinstance(exc, DjangoPermissionDenied):
        exc = exceptions.PermissionDenied(str(exc) or "You do not have permission to perform this action.")
    response = exception_handler(exc, context)
    if response is None or not isinstance(exc, exceptions.APIException):
        return response
    code = next((name for kind, name in DRF_CODES if isinstance(exc, kind)), "error")
    if isinstance(exc, exceptions.ValidationError):
        fields = flatten(exc.detail)
        response.data = error_body(code, validation_message(fields), fields)
    else:
        response.data = error_body(code, str(exc.detail))
    return response


# --- The 500 handler: an unavailable database is a 503 --------------------------------------------------

# Seconds a client is asked to wait before it tries again when the database cannot serve the request.
RETRY_AFTER_S = 5


def database_unavailable(exc: BaseException | None) -> bool:
    """Whether ``exc`` says the database cannot serve the request right now, rather than that the code is
    wrong: no connection (server down or restarting), the pool's wait for a connection ran out
    (psycopg_pool's ``PoolTimeout``), too many clients, a connection that died under the request. Django
    raises all of them as ``OperationalError`` (or ``InterfaceError`` for a closed connection)."""
    return isinstance(exc, (OperationalError, InterfaceError))


def server_error(request: HttpRequest) -> HttpResponse:
    """``handler500`` (arena/urls.py). An overloaded or unreachable database answers 503 with
    ``Retry-After``: the request stored nothing (its transaction rolled back) and the same request will
    succeed once the database is back, so clients and load balancers should retry rather than report a
    bug. API paths get the API's error body (code ``unavailable``), pages the site's 503 page, rendered
    without the request (its context processors would ask the database again). Anything else is the
    site's 500 page, as Django renders it."""
    if database_unavailable(sys.exc_info()[1]):
        response: HttpResponse
        if request.path.startswith("/api/"):
            message = "The service is briefly unavailable (its database is busy or restarting). Try again shortly."
            response = JsonResponse(error_body("unavailable", message), status=503)
        else:
            response = HttpResponse(loader.get_template("503.html").render(), status=503)
        response["Retry-After"] = str(RETRY_AFTER_S)
        patch_cache_control(response, no_store=True)
        return response
    return defaults.server_error(request)
