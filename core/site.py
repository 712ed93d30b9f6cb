"""The site's own absolute addresses, for links that leave the page they are shown on: an invitation mailed
to a rater, a crowd study's entry link handed to a vendor. ``ARENA_SITE_URL`` when the operator sets it (the
address people reach the site at, which a request behind a proxy may not know), else the request's own."""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.http import HttpRequest

__all__ = ["site_url"]


def site_url(path: str, *, request: HttpRequest | None = None) -> str:
    """``path`` (``/invite/…/``) as an absolute URL: under ``ARENA_SITE_URL``, else the request's address."""
    base = settings.ARENA_SITE_URL
    if base:
        return base.rstrip("/") + "/" + path.lstrip("/")
    if request is not None:
        return request.build_absolute_uri(path)
    raise ImproperlyConfigured("Set ARENA_SITE_URL: a link for outside the site needs the site's address.")
