"""Request types shared by every app's views and admin.

This sits in the project package, next to ``arena.admin_site``, rather than in one app: battles,
raters and ranking all have views behind ``@login_required`` and admin actions behind
``ArenaAdminSite.has_permission``, and each app should be able to import it without depending on
another app for a type.
"""

from __future__ import annotations

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
