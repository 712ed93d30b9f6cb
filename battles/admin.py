"""Campaign configuration for managers; battles and the vote log are read-only here."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db import models
from django.http import HttpRequest

from arena.http import AuthenticatedHttpRequest
from raters.admin import ReadOnlyTenantAdmin, TenantAdmin, TenantInlineMixin
from raters.services import audit_record

from . import services
from .models import Battle, Campaign, Competitor, Generation, Prompt, Vote
from .prompting import prompt_validate


def competitor_has_battles(competitor: Competitor) -> bool:
    return Battle.objects.filter(models.Q(left=competitor) | models.Q(right=competitor)).exists()


class CompetitorForm(forms.ModelForm):
    """A competitor that has fought is history: its votes were cast for that endpoint at that version,
    so neither can change any more; a new version is a new competitor."""

    frozen_fields = ("endpoint", "version_label")

    class Meta:
        model = Competitor
        fields = ("endpoint", "version_label", "active")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.instance.pk is not None and competitor_has_battles(self.instance):
            for name in self.frozen_fields:
                if name in self.fields:
                    # A disabled field ignores what is posted and keeps the saved value.
                    self.fields[name].disabled = True
                    self.fields[name].help_text = "Fixed once the competitor has battles; add a new competitor."


class CompetitorInline(TenantInlineMixin, admin.TabularInline):
    model = Competitor
    form = CompetitorForm
    extra = 0
    fields = ("endpoint", "version_label", "active")


class CampaignForm(forms.ModelForm):
    new_prompts = forms.CharField(
        required=False, widget=forms.Textarea(attrs={"rows": 6}),
        help_text="Add prompts to the pool, one per line. Category and language are assigned by the "
                  "classifier unless a category is chosen below.",
    )
    new_prompts_category = forms.ChoiceField(
        required=False, choices=[("", "(classify automatically)")] + Prompt._meta.get_field("category").flatchoices,
    )

    class Meta:
        model = Campaign
        fields = (
            "organization", "name", "slug", "description", "rater_pools", "allow_rater_prompts", "temperature",
            "top_p", "max_tokens", "system_prompt", "sampling", "session_cap", "rater_vote_cap", "prompt_hash_cap",
            "min_decision_ms", "exclude_identity_leaks", "both_bad_as_tie", "ranking_min_votes",
            "ranking_bootstrap_rounds", "ranking_interval", "ranking_style_interval", "ranking_anchor", "ranking_ties",
        )

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        # Choices cover every organisation the user manages; a campaign takes pools of its own only.
        organization = self.instance.organization if self.instance.pk else cleaned.get("organization")
        pools = cleaned.get("rater_pools")
        if organization is not None and pools is not None:
            foreign = [pool.name for pool in pools if pool.organization_id != organization.pk]
            if foreign:
                self.add_error("rater_pools", f"Not pools of {organization}: {', '.join(foreign)}.")
        return cleaned


@admin.register(Campaign)
class CampaignAdmin(TenantAdmin):
    form = CampaignForm
    list_display = ("name", "organization", "status", "competitor_count", "prompt_count", "vote_count")
    list_filter = ("status",)
    prepopulated_fields = {"slug": ("name",)}
    filter_horizontal = ("rater_pools",)
    inlines = (CompetitorInline,)
    actions = ("open_campaigns", "close_campaigns", "recompute_leaderboards")
    readonly_fields = ("status", "opened_at", "closed_at")
    fieldsets = (
        (None, {"fields": ("organization", "name", "slug", "description", "status", "opened_at", "closed_at")}),
        ("Raters", {"fields": ("rater_pools", "allow_rater_prompts")}),
        ("Generation (identical for both sides)", {"fields": ("temperature", "top_p", "max_tokens",
                                                              "system_prompt")}),
        ("Sampling, caps and filters", {"fields": ("sampling", "session_cap", "rater_vote_cap",
                                                   "prompt_hash_cap", "min_decision_ms")}),
        ("Prompt pool", {"fields": ("new_prompts", "new_prompts_category")}),
        ("Leaderboards", {"fields": ("exclude_identity_leaks", "both_bad_as_tie", "ranking_min_votes",
                                     "ranking_bootstrap_rounds", "ranking_interval", "ranking_style_interval",
                                     "ranking_anchor", "ranking_ties")}),
    )

    def get_queryset(self, request: HttpRequest) -> models.QuerySet[Any]:
        return super().get_queryset(request).annotate(
            n_competitors=models.Count("competitors", distinct=True),
            n_prompts=models.Count("prompts", distinct=True),
            n_votes=models.Count("votes", distinct=True),
        )

    @admin.display(description="Competitors", ordering="n_competitors")
    def competitor_count(self, obj: Any) -> int:
        return obj.n_competitors

    @admin.display(description="Prompts", ordering="n_prompts")
    def prompt_count(self, obj: Any) -> int:
        return obj.n_prompts

    @admin.display(description="Votes", ordering="n_votes")
    def vote_count(self, obj: Any) -> int:
        return obj.n_votes

    def save_model(self, request: HttpRequest, obj: Campaign, form: Any, change: bool) -> None:
        services.campaign_save(campaign=obj, actor=request.user, changed=list(form.changed_data))

    def save_related(self, request: HttpRequest, form: Any, formsets: Any, change: bool) -> None:
        form.save_m2m()
        for formset in formsets:
            formset.save(commit=False)
            changed = {obj.pk: fields for obj, fields in formset.changed_objects}
            for competitor in [*formset.new_objects, *(obj for obj, _ in formset.changed_objects)]:
                competitor.campaign = form.instance
                services.competitor_save(competitor=competitor, actor=request.user,
                                         changed=changed.get(competitor.pk, []))
            for deleted in formset.deleted_objects:
                audit_record(organization=form.instance.organization, actor=request.user,
                             action="competitor.deleted", obj=deleted,
                             data={"endpoint": deleted.endpoint_id, "version": deleted.version_label})
                deleted.delete()
        lines = [line for line in form.cleaned_data.get("new_prompts", "").splitlines() if line.strip()]
        if lines:
            try:
                services.prompts_import(campaign=form.instance, texts=lines, actor=request.user,
                                        category=form.cleaned_data.get("new_prompts_category", ""))
            except ValueError as exc:
                messages.error(request, f"Prompts not imported: {exc}")
            else:
                messages.success(request, f"{len(lines)} prompts added to the pool.")

    @admin.action(description="Open the selected campaigns for voting")
    def open_campaigns(self, request: AuthenticatedHttpRequest, queryset: models.QuerySet[Campaign]) -> None:
        for campaign in queryset:
            try:
                services.campaign_open(campaign=campaign, actor=request.user)
            except services.BattleError as exc:
                messages.error(request, f"{campaign.name}: {exc}")
            else:
                messages.success(request, f"{campaign.name} is open.")

    @admin.action(description="Recompute the leaderboards of the selected campaigns now")
    def recompute_leaderboards(self, request: AuthenticatedHttpRequest, queryset: models.QuerySet[Campaign]) -> None:
        from ranking.services import leaderboards_recompute_soon

        for campaign in queryset:
            leaderboards_recompute_soon(campaign_id=campaign.pk)
        messages.success(request, f"Recompute queued for {queryset.count()} campaign(s).")

    @admin.action(description="Close the selected campaigns")
    def close_campaigns(self, request: AuthenticatedHttpRequest, queryset: models.QuerySet[Campaign]) -> None:
        for campaign in queryset:
            services.campaign_close(campaign=campaign, actor=request.user)
            messages.success(request, f"{campaign.name} is closed.")


class PromptForm(forms.ModelForm):
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
    list_display = ("short_text", "campaign", "category", "language", "source", "active")
    list_filter = ("category", "language", "source", "active")
    search_fields = ("text",)
    readonly_fields = ("text_hash", "source", "author")
    exclude = ("organization",)

    @admin.display(description="Prompt")
    def short_text(self, obj: Prompt) -> str:
        return obj.text[:80]

    def save_model(self, request: HttpRequest, obj: Prompt, form: Any, change: bool) -> None:
        built = services.prompt_build(campaign=obj.campaign, text=obj.text, source=obj.source or "pool",
                                      category=obj.category, language=obj.language if change else "")
        if not change:
            obj.organization_id = built.organization_id
        obj.text, obj.text_hash = built.text, built.text_hash
        obj.language = built.language
        super().save_model(request, obj, form, change)


class GenerationInline(TenantInlineMixin, admin.TabularInline):
    model = Generation
    extra = 0
    can_delete = False
    fields = ("side", "competitor", "output_tokens", "finish_reason", "latency_s", "error", "style")
    readonly_fields = fields

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(Battle)
class BattleAdmin(ReadOnlyTenantAdmin):
    list_display = ("id", "campaign", "rater", "left", "right", "status", "created_at")
    list_filter = ("status",)
    inlines = (GenerationInline,)


@admin.register(Vote)
class VoteAdmin(ReadOnlyTenantAdmin):
    list_display = ("id", "campaign", "rater", "left_model", "right_model", "choice", "decision_ms", "created_at")
    list_filter = ("choice", "category")
