"""A cheaper flush for transactional tests on PostgreSQL: DELETE instead of TRUNCATE.

After each transactional test (``transactional_db``, ``live_server``) Django flushes the database: one
``TRUNCATE`` of every table, then the ``post_migrate`` signal (content types, permissions). A TRUNCATE
gives each of the ~55 tables, its indexes and its TOAST table new files, created and fsynced at commit:
0.3 s on an idle machine, 1.5-2 s while other test processes write (measured 2026-12 on the 2-core
machine), where deleting the few rows a test left takes about 10 ms. ``delete_flush()`` swaps the SQL and
keeps the rest of Django's flush (the same tables, the same transaction, the same post_migrate).

What TRUNCATE does, the DELETEs do too: every table ends empty and no sequence is reset (Django's
TransactionTestCase flushes without ``reset_sequences``). TRUNCATE fires no row trigger, so the DELETEs run
with ``session_replication_role = replica`` (row triggers off: the foreign keys' checks, the judge
verdicts' refusal of DELETE) — except on a table with a TRUNCATE trigger of its own (the vote log, which
refuses to be truncated while it holds rows): that one is emptied last with its triggers on, so it
refuses exactly when its TRUNCATE guard would, and a test that commits votes still needs
``vote_log_purge``. Only the suite's superuser connection may turn triggers off; any other connection,
another database vendor, or a flush Django asks for with ``reset_sequences`` or ``allow_cascade``
(``available_apps``) gets Django's own SQL.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from django.core.management.color import Style
from django.db.backends.base.operations import BaseDatabaseOperations
from django.db.backends.postgresql.operations import DatabaseOperations

_TRUNCATE_GUARDED = """
    SELECT DISTINCT c.relname FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
    WHERE NOT t.tgisinternal AND (t.tgtype & 32) <> 0
"""


def delete_flush_sql(operations: BaseDatabaseOperations, tables: Sequence[str]) -> list[str] | None:
    """The statements that empty ``tables`` by DELETE, or None where only Django's TRUNCATE will do."""
    with operations.connection.cursor() as cursor:
        cursor.execute("SELECT current_setting('is_superuser') = 'on'")
        row = cursor.fetchone()
        if not row or not row[0]:
            return None
        cursor.execute(_TRUNCATE_GUARDED)
        guarded = {name for (name,) in cursor.fetchall()}
    quote = operations.quote_name
    return [
        "SET LOCAL session_replication_role = replica",
        *(f"DELETE FROM {quote(table)}" for table in tables if table not in guarded),
        "SET LOCAL session_replication_role = DEFAULT",
        *(f"DELETE FROM {quote(table)}" for table in tables if table in guarded),
    ]


@contextmanager
def delete_flush() -> Iterator[None]:
    """While the block runs, Django's flush on PostgreSQL deletes rows instead of truncating tables."""
    original = DatabaseOperations.sql_flush

    def sql_flush(
        self: BaseDatabaseOperations,
        style: Style,
        tables: Sequence[str],
        *,
        reset_sequences: bool = False,
        allow_cascade: bool = False,
    ) -> list[str]:
        if tables and not reset_sequences and not allow_cascade:
            statements = delete_flush_sql(self, tables)
            if statements is not None:
                return statements
        return original(self, style, tables, reset_sequences=reset_sequences, allow_cascade=allow_cascade)

    DatabaseOperations.sql_flush = sql_flush  # type: ignore[method-assign]
    try:
        yield
    finally:
        DatabaseOperations.sql_flush = original  # type: ignore[method-assign]
