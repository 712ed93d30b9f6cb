"""Content-Security-Policy on every response (Django 5.2 has none built in).

Answers and prompts are sanitised before rendering; the policy is the second wall: should markup ever
slip through, the browser runs no inline script, loads nothing from elsewhere and cannot be framed.
Pages therefore carry no inline script (the battle page's shortcuts live in static/arena/battle.js).
Style *attributes* stay allowed (``style-src-attr``): the leaderboard draws interval bars and heatmap
cells with computed widths and colours, values the server computes, not text anyone typed."""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse


class ContentSecurityPolicyMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        policy = settings.ARENA_CONTENT_SECURITY_POLICY
        if policy and "Content-Security-Policy" not in response:
            response["Content-Security-Policy"] = policy
        return response
