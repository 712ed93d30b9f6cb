from django.contrib import admin

from raters.admin import TenantAdmin

from .models import ModelEndpoint


@admin.register(ModelEndpoint)
class ModelEndpointAdmin(TenantAdmin):
    list_display = ("name", "organization", "url", "protocol", "model_name", "model_version", "timeout_s")
    list_filter = ("protocol",)
    search_fields = ("name", "model_name")
