"""The manager's console: the Django admin, open to owners and managers of an organisation only."""

from __future__ import annotations

from typing import Any, cast
from urllib.parse import urlencode

from django.contrib import admin
from django.contrib.auth.models import User
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect

from raters.selectors import user_manages_anything


def admin_user(request: HttpRequest) -> User:
    """The user behind a request that reached a ModelAdmin of this site: an authenticated manager.

    ``AdminSite.admin_view`` runs ``ArenaAdminSite.has_permission`` (``user_manages_anything``: logged in,
    active, and a manager or superuser) before any admin view, so every ModelAdmin method sees such a
    user. Those methods must keep Django's ``HttpRequest`` signature (a narrower argument type would
    break the override), so this cast states the guarantee once; it checks nothing at run time. Admin
    actions, which are not overrides, take ``arena.http.AuthenticatedHttpRequest`` instead.
    """
    return cast(User, request.user)


class ArenaAdminSite(admin.AdminSite):
    site_header = "Arena — campaign console"
    site_title = "Arena console"
    index_title = "Campaigns, competitors, prompts and raters"

    def has_permission(self, request: HttpRequest) -> bool:
        # Managers are not Django "staff": their rights come from their memberships, and each
        # ModelAdmin narrows every query to the organisations they manage.
        return user_manages_anything(request.user)

    def login(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> HttpResponse:
        if request.user.is_authenticated:
            return redirect("battles:campaigns")
        return redirect("/accounts/login/?" + urlencode({"next": request.GET.get("next", "/admin/")}))
