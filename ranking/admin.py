"""The console's page for published boards: publish a campaign's leaderboard at a random public
address, change what it shows, or take it down. Every change goes through the services (audited)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html

from arena.admin_site import admin_user
from raters.admin import TenantAdmin

from . import services
from .models import BoardPublication


@admin.register(BoardPublication)
class BoardPublicationAdmin(TenantAdmin):
    list_display = ("campaign", "organization", "public_link", "show_prompts", "published_at", "published_by")
    fields = ("campaign", "show_prompts", "public_link", "published_at", "published_by")
    readonly_fields = ("public_link", "published_at", "published_by")

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        readonly = tuple(super().get_readonly_fields(request, obj))
        # A publication belongs to its campaign for good; publishing another campaign is a new row.
        return readonly + ("campaign",) if obj is not None else readonly

    @admin.display(description="Public address")
    def public_link(self, obj: BoardPublication) -> str:
        if not obj.pk:
            return "(a random address, given when you save)"
        url = reverse("ranking:board-public", args=[obj.slug])
        return format_html('<a href="{}">{}</a>', url, url)

    def save_model(self, request: HttpRequest, obj: BoardPublication, form: Any, change: bool) -> None:
        publication, _ = services.board_publish(
            campaign=obj.campaign, actor=admin_user(request), show_prompts=obj.show_prompts
        )
        obj.pk = publication.pk
        obj.refresh_from_db()

    def delete_model(self, request: HttpRequest, obj: BoardPublication) -> None:
        services.board_unpublish(campaign=obj.campaign, actor=admin_user(request))
