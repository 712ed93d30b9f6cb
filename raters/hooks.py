"""Where a lower app tells the apps above it that something happened, without importing them.

Apps depend one way: ``raters`` <- ``serving`` <- ``battles`` <- ``ranking``. When a write down here
must start work up there (a rater flag changed -> recompute the leaderboards), the lower app sends a
signal it defines and the higher app connects a receiver in its ``AppConfig.ready``.

``send_on_commit`` is how every such signal is sent: after the surrounding transaction commits (a
rolled-back change must start nothing), each receiver on its own, and a receiver that fails (a broker
down) is logged rather than turning a stored change into an error page."""

from __future__ import annotations

import logging
from typing import Any

from django.db import transaction
from django.dispatch import Signal

logger = logging.getLogger(__name__)

# Sent after commit when a rater is flagged or unflagged in an organisation: the votes that count
# have changed. Arguments: ``organization_id``, ``rater_id``.
rater_flag_changed = Signal()


def send_on_commit(signal: Signal, *, sender: Any, **kwargs: Any) -> None:
    def send() -> None:
        for receiver, result in signal.send_robust(sender=sender, **kwargs):
            if isinstance(result, Exception):
                logger.error("receiver %r of %s failed", receiver, sender, exc_info=result)

    transaction.on_commit(send)
