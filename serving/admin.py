from typing import Any

from django.contrib import admin, messages
from django.http import HttpRequest, HttpResponse

from arena.admin_site import admin_user
from raters.admin import TenantAdmin

from . import selectors, services
from .models import ModelEndpoint


@admin.register(ModelEndpoint)
class ModelEndpointAdmin(TenantAdmin):
    list_display = (
        "name",
        "organization",
        "url",
        "protocol",
        "contract",
        "prompt_format",
        "model_name",
        "model_version",
        "timeout_s",
    )
    list_filter = ("protocol", "contract")
    search_fields = ("name", "model_name")

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        fields = tuple(super().get_readonly_fields(request, obj))
        if obj is not None and services.endpoint_has_battles(obj):
            fields += services.FROZEN_WHEN_USED
        return fields

    def save_model(self, request: HttpRequest, obj: ModelEndpoint, form: Any, change: bool) -> None:
        services.endpoint_save(endpoint=obj, actor=admin_user(request), changed=list(form.changed_data))
        request._arena_saved_endpoint = obj  # type: ignore[attr-defined]

    def changeform_view(
        self,
        request: HttpRequest,
        object_id: str | None = None,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        response = super().changeform_view(request, object_id, form_url, extra_context)
        # Asked after the save's transaction (a slow server must not hold the row lock): the endpoint
        # is saved either way (a server may be started later), but the manager hears about it now.
        endpoint = getattr(request, "_arena_saved_endpoint", None)
        if endpoint is not None:
            for problem in selectors.endpoints_not_ready([endpoint]):
                messages.warning(request, f"Saved, but Triton does not report the model ready: {problem}")
        return response
