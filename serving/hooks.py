"""Questions the serving app asks of the apps above it, which answer by registering in ``AppConfig.ready``.

An endpoint that has served battles keeps its identity (name, model, version): the battles app knows
whether it has, and registers that check here, so this app need not import it."""

from __future__ import annotations

from collections.abc import Callable
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
