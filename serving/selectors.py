"""Reads about model endpoints."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime

from django.db.models import Q
from django.utils import timezone

from .models import EndpointOutage, ModelEndpoint
from .triton.client import model_readiness

Period = tuple[datetime, datetime]


def endpoints_not_ready(endpoints: Iterable[ModelEndpoint]) -> list[str]:
    """One line per endpoint whose Triton server does not report its model ready (asked live)."""
    return [problem for problem in (model_readiness(endpoint.spec()) for endpoint in endpoints) if problem]


def periods_overlap_s(periods: Sequence[Period], window: Period) -> float:
    """Seconds of ``window`` covered by the union of ``periods`` (overlapping periods count once)."""
    start, end = window
    clipped = sorted((max(a, start), min(b, end)) for a, b in periods if min(b, end) > max(a, start))
    total = 0.0
    current: Period | None = None
    for a, b in clipped:
        if current is None or a > current[1]:
            if current is not None:
                total += (current[1] - current[0]).total_seconds()
            current = (a, b)
        else:
            current = (current[0], max(current[1], b))
    if current is not None:
        total += (current[1] - current[0]).total_seconds()
    return total


def endpoint_outage_periods(
    *, endpoint_ids: Iterable[int], since: datetime, until: datetime, now: datetime
) -> dict[int, list[tuple[datetime, datetime, bool]]]:
    """Per endpoint id, its outages that overlap ``since``..``until`` as (start, end, still open), oldest
    first; an open outage ends ``now``."""
    found: dict[int, list[tuple[datetime, datetime, bool]]] = {}
    rows = (
        EndpointOutage.objects.filter(endpoint_id__in=list(endpoint_ids), started_at__lt=until)
        .filter(Q(ended_at__isnull=True) | Q(ended_at__gt=since))
        .order_by("started_at")
        .values_list("endpoint_id", "started_at", "ended_at")
    )
    for endpoint_id, started_at, ended_at in rows:
        found.setdefault(endpoint_id, []).append((started_at, ended_at or max(now, started_at), ended_at is None))
    return found


def _ago(seconds: float) -> str:
    minutes = int(seconds // 60)
    if minutes < 1:
        return f"{int(seconds)} s"
    if minutes < 120:
        return f"{minutes} min"
    return f"{minutes // 60} h {minutes % 60} min"


def endpoint_health_line(endpoint: ModelEndpoint, *, now: datetime | None = None) -> str:
    """The endpoint's health for a manager, in one line: state, since when, and the last check's problem
    (if any). Times are UTC, as the console's."""
    now = now or timezone.now()
    if endpoint.health == ModelEndpoint.Health.UNKNOWN and endpoint.health_checked_at is None:
        return "Unknown (not checked yet)"
    line = endpoint.get_health_display()
    if endpoint.health_since is not None:
        line += (
            f" since {endpoint.health_since:%Y-%m-%d %H:%M} UTC ({_ago((now - endpoint.health_since).total_seconds())})"
        )
    if endpoint.health != ModelEndpoint.Health.DOWN and endpoint.health_failures:
        checks = "check" if endpoint.health_failures == 1 else "checks"
        line += f"; {endpoint.health_failures} failed {checks} in a row"
    if endpoint.health_detail:
        line += f": {endpoint.health_detail}"
    return line


def endpoint_outages_recent(endpoint: ModelEndpoint, *, limit: int) -> list[EndpointOutage]:
    """The endpoint's latest outages, newest first."""
    return list(EndpointOutage.objects.filter(endpoint=endpoint).order_by("-started_at")[:limit])
