"""Prompts: the pool's rows, and the form of the prompt import (a campaign's page, ``campaigns.py``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django import forms
from django.contrib import admin
from django.http import HttpRequest

from core.http import admin_user
from raters.admin import TenantAdmin

from .. import services
from ..models import Prompt
from ..prompting import prompt_validate

# django-stubs makes these classes generic; Django's own are not subscriptable at run time.
if TYPE_CHECKING:
    _PromptModelForm = forms.ModelForm[Prompt]
else:
    _PromptModelForm = forms.ModelForm


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
