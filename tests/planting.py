"""Planting rows that the database holds append-only, for tests that must set a scene.

Prompt texts once battled, answers and turns, leaderboard snapshots, audit events and the judgement ledger
are refused UPDATE (and DELETE, except with their parent) by triggers (battles 0027, raters 0018, ranking
0007; the vote log by battles 0002). A test that needs an answer with a given text, a generation removed so
that it can be recorded again, or a snapshot from a week ago, plants it inside ``planting()``: the block runs
with the session's row triggers off (``session_replication_role = replica``), which only a superuser may
set, so only the suite's own connection can. The application's role never can
(``tests/battles/test_app_role.py``, ``tests/battles/test_append_only_texts.py``), so this is not a way
around the rule for the platform; it is the suite's stand-in for writing a past that the code under test
could not have written itself.

Row triggers off includes the foreign keys' checks: plant only rows that are consistent.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.db import connection

__all__ = ["answers_planted", "planting"]


@contextmanager
def planting() -> Iterator[None]:
    """Within the block, writes to append-only rows pass (PostgreSQL; a no-op on SQLite, whose tables carry
    only the vote log's triggers)."""
    if connection.vendor != "postgresql":
        yield
        return
    with connection.cursor() as cursor:
        cursor.execute("SET session_replication_role = replica")
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute("SET session_replication_role = DEFAULT")


def answers_planted(generations: Any, text: str) -> None:
    """Inside ``planting()``: the answers of the ``generations`` queryset now say ``text``, with the rendering
    the generation worker stores beside an answer (battles.rendering.answer_rendered), as if the models had
    written it."""
    from battles.rendering import answer_rendered

    generations.update(text=text, **answer_rendered(text))
