from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from core.http import admin_user
from raters.admin import TenantAdmin

from . import selectors, services
from .models import ModelEndpoint

OUTAGES_SHOWN = 20


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
        "health_state",
        "health_checked_at",
    )
    list_filter = ("protocol", "contract", "health")
    search_fields = ("name", "model_name")
    actions = ("check_health",)

    @admin.display(description="Health", ordering="health")
    def health_state(self, obj: ModelEndpoint) -> str:
        return selectors.endpoint_health_line(obj)

    @admin.display(description="Outages (no new battles while down)")
    def outages(self, obj: ModelEndpoint) -> SafeString:
        # Shown as text, not an inline: the health check writes them, and an inline would be a formset
        # every save of the endpoint must post.
        rows = selectors.endpoint_outages_recent(obj, limit=OUTAGES_SHOWN)
        if not rows:
            return format_html("{}", "none")
        return format_html(
            "<ul>{}</ul>",
            format_html_join(
                "",
                "<li>{} to {}: {}</li>",
                (
                    (
                        f"{o.started_at:%Y-%m-%d %H:%M:%S} UTC",
                        f"{o.ended_at:%Y-%m-%d %H:%M:%S} UTC" if o.ended_at else "now (still down)",
                        o.reason,
                    )
                    for o in rows
                ),
            ),
        )

    @admin.action(description="Check the selected endpoints' readiness now")
    def check_health(self, request: HttpRequest, queryset: QuerySet[ModelEndpoint]) -> None:
        endpoints = list(queryset)
        services.endpoints_health_check(endpoints=endpoints)
        for endpoint in endpoints:
            level = messages.WARNING if endpoint.health == ModelEndpoint.Health.DOWN else messages.INFO
            messages.add_message(request, level, f"{endpoint.name}: {selectors.endpoint_health_line(endpoint)}")

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        fields = tuple(super().get_readonly_fields(request, obj))
        if obj is not None:
            fields += ("health_state", "health_checked_at", "outages")
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
        # Checked after the save's transaction (a slow server must not hold the row lock), within the health
        # check's short timeout, and recorded like the periodic check's answers: the endpoint's state says
        # ready, or why not, from the moment it is saved. Saved either way (a server may be started later).
        endpoint = getattr(request, "_arena_saved_endpoint", None)
        if endpoint is not None:
            services.endpoint_health_check_on_save(endpoint=endpoint)
            line = selectors.endpoint_health_line(endpoint)
            if endpoint.health == ModelEndpoint.Health.READY:
                messages.info(request, f"{endpoint.name}: {line}")
            else:
                messages.warning(request, f"Saved, but Triton does not report the model ready: {line}")
        return response
