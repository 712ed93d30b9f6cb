"""Battles (with their turns and generations) and the vote log, read-only."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.contrib import admin
from django.http import HttpRequest

from raters.admin import ReadOnlyTenantAdmin, TenantInlineMixin

from ..models import Battle, Generation, Turn, Vote

# django-stubs makes these classes generic; Django's own are not subscriptable at run time.
if TYPE_CHECKING:
    _GenerationTabularInline = admin.TabularInline[Generation, Battle]
    _TurnTabularInline = admin.TabularInline[Turn, Battle]
else:
    _GenerationTabularInline = admin.TabularInline
    _TurnTabularInline = admin.TabularInline


class GenerationInline(TenantInlineMixin, _GenerationTabularInline):
    model = Generation
    extra = 0
    can_delete = False
    fields = (
        "turn",
        "side",
        "competitor",
        "output_tokens",
        "finish_reason",
        "latency_s",
        "ttft_s",
        "tokens_per_s",
        "error",
        "style",
    )
    readonly_fields = fields

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class TurnInline(TenantInlineMixin, _TurnTabularInline):
    """The rater's later turns of a multi-turn battle (turn 0 is the battle's prompt)."""

    model = Turn
    extra = 0
    can_delete = False
    fields = ("index", "text", "created_at")
    readonly_fields = fields

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(Battle)
class BattleAdmin(ReadOnlyTenantAdmin):
    list_display = ("id", "campaign", "source", "rater", "left", "right", "status", "created_at")
    list_filter = ("status", "source")
    inlines = (TurnInline, GenerationInline)


@admin.register(Vote)
class VoteAdmin(ReadOnlyTenantAdmin):
    list_display = (
        "id",
        "campaign",
        "source",
        "rater",
        "left_model",
        "right_model",
        "choice",
        "decision_ms",
        "created_at",
    )
    list_filter = ("choice", "category", "source")
