"""Gold items and attention checks, the form of their CSV import (a campaign's page, ``campaigns.py``),
and raters' qualification outcomes (the campaign's first gold battles)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django import forms
from django.contrib import admin
from django.http import HttpRequest

from core.http import admin_user
from raters.admin import ReadOnlyTenantAdmin, TenantAdmin

from .. import services
from ..gold import Corruption, attention_answer_corrupt
from ..models import GoldItem, Qualification

# django-stubs makes these classes generic; Django's own are not subscriptable at run time.
if TYPE_CHECKING:
    _GoldItemModelForm = forms.ModelForm[GoldItem]
else:
    _GoldItemModelForm = forms.ModelForm


class GoldImportForm(forms.Form):
    file = forms.FileField(help_text="CSV (UTF-8) with a header row; see the columns above.")


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


@admin.register(Qualification)
class QualificationAdmin(ReadOnlyTenantAdmin):
    """Raters' qualification outcomes (``Campaign.qualification_battles``): one row each, as decided."""

    list_display = ("rater", "campaign", "status", "correct", "answered", "score", "threshold", "decided_at")
    list_filter = ("status", "campaign")
