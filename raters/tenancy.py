"""Tenancy enforced by the ORM (pretix's django-scopes).

Every tenant-owned model's default manager is a ``ScopedManager`` on the dimension ``organization``:
a query made while no scope is open raises ``ScopeError`` instead of returning every organisation's
rows, and inside ``scope(organization=[...])`` it is filtered to those organisations. The scope is
opened once, at each edge:

- HTTP requests (views, the admin, the API, streamed exports): ``raters.middleware``, to the
  organisations the request's principal belongs to (a user's memberships, an API key's organisation,
  everything for a superuser, nothing for an anonymous visitor);
- Celery tasks: ``TenantTask``, to the ``organization_id`` the task is called with;
- management commands and the few deliberate cross-tenant reads (the beat safety net that lists
  open campaigns of every organisation, the lookup of a credential such as an API key or an
  invitation token): ``scopes_disabled()``, written out where it happens so it can be reviewed.

Role checks stay in the selectors: the scope is the outer wall (no row of a foreign organisation can
be read by mistake), the selectors decide what a member may see inside it.
"""

from __future__ import annotations

import random
from collections.abc import AsyncIterable, AsyncIterator, Iterable, Iterator
from contextlib import AbstractContextManager
from typing import Any, TypeVar

from django.apps import apps
from django.conf import settings
from django.db import models
from django_scopes import ScopeError, get_scope, scope, scopes_disabled
from django_scopes.manager import DisabledQuerySet

from core.cached import cached_fact
from core.slots import organization_slot
from core.tasks import TransactionAwareTask

__all__ = [
    "ScopeError",
    "UnscopedQuerySet",
    "ascoped_iterator",
    "TENANT_DIMENSION",
    "TenantTask",
    "organization_scope",
    "principal_organization_ids",
    "principal_scope",
    "scope",
    "scoped_iterator",
    "scopes_disabled",
    "TenantManager",
]

TENANT_DIMENSION = "organization"

_M = TypeVar("_M", bound=models.Model)


class UnscopedQuerySet(DisabledQuerySet):  # type: ignore[misc]  # django-scopes ships no types
    """What a tenant model's manager hands out while no scope is open: every read, write and filter
    raises ``ScopeError``. Unlike django-scopes' own, ``.all()`` may be chained (it still raises once
    evaluated), so that a form can declare a model choice field at import time and get its real
    queryset at request time (the admin does exactly this for every foreign key)."""

    def all(self) -> UnscopedQuerySet:
        chained: UnscopedQuerySet = self._chain()
        return chained


class TenantManager(models.Manager[_M]):
    """The default manager of a tenant-owned model, scoped on ``organization`` through ``tenant_path``
    (the lookup from the model to its organisation; a subclass sets ``battle__organization`` for a
    generation, which has no organisation column of its own: a class attribute, because Django builds
    related managers from the manager's class, not from its instance).

    Inside ``scope(organization=[ids])`` it is filtered to those organisations; inside
    ``scope(organization=None)`` (a superuser) and ``scopes_disabled()`` it is not filtered; outside
    any scope every query raises ``ScopeError``."""

    tenant_path = "organization"

    def get_queryset(self) -> models.QuerySet[_M]:
        current = get_scope()
        if not current.get("_enabled", True):
            return super().get_queryset()
        if TENANT_DIMENSION not in current:
            return UnscopedQuerySet(self.model, using=self._db, missing_scopes={TENANT_DIMENSION})
        value = current[TENANT_DIMENSION]
        queryset = super().get_queryset()
        if value is None:
            return queryset
        return queryset.filter(**{f"{self.tenant_path}__in": list(value)})

    def with_scopes_disabled(self) -> models.QuerySet[_M]:
        """Every organisation's rows, for the few reads that are across tenants by design; prefer
        ``with scopes_disabled():`` around a block, which shows in review."""
        with scopes_disabled():
            return self.get_queryset()


ScopeValue = list[int] | None  # None: every organisation (a superuser); []: none at all


def principal_organization_ids(principal: Any) -> ScopeValue:
    """The organisations a request's principal may touch at all: an API key's own organisation, a
    superuser everything, a user the organisations they are a member of (any role), an anonymous
    visitor none."""
    api_key = getattr(principal, "api_key", None)
    if api_key is not None:
        return [api_key.organization_id]
    if principal is None or not getattr(principal, "is_authenticated", False):
        return []
    if not principal.is_active:
        return []
    if principal.is_superuser:
        return None
    membership = apps.get_model("raters", "Membership")  # raters.models imports this module

    def load() -> list[int]:
        with scopes_disabled():  # the memberships are what the scope is made of
            return sorted(set(membership.objects.filter(user=principal).values_list("organization_id", flat=True)))

    # Read on every request: from the shared cache, dropped when a membership changes (raters.principals).
    ids: list[int] = cached_fact(organizations_key(principal.pk), load)
    return list(ids)


def organizations_key(user_id: Any) -> str:
    """The cache key of a user's organisations (core.cached)."""
    return f"arena:fact:organizations:{user_id}"


def principal_scope(principal: Any) -> AbstractContextManager[None]:
    manager: AbstractContextManager[None] = scope(**{TENANT_DIMENSION: principal_organization_ids(principal)})
    return manager


def organization_scope(organization_id: int | Iterable[int]) -> AbstractContextManager[None]:
    if isinstance(organization_id, int):
        value: list[int] = [organization_id]
    else:
        value = list(organization_id)
    manager: AbstractContextManager[None] = scope(**{TENANT_DIMENSION: value})
    return manager


def scoped_iterator(content: Iterable[Any], value: ScopeValue) -> Iterator[Any]:
    """A streamed body is produced after the view (and the middleware) returned: each chunk is
    computed inside the request's scope again."""
    iterator = iter(content)
    while True:
        with scope(**{TENANT_DIMENSION: value}):
            try:
                chunk = next(iterator)
            except StopIteration:
                return
        yield chunk


async def ascoped_iterator(content: AsyncIterable[Any], value: ScopeValue) -> AsyncIterator[Any]:
    """``scoped_iterator`` for an async streamed body (an async view's server-sent events): each step
    runs inside the request's scope again, and so do the ORM calls it makes (``sync_to_async`` copies
    the context)."""
    iterator = aiter(content)
    try:
        while True:
            with scope(**{TENANT_DIMENSION: value}):
                try:
                    chunk = await anext(iterator)
                except StopAsyncIteration:
                    return
            yield chunk
    finally:
        close = getattr(iterator, "aclose", None)
        if close is not None:  # a client that went away: the view's generator stops reading too
            with scope(**{TENANT_DIMENSION: value}):
                await close()


# A slot's lease (renewed every third of it while its task runs): a worker killed with a slot frees it this
# long after; and how long an organisation's task that found every slot taken waits before it is tried again.
ORGANIZATION_SLOT_LEASE_S = 30.0
ORGANIZATION_BUSY_RETRY_S = 1.0


class TenantTask(TransactionAwareTask):
    """Celery base for tasks that work inside one organisation: the task takes a keyword-only
    ``organization_id`` (required: Celery checks the call against the signature) and its body runs
    inside that organisation's scope. Transaction-aware like every task of the platform: queued
    inside a transaction, it is sent when that commits."""

    abstract = True
    # A kind of work an organisation may run only so many of at once across the deployment (the keys of
    # ARENA_ORGANIZATION_SLOTS, e.g. "generation": model calls to the organisation's own endpoints);
    # ``@shared_task(base=TenantTask, organization_slots="generation")``. Empty: no limit.
    organization_slots = ""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        organization_id = kwargs.get("organization_id")
        if not isinstance(organization_id, int):
            raise TypeError(f"{self.name} must be called with organization_id=<int>")
        limit = settings.ARENA_ORGANIZATION_SLOTS.get(self.organization_slots, 0) if self.organization_slots else 0
        if not limit or self.request.is_eager or self.request.id is None:
            with organization_scope(organization_id):
                return super().__call__(*args, **kwargs)
        # One organisation's flood (many battles to a slow endpoint, many judge runs) holds at most
        # ``limit`` of the workers; its other tasks go back to the queue for a moment, never blocking a
        # worker, and the other organisations' tasks run meanwhile (docs/reliability/index.md).
        with organization_slot(
            self.organization_slots, organization_id, limit=limit, lease_s=ORGANIZATION_SLOT_LEASE_S, renew=True
        ) as held:
            if not held:
                raise self.retry(countdown=ORGANIZATION_BUSY_RETRY_S + random.random(), max_retries=None)
            with organization_scope(organization_id):
                return super().__call__(*args, **kwargs)
