"""Campaign configuration for managers; battles and the vote log are read-only here."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django import forms
from django.conf import settings
from django.contrib import admin, messages
from django.contrib.admin.utils import unquote
from django.db import models, transaction
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html, format_html_join

from arena.admin_site import admin_user
from arena.http import AuthenticatedHttpRequest
from raters.admin import ReadOnlyTenantAdmin, TenantAdmin, TenantInlineMixin
from raters.errors import DomainError
from serving.selectors import endpoint_health_line, endpoints_not_ready

from . import prompt_import, selectors, services
from .gold import Corruption, attention_answer_corrupt, wilson_interval
from .models import (
    Battle,
    Campaign,
    Competitor,
    Experiment,
    Generation,
    GoldItem,
    Judge,
    JudgeRun,
    JudgeVerdict,
    Participant,
    Prompt,
    Qualification,
    Rubric,
    Study,
    Turn,
    Variant,
    Vote,
)
from .prompt_import import PromptRow
from .prompting import prompt_validate

# django-stubs makes these classes generic; Django's own are not subscriptable at run time.
if TYPE_CHECKING:
    _CompetitorModelForm = forms.ModelForm[Competitor]
    _CampaignModelForm = forms.ModelForm[Campaign]
    _PromptModelForm = forms.ModelForm[Prompt]
    _GoldItemModelForm = forms.ModelForm[GoldItem]
    _CompetitorTabularInline = admin.TabularInline[Competitor, Campaign]
    _GenerationTabularInline = admin.TabularInline[Generation, Battle]
    _TurnTabularInline = admin.TabularInline[Turn, Battle]
    _VariantTabularInline = admin.TabularInline[Variant, Experiment]
else:
    _CompetitorModelForm = _CampaignModelForm = _PromptModelForm = _GoldItemModelForm = forms.ModelForm
    _CompetitorTabularInline = _GenerationTabularInline = _TurnTabularInline = admin.TabularInline
    _VariantTabularInline = admin.TabularInline


class CompetitorForm(_CompetitorModelForm):
    """A competitor that has fought is history: its votes were cast for that endpoint at that version,
    so neither can change any more; a new version is a new competitor.

    The version label may be left empty: it then defaults to the endpoint's pinned model version, or
    to today's date (``services.competitor_version_default``)."""

    frozen_fields = ("endpoint", "external_model", "version_label")

    class Meta:
        model = Competitor
        fields = ("endpoint", "external_model", "version_label", "family", "active")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if "version_label" in self.fields:
            self.fields["version_label"].required = False
            self.fields[
                "version_label"
            ].help_text = "Empty: the endpoint's model version, or today's date if it pins none."
        if self.instance.pk is not None and services.competitor_has_battles(self.instance):
            for name in self.frozen_fields:
                if name in self.fields:
                    # A disabled field ignores what is posted and keeps the saved value.
                    self.fields[name].disabled = True
                    self.fields[name].help_text = "Fixed once the competitor has battles; add a new competitor."

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        endpoint = cleaned.get("endpoint")
        if endpoint is not None and not cleaned.get("version_label"):
            cleaned["version_label"] = services.competitor_version_default(endpoint=endpoint)
            # The model's validation (unique per campaign and endpoint) runs after clean, on the instance.
            self.instance.version_label = cleaned["version_label"]
        return cleaned


class CompetitorInline(TenantInlineMixin, _CompetitorTabularInline):
    model = Competitor
    form = CompetitorForm
    extra = 0
    fields = (
        "endpoint",
        "external_model",
        "version_label",
        "family",
        "active",
        "retired_at",
        "availability",
        "unavailable",
    )
    readonly_fields = ("retired_at", "availability", "unavailable")

    def get_queryset(self, request: HttpRequest) -> models.QuerySet[Competitor]:
        # Not the gold pseudo-competitors: created by the platform, never edited (Gold items).
        return super().get_queryset(request).filter(gold=False)

    def get_formset(self, request: HttpRequest, obj: Any = None, **kwargs: Any) -> Any:
        formset = super().get_formset(request, obj, **kwargs)
        protected = formset.form  # the admin's DeleteProtectedModelForm around CompetitorForm

        class RefusingDeleteForm(protected):  # type: ignore[misc,valid-type]
            def hand_clean_DELETE(self) -> None:
                # The delete box of a competitor with battles: refused in the service's words (retire it),
                # not with the admin's list of every battle as a "protected related object".
                if self.cleaned_data.get("DELETE") and self.instance.pk is not None:
                    refusal = services.competitor_delete_refusal(self.instance)
                    if refusal is not None:
                        raise forms.ValidationError(refusal, code="deleting_protected")
                super().hand_clean_DELETE()

        formset.form = RefusingDeleteForm
        return formset

    @admin.display(description="Endpoint health")
    def availability(self, obj: Competitor) -> str:
        if obj.pk is None:
            return "-"
        if obj.endpoint is None:
            return "external model: shadow battles only"
        return endpoint_health_line(obj.endpoint)

    @admin.display(description="Skipped while down (this campaign)")
    def unavailable(self, obj: Competitor) -> str:
        if obj.pk is None:
            return "-"
        exposure = selectors.competitor_exposure(campaign=obj.campaign).get(obj.pk)
        if exposure is None or exposure.outages == 0:
            return "never"
        outages = "outage" if exposure.outages == 1 else "outages"
        return f"{exposure.unavailable_min} min in {exposure.outages} {outages}"


class CampaignForm(_CampaignModelForm):
    new_prompts = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 6}),
        help_text="Add prompts to the pool, one per line. Category and language are assigned by the "
        "classifier unless a category is chosen below.",
    )
    new_prompts_category = forms.ChoiceField(
        required=False,
        choices=[("", "(classify automatically)")] + Prompt._meta.get_field("category").flatchoices,
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        anchor = self.fields.get("ranking_anchor")
        if anchor is not None and hasattr(anchor, "queryset"):
            # The gold pseudo-competitors are never ranked, so never an anchor.
            anchor.queryset = anchor.queryset.filter(gold=False)

    class Meta:
        model = Campaign
        fields = (
            "organization",
            "name",
            "slug",
            "description",
            "rater_pools",
            "allow_rater_prompts",
            "max_turns",
            "temperature",
            "top_p",
            "max_tokens",
            "system_prompt",
            "sampling",
            "session_cap",
            "rater_vote_cap",
            "prompt_hash_cap",
            "min_decision_ms",
            "buffer_size",
            "buffer_max_age_s",
            "gold_rate",
            "attention_warn_after",
            "attention_block_after",
            "gold_feedback",
            "identity_policy",
            "gold_min_accuracy",
            "outlier_alpha",
            "reviewers_per_item",
            "qualification_battles",
            "qualification_pass",
            "exclude_identity_leaks",
            "both_bad_as_tie",
            "ranking_min_votes",
            "ranking_bootstrap_rounds",
            "ranking_interval",
            "ranking_style_interval",
            "ranking_anchor",
            "ranking_ties",
            "cadence_threshold",
        )


class GoldImportForm(forms.Form):
    file = forms.FileField(help_text="CSV (UTF-8) with a header row; see the columns above.")


class PromptImportForm(forms.Form):
    file = forms.FileField(
        help_text="JSON lines (.jsonl, one object per line) or CSV (.csv, with a header row): text (required), "
        "category, language, external_id. Nothing is imported unless every row is valid."
    )
    on_duplicate = forms.ChoiceField(
        choices=[
            ("error", "An external id the campaign already has is an error"),
            ("skip", "Skip rows whose external id the campaign already has"),
        ],
        initial="error",
        label="Known external ids",
    )


@admin.register(Campaign)
class CampaignAdmin(TenantAdmin):
    form = CampaignForm
    list_display = (
        "name",
        "organization",
        "status",
        "competitor_count",
        "prompt_count",
        "vote_count",
        "leaderboard_link",
    )
    list_filter = ("status",)
    prepopulated_fields = {"slug": ("name",)}
    filter_horizontal = ("rater_pools",)
    inlines = (CompetitorInline,)
    actions = ("open_campaigns", "close_campaigns", "recompute_leaderboards")
    readonly_fields = ("status", "opened_at", "closed_at", "leaderboard_link", "buffer_state", "gold_report")
    fieldsets = (
        (
            None,
            {
                "fields": (
                    "organization",
                    "name",
                    "slug",
                    "description",
                    "status",
                    "opened_at",
                    "closed_at",
                    "leaderboard_link",
                )
            },
        ),
        ("Raters", {"fields": ("rater_pools", "allow_rater_prompts", "max_turns", "identity_policy")}),
        (
            "Instructions and consent (every rater, before the first battle)",
            {"fields": ("instructions", "consent_text")},
        ),
        ("Generation (identical for both sides)", {"fields": ("temperature", "top_p", "max_tokens", "system_prompt")}),
        (
            "Sampling, caps and filters",
            {"fields": ("sampling", "session_cap", "rater_vote_cap", "prompt_hash_cap", "min_decision_ms")},
        ),
        (
            "Battles generated ahead (pool prompts)",
            {"fields": ("buffer_size", "buffer_max_age_s", "buffer_state")},
        ),
        ("Prompt pool", {"fields": ("new_prompts", "new_prompts_category")}),
        (
            "Gold battles and attention checks",
            {
                "fields": (
                    "gold_rate",
                    "attention_warn_after",
                    "attention_block_after",
                    "gold_feedback",
                    "gold_report",
                )
            },
        ),
        (
            "Shared battles, qualification and rater flags",
            {
                "fields": (
                    "reviewers_per_item",
                    "qualification_battles",
                    "qualification_pass",
                    "gold_min_accuracy",
                    "outlier_alpha",
                )
            },
        ),
        (
            "Leaderboards",
            {
                "fields": (
                    "exclude_identity_leaks",
                    "both_bad_as_tie",
                    "ranking_min_votes",
                    "ranking_bootstrap_rounds",
                    "ranking_interval",
                    "ranking_style_interval",
                    "ranking_anchor",
                    "ranking_ties",
                    "cadence_threshold",
                )
            },
        ),
    )

    def get_urls(self) -> list[URLPattern]:
        own = [
            path(
                "<path:object_id>/import-prompts/",
                self.admin_site.admin_view(self.import_prompts_view),
                name="battles_campaign_import_prompts",
            ),
            path(
                "<path:object_id>/import-gold/",
                self.admin_site.admin_view(self.import_gold_view),
                name="battles_campaign_import_gold",
            ),
        ]
        return own + super().get_urls()

    def import_gold_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """A CSV of gold items and attention checks into the campaign, all or nothing, every bad row named."""
        campaign = self.get_object(request, unquote(object_id))  # None for another tenant's campaign
        if campaign is None or not self.has_change_permission(request, campaign):
            raise Http404("No such campaign.")
        errors: dict[str, list[str]] = {}
        summary = ""
        form = GoldImportForm(request.POST or None, request.FILES or None)
        if request.method == "POST" and form.is_valid():
            upload = form.cleaned_data["file"]
            if upload.size > settings.ARENA_API_MAX_BODY_BYTES:
                form.add_error("file", f"The file is larger than {settings.ARENA_API_MAX_BODY_BYTES} bytes; split it.")
            else:
                try:
                    text = upload.read().decode("utf-8-sig")
                    made = services.gold_items_import(campaign=campaign, text=text, actor=admin_user(request))
                except UnicodeDecodeError:
                    form.add_error("file", "The file is not UTF-8 text.")
                except DomainError as exc:
                    summary, errors = exc.message, exc.field_errors
                else:
                    self.message_user(
                        request, f"{len(made)} gold items imported into {campaign.name}.", messages.SUCCESS
                    )
                    return HttpResponseRedirect(reverse("admin:battles_golditem_changelist"))
        context = {
            **self.admin_site.each_context(request),
            "title": f"Import gold items into {campaign.name}",
            "opts": self.opts,
            "original": campaign,
            "form": form,
            "summary": summary,
            "row_errors": sorted(errors.items()),
            "columns": services.GOLD_IMPORT_COLUMNS,
            "max_rows": services.GOLD_IMPORT_MAX_ROWS,
        }
        return TemplateResponse(request, "admin/battles/campaign/import_gold.html", context)

    def import_prompts_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """A file of prompts into the campaign's pool, all or nothing, with every bad row named (the
        parser and the service of the API's import)."""
        campaign = self.get_object(request, unquote(object_id))  # None for another tenant's campaign
        if campaign is None or not self.has_change_permission(request, campaign):
            raise Http404("No such campaign.")
        errors: dict[str, list[str]] = {}
        summary = ""
        form = PromptImportForm(request.POST or None, request.FILES or None)
        if request.method == "POST" and form.is_valid():
            upload = form.cleaned_data["file"]
            kind = prompt_import.format_for(upload.content_type or "", upload.name or "")
            if kind is None:
                form.add_error("file", "Upload a JSON lines file (.jsonl, .ndjson) or a CSV file (.csv).")
            elif upload.size > settings.ARENA_API_MAX_BODY_BYTES:
                form.add_error("file", f"The file is larger than {settings.ARENA_API_MAX_BODY_BYTES} bytes; split it.")
            else:
                parsed = prompt_import.parse(upload.read(), kind=kind, max_rows=settings.ARENA_PROMPT_IMPORT_MAX_ROWS)
                if not parsed.ok:
                    summary, errors = parsed.summary(), parsed.errors
                else:
                    try:
                        result = services.prompts_import(
                            campaign=campaign,
                            rows=parsed.rows,
                            actor=admin_user(request),
                            on_duplicate=form.cleaned_data["on_duplicate"],
                        )
                    except DomainError as exc:
                        summary, errors = exc.message, exc.field_errors
                    else:
                        skipped = len(result.skipped_external_ids)
                        note = f", {skipped} skipped (external id already there)" if skipped else ""
                        repeats = (
                            f"; {result.repeated_texts} repeat an earlier prompt's text"
                            if result.repeated_texts
                            else ""
                        )
                        self.message_user(
                            request,
                            f"{len(result.prompt_ids)} prompts imported into {campaign.name}{note}{repeats}.",
                            messages.SUCCESS,
                        )
                        return HttpResponseRedirect(reverse("admin:battles_campaign_change", args=[campaign.pk]))
        context = {
            **self.admin_site.each_context(request),
            "title": f"Import prompts into {campaign.name}",
            "opts": self.opts,
            "original": campaign,
            "form": form,
            "summary": summary,
            "row_errors": sorted(errors.items(), key=lambda item: _error_order(item[0])),
            "max_rows": settings.ARENA_PROMPT_IMPORT_MAX_ROWS,
            "categories": prompt_import.CATEGORIES,
        }
        return TemplateResponse(
            request, "admin/battles/campaign/import_prompts.html", context, status=400 if summary else 200
        )

    @admin.display(description="Gold accuracy per rater")
    def gold_report(self, obj: Campaign) -> str:
        if obj.pk is None:
            return "—"
        counts = selectors.gold_counts(campaign=obj)
        if not counts:
            return "No gold votes yet."
        people = selectors.raters_named(organization_id=obj.organization_id, user_ids=list(counts))
        flagged = selectors.raters_flagged(organization_id=obj.organization_id, user_ids=list(counts))
        rows = []
        for rater_id, c in counts.items():
            interval = wilson_interval(c.gold_correct, c.gold_answered)
            accuracy = (
                f"{c.gold_correct / c.gold_answered:.0%} ({interval[0]:.0%}–{interval[1]:.0%})" if interval else "—"
            )
            rows.append(
                format_html(
                    "<tr><td>{}</td><td>{}/{}</td><td>{}</td><td>{}/{}</td><td>{}</td></tr>",
                    people.get(rater_id, f"rater {rater_id}"),
                    c.gold_correct,
                    c.gold_answered,
                    accuracy,
                    c.attention_failed,
                    c.attention_answered,
                    "flagged" if rater_id in flagged else "",
                )
            )
        head = format_html(
            "<tr><th>{}</th><th>{}</th><th>{}</th><th>{}</th><th>{}</th></tr>",
            "Rater",
            "Correct",
            "Accuracy (95% Wilson)",
            "Attention checks failed",
            "Flag",
        )
        return format_html(
            '<table class="gold-report">{}{}</table>', head, format_html_join("", "{}", ((r,) for r in rows))
        )

    @admin.display(description="Buffer now")
    def buffer_state(self, obj: Campaign) -> str:
        if obj.pk is None:
            return "—"
        counts = selectors.buffer_counts(campaign=obj)
        return f"{counts['ready']} ready, {counts['generating']} being generated (of {obj.buffer_size})"

    def get_queryset(self, request: HttpRequest) -> models.QuerySet[Any]:
        queryset: models.QuerySet[Any] = (
            super()
            .get_queryset(request)
            .annotate(
                n_competitors=models.Count("competitors", distinct=True),
                n_prompts=models.Count("prompts", distinct=True),
                n_votes=models.Count("votes", distinct=True),
            )
        )
        return queryset

    @admin.display(description="Competitors", ordering="n_competitors")
    def competitor_count(self, obj: Any) -> int:
        count: int = obj.n_competitors  # annotated by get_queryset
        return count

    @admin.display(description="Prompts", ordering="n_prompts")
    def prompt_count(self, obj: Any) -> int:
        count: int = obj.n_prompts  # annotated by get_queryset
        return count

    @admin.display(description="Votes", ordering="n_votes")
    def vote_count(self, obj: Any) -> int:
        count: int = obj.n_votes  # annotated by get_queryset
        return count

    @admin.display(description="Leaderboard")
    def leaderboard_link(self, obj: Campaign) -> str:
        if obj.pk is None:
            return "-"
        return format_html('<a href="{}">Leaderboard</a>', reverse("ranking:leaderboard", args=[obj.pk]))

    def save_model(self, request: HttpRequest, obj: Campaign, form: Any, change: bool) -> None:
        services.campaign_save(
            campaign=obj,
            actor=admin_user(request),
            changed=list(form.changed_data),
            rater_pools=form.cleaned_data.get("rater_pools"),
        )

    def delete_model(self, request: HttpRequest, obj: Campaign) -> None:
        services.campaign_delete(campaign=obj, actor=admin_user(request))

    def save_related(self, request: HttpRequest, form: Any, formsets: Any, change: bool) -> None:
        # Not ``form.save_m2m()``: the pools were set (and checked) by ``campaign_save``.
        for formset in formsets:
            formset.save(commit=False)
            changed = {obj.pk: fields for obj, fields in formset.changed_objects}
            for competitor in [*formset.new_objects, *(obj for obj, _ in formset.changed_objects)]:
                competitor.campaign = form.instance
                services.competitor_save(
                    competitor=competitor, actor=request.user, changed=changed.get(competitor.pk, [])
                )
            for deleted in formset.deleted_objects:
                services.competitor_delete(competitor=deleted, actor=admin_user(request))
        category = form.cleaned_data.get("new_prompts_category", "")
        lines = form.cleaned_data.get("new_prompts", "").splitlines()
        rows = [
            PromptRow(row=number, text=line, category=category)
            for number, line in enumerate(lines, start=1)
            if line.strip()
        ]
        if rows:
            try:
                services.prompts_import(campaign=form.instance, rows=rows, actor=admin_user(request))
            except DomainError as exc:
                messages.error(request, f"Prompts not imported: {exc.message}")
            else:
                messages.success(request, f"{len(rows)} prompts added to the pool.")

    @admin.action(description="Open the selected campaigns for voting")
    def open_campaigns(self, request: AuthenticatedHttpRequest, queryset: models.QuerySet[Campaign]) -> None:
        for campaign in queryset:
            try:
                services.campaign_open(campaign=campaign, actor=request.user)
            except DomainError as exc:
                messages.error(request, f"{campaign.name}: {exc.message}")
                continue
            messages.success(request, f"{campaign.name} is open.")
            # Open either way (a server may come up later), but battles would void until it does.
            competitors = campaign.competitors.filter(active=True, endpoint__isnull=False).select_related("endpoint")
            endpoints = [c.endpoint for c in competitors if c.endpoint is not None]
            for problem in endpoints_not_ready(endpoints):
                messages.warning(request, f"{campaign.name}: Triton does not report a model ready: {problem}")

    @admin.action(description="Recompute the leaderboards of the selected campaigns now")
    def recompute_leaderboards(self, request: AuthenticatedHttpRequest, queryset: models.QuerySet[Campaign]) -> None:
        for campaign in queryset:
            services.leaderboards_refresh_request(campaign=campaign)
        messages.success(request, f"Recompute queued for {queryset.count()} campaign(s).")

    @admin.action(description="Close the selected campaigns")
    def close_campaigns(self, request: AuthenticatedHttpRequest, queryset: models.QuerySet[Campaign]) -> None:
        for campaign in queryset:
            services.campaign_close(campaign=campaign, actor=request.user)
            messages.success(request, f"{campaign.name} is closed.")


def _error_order(key: str) -> tuple[int, int, str]:
    """File and header problems first, then rows by number."""
    if not key.startswith("row "):
        return (0, 0, key)
    number, _, name = key[4:].partition(".")
    return (1, int(number) if number.isdigit() else 0, name)


class PromptForm(_PromptModelForm):
    class Meta:
        model = Prompt
        fields = ("campaign", "text", "category", "language", "active")

    def clean_text(self) -> str:
        try:
            return prompt_validate(self.cleaned_data.get("text", ""))
        except ValueError as exc:
            raise forms.ValidationError(str(exc)) from exc


@admin.register(Prompt)
class PromptAdmin(TenantAdmin):
    form = PromptForm
    list_display = ("short_text", "campaign", "category", "language", "source", "external_id", "active")
    list_filter = ("category", "language", "source", "active")
    search_fields = ("text", "external_id")
    readonly_fields = ("text_hash", "source", "author", "external_id")
    exclude = ("organization",)

    @admin.display(description="Prompt")
    def short_text(self, obj: Prompt) -> str:
        return obj.text[:80]

    def save_model(self, request: HttpRequest, obj: Prompt, form: Any, change: bool) -> None:
        services.prompt_save(prompt=obj, actor=admin_user(request), changed=list(form.changed_data))


class GoldItemForm(_GoldItemModelForm):
    """A gold item, or an attention check: for one, the manager may leave the broken answer empty and
    have the platform break the other one (``attention_answer_corrupt``)."""

    corrupt = forms.ChoiceField(
        required=False,
        choices=[("", "(no: I wrote both answers)"), *((c.value, c.value) for c in Corruption)],
        help_text="Attention check: fill the answer that is not the expected one by breaking the expected "
        "one (shuffled words, truncated, or lorem ipsum).",
    )

    class Meta:
        model = GoldItem
        fields = (
            "campaign",
            "prompt_text",
            "category",
            "language",
            "kind",
            "expected",
            "answer_1",
            "answer_2",
            "active",
            "note",
        )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for name in ("answer_1", "answer_2"):
            self.fields[name].required = False

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        method = data.get("corrupt")
        expected = data.get("expected")
        if method:
            if data.get("kind") != GoldItem.Kind.ATTENTION or expected not in ("answer_1", "answer_2"):
                raise forms.ValidationError("Only an attention check with answer 1 or 2 expected can be generated.")
            good, broken = ("answer_1", "answer_2") if expected == "answer_1" else ("answer_2", "answer_1")
            if not (data.get(good) or "").strip():
                self.add_error(good, "Write the good answer: the broken one is made from it.")
            else:
                data[broken] = attention_answer_corrupt(data[good], method=method, seed=len(data[good]))
                self.instance.__dict__[broken] = data[broken]
        for name in ("answer_1", "answer_2"):
            if not (data.get(name) or "").strip():
                self.add_error(name, "Write this answer (or generate it for an attention check).")
        return data


@admin.register(GoldItem)
class GoldItemAdmin(TenantAdmin):
    """Gold items and attention checks; their answers are labelled answer 1 / answer 2 only."""

    form = GoldItemForm
    list_display = ("short_prompt", "campaign", "kind", "expected", "active", "served", "created_at")
    list_filter = ("kind", "expected", "active")
    search_fields = ("prompt_text", "note")
    exclude = ("organization",)

    @admin.display(description="Prompt")
    def short_prompt(self, obj: GoldItem) -> str:
        return obj.prompt_text[:80]

    @admin.display(description="Battles served")
    def served(self, obj: GoldItem) -> int:
        return obj.battles.count()

    def save_model(self, request: HttpRequest, obj: GoldItem, form: Any, change: bool) -> None:
        services.gold_item_save(item=obj, actor=admin_user(request), changed=list(form.changed_data))

    def delete_model(self, request: HttpRequest, obj: GoldItem) -> None:
        services.gold_item_delete(item=obj, actor=admin_user(request))


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


class VariantInline(TenantInlineMixin, _VariantTabularInline):
    """An experiment's variants, in the assignment's order (creation). Changing a weight moves some units
    to another variant from their next assignment on."""

    model = Variant
    extra = 0
    fields = ("name", "weight", "competitor", "exposure_line")
    readonly_fields = ("exposure_line",)

    @admin.display(description="Units / exposures")
    def exposure_line(self, obj: Variant) -> str:
        if obj.pk is None:
            return "-"
        for row in selectors.experiment_exposures(obj.experiment):
            if row.variant.pk == obj.pk:
                return f"{row.units} / {row.exposures}"
        return "0 / 0"


@admin.register(Experiment)
class ExperimentAdmin(TenantAdmin):
    """Sticky A/B assignment (``POST /api/v1/experiments/<key>/assign``); saved through the generic,
    audited tenant-row service (``experiment.created`` / ``.changed``), variants through theirs."""

    list_display = ("key", "name", "organization", "campaign", "active", "created_at")
    list_filter = ("active",)
    search_fields = ("key", "name")
    fields = ("organization", "key", "name", "description", "campaign", "active")
    inlines = (VariantInline,)

    def save_related(self, request: HttpRequest, form: Any, formsets: Any, change: bool) -> None:
        form.save_m2m()
        for formset in formsets:
            formset.save(commit=False)
            changed = {obj.pk: fields for obj, fields in formset.changed_objects}
            for variant in [*formset.new_objects, *(obj for obj, _ in formset.changed_objects)]:
                variant.experiment = form.instance
                services.variant_save(variant=variant, actor=admin_user(request), changed=changed.get(variant.pk, []))
            for deleted in formset.deleted_objects:
                services.variant_delete(variant=deleted, actor=admin_user(request))


@admin.register(Competitor)
class CompetitorAdmin(TenantAdmin):
    """Every competitor of the managers' campaigns, to set its family and to retire it. Competitors are
    added in their campaign's page; one that has battles is never deleted (its votes name it): the
    *Retire* action stops its battles for good and keeps its history and its row on the board."""

    form = CompetitorForm
    list_display = ("__str__", "campaign", "family", "active", "retired_at")
    list_filter = ("active", "campaign")
    search_fields = ("version_label", "external_model", "endpoint__name", "family")
    fields = ("campaign", "endpoint", "external_model", "version_label", "family", "active", "retired_at")
    readonly_fields = ("campaign", "retired_at")
    actions = ("retire_competitors",)

    def get_queryset(self, request: HttpRequest) -> models.QuerySet[Competitor]:
        return super().get_queryset(request).filter(gold=False)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # in the campaign's page, where the endpoint choices are the campaign's organisation's

    def get_actions(self, request: HttpRequest) -> Any:
        actions = super().get_actions(request)
        # Bulk delete would meet battles' protection with Django's own page; one at a time says why.
        actions.pop("delete_selected", None)
        return actions

    def save_model(self, request: HttpRequest, obj: Competitor, form: Any, change: bool) -> None:
        services.competitor_save(competitor=obj, actor=admin_user(request), changed=list(form.changed_data))

    def delete_model(self, request: HttpRequest, obj: Competitor) -> None:
        services.competitor_delete(competitor=obj, actor=admin_user(request))

    def delete_view(
        self, request: HttpRequest, object_id: str, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        # Before Django's confirmation page, which would list the battles as protected objects.
        competitor = self.get_object(request, unquote(object_id))
        refusal = services.competitor_delete_refusal(competitor) if competitor is not None else None
        if competitor is not None and refusal is not None:
            self.message_user(request, refusal, messages.ERROR)
            return HttpResponseRedirect(reverse("admin:battles_competitor_change", args=[competitor.pk]))
        return super().delete_view(request, object_id, extra_context)

    @admin.action(description="Retire the selected competitors (no new battles; votes and board row kept)")
    def retire_competitors(self, request: HttpRequest, queryset: models.QuerySet[Competitor]) -> None:
        try:
            with transaction.atomic():  # all or none
                names = [str(services.competitor_retire(competitor=c, actor=admin_user(request))) for c in queryset]
        except DomainError as exc:
            self.message_user(request, exc.message, messages.ERROR)
            return
        self.message_user(request, f"Retired: {', '.join(names)}.", messages.SUCCESS)


@admin.register(Study)
class StudyAdmin(TenantAdmin):
    """A campaign's crowd study: the vendor link to hand out, its pool, target and completion code.
    Saved through the generic audited service (``study.created`` / ``study.changed``)."""

    list_display = ("name", "campaign", "vendor", "pool", "target_votes", "active", "participant_count")
    list_filter = ("vendor", "active")
    readonly_fields = ("entry_link", "completion_preview")
    fields = (
        "organization",
        "campaign",
        "name",
        "vendor",
        "pool",
        "target_votes",
        "time_limit_min",
        "completion_code",
        "completion_url",
        "completion_preview",
        "instructions",
        "consent_text",
        "active",
        "entry_link",
    )

    @admin.display(description="Link for the vendor (after this site's address)")
    def entry_link(self, obj: Study) -> str:
        if obj.pk is None:
            return "Shown once the study is saved."
        query = (
            "?PROLIFIC_PID={{%PROLIFIC_PID%}}&STUDY_ID={{%STUDY_ID%}}&SESSION_ID={{%SESSION_ID%}}"
            if obj.vendor == Study.Vendor.PROLIFIC
            else "?worker_id=<worker id>&assignment_id=<assignment id>"
        )
        return f"{obj.path}{query}"

    @admin.display(description="Participants are sent to")
    def completion_preview(self, obj: Study) -> str:
        return obj.completion_link() if obj.pk is not None else "-"

    @admin.display(description="Participants")
    def participant_count(self, obj: Study) -> int:
        return obj.participants.count()


@admin.register(Participant)
class ParticipantAdmin(ReadOnlyTenantAdmin):
    """Who entered through a study link (the vendor's ids are for the organisation's managers, who
    approve and pay them; the vote log knows only the account)."""

    list_display = ("vendor_participant_id", "study", "status", "entered_at", "consented_at", "completed_at")
    list_filter = ("status", "study")
    search_fields = ("vendor_participant_id",)


# --- Judges: rubric versions, judges, runs and the judge verdict log -----------------------------------


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
        "pairs_judged",
        "order_disagreement",
        "position_bias",
        "refusal_rate",
        "gpu_seconds",
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
        "gpu_seconds",
        "generation_seconds",
        "stats",
        "created_at",
        "started_at",
        "finished_at",
    )

    def get_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return self.fields + self.run_fields if obj is not None else self.fields

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return self.fields + self.run_fields if obj is not None else ()

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


@admin.register(Qualification)
class QualificationAdmin(ReadOnlyTenantAdmin):
    """Raters' qualification outcomes (``Campaign.qualification_battles``): one row each, as decided."""

    list_display = ("rater", "campaign", "status", "correct", "answered", "score", "threshold", "decided_at")
    list_filter = ("status", "campaign")
