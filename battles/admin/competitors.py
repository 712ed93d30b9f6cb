"""Competitors: the inline of a campaign's page where they are added, and the list of every competitor
of the managers' campaigns (family, retirement)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.utils import unquote
from django.db import models, transaction
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse

from core.errors import DomainError
from core.http import admin_user
from raters.admin import TenantAdmin, TenantInlineMixin
from serving.selectors import endpoint_health_line

from .. import selectors, services
from ..models import Campaign, Competitor

# django-stubs makes these classes generic; Django's own are not subscriptable at run time.
if TYPE_CHECKING:
    _CompetitorModelForm = forms.ModelForm[Competitor]
    _CompetitorTabularInline = admin.TabularInline[Competitor, Campaign]
else:
    _CompetitorModelForm = forms.ModelForm
    _CompetitorTabularInline = admin.TabularInline


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
    # Narrow enough for a 1280 px screen beside the console's sidebar: the health, the time skipped while down
    # and the retirement share one column (the Competitors list shows each on its own).
    fields = ("endpoint", "external_model", "version_label", "family", "active", "availability")
    readonly_fields = ("availability",)

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

    @admin.display(description="Health; skipped while down")
    def availability(self, obj: Competitor) -> str:
        if obj.pk is None:
            return "-"
        if obj.retired_at is not None:
            return f"Retired {obj.retired_at:%Y-%m-%d %H:%M} UTC: no new battles"
        if obj.endpoint is None:
            return "External model: shadow battles only"
        return f"{endpoint_health_line(obj.endpoint)}. Skipped while down (this campaign): {self._unavailable(obj)}"

    def _unavailable(self, obj: Competitor) -> str:
        exposure = selectors.competitor_exposure(campaign=obj.campaign).get(obj.pk)
        if exposure is None or exposure.outages == 0:
            return "never"
        outages = "outage" if exposure.outages == 1 else "outages"
        return f"{exposure.unavailable_min} min in {exposure.outages} {outages}"


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
