"""django-allauth's adapter for Arena: the client address behind our own proxies.

allauth keys its login throttle on the client address ("10 failed logins a minute per address") and on
the account ("5 failed logins in 5 minutes per e-mail"). Behind a TLS proxy every request comes from
the proxy's address, so without this one throttle was shared by everybody: ten failed logins for random
e-mails locked every other user out. ``core.http.client_ip`` reads X-Forwarded-For only from our own
proxies (``ARENA_TRUSTED_PROXIES``)."""

from __future__ import annotations

from allauth.account.adapter import DefaultAccountAdapter
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest

from core.http import client_ip


class AccountAdapter(DefaultAccountAdapter):  # type: ignore[misc]  # allauth ships no types
    def get_client_ip(self, request: HttpRequest) -> str:
        ip = client_ip(request)
        if not ip:
            raise PermissionDenied("Unable to determine client IP address")
        return ip
