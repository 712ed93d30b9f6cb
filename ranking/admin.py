"""The console's page for published boards: publish a campaign's leaderboard at a random public
address, change what it shows, or take it down. Every change goes through the services (audited)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html, format_html_join

from arena.admin_site import admin_user
from raters.admin import ReadOnlyTenantAdmin, TenantAdmin

from . import selectors, services
from .models import BoardPublication, JudgeBoard, JudgeCalibration


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


# --- Judges' boards and calibrations (read-only: computed after every judge run) -----------------------


@admin.register(JudgeCalibration)
class JudgeCalibrationAdmin(ReadOnlyTenantAdmin):
    """A judge's agreement with the human votes, per category, attached to its rubric version: under 75%
    the rubric needs work; from 90% the judge may run alone on that category."""

    list_display = (
        "judge",
        "rubric",
        "campaign",
        "version",
        "category_name",
        "battles",
        "refused",
        "agreement",
        "kappa",
        "gate",
        "created_at",
    )
    list_filter = ("gate",)

    @admin.display(description="Category")
    def category_name(self, obj: JudgeCalibration) -> str:
        return obj.category or "all"


@admin.register(JudgeBoard)
class JudgeBoardAdmin(ReadOnlyTenantAdmin):
    """A judge's leaderboard of a campaign: its verdicts only, ranked like the human boards, with its
    newest calibration against the humans."""

    list_display = ("judge", "campaign", "kind", "version", "verdicts_used", "verdicts_refused", "created_at")
    list_filter = ("kind",)
    fields = (
        "judge",
        "rubric",
        "campaign",
        "kind",
        "version",
        "run",
        "verdicts_total",
        "verdicts_used",
        "verdicts_refused",
        "verdicts_inconsistent",
        "board_table",
        "calibration_table",
        "created_at",
    )
    readonly_fields = fields

    @admin.display(description="Board")
    def board_table(self, obj: JudgeBoard) -> str:
        rows = selectors.snapshot_rows(snapshot=obj, names=selectors.competitor_names(campaign=obj.campaign))
        body = format_html_join(
            "",
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            (
                (
                    f"{row['rank_best']}-{row['rank_worst']}" if not row["hidden"] else "hidden",
                    row.get("model", ""),
                    row.get("score", "") if not row["hidden"] else "",
                    row["wins"],
                    row["ties"],
                    row["votes"],
                )
                for row in rows
            ),
        )
        return format_html(
            "<table><tr><th>Rank</th><th>Model</th><th>Score</th><th>Wins</th><th>Ties</th><th>Verdicts</th></tr>"
            "{}</table>",
            body,
        )

    @admin.display(description="Calibration against the human votes")
    def calibration_table(self, obj: JudgeBoard) -> str:
        rows = selectors.judge_calibration_latest(campaign=obj.campaign, judge=obj.judge)
        if not rows:
            return "No battle has both a human vote and a verdict of this judge yet."
        body = format_html_join(
            "",
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            ((row.category or "all", row.battles, row.agreement, row.kappa, row.get_gate_display()) for row in rows),
        )
        return format_html(
            "<table><tr><th>Category</th><th>Battles</th><th>Agreement</th><th>Kappa</th><th>Gate</th></tr>{}</table>",
            body,
        )
