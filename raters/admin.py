"""Tenant-scoped admin: a manager sees and edits only the organisations they manage."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from django import forms
from django.contrib import admin, messages
from django.contrib.auth.models import User
from django.db import models, transaction
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme

from core.errors import DomainError
from core.http import AuthenticatedHttpRequest, admin_user
from core.site import site_url

from . import services
from .models import (
    ApiKey,
    AuditEvent,
    Invitation,
    Membership,
    Organization,
    RaterAttribute,
    RaterFlag,
    RaterPool,
    WebhookDelivery,
    WebhookEndpoint,
    WebhookEvent,
    api_keys_with_maker_role,
)
from .selectors import organizations_managed_by, organizations_owned_by, user_manages_anything, user_owns_anything


def _manages_anything(request: HttpRequest) -> bool:
    """``user_manages_anything`` for the request's user, read once per request: a console page asks it
    of every model it lists (the index: about a hundred times)."""
    if not hasattr(request, "_arena_manages_anything"):
        request._arena_manages_anything = user_manages_anything(request.user)  # type: ignore[attr-defined]
    return bool(request._arena_manages_anything)  # type: ignore[attr-defined]


def _owns_anything(request: HttpRequest) -> bool:
    """``user_owns_anything`` for the request's user, read once per request (as above)."""
    if not hasattr(request, "_arena_owns_anything"):
        request._arena_owns_anything = user_owns_anything(request.user)  # type: ignore[attr-defined]
    return bool(request._arena_owns_anything)  # type: ignore[attr-defined]


# django-stubs makes these classes generic; Django's own are not subscriptable at run time.
if TYPE_CHECKING:
    _ModelAdmin = admin.ModelAdmin[Any]  # TenantAdmin is the base of every model's admin
    _MembershipModelForm = forms.ModelForm[Membership]
else:
    _ModelAdmin = admin.ModelAdmin
    _MembershipModelForm = forms.ModelForm


class TenantScopedChoices:
    """Foreign-key and many-to-many choices limited to the organisations the user manages.

    For a user who manages several organisations this is all of them, not the edited object's own:
    that the related rows belong to the object's organisation is checked by the forms and by the
    models' ``clean()``."""

    def _orgs(self, request: HttpRequest) -> models.QuerySet[Organization]:
        return organizations_managed_by(admin_user(request))

    def formfield_for_foreignkey(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        kwargs["queryset"] = self._scoped(db_field, request, kwargs.get("queryset"))
        return super().formfield_for_foreignkey(db_field, request, **kwargs)  # type: ignore[misc]

    def formfield_for_manytomany(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        kwargs["queryset"] = self._scoped(db_field, request, kwargs.get("queryset"))
        return super().formfield_for_manytomany(db_field, request, **kwargs)  # type: ignore[misc]

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


def _organization_of(obj: Any) -> Organization | None:
    if obj is None:
        return None
    if isinstance(obj, Organization):
        return obj
    return getattr(obj, "organization", None)


class TenantInlineMixin(TenantScopedChoices):
    """Permissions of an inline from memberships, as ``TenantAdmin``'s: managers are not Django staff
    and hold no model permissions, so a plain inline would be hidden from them (or read-only)."""

    def _may_manage(self, request: HttpRequest, obj: Any) -> bool:
        # ``obj`` is the parent row, already limited to the user's organisations by its admin's queryset;
        # checking its organisation again keeps an inline safe on a parent admin that forgets to.
        if not _manages_anything(request):
            return False
        organization = _organization_of(obj)
        return (
            organization is None or request.user.is_superuser or self._orgs(request).filter(pk=organization.pk).exists()
        )

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self._may_manage(request, obj)

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self._may_manage(request, obj)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self._may_manage(request, obj)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self._may_manage(request, obj)


class TenantAdmin(TenantScopedChoices, _ModelAdmin):
    """Base for every admin of tenant-owned rows.

    Querysets, foreign-key choices and permissions are all derived from the organisations the user
    manages; other tenants' rows are simply absent (a direct URL gives the admin's not-found page).
    A row's organisation is read-only once it exists: rows never move between tenants."""

    organization_field = "organization"

    def get_queryset(self, request: HttpRequest) -> models.QuerySet[Any]:
        qs = super().get_queryset(request)
        if request.user.is_superuser:
            return qs
        return qs.filter(**{f"{self.organization_field}__in": self._orgs(request)})

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        readonly = tuple(super().get_readonly_fields(request, obj))
        has_field = any(f.name == self.organization_field for f in self.model._meta.fields)
        if obj is not None and has_field and self.organization_field not in readonly:
            readonly += (self.organization_field,)
        return readonly

    def get_changeform_initial_data(self, request: HttpRequest) -> dict[str, Any]:
        # A manager of exactly one organisation has nothing to choose: it is preselected.
        initial: dict[str, Any] = dict(super().get_changeform_initial_data(request))
        has_field = any(f.name == self.organization_field for f in self.model._meta.fields)
        if has_field and self.organization_field not in initial:
            managed = list(self._orgs(request).values_list("pk", flat=True)[:2])
            if len(managed) == 1:
                initial[self.organization_field] = managed[0]
        return initial

    def has_module_permission(self, request: HttpRequest) -> bool:
        return _manages_anything(request)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return _manages_anything(request)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return _manages_anything(request)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return _manages_anything(request)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return _manages_anything(request)

    # Writes go through services; a row with no rules of its own uses the generic, audited ones.
    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        services.tenant_row_save(obj=obj, actor=admin_user(request), changed=list(form.changed_data))

    def delete_model(self, request: HttpRequest, obj: Any) -> None:
        services.tenant_row_delete(obj=obj, actor=admin_user(request))

    def delete_queryset(self, request: HttpRequest, queryset: models.QuerySet[Any]) -> None:
        # The bulk "delete selected" action: each row through ``delete_model`` (one audit row each),
        # all or none.
        with transaction.atomic():
            for obj in queryset:
                self.delete_model(request, obj)

    # --- Returning to where the manager came from -------------------------------------------------
    # A form opened from a campaign's checklist carries ``next`` (a console page): saving goes back there
    # (unless the manager asked to continue editing or to add another). Only a path inside the console.

    def _return_path(self, request: HttpRequest) -> str | None:
        target = request.GET.get("next", "")
        console = reverse("admin:index")
        if target.startswith(console) and url_has_allowed_host_and_scheme(target, allowed_hosts=None):
            return target
        return None

    def response_add(self, request: HttpRequest, obj: Any, post_url_continue: str | None = None) -> HttpResponse:
        response = super().response_add(request, obj, post_url_continue)
        target = self._return_path(request)
        if target is not None and not any(key in request.POST for key in ("_continue", "_addanother", "_popup")):
            return HttpResponseRedirect(target)
        return response

    # --- Services' refusals (core.errors), mapped once for the whole console ----------------------
    # On a form, a refusal is shown as form errors: the admin's transaction has rolled back, and the
    # same POST is processed again with the refusal attached to the form (``get_form``), so the
    # manager keeps what they typed. Elsewhere (deletes, actions) it is an error message.

    def get_form(self, request: HttpRequest, obj: Any = None, change: bool = False, **kwargs: Any) -> Any:
        form = super().get_form(request, obj, change, **kwargs)
        refusal = getattr(request, "_arena_refusal", None)
        if refusal is None:
            return form
        return type(form.__name__, (_RefusedForm, form), {"refusal": refusal})

    def changeform_view(
        self,
        request: HttpRequest,
        object_id: str | None = None,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        try:
            return super().changeform_view(request, object_id, form_url, extra_context)
        except DomainError as exc:
            if request.method != "POST" or getattr(request, "_arena_refusal", None) is not None:
                raise
            request._arena_refusal = exc  # type: ignore[attr-defined]
            return super().changeform_view(request, object_id, form_url, extra_context)

    def delete_view(
        self, request: HttpRequest, object_id: str, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        try:
            return super().delete_view(request, object_id, extra_context)
        except DomainError as exc:
            self.message_user(request, exc.message, messages.ERROR)
            return HttpResponseRedirect(request.path.rsplit("/delete/", 1)[0] + "/change/")

    def changelist_view(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> HttpResponse:
        try:
            return super().changelist_view(request, extra_context)
        except DomainError as exc:
            self.message_user(request, exc.message, messages.ERROR)
            return HttpResponseRedirect(request.get_full_path())


class _RefusedForm(forms.BaseForm):
    """Mixed into an admin form to show a service's refusal: on its fields where it names them, else
    above the form."""

    refusal: DomainError

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        placed = False
        for name, errors in self.refusal.field_errors.items():
            if name in self.fields and name not in self.errors:
                for error in errors:
                    self.add_error(name, error)
                placed = True
        if not placed:
            self.add_error(None, self.refusal.message)
        return cleaned


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


class MembershipForm(_MembershipModelForm):
    """Role changes are checked here by the service's own rule, so a refused change is a form error;
    ``services.membership_set`` checks it again, under the organisation's lock, when it writes."""

    actor: User | None = None  # set per request by MembershipAdmin.get_form

    class Meta:
        model = Membership
        fields = ("user", "organization", "role")

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        organization = self.instance.organization if self.instance.pk else cleaned.get("organization")
        user = self.instance.user if self.instance.pk else cleaned.get("user")
        role = cleaned.get("role")
        if organization is not None and user is not None and role:
            try:
                services.membership_change_check(organization=organization, user=user, role=role, actor=self.actor)
            except DomainError as exc:
                raise forms.ValidationError(exc.message) from exc
        return cleaned


@admin.register(Membership)
class MembershipAdmin(TenantAdmin):
    form = MembershipForm
    list_display = ("user", "organization", "role", "created_at")
    list_filter = ("role",)

    def get_form(self, request: HttpRequest, obj: Any = None, change: bool = False, **kwargs: Any) -> Any:
        form = super().get_form(request, obj, change, **kwargs)
        return type(form.__name__, (form,), {"actor": admin_user(request)})

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        # A membership is one person in one organisation: only its role changes.
        readonly = tuple(super().get_readonly_fields(request, obj))
        return readonly + ("user",) if obj is not None else readonly

    def get_actions(self, request: HttpRequest) -> Any:
        # Bulk deletion would bypass the owner rules; memberships are removed one at a time.
        actions = super().get_actions(request)
        actions.pop("delete_selected", None)
        return actions

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        if not super().has_delete_permission(request, obj):
            return False
        if obj is None:
            return True
        try:
            services.membership_change_check(
                organization=obj.organization, user=obj.user, role=None, actor=admin_user(request)
            )
        except DomainError:
            return False
        return True

    def save_model(self, request: HttpRequest, obj: Membership, form: Any, change: bool) -> None:
        membership = services.membership_set(
            organization=obj.organization, user=obj.user, role=obj.role, actor=admin_user(request)
        )
        obj.pk = membership.pk
        obj.refresh_from_db()

    def delete_model(self, request: HttpRequest, obj: Membership) -> None:
        services.membership_remove(organization=obj.organization, user=obj.user, actor=admin_user(request))

    def delete_queryset(self, request: HttpRequest, queryset: models.QuerySet[Any]) -> None:
        for membership in queryset.select_related("organization", "user"):
            self.delete_model(request, membership)


@admin.register(RaterPool)
class RaterPoolAdmin(TenantAdmin):
    fields = ("organization", "name", "kind", "members")
    list_display = ("name", "organization", "kind", "member_count")
    filter_horizontal = ("members",)
    actions = ("create_invitation",)

    @admin.display(description="Members")
    def member_count(self, obj: RaterPool) -> int:
        return obj.members.count()

    def save_model(self, request: HttpRequest, obj: RaterPool, form: Any, change: bool) -> None:
        # Members only of the pool's organisation: the service's rule, shown on the members field.
        services.pool_save(
            pool=obj,
            members=form.cleaned_data.get("members"),
            actor=admin_user(request),
            changed=list(form.changed_data),
        )

    def save_related(self, request: HttpRequest, form: Any, formsets: Any, change: bool) -> None:
        # Not ``form.save_m2m()``: the members were written (and audited) by ``pool_save``.
        for formset in formsets:
            self.save_formset(request, form, formset, change=change)

    @admin.action(description="Create an invitation link for the selected pools")
    def create_invitation(self, request: AuthenticatedHttpRequest, queryset: models.QuerySet[RaterPool]) -> None:
        for pool in queryset:
            invitation = services.invitation_create(pool=pool, actor=request.user, max_uses=50)
            messages.success(
                request,
                f"Invitation link for {pool.name}: {site_url(invitation.path, request=request)} (50 uses, 14 days)",
            )


def absolute_link_column(request: HttpRequest, *, description: str, path: Callable[[Any], str]) -> Any:
    """A read-only column or field showing a row's link absolute (``core.site.site_url``: ARENA_SITE_URL, else
    this request's address), to copy and hand out as it is. Bound to the request, so it is made once per
    request (the admin compares the fields it is given by identity)."""
    made: dict[str, Any] = request.__dict__.setdefault("_arena_link_columns", {})
    if description in made:
        return made[description]

    def column(obj: Any) -> str:
        return site_url(path(obj), request=request) if obj is not None and obj.pk else "Shown once it is saved."

    column.short_description = description  # type: ignore[attr-defined]
    made[description] = column
    return column


@admin.register(Invitation)
class InvitationAdmin(TenantAdmin):
    list_display = ("pool", "email", "uses", "max_uses", "expires_at")
    readonly_fields = ("uses",)
    exclude = ("organization", "created_by")

    def _link(self, request: HttpRequest) -> Any:
        return absolute_link_column(request, description="Link", path=lambda obj: obj.path)

    def get_list_display(self, request: HttpRequest) -> Any:
        return (*super().get_list_display(request), self._link(request))

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return (self._link(request), *super().get_readonly_fields(request, obj))

    def save_model(self, request: HttpRequest, obj: Invitation, form: Any, change: bool) -> None:
        if change:
            super().save_model(request, obj, form, change)
            return
        invitation = services.invitation_create(
            pool=obj.pool,
            actor=admin_user(request),
            email=obj.email,
            max_uses=obj.max_uses,
            expires_at=obj.expires_at,
            site=site_url("/", request=request),
        )
        obj.pk = invitation.pk
        obj.refresh_from_db()


@admin.register(AuditEvent)
class AuditEventAdmin(ReadOnlyTenantAdmin):
    list_display = ("created_at", "organization", "actor", "action", "object_type", "object_id")
    list_filter = ("action",)


@admin.register(ApiKey)
class ApiKeyAdmin(TenantAdmin):
    list_display = (
        "name",
        "organization",
        "prefix",
        "scope",
        "acts_as",
        "created_by",
        "rate_limit",
        "created_at",
        "last_used_at",
        "revoked_at",
    )
    list_select_related = ("organization", "created_by")
    fields = ("organization", "name", "scope", "rate_limit", "prefix", "created_at", "last_used_at", "revoked_at")
    readonly_fields = ("prefix", "created_at", "last_used_at", "revoked_at")
    actions = ("revoke",)

    def get_queryset(self, request: HttpRequest) -> models.QuerySet[Any]:
        # "acts as" reads each maker's role: in the list's one query, not one per row.
        return api_keys_with_maker_role(super().get_queryset(request))

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return obj is None and super().has_change_permission(request, obj)

    @admin.display(description="acts as")
    def acts_as(self, obj: ApiKey) -> str:
        """The scope the key has now: its own, capped by its maker's current role (refused: none)."""
        scope = obj.effective_scope()
        return "refused (its maker's role)" if scope is None else scope

    def formfield_for_choice_field(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        # A key never exceeds its maker: offer the scopes the user's strongest role may make (an owner:
        # up to owner, a manager: up to write); the service checks the organisation chosen.
        if db_field.name == "scope" and not request.user.is_superuser:
            strongest = max(
                (
                    len(services.api_key_scopes_for(organization=organization, user=request.user))
                    for organization in self._orgs(request)
                ),
                default=0,
            )
            kwargs["choices"] = list(ApiKey.Scope.choices)[:strongest]
        return super().formfield_for_choice_field(db_field, request, **kwargs)

    def save_model(self, request: HttpRequest, obj: ApiKey, form: Any, change: bool) -> None:
        api_key, key = services.api_key_create(
            organization=obj.organization, name=obj.name, scope=obj.scope, rate_limit=obj.rate_limit, actor=request.user
        )
        obj.pk = api_key.pk
        obj.refresh_from_db()
        messages.warning(
            request, f"API key for {api_key.name}: {key} — copy it now; it is not stored and will not be shown again."
        )

    @admin.action(description="Revoke the selected keys")
    def revoke(self, request: AuthenticatedHttpRequest, queryset: models.QuerySet[ApiKey]) -> None:
        for api_key in queryset:
            services.api_key_revoke(api_key=api_key, actor=request.user)


class FlagInForceFilter(admin.SimpleListFilter):
    title = "status"
    parameter_name = "in_force"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("yes", "In force"), ("no", "Cleared")]

    def queryset(self, request: HttpRequest, queryset: models.QuerySet[Any]) -> models.QuerySet[Any]:
        if self.value() == "yes":
            return queryset.filter(cleared_at__isnull=True)
        if self.value() == "no":
            return queryset.filter(cleared_at__isnull=False)
        return queryset


@admin.register(RaterFlag)
class RaterFlagAdmin(TenantAdmin):
    """Flags to review: raised by a manager here, or by the checks (attention, gold accuracy, the
    sequential outlier test) with what they saw. Reviewing one and letting the rater back in is the
    *Clear* action: the flag stays, stamped with who cleared it and when (audited); nothing is deleted."""

    list_display = (
        "rater",
        "organization",
        "kind",
        "reason",
        "created_at",
        "in_force_display",
        "cleared_by",
        "cleared_at",
    )
    list_filter = (FlagInForceFilter, "kind")
    exclude = ("created_by", "kind")  # a manager's flag is "manual"; the checks set their own kind
    readonly_fields = ("kind", "campaign_id", "evidence", "created_at", "cleared_at", "cleared_by", "clear_note")
    actions = ["clear_selected"]

    @admin.display(description="in force", boolean=True)
    def in_force_display(self, obj: RaterFlag) -> bool:
        return obj.in_force

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        if obj is None:  # a manager raising a flag writes the rater and the reason only
            return ("created_at",)
        return ("organization", "rater", "reason", *self.readonly_fields)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # a flag is raised or cleared, never edited

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # the record of a flag and its review stays

    def save_model(self, request: HttpRequest, obj: RaterFlag, form: Any, change: bool) -> None:
        flag = services.rater_flag_create(
            organization=obj.organization, rater=obj.rater, reason=obj.reason, actor=admin_user(request)
        )
        obj.pk, obj.created_at = flag.pk, flag.created_at

    @admin.action(description="Clear the selected flags (reviewed: the raters' votes count again)")
    def clear_selected(self, request: HttpRequest, queryset: models.QuerySet[RaterFlag]) -> None:
        cleared = 0
        for flag in queryset.filter(cleared_at__isnull=True):
            cleared += services.rater_flag_clear(flag=flag, actor=admin_user(request), note="Reviewed in the console.")
        messages.success(request, f"Cleared {cleared} flag(s).")

    clear_selected.allowed_permissions = ("view",)  # type: ignore[attr-defined]  # no change page: clearing is this action


@admin.register(RaterAttribute)
class RaterAttributeAdmin(TenantAdmin):
    """Raters' attributes (expertise, language, occupation, or any key): the leaderboards' rater-segment
    boards split the votes by them. Set here by a manager, or taken from a study link's parameters when a
    crowd participant arrives (source "vendor"). Every change is audited."""

    list_display = ("rater", "organization", "key", "value", "source", "updated_by", "updated_at")
    list_filter = ("key", "source")
    search_fields = ("key", "value", "rater__username", "rater__email")
    fields = ("organization", "rater", "key", "value", "source", "updated_by", "updated_at")
    readonly_fields = ("source", "updated_by", "updated_at")

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        # An attribute is one rater's one key: only its value changes (another key is another row).
        readonly = tuple(super().get_readonly_fields(request, obj))
        return readonly + ("rater", "key") if obj is not None else readonly

    def save_model(self, request: HttpRequest, obj: RaterAttribute, form: Any, change: bool) -> None:
        attribute = services.rater_attribute_set(
            organization=obj.organization, rater=obj.rater, key=obj.key, value=obj.value, actor=admin_user(request)
        )
        obj.pk = attribute.pk
        obj.refresh_from_db()

    def delete_model(self, request: HttpRequest, obj: RaterAttribute) -> None:
        services.rater_attribute_remove(attribute=obj, actor=admin_user(request))


# --- Webhooks: owners only (a webhook's secret signs what the organisation's receivers trust) ---------


class OwnerOnlyAdmin(TenantAdmin):
    """Rows only the organisation's owners see: the organisations offered and listed are those the
    user owns, and a manager who owns none does not see the pages at all."""

    def _orgs(self, request: HttpRequest) -> models.QuerySet[Organization]:
        return organizations_owned_by(request.user)

    def has_module_permission(self, request: HttpRequest) -> bool:
        return _owns_anything(request)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return _owns_anything(request)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return _owns_anything(request)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return _owns_anything(request)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return _owns_anything(request)


if TYPE_CHECKING:
    _WebhookModelForm = forms.ModelForm[WebhookEndpoint]
else:
    _WebhookModelForm = forms.ModelForm


class WebhookEndpointForm(_WebhookModelForm):
    url = forms.URLField(max_length=2000, assume_scheme="https")
    events = forms.MultipleChoiceField(
        choices=[(value, label) for value, label in WebhookEvent.choices if value != WebhookEvent.PING],
        widget=forms.CheckboxSelectMultiple,
    )

    class Meta:
        model = WebhookEndpoint
        fields = ("organization", "url", "description", "events")


@admin.register(WebhookEndpoint)
class WebhookEndpointAdmin(OwnerOnlyAdmin):
    form = WebhookEndpointForm
    list_display = ("url", "organization", "active", "consecutive_failures", "disabled_at", "created_at")
    list_filter = ("active",)
    readonly_fields = (
        "secret",
        "active",
        "consecutive_failures",
        "failing_since",
        "disabled_at",
        "disabled_reason",
        "created_by",
        "created_at",
    )
    actions = ("ping", "enable")

    def get_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        fields = ["organization", "url", "description", "events"]
        if obj is None:
            return fields  # the secret is made at creation and shown once, in the message
        return fields + list(self.readonly_fields)

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return super().get_readonly_fields(request, obj) if obj is not None else ()

    def save_model(self, request: HttpRequest, obj: WebhookEndpoint, form: Any, change: bool) -> None:
        data = form.cleaned_data
        if change:
            # The form has already copied its values onto ``obj``: the service compares with the stored row.
            services.webhook_endpoint_update(
                endpoint=WebhookEndpoint.objects.get(pk=obj.pk),
                actor=admin_user(request),
                url=data.get("url"),
                events=data.get("events"),
                description=data.get("description"),
            )
            return
        endpoint = services.webhook_endpoint_create(
            organization=obj.organization,
            url=data["url"],
            events=list(data["events"]),
            description=data.get("description", ""),
            actor=admin_user(request),
        )
        obj.pk = endpoint.pk
        obj.refresh_from_db()
        messages.warning(
            request,
            f"Signing secret of the webhook {endpoint.url}: {endpoint.secret} — copy it to your receiver now; "
            "owners can read it again on this page.",
        )

    def delete_model(self, request: HttpRequest, obj: WebhookEndpoint) -> None:
        services.webhook_endpoint_delete(endpoint=obj, actor=admin_user(request))

    @admin.action(description="Send a test event (ping) to the selected webhooks")
    def ping(self, request: AuthenticatedHttpRequest, queryset: models.QuerySet[WebhookEndpoint]) -> None:
        for endpoint in queryset:
            try:
                delivery = services.webhook_ping(endpoint=endpoint, actor=request.user)
            except DomainError as exc:
                messages.error(request, f"{endpoint.url}: {exc.message}")
            else:
                messages.success(request, f"Test event {delivery.event_id} queued for {endpoint.url}.")

    @admin.action(description="Enable the selected webhooks again")
    def enable(self, request: AuthenticatedHttpRequest, queryset: models.QuerySet[WebhookEndpoint]) -> None:
        for endpoint in queryset:
            services.webhook_endpoint_enable(endpoint=endpoint, actor=request.user)


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(OwnerOnlyAdmin):
    """The delivery log: read only."""

    list_display = ("created_at", "event", "endpoint", "status", "attempts", "response_status", "duration_ms")
    list_filter = ("status", "event")
    list_select_related = ("endpoint",)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
