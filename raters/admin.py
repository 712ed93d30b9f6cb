"""Tenant-scoped admin: a manager sees and edits only the organisations they manage."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.db import models
from django.http import HttpRequest

from arena.admin_site import admin_user
from arena.http import AuthenticatedHttpRequest

from . import services
from .models import ApiKey, AuditEvent, Invitation, Membership, Organization, RaterFlag, RaterPool
from .selectors import organizations_managed_by, user_manages_anything


class TenantAdmin(admin.ModelAdmin):
    """Base for every admin of tenant-owned rows.

    Querysets, foreign-key choices and permissions are all derived from the organisations the user
    manages; other tenants' rows are simply absent (a direct URL gives the admin's not-found page)."""

    organization_field = "organization"

    def _orgs(self, request: HttpRequest) -> models.QuerySet[Organization]:
        return organizations_managed_by(admin_user(request))

    def get_queryset(self, request: HttpRequest) -> models.QuerySet[Any]:
        qs = super().get_queryset(request)
        if request.user.is_superuser:
            return qs
        return qs.filter(**{f"{self.organization_field}__in": self._orgs(request)})

    def formfield_for_foreignkey(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        kwargs["queryset"] = self._scoped(db_field, request, kwargs.get("queryset"))
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def formfield_for_manytomany(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        kwargs["queryset"] = self._scoped(db_field, request, kwargs.get("queryset"))
        return super().formfield_for_manytomany(db_field, request, **kwargs)

    def _scoped(self, db_field: Any, request: HttpRequest, queryset: Any) -> Any:
        model = db_field.related_model
        qs = queryset if queryset is not None else model._default_manager.all()
        if request.user.is_superuser:
            return qs
        if model is Organization:
            return self._orgs(request)
        if any(f.name == "organization" for f in model._meta.get_fields()):
            return qs.filter(organization__in=self._orgs(request))
        if model._meta.label == "auth.User":
            return qs.filter(memberships__organization__in=self._orgs(request)).distinct()
        return qs

    def has_module_permission(self, request: HttpRequest) -> bool:
        return user_manages_anything(request.user)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return user_manages_anything(request.user)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return user_manages_anything(request.user)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return user_manages_anything(request.user)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return user_manages_anything(request.user)

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        super().save_model(request, obj, form, change)
        organization = obj if isinstance(obj, Organization) else getattr(obj, self.organization_field)
        services.audit_record(
            organization=organization, actor=request.user,
            action=f"{obj._meta.model_name}.{'changed' if change else 'created'}", obj=obj,
            data={"fields": list(form.changed_data)},
        )

    def delete_model(self, request: HttpRequest, obj: Any) -> None:
        organization = obj if isinstance(obj, Organization) else getattr(obj, self.organization_field)
        if not isinstance(obj, Organization):
            services.audit_record(organization=organization, actor=request.user,
                                  action=f"{obj._meta.model_name}.deleted", obj=obj)
        super().delete_model(request, obj)


class ReadOnlyTenantAdmin(TenantAdmin):
    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(Organization)
class OrganizationAdmin(TenantAdmin):
    list_display = ("name", "slug", "created_at")
    prepopulated_fields = {"slug": ("name",)}

    def get_queryset(self, request: HttpRequest) -> models.QuerySet[Any]:
        return self._orgs(request)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return request.user.is_superuser

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return request.user.is_superuser


@admin.register(Membership)
class MembershipAdmin(TenantAdmin):
    list_display = ("user", "organization", "role", "created_at")
    list_filter = ("role",)


@admin.register(RaterPool)
class RaterPoolAdmin(TenantAdmin):
    list_display = ("name", "organization", "kind", "member_count")
    filter_horizontal = ("members",)
    actions = ("create_invitation",)

    @admin.display(description="Members")
    def member_count(self, obj: RaterPool) -> int:
        return obj.members.count()

    def save_related(self, request: HttpRequest, form: Any, formsets: Any, change: bool) -> None:
        super().save_related(request, form, formsets, change)
        # A rater added to a pool becomes a rater member of its organisation.
        for user in form.instance.members.all():
            Membership.objects.get_or_create(user=user, organization=form.instance.organization,
                                             defaults={"role": "rater"})

    @admin.action(description="Create an invitation link for the selected pools")
    def create_invitation(self, request: AuthenticatedHttpRequest, queryset: models.QuerySet[RaterPool]) -> None:
        for pool in queryset:
            invitation = services.invitation_create(pool=pool, actor=request.user, max_uses=50)
            messages.success(request, f"Invitation link for {pool.name}: "
                                      f"{request.build_absolute_uri(invitation.path)} (50 uses, 14 days)")


@admin.register(Invitation)
class InvitationAdmin(TenantAdmin):
    list_display = ("pool", "email", "uses", "max_uses", "expires_at", "link")
    readonly_fields = ("link", "uses")
    exclude = ("organization", "created_by")

    @admin.display(description="Link")
    def link(self, obj: Invitation) -> str:
        return obj.path if obj.pk else "(saved invitations get a link)"

    def save_model(self, request: HttpRequest, obj: Invitation, form: Any, change: bool) -> None:
        if not change:
            obj.created_by = admin_user(request)
            obj.organization = obj.pool.organization
        super().save_model(request, obj, form, change)


@admin.register(AuditEvent)
class AuditEventAdmin(ReadOnlyTenantAdmin):
    list_display = ("created_at", "organization", "actor", "action", "object_type", "object_id")
    list_filter = ("action",)


@admin.register(ApiKey)
class ApiKeyAdmin(TenantAdmin):
    list_display = ("name", "organization", "prefix", "scope", "created_at", "last_used_at", "revoked_at")
    fields = ("organization", "name", "scope", "prefix", "created_at", "last_used_at", "revoked_at")
    readonly_fields = ("prefix", "created_at", "last_used_at", "revoked_at")
    actions = ("revoke",)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return obj is None and super().has_change_permission(request, obj)

    def save_model(self, request: HttpRequest, obj: ApiKey, form: Any, change: bool) -> None:
        api_key, key = services.api_key_create(organization=obj.organization, name=obj.name, scope=obj.scope,
                                               actor=request.user)
        obj.pk = api_key.pk
        obj.refresh_from_db()
        messages.warning(request, f"API key for {api_key.name}: {key} — copy it now; it is not stored and will not "
                                  "be shown again.")

    @admin.action(description="Revoke the selected keys")
    def revoke(self, request: AuthenticatedHttpRequest, queryset: models.QuerySet[ApiKey]) -> None:
        for api_key in queryset:
            services.api_key_revoke(api_key=api_key, actor=request.user)


@admin.register(RaterFlag)
class RaterFlagAdmin(TenantAdmin):
    list_display = ("rater", "organization", "reason", "created_by", "created_at")
    exclude = ("created_by",)

    def save_model(self, request: HttpRequest, obj: RaterFlag, form: Any, change: bool) -> None:
        if not change:
            obj.created_by = admin_user(request)
        super().save_model(request, obj, form, change)
