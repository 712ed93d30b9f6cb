"""The console's pages for published boards (publish a campaign's leaderboard at a random public
address, change what it shows, or take it down), for judges' boards and calibrations, and for attribute
boards (create one with its entities, start runs, publish; read runs, scores and the judgement ledger).
Every change goes through the services (audited)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django import forms
from django.contrib import admin, messages
from django.db import models
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html, format_html_join

from core.errors import DomainError
from core.http import AuthenticatedHttpRequest, admin_user
from raters.admin import ReadOnlyTenantAdmin, TenantAdmin

from . import selectors, services
from .models import (
    AttributeBoard,
    AttributeEntity,
    AttributeJudgement,
    AttributeRun,
    AttributeScore,
    BoardPublication,
    JudgeBoard,
    JudgeCalibration,
    Promotion,
)

if TYPE_CHECKING:
    _AttributeBoardModelForm = forms.ModelForm[AttributeBoard]
    _PromotionModelForm = forms.ModelForm[Promotion]
else:
    _AttributeBoardModelForm = forms.ModelForm
    _PromotionModelForm = forms.ModelForm


@admin.register(BoardPublication)
class BoardPublicationAdmin(TenantAdmin):
    list_display = ("campaign", "organization", "public_link", "show_prompts", "listed", "published_at", "published_by")
    fields = ("campaign", "show_prompts", "listed", "public_link", "published_at", "published_by")
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
            campaign=obj.campaign, actor=admin_user(request), show_prompts=obj.show_prompts, listed=obj.listed
        )
        obj.pk = publication.pk
        obj.refresh_from_db()

    def delete_model(self, request: HttpRequest, obj: BoardPublication) -> None:
        services.board_unpublish(campaign=obj.campaign, actor=admin_user(request))


# --- Judges' boards and calibrations (read-only: computed after every judge run) -----------------------


# A calibration made before the interval rule (``est.GATE_RULE``) has no ``extra``: its gate was read from the
# point estimate, over every non-gold human vote.
OLD_GATE_RULE = (
    "The point estimate of the agreement, over every non-gold human vote (a calibration made before the interval "
    "rule; the judge's next run is calibrated under it)."
)


def _human_votes(row: JudgeCalibration) -> str:
    """The human votes' account of a calibration row: used of all, and those left out by rule."""
    account = (row.extra or {}).get("human_votes")
    if not account:
        return "-"
    excluded = account["excluded"]
    reasons = ", ".join(f"{n} {rule.replace('_', ' ')}" for rule, n in excluded.items() if rule != "total" and n)
    text = f"{account['used']} used of {account['human_votes']}"
    if account.get("refused"):
        text += f"; {account['refused']} refused by the judge"
    if excluded["total"]:
        text += f"; {excluded['total']} excluded as on the board ({reasons})"
    return text


def _gate_rule(row: JudgeCalibration) -> str:
    return str((row.extra or {}).get("gate_rule", "")) or OLD_GATE_RULE


def _agreement_interval(row: JudgeCalibration) -> str:
    if row.agreement is None:
        return "-"
    return f"{row.agreement:.2f} [{row.agreement_lower:.2f}, {row.agreement_upper:.2f}]"


@admin.register(JudgeCalibration)
class JudgeCalibrationAdmin(ReadOnlyTenantAdmin):
    """A judge's agreement with the human votes, per category, attached to its rubric version, against
    exactly the human votes the human board uses. A gate is passed only when the agreement's 95% interval
    supports it (``estimators.GATE_RULE``, shown on each calibration's page)."""

    list_display = (
        "judge",
        "rubric",
        "campaign",
        "version",
        "category_name",
        "battles",
        "refused",
        "agreement_interval",
        "kappa",
        "gate",
        "human_votes",
        "created_at",
    )
    list_filter = ("gate",)
    fields = (
        "judge",
        "rubric",
        "campaign",
        "version",
        "run",
        "category_name",
        "battles",
        "refused",
        "agreement_interval",
        "kappa",
        "kappa_lower",
        "kappa_upper",
        "kappa_note",
        "gate",
        "gate_rule",
        "human_votes",
        "created_at",
    )
    readonly_fields = fields

    @admin.display(description="Category")
    def category_name(self, obj: JudgeCalibration) -> str:
        return obj.category or "all"

    @admin.display(description="Agreement [95% interval]")
    def agreement_interval(self, obj: JudgeCalibration) -> str:
        return _agreement_interval(obj)

    @admin.display(description="Human votes (the board's)")
    def human_votes(self, obj: JudgeCalibration) -> str:
        return _human_votes(obj)

    @admin.display(description="Gate rule")
    def gate_rule(self, obj: JudgeCalibration) -> str:
        return _gate_rule(obj)


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
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            (
                (
                    row.category or "all",
                    row.battles,
                    _agreement_interval(row),
                    row.kappa,
                    row.get_gate_display(),
                    _human_votes(row),
                )
                for row in rows
            ),
        )
        return format_html(
            "<table><tr><th>Category</th><th>Battles</th><th>Agreement [95% interval]</th><th>Kappa</th>"
            "<th>Gate</th><th>Human votes (the board's)</th></tr>{}</table><p>{}</p>",
            body,
            _gate_rule(rows[0]),
        )


# --- Attribute boards ----------------------------------------------------------------------------------


class AttributeBoardForm(_AttributeBoardModelForm):
    new_entities = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 8}),
        help_text="Add entities, one text per line (the API takes multi-line texts and labels).",
    )

    class Meta:
        model = AttributeBoard
        fields = ("organization", "name", "attribute", "judge", "seed", "calls_per_entity", "top_k", "batch_size")


@admin.register(AttributeBoard)
class AttributeBoardAdmin(TenantAdmin):
    form = AttributeBoardForm
    list_display = ("name", "organization", "judge", "entity_count", "latest_run", "public_link", "created_at")
    search_fields = ("name", "attribute")
    readonly_fields = ("entity_count", "runs_link", "public_link")
    actions = ["start_runs", "publish_boards", "publish_and_list_boards", "unpublish_boards"]

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        readonly = tuple(super().get_readonly_fields(request, obj))
        # The judge is part of the board's identity; another judge is a replication run.
        return readonly + ("judge",) if obj is not None else readonly

    @admin.display(description="Entities")
    def entity_count(self, obj: AttributeBoard) -> int:
        return obj.entities.count() if obj.pk else 0

    @admin.display(description="Latest run")
    def latest_run(self, obj: AttributeBoard) -> str:
        run = obj.runs.order_by("-id").first()
        return f"{run.status} ({run.stop_reason or '-'})" if run else "-"

    @admin.display(description="Runs")
    def runs_link(self, obj: AttributeBoard) -> str:
        if not obj.pk:
            return "-"
        url = reverse("admin:ranking_attributerun_changelist") + f"?board__id__exact={obj.pk}"
        return format_html('<a href="{}">{} run(s)</a>', url, obj.runs.count())

    @admin.display(description="Public address")
    def public_link(self, obj: AttributeBoard) -> str:
        if not obj.public_slug:
            return "(not published)"
        url = reverse("ranking:attribute-board-public", args=[obj.public_slug])
        return format_html('<a href="{}">{}</a>', url, url)

    def save_model(self, request: HttpRequest, obj: AttributeBoard, form: Any, change: bool) -> None:
        lines = [line for line in form.cleaned_data.get("new_entities", "").splitlines() if line.strip()]
        entities = [services.EntityInput(text=line.strip()) for line in lines]
        if change:
            services.attribute_board_change(board=obj, actor=admin_user(request), changed=list(form.changed_data))
            if entities:
                services.attribute_entities_add(board=obj, entities=entities, actor=admin_user(request))
            return
        board = services.attribute_board_create(
            organization=obj.organization,
            name=obj.name,
            attribute=obj.attribute,
            judge=obj.judge,
            entities=entities,
            seed=obj.seed,
            calls_per_entity=obj.calls_per_entity,
            top_k=obj.top_k,
            batch_size=obj.batch_size,
            actor=admin_user(request),
        )
        obj.pk = board.pk
        obj.refresh_from_db()

    def delete_model(self, request: HttpRequest, obj: AttributeBoard) -> None:
        services.attribute_board_delete(board=obj, actor=admin_user(request))

    @admin.action(description="Start a run of the selected boards")
    def start_runs(self, request: AuthenticatedHttpRequest, queryset: models.QuerySet[AttributeBoard]) -> None:
        for board in queryset:
            try:
                run = services.attribute_run_start(board=board, actor=request.user)
            except DomainError as exc:
                messages.error(request, f"{board.name}: {exc.message}")
                continue
            messages.success(request, f"{board.name}: run {run.pk} queued ({run.budget_calls} calls at most).")

    @admin.action(description="Publish the selected boards")
    def publish_boards(self, request: AuthenticatedHttpRequest, queryset: models.QuerySet[AttributeBoard]) -> None:
        for board in queryset:
            slug, _ = services.attribute_board_publish(board=board, actor=request.user)
            messages.success(request, f"{board.name}: {reverse('ranking:attribute-board-public', args=[slug])}")

    @admin.action(description="Publish the selected boards and list them in the public index")
    def publish_and_list_boards(
        self, request: AuthenticatedHttpRequest, queryset: models.QuerySet[AttributeBoard]
    ) -> None:
        for board in queryset:
            slug, _ = services.attribute_board_publish(board=board, actor=request.user, listed=True)
            messages.success(request, f"{board.name}: {reverse('ranking:attribute-board-public', args=[slug])}, listed")

    @admin.action(description="Unpublish the selected boards")
    def unpublish_boards(self, request: AuthenticatedHttpRequest, queryset: models.QuerySet[AttributeBoard]) -> None:
        for board in queryset:
            if services.attribute_board_unpublish(board=board, actor=request.user):
                messages.success(request, f"{board.name} is no longer published.")


@admin.register(AttributeEntity)
class AttributeEntityAdmin(ReadOnlyTenantAdmin):
    list_display = ("board", "position", "label", "short_text")
    list_filter = ("board",)
    search_fields = ("label", "text")

    @admin.display(description="Text")
    def short_text(self, obj: AttributeEntity) -> str:
        return obj.text if len(obj.text) <= 120 else obj.text[:119] + "…"


@admin.register(AttributeRun)
class AttributeRunAdmin(ReadOnlyTenantAdmin):
    list_display = ("pk", "board", "judge", "status", "stop_reason", "calls", "accepted", "refused", "malformed",
                    "call_errors", "degraded", "created_at")  # fmt: skip
    list_filter = ("status", "board")
    readonly_fields = ("top_scores", "ledger_link")

    @admin.display(description="Judgement ledger")
    def ledger_link(self, obj: AttributeRun) -> str:
        url = reverse("admin:ranking_attributejudgement_changelist") + f"?run__id__exact={obj.pk}"
        return format_html('<a href="{}">{} judgement(s)</a>', url, obj.judgements.count())

    @admin.display(description="Top scores")
    def top_scores(self, obj: AttributeRun) -> str:
        rows = AttributeScore.objects.filter(run=obj).select_related("entity").order_by("rank")[:50]
        if not rows:
            return obj.failure_reason or "(no scores yet)"
        body = format_html_join(
            "",
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            (
                (s.rank, str(s.entity), f"{s.score:.3f}", "-" if s.std is None else f"{s.std:.3f}", s.comparisons)
                for s in rows
            ),
        )
        return format_html(
            "<table><tr><th>Rank</th><th>Entity</th><th>Score</th><th>sd</th><th>Comparisons</th></tr>{}</table>", body
        )


@admin.register(AttributeJudgement)
class AttributeJudgementAdmin(ReadOnlyTenantAdmin):
    list_display = ("pk", "run", "first", "second", "order", "status", "more", "ratio", "confidence", "used",
                    "latency_s")  # fmt: skip
    list_filter = ("status", "used")
    search_fields = ("raw_reply", "reason")


class PromotionForm(_PromotionModelForm):
    """A new promotion: the service's own checks run here, so a refused one is a form error."""

    class Meta:
        model = Promotion
        fields = ("organization", "experiment", "variant", "baseline", "stages", "min_votes")

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        experiment, variant, baseline = data.get("experiment"), data.get("variant"), data.get("baseline")
        if experiment is not None and variant is not None and baseline is not None:
            try:
                data["stages"] = services.promotion_validate(
                    experiment=experiment,
                    variant=variant,
                    baseline=baseline,
                    stages=data.get("stages") or [],
                    min_votes=data.get("min_votes") or 0,
                )
            except DomainError as exc:
                raise forms.ValidationError(exc.message) from None
        return data


@admin.register(Promotion)
class PromotionAdmin(TenantAdmin):
    """Promotions: a board's winner rolled out in stages through an A/B experiment (added here, started by the
    service), watched by beat; each decision listed, read-only. Actions: check now, stop and roll back."""

    form = PromotionForm
    list_display = ("pk", "experiment", "variant", "baseline", "share_line", "status", "campaign", "created_at")
    list_filter = ("status",)
    readonly_fields = ("campaign", "stage", "share_line", "status", "stage_started_at", "ended_at", "decision_table")
    actions = ["check_now", "stop_and_roll_back"]

    def get_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        if obj is None:
            return ("organization", "experiment", "variant", "baseline", "stages", "min_votes")
        return ("experiment", "variant", "baseline", "stages", "min_votes", *self.readonly_fields)

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        if obj is None:
            return ()
        return ("experiment", "variant", "baseline", "stages", "min_votes", *self.readonly_fields)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # the record stays; stop it instead

    @admin.display(description="Share now")
    def share_line(self, obj: Promotion) -> str:
        if not obj.pk:
            return "-"
        return f"{obj.share:.0%} (stage {obj.stage + 1} of {len(obj.stages)})"

    @admin.display(description="Decisions")
    def decision_table(self, obj: Promotion) -> str:
        if not obj.pk:
            return "-"
        body = format_html_join(
            "",
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            (
                (d.created_at.strftime("%Y-%m-%d %H:%M"), d.get_action_display(), f"{d.share:.0%}",
                 d.board_version if d.board_version is not None else "-", d.reason)
                for d in obj.decisions.order_by("id")
            ),
        )  # fmt: skip
        return format_html(
            "<table><tr><th>When</th><th>Decision</th><th>Share</th><th>Board version</th><th>Why</th></tr>{}</table>",
            body,
        )

    def save_model(self, request: HttpRequest, obj: Promotion, form: Any, change: bool) -> None:
        if change:
            return  # nothing of a promotion is edited: it moves by its decisions
        promotion = services.promotion_start(
            experiment=obj.experiment,
            variant=obj.variant,
            baseline=obj.baseline,
            stages=obj.stages,
            min_votes=obj.min_votes,
            actor=admin_user(request),
        )
        obj.pk = promotion.pk
        obj.refresh_from_db()

    @admin.action(description="Check the board now for the selected promotions")
    def check_now(self, request: AuthenticatedHttpRequest, queryset: models.QuerySet[Promotion]) -> None:
        for promotion in queryset:
            decision = services.promotion_check(promotion=promotion)
            text = f"{decision.get_action_display()}: {decision.reason}" if decision else "nothing new"
            messages.info(request, f"Promotion {promotion.pk}: {text}.")

    @admin.action(description="Stop the selected promotions (the experiment's weights decide again)")
    def stop_and_roll_back(self, request: AuthenticatedHttpRequest, queryset: models.QuerySet[Promotion]) -> None:
        for promotion in queryset:
            try:
                services.promotion_stop(promotion=promotion, actor=request.user)
            except DomainError as exc:
                messages.error(request, f"Promotion {promotion.pk}: {exc.message}")
                continue
            messages.success(request, f"Promotion {promotion.pk} stopped.")
