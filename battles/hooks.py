"""What the battles app tells the apps above it (``ranking``), which subscribe in ``AppConfig.ready``.

Signals are sent with ``raters.hooks.send_on_commit``: after the transaction commits, each receiver on
its own, failures logged. ``interval_source`` is a query the other way round: active sampling needs the
current score intervals, which the ranking app owns and registers here."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from django.dispatch import Signal

# A vote was appended to the log. Arguments: ``campaign_id``, ``vote_id``, ``organization_id``.
vote_stored = Signal()

# The campaign's ranking settings changed (exclusion policy, method) or a manager asked for fresh
# leaderboards. Arguments: ``campaign_id``, ``now`` (True: past the debounce).
leaderboards_stale = Signal()

# campaign id -> {competitor id: (lower, upper)} of the current leaderboard's placed competitors.
IntervalSource = Callable[[int], dict[int, tuple[float, float]]]
_interval_source: list[IntervalSource] = []


def interval_source_register(source: IntervalSource) -> None:
    _interval_source[:] = [source]


def current_intervals(campaign_id: int) -> dict[int, tuple[float, float]]:
    """The registered source's intervals; none (every pair equally uncertain) without one."""
    return _interval_source[0](campaign_id) if _interval_source else {}


# An export job finished (done or failed), sent after its row commits, for in-process subscribers (the
# webhooks' ``export.ready`` delivery is written by the service itself, ``raters.services.
# webhook_event_emit``, in the same transaction). Arguments: ``organization_id``, ``event``
# ("export.ready"), ``payload`` (``battles.services.export_event_payload``: the job's id, campaign,
# kind, format, status, rows, bytes, sha256, error, finished_at).
export_ready = Signal()


@dataclass(frozen=True)
class ExportKind:
    """An export kind an app above battles provides (``preference_pairs``, by ranking, which owns the
    exclusion policy): its rows as JSON-ready dicts, and an audit stored with the job (or None)."""

    rows: Callable[[Any, Any], Iterator[dict[str, Any]]]  # (campaign, VoteFilters) -> rows
    audit: Callable[[Any, Any], dict[str, Any] | None]  # (campaign, VoteFilters) -> audit


_export_kinds: dict[str, ExportKind] = {}


def export_kind_register(name: str, kind: ExportKind) -> None:
    _export_kinds[name] = kind


def export_kind(name: str) -> ExportKind | None:
    return _export_kinds.get(name)


# A judge run ended (done or failed), sent after its row commits: ranking recomputes the judge's board
# and its calibration against the human votes. Arguments: ``organization_id``, ``campaign_id``, ``judge_id``,
# ``run_id``.
judge_run_finished = Signal()
