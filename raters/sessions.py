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
from django.contrib.sessions.backends.db import SessionStore as DatabaseSessionStore
from django.utils import timezone

from core.cached import cached_fact, cached_fact_drop

TIMEOUT_S = 600


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
        row = (
            cached_fact(
                session_key_fact(session_key), lambda: self._row(session_key), timeout_s=TIMEOUT_S, keep_none=False
            )
            if session_key
            else None
        )
        if row is None or row[1] <= timezone.now():
            self._session_key = None  # as Django's: a missing or expired session is a new, empty one
            return {}
        data: dict[str, Any] = self.decode(row[0])
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
