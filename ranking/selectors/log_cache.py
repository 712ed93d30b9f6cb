"""Figures computed from a campaign's vote log alone, cached under a key naming the log's state (its mark):
the same log gives the cached figure, a new vote a fresh computation. The latest figure computed is kept
as well, for a view to serve (labelled with its age) while a worker computes the current one."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Generic, TypeVar

from django.core.cache import cache
from django.db import connection, transaction
from django.db.models import Count, Max

from battles.models import Vote

T = TypeVar("T")
V = TypeVar("V")

# Figures computed from the vote log alone are cached this long, under a key that changes with the log.
LOG_CACHE_S = 3600
# The last such figures computed, whatever the log's state then, are kept this long as well ("latest"):
# what a view may serve, labelled with their age, while a worker computes the current ones
# (stale-while-revalidate, ``ranking.services.rater_reports_serve``).
LOG_LATEST_S = 7 * 24 * 3600


def _log_mark(campaign_id: int) -> list[Any]:
    """What identifies the campaign's log as it stands: the number of votes, the largest id and that
    vote's time. The log is append-only, so a new vote changes the count (also one that commits after a
    larger id was seen); the time tells apart two databases whose ids happen to coincide (a test
    database made afresh, a restore) behind one long-lived cache."""
    mark = Vote.objects.filter(campaign_id=campaign_id).aggregate(n=Count("id"), last=Max("id"))
    last = mark["last"]
    at = Vote.objects.filter(pk=last).values_list("created_at", flat=True).first() if last else None
    return [int(mark["n"]), int(last or 0), at.isoformat() if at else ""]


def _log_key(name: str, campaign_id: int, parts: list[Any], mark: list[Any] | None) -> str:
    """The cache key of a figure at one state of the log (``mark``), or of its latest one (None)."""
    named = json.dumps([name, campaign_id, mark, parts], default=str, separators=(",", ":"))
    kind = "log" if mark is not None else "log-latest"
    return f"arena:{kind}:{name}:{campaign_id}:{hashlib.sha256(named.encode()).hexdigest()}"


def _cached_on_log(campaign_id: int, name: str, parts: list[Any], compute: Callable[[], T]) -> T:
    """``compute()``, a pure function of the campaign's vote log (and of ``parts``), cached in the
    platform's cache under a key naming the log's current mark: the same log and parts give the cached
    value, a new vote a fresh computation. Deterministic figures only (the bootstraps here are seeded)."""
    key = _log_key(name, campaign_id, parts, _log_mark(campaign_id))
    found = cache.get(key)
    if found is None:
        found = compute()
        cache.set(key, found, LOG_CACHE_S)
    return found  # type: ignore[no-any-return]


@dataclass(frozen=True)
class OnLog(Generic[V]):
    """A figure computed from a campaign's vote log, with the log's mark at the time (``_log_mark``)."""

    value: V
    mark: list[Any]
    computed_at: datetime

    @property
    def votes(self) -> int:
        """Votes in the log the figure stands on."""
        return int(self.mark[0])


@contextmanager
def _log_snapshot() -> Iterator[None]:
    """The mark and the figures read from one snapshot of the log, so that a figure stored under a mark
    is exactly that log's (PostgreSQL: a REPEATABLE READ transaction; inside a caller's transaction, its
    isolation holds)."""
    outermost = not connection.in_atomic_block
    with transaction.atomic():
        if outermost and connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        yield


def _on_log_compute(campaign_id: int, name: str, parts: list[Any], compute: Callable[[], V]) -> OnLog[V]:
    """``compute()`` for the log as it stands, stored under that state's key and as the latest."""
    with _log_snapshot():
        mark = _log_mark(campaign_id)
        value = compute()
    return _on_log_store(campaign_id, name, parts, value, mark)


def _on_log_store(campaign_id: int, name: str, parts: list[Any], value: V, mark: list[Any]) -> OnLog[V]:
    """``value``, computed for the log at ``mark`` (in one snapshot with it: ``_log_snapshot``), stored under
    that state's key and as the latest."""
    found = OnLog(value=value, mark=mark, computed_at=datetime.now(UTC))
    # Plain tuples in the cache: an entry stays readable across a deploy that changes the class.
    entry = (found.value, found.mark, found.computed_at.isoformat())
    cache.set(_log_key(name, campaign_id, parts, mark), entry, LOG_CACHE_S)
    cache.set(_log_key(name, campaign_id, parts, None), entry, LOG_LATEST_S)
    return found


def _on_log_entry(entry: Any) -> OnLog[Any] | None:
    if not (isinstance(entry, tuple) and len(entry) == 3):
        return None
    value, mark, computed_at = entry
    return OnLog(value=value, mark=list(mark), computed_at=datetime.fromisoformat(computed_at))


def _log_extends(campaign_id: int, earlier: list[Any], now: list[Any]) -> bool:
    """Whether the log as it stands (``now``) grew from the one ``earlier`` names: no fewer votes, no
    smaller largest id, and that vote still there with its time (the cache may have outlived a database).
    An empty earlier log is not taken: a page of no raters is nothing to show while the rest comes."""
    votes, last, at = earlier
    if not last or votes > now[0] or last > now[1]:
        return False
    found = Vote.objects.filter(pk=last, campaign_id=campaign_id).values_list("created_at", flat=True).first()
    return found is not None and found.isoformat() == at


def _on_log_cached(
    campaign_id: int, name: str, parts: list[Any], mark: list[Any] | None = None
) -> tuple[OnLog[Any] | None, list[Any]]:
    """The figure cached for the log as it stands; else the latest one, computed on an earlier state of
    this log (the caller tells them apart by their mark); else None. With the log's current mark; with
    nothing cached (no latest entry: each computation stores one), ``[]`` and the log's mark is not read
    (the caller computes the figure, with its own mark). ``mark``: the log's, when the caller knows it."""
    if mark is None:
        if cache.get(_log_key(name, campaign_id, parts, None)) is None:
            return None, []
        mark = _log_mark(campaign_id)
    found = _on_log_entry(cache.get(_log_key(name, campaign_id, parts, mark)))
    if found is not None:
        return found, mark
    latest = _on_log_entry(cache.get(_log_key(name, campaign_id, parts, None)))
    if latest is not None and (latest.mark == mark or _log_extends(campaign_id, latest.mark, mark)):
        return latest, mark
    return None, mark
