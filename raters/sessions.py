"""Sessions in the database, read through the shared cache (``SESSION_ENGINE = "raters.sessions"``).

Django's database sessions read their row on every request: the first statement of each of a rater's three
requests a cycle. Here the row (its signed data and its expiry) is a fact of ``core.cached``: read from Redis,
dropped whenever this store saves or deletes it (a log-in's new key, a log-out's flush, a password change's
rotation, any change of the data), so a session ended in one process is gone in every other on their next
request; the expiry is checked on every read, as the database query does. The rows stay the truth (Redis can
be emptied at any time), and while Redis is down they are read as before. A cookie naming no session stores
nothing (anyone can send one), and an entry lives at most ``TIMEOUT_S``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from asgiref.sync import sync_to_async
from django.contrib.auth import SESSION_KEY
from django.contrib.sessions.backends.db import SessionStore as DatabaseSessionStore
from django.utils import timezone

from core.cached import cached_fact, cached_fact_drop

from .principals import user_facts_along

TIMEOUT_S = 600
# The user each session key this process has read belongs to, as a guess for the next read of the same session:
# that read fetches the user's facts in its round trip to Redis (``along``), so a request reads its session, its
# user and their organisations in one round trip, not two. Only a guess: a fact fetched along is kept in the
# request's memo under its own key (the user named by the session is looked up by that user's key), so a wrong
# guess costs nothing but the fetch. Only sessions that exist are remembered, at most HINTS_MAX of them.
HINTS_MAX = 50_000
_user_hints: dict[str, Any] = {}


def session_key_fact(session_key: str) -> str:
    return f"arena:fact:session:{session_key}"


class SessionStore(DatabaseSessionStore):
    def _row(self, session_key: str) -> tuple[str, datetime] | None:
        row: tuple[str, datetime] | None = (
            self.model.objects.filter(session_key=session_key).values_list("session_data", "expire_date").first()
        )
        return row

    def load(self) -> dict[str, Any]:
        session_key = self.session_key
        hint = _user_hints.get(session_key) if session_key else None
        row = (
            cached_fact(
                session_key_fact(session_key),
                lambda: self._row(session_key),
                timeout_s=TIMEOUT_S,
                keep_none=False,
                along=user_facts_along(hint) if hint is not None else (),
            )
            if session_key
            else None
        )
        if row is None or row[1] <= timezone.now():
            self._session_key = None  # as Django's: a missing or expired session is a new, empty one
            return {}
        data: dict[str, Any] = self.decode(row[0])
        user_id = data.get(SESSION_KEY)
        if user_id is not None and user_id != hint and session_key:
            if len(_user_hints) >= HINTS_MAX:
                _user_hints.clear()
            _user_hints[session_key] = user_id
        return data

    def save(self, must_create: bool = False) -> None:
        super().save(must_create=must_create)
        if self.session_key:
            cached_fact_drop(session_key_fact(self.session_key))

    def delete(self, session_key: str | None = None) -> None:
        session_key = session_key or self.session_key
        super().delete(session_key)
        if session_key:
            cached_fact_drop(session_key_fact(session_key))

    async def asave(self, must_create: bool = False) -> None:
        await super().asave(must_create=must_create)
        if self.session_key:
            await sync_to_async(cached_fact_drop)(session_key_fact(self.session_key))

    async def adelete(self, session_key: str | None = None) -> None:
        session_key = session_key or self.session_key
        await super().adelete(session_key)
        if session_key:
            await sync_to_async(cached_fact_drop)(session_key_fact(session_key))
