"""A/B experiments and their variants."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.contrib import admin
from django.http import HttpRequest

from core.http import admin_user
from raters.admin import TenantAdmin, TenantInlineMixin

from .. import selectors, services
from ..models import Experiment, Variant

# django-stubs makes these classes generic; Django's own are not subscriptable at run time.
if TYPE_CHECKING:
    _VariantTabularInline = admin.TabularInline[Variant, Experiment]
else:
    _VariantTabularInline = admin.TabularInline


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
