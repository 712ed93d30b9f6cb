"""What the battles app tells the apps above it (``ranking``), which subscribe in ``AppConfig.ready``.

Signals are sent with ``raters.hooks.send_on_commit``: after the transaction commits, each receiver on
its own, failures logged. ``interval_source`` is a query the other way round: active sampling needs the
current score intervals, which the ranking app owns and registers here."""

from __future__ import annotations

from collections.abc import Callable

from django.dispatch import Signal

# A vote was appended to the log. Arguments: ``campaign_id``, ``vote_id``.
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
