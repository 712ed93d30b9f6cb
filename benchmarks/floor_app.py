"""The load benchmark's Django floor: Arena's own settings and middleware serving do-nothing views at the
cycle's three URLs, so ``benchmarks/load.py`` can say how much of the ceiling (``ceiling_app.py``: no
framework at all) any Django application with this middleware reaches before Arena's own work is counted.

Everything but the three views is Arena's (``floor_settings.py`` imports the platform's settings and sets only
``ROOT_URLCONF``; the sign-in page is the platform's): the raters sign in once and then every request passes
the same middleware as the platform's: security headers, the content security policy, sessions (read through
the shared cache), CSRF on each POST, the session's user and their organisations (the shared cache), messages,
allauth's, the tenant scope. The views then do what the ceiling's do and nothing else:

  POST /c/<campaign>/next/  302 to /b/<battle>/ (an id made in the process: no database)
  GET  /b/<battle>/         200, the ceiling's page (same size, the vote form's ``name="choice"``)
  POST /b/<battle>/vote/    ONE single-row INSERT into ``ceiling_vote`` through Django's connection (the
                            same pool as the platform's), 302 to /b/<battle>/

No ORM, no template, no rate limit, no claim: a floor under the platform's cycle on this framework, not a
design.
"""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.db import connection
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import include, path
from django.views.decorators.http import require_GET, require_POST

from benchmarks.ceiling_app import INSERT, PAGE, _battle_id


@require_POST
@login_required
def floor_next(request: HttpRequest, campaign_id: int) -> HttpResponse:
    return HttpResponseRedirect(f"/b/{_battle_id()}/")


@require_GET
@login_required
def floor_page(request: HttpRequest, battle_id: int) -> HttpResponse:
    return HttpResponse(PAGE, content_type="text/html; charset=utf-8")


@require_POST
@login_required
def floor_vote(request: HttpRequest, battle_id: int) -> HttpResponse:
    with connection.cursor() as cursor:
        cursor.execute(INSERT, [battle_id, (request.POST.get("choice") or "left")[:16]])
    return HttpResponseRedirect(f"/b/{battle_id}/")


urlpatterns = [
    path("c/<int:campaign_id>/next/", floor_next),
    path("b/<int:battle_id>/", floor_page),
    path("b/<int:battle_id>/vote/", floor_vote),
    path("", include("arena.urls")),
]
