"""Campaigns: configuration, the open/close/recompute actions, the buffer and gold reports, and the pages
that import prompts and gold items into a campaign."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from django import forms
from django.conf import settings
from django.contrib import admin, messages
from django.contrib.admin.utils import unquote
from django.db import models
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseNotAllowed, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html, format_html_join

from core.errors import DomainError
from core.http import AuthenticatedHttpRequest, admin_user
from raters.admin import TenantAdmin
from serving.selectors import endpoints_not_ready

from .. import prompt_import, selectors, services
from ..gold import wilson_interval
from ..models import Campaign, Prompt
from ..prompt_import import PromptRow
from .competitors import CompetitorInline
from .gold import GoldImportForm
from .prompts import PromptImportForm, _error_order

# django-stubs makes these classes generic; Django's own are not subscriptable at run time.
if TYPE_CHECKING:
    _CampaignModelForm = forms.ModelForm[Campaign]
else:
    _CampaignModelForm = forms.ModelForm


class CampaignForm(_CampaignModelForm):
    new_prompts = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 6}),
        help_text="Add prompts to the pool, one per line (or Import prompts, above, for a file). Category and "
        "language are assigned by the classifier unless a category is chosen below.",
    )
    new_prompts_category = forms.ChoiceField(
        required=False,
        choices=[("", "(classify automatically)")] + Prompt._meta.get_field("category").flatchoices,
        help_text="Categories are a fixed list, not configured per campaign: each prompt has one (chosen here, "
        "in the import file, or by the classifier), and every category with votes gets its own leaderboard.",
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
            "session_window_h",
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
        # A few pools per organisation: boxes to tick, not the two-list widget wider than a laptop's screen.
        widgets = {"rater_pools": forms.CheckboxSelectMultiple}
        help_texts = {
            "rater_pools": "Only members of these pools see the campaign and vote in it (the pool is recorded on "
            "every vote). Invite raters into a pool from the checklist above."
        }


# Collapsed on the page: each has working defaults, and a first campaign needs none of them.
ADVANCED = ("collapse",)


@admin.register(Campaign)
class CampaignAdmin(TenantAdmin):
    """The campaign's page is where a manager sets a campaign up: a checklist with the live state of every
    step on top (``selectors.campaign_checklist``, links to where each is done, the *Open* button), then the
    competitors, then the essentials (name, description, instructions, prompts, pools); every other setting
    is in a collapsed section (templates/admin/battles/campaign/change_form.html)."""

    form = CampaignForm
    change_form_template = "admin/battles/campaign/change_form.html"
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
    inlines = (CompetitorInline,)
    actions = ("open_campaigns", "close_campaigns", "recompute_leaderboards")
    readonly_fields = ("status", "opened_at", "closed_at", "leaderboard_link", "buffer_state", "gold_report")
    fieldsets = (
        (None, {"fields": ("organization", "name", "slug", "description", "instructions", "status")}),
        ("Prompt pool", {"fields": ("new_prompts", "new_prompts_category")}),
        ("Who may vote", {"fields": ("rater_pools",)}),
        (
            "Consent (optional: each rater agrees once before the first battle)",
            {"classes": ADVANCED, "fields": ("consent_text",)},
        ),
        (
            "Raters' options: typed prompts, turns, identity questions",
            {"classes": ADVANCED, "fields": ("allow_rater_prompts", "max_turns", "identity_policy")},
        ),
        (
            "Generation (identical for both sides)",
            {"classes": ADVANCED, "fields": ("temperature", "top_p", "max_tokens", "system_prompt")},
        ),
        (
            "Sampling, caps and filters",
            {
                "classes": ADVANCED,
                "fields": (
                    "sampling",
                    "session_cap",
                    "session_window_h",
                    "rater_vote_cap",
                    "prompt_hash_cap",
                    "min_decision_ms",
                ),
            },
        ),
        (
            "Battles generated ahead (pool prompts)",
            {"classes": ADVANCED, "fields": ("buffer_size", "buffer_max_age_s", "buffer_state")},
        ),
        (
            "Gold battles and attention checks",
            {
                "classes": ADVANCED,
                "fields": (
                    "gold_rate",
                    "attention_warn_after",
                    "attention_block_after",
                    "gold_feedback",
                    "gold_report",
                ),
            },
        ),
        (
            "Shared battles (crowd), qualification and rater flags",
            {
                "classes": ADVANCED,
                "fields": (
                    "reviewers_per_item",
                    "qualification_battles",
                    "qualification_pass",
                    "gold_min_accuracy",
                    "outlier_alpha",
                ),
            },
        ),
        (
            "Leaderboards",
            {
                "classes": ADVANCED,
                "fields": (
                    "leaderboard_link",
                    "exclude_identity_leaks",
                    "both_bad_as_tie",
                    "ranking_min_votes",
                    "ranking_bootstrap_rounds",
                    "ranking_interval",
                    "ranking_style_interval",
                    "ranking_anchor",
                    "ranking_ties",
                    "cadence_threshold",
                ),
            },
        ),
        ("Opened and closed", {"classes": ADVANCED, "fields": ("opened_at", "closed_at")}),
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
            path(
                "<path:object_id>/open/",
                self.admin_site.admin_view(self.open_view),
                name="battles_campaign_open",
            ),
        ]
        return own + super().get_urls()

    def changeform_view(
        self,
        request: HttpRequest,
        object_id: str | None = None,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        context = dict(extra_context or {})
        if object_id is not None and request.method == "GET":
            campaign = self.get_object(request, unquote(object_id))
            if campaign is not None:
                context["checklist"] = self._checklist(request, campaign)
        return super().changeform_view(request, object_id, form_url, context)

    def _checklist(self, request: HttpRequest, campaign: Campaign) -> list[dict[str, Any]]:
        """The checklist's steps with their live state, each with the links to where it is done. A page opened
        from here returns to the campaign when saved (``next``: TenantAdmin.response_add)."""
        checklist = selectors.campaign_checklist(campaign=campaign)
        here = reverse("admin:battles_campaign_change", args=[campaign.pk])
        back = urlencode({"next": here})
        pool_add = reverse("admin:raters_raterpool_add") + "?" + back
        links: dict[str, list[tuple[str, str]]] = {
            "endpoints": [
                ("Add a model endpoint", reverse("admin:serving_modelendpoint_add") + "?" + back),
                ("All endpoints", reverse("admin:serving_modelendpoint_changelist")),
            ],
            "competitors": [("Add competitors (below)", "#competitors-group")],
            "prompts": [
                ("Paste prompts (below)", "#id_new_prompts"),
                ("Import a file", reverse("admin:battles_campaign_import_prompts", args=[campaign.pk])),
            ],
            "pool": ([("Tick a pool (below)", "#id_rater_pools")] if checklist.pools_in_organization else [])
            + [("Create a rater pool", pool_add)],
            "raters": (
                [
                    (
                        "Create an invitation link",
                        reverse("admin:raters_invitation_add")
                        + "?"
                        + urlencode({"pool": checklist.first_pool_id, "max_uses": 50, "next": here}),
                    )
                ]
                if checklist.first_pool_id is not None
                else []
            ),
            "open": [],
            "votes": [("Leaderboard", reverse("ranking:leaderboard", args=[campaign.pk]))],  # Dashboard: above
        }
        invitations = [request.build_absolute_uri(path) for path in checklist.invitation_paths]
        return [
            {
                "step": step,
                "number": number,
                "links": links.get(step.key, []),
                "invitations": invitations if step.key == "raters" else [],
                "can_open": step.key == "open" and not step.done,
            }
            for number, step in enumerate(checklist.steps, start=1)
        ]

    def open_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """The checklist's *Open for voting* button: the list's action for this one campaign."""
        campaign = self.get_object(request, unquote(object_id))  # None for another tenant's campaign
        if campaign is None or not self.has_change_permission(request, campaign):
            raise Http404("No such campaign.")
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        self.open_campaigns(request, Campaign.objects.filter(pk=campaign.pk))  # type: ignore[arg-type]
        return HttpResponseRedirect(reverse("admin:battles_campaign_change", args=[campaign.pk]))

    def response_add(self, request: HttpRequest, obj: Campaign, post_url_continue: str | None = None) -> HttpResponse:
        response = super().response_add(request, obj, post_url_continue)
        # A new campaign's next steps are on its own page (the checklist), not in the list of campaigns.
        if not any(key in request.POST for key in ("_continue", "_addanother", "_popup")):
            return HttpResponseRedirect(reverse("admin:battles_campaign_change", args=[obj.pk]))
        return response

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
