"""The manager's console: the Django admin, open to owners and managers of an organisation only."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect

from raters.selectors import user_manages_anything


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
