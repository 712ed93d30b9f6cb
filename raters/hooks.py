"""Where a lower app tells the apps above it that something happened, without importing them.

Apps depend one way: ``raters`` <- ``serving`` <- ``battles`` <- ``ranking``. When a write down here
must start work up there (a rater flag changed -> recompute the leaderboards), the lower app sends a
signal it defines and the higher app connects a receiver in its ``AppConfig.ready``.

``send_on_commit`` is how every such signal is sent: after the surrounding transaction commits (a
rolled-back change must start nothing), each receiver on its own, and a receiver that fails (a broker
down) is logged rather than turning a stored change into an error page."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from django.db import transaction
from django.dispatch import Signal

logger = logging.getLogger(__name__)

# Sent after commit when a rater is flagged or unflagged in an organisation: the votes that count
# have changed. Arguments: ``organization_id``, ``rater_id``.
rater_flag_changed = Signal()


# The cache keys of facts (core.cached) keyed by a user that the apps above read on a signed-in person's
# requests: fetched with the user's own fact, in the same round trip (raters.principals.session_user).
_user_fact_keys: list[Callable[[Any], str]] = []


def user_fact_register(key_of_user: Callable[[Any], str]) -> None:
    """Have ``key_of_user(user_id)``'s fact fetched along with the session's user (an app's ``ready``)."""
    if key_of_user not in _user_fact_keys:
        _user_fact_keys.append(key_of_user)


def user_fact_keys(user_id: Any) -> list[str]:
    return [key_of_user(user_id) for key_of_user in _user_fact_keys]


def send_on_commit(signal: Signal, *, sender: Any, **kwargs: Any) -> None:
    def send() -> None:
        for receiver, result in signal.send_robust(sender=sender, **kwargs):
            if isinstance(result, Exception):
                logger.error("receiver %r of %s failed", receiver, sender, exc_info=result)

    transaction.on_commit(send)
