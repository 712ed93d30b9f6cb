"""Questions the serving app asks of the apps above it, which answer by registering in ``AppConfig.ready``.

An endpoint that has served battles keeps its identity (name, model, version): the battles app knows
whether it has, and registers that check here, so this app need not import it. Likewise which endpoints
the health check watches (those of open campaigns' active competitors)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .models import ModelEndpoint

EndpointUsage = Callable[["ModelEndpoint"], bool]
_usage_checks: list[EndpointUsage] = []


def endpoint_usage_register(check: EndpointUsage) -> None:
    if check not in _usage_checks:
        _usage_checks.append(check)


def endpoint_in_use(endpoint: ModelEndpoint) -> bool:
    """Whether any registered app has history that names ``endpoint`` (battles, votes)."""
    return any(check(endpoint) for check in _usage_checks)


# The endpoints whose health is watched: those the apps above still need (battles registers the
# endpoints of open campaigns' active competitors). Called inside a tenant scope, or with scopes
# disabled by the cross-tenant lister; returns endpoint ids (a values queryset is fine: a subquery).
EndpointWatch = Callable[[], Iterable[int]]
_watch_sources: list[EndpointWatch] = []


def endpoint_watch_register(source: EndpointWatch) -> None:
    if source not in _watch_sources:
        _watch_sources.append(source)


def endpoints_watched() -> list[Iterable[int]]:
    """Each registered source's endpoint ids (none registered: nothing is watched)."""
    return [source() for source in _watch_sources]
