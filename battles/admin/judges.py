"""Judges: rubric versions, judges, runs and the judge verdict log."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.http import HttpRequest

from core.errors import DomainError
from core.http import admin_user
from raters.admin import ReadOnlyTenantAdmin, TenantAdmin

from .. import services
from ..models import Judge, JudgeRun, JudgeVerdict, Rubric


@admin.register(Rubric)
class RubricAdmin(TenantAdmin):
    """A rubric's versions are immutable: saving changed wording writes version n + 1, and every active
    judge on the old version is succeeded by a new judge on the new one (rerun on the campaigns it
    judged, so its calibration is measured again). Calibrations: the console's judge calibration page."""

    list_display = ("name", "version", "kind", "short_hash", "created_at")
    list_filter = ("kind",)
    search_fields = ("name", "question")
    fields = ("organization", "name", "kind", "question", "instructions", "version", "content_hash", "created_at")
    readonly_fields = ("version", "content_hash", "created_at")

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        readonly = tuple(super().get_readonly_fields(request, obj))
        return readonly + ("name", "kind") if obj is not None else readonly

    @admin.display(description="Content hash")
    def short_hash(self, obj: Rubric) -> str:
        return obj.content_hash[:12]

    def save_model(self, request: HttpRequest, obj: Rubric, form: Any, change: bool) -> None:
        if change:
            stored = Rubric.objects.get(pk=obj.pk)
            revised, _ = services.rubric_revise(
                rubric=stored, question=obj.question, instructions=obj.instructions, actor=admin_user(request)
            )
            messages.info(request, f"Saved as {revised}: a new version (and new judges); {stored} is kept.")
            obj.pk = revised.pk
            return
        created = services.rubric_create(
            organization=obj.organization,
            name=obj.name,
            question=obj.question,
            instructions=obj.instructions,
            kind=obj.kind,
            actor=admin_user(request),
        )
        obj.pk = created.pk

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # verdicts and calibrations name the version they were given under


@admin.register(Judge)
class JudgeAdmin(TenantAdmin):
    list_display = ("name", "endpoint", "rubric", "family", "active", "created_at")
    list_filter = ("active",)
    search_fields = ("name",)
    fields = ("organization", "name", "endpoint", "rubric", "family", "excluded_families", "max_tokens", "active")

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        readonly = tuple(super().get_readonly_fields(request, obj))
        # A judge's model and rubric are its identity: another one is another judge.
        return readonly + ("endpoint", "rubric", "family", "excluded_families") if obj is not None else readonly

    def save_model(self, request: HttpRequest, obj: Judge, form: Any, change: bool) -> None:
        if change:
            services.judge_save(judge=obj, actor=admin_user(request), changed=list(form.changed_data))
            return
        created = services.judge_create(
            organization=obj.organization,
            name=obj.name,
            endpoint=obj.endpoint,
            rubric=obj.rubric,
            family=obj.family,
            excluded_families=list(obj.excluded_families or []),
            max_tokens=obj.max_tokens,
            actor=admin_user(request),
        )
        obj.pk = created.pk

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(JudgeRun)
class JudgeRunAdmin(TenantAdmin):
    """Start a run (a judge over a campaign's battles, or a golden set); its counters and rates follow."""

    list_display = (
        "id",
        "judge",
        "campaign",
        "kind",
        "status",
        "reason",
        "pairs_judged",
        "order_disagreement",
        "position_bias",
        "refusal_rate",
        "call_wall_seconds",
        "created_at",
    )
    list_filter = ("status", "kind")
    fields = ("judge", "campaign", "kind", "seed", "competitor_ids")
    run_fields = (
        "status",
        "error",
        "rubric",
        "pairs_total",
        "pairs_judged",
        "pairs_refused",
        "pairs_inconsistent",
        "pairs_excluded_family",
        "calls",
        "calls_refused",
        "calls_failed",
        "first_position",
        "second_position",
        "input_tokens",
        "output_tokens",
        "call_wall_seconds",
        "answer_wall_seconds",
        "stats",
        "created_at",
        "started_at",
        "finished_at",
    )

    def get_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return self.fields + self.run_fields if obj is not None else self.fields

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return self.fields + self.run_fields if obj is not None else ()

    @admin.display(description="Why it failed")
    def reason(self, obj: JudgeRun) -> str:
        return obj.error or "-"

    @admin.display(description="Order disagreement")
    def order_disagreement(self, obj: JudgeRun) -> Any:
        return (obj.stats or {}).get("order_disagreement_rate")

    @admin.display(description="Position bias")
    def position_bias(self, obj: JudgeRun) -> Any:
        return (obj.stats or {}).get("position_bias")

    @admin.display(description="Refusal rate")
    def refusal_rate(self, obj: JudgeRun) -> Any:
        return (obj.stats or {}).get("refusal_rate")

    def save_model(self, request: HttpRequest, obj: JudgeRun, form: Any, change: bool) -> None:
        if change:
            return  # a run is read-only once started
        try:
            run = services.judge_run_create(
                judge=obj.judge,
                campaign=obj.campaign,
                actor=admin_user(request),
                kind=obj.kind,
                seed=obj.seed,
                competitor_ids=list(obj.competitor_ids or []),
            )
        except DomainError as exc:
            messages.error(request, str(exc))
            raise
        obj.pk = run.pk

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return obj is None and super().has_change_permission(request, obj)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(JudgeVerdict)
class JudgeVerdictAdmin(ReadOnlyTenantAdmin):
    """The judge votes' log (append-only), apart from the human one: both raw replies of every pair."""

    list_display = (
        "id",
        "judge",
        "campaign",
        "battle",
        "left",
        "right",
        "choice",
        "consistent",
        "refused",
        "created_at",
    )
    list_filter = ("refused", "consistent", "choice")
