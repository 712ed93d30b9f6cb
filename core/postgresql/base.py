"""Django's PostgreSQL backend with a pool (psycopg_pool) that behaves well around an outage.

Django's own ``pool`` option builds a plain ``psycopg_pool.ConnectionPool``. Two of its habits hurt a web
process when PostgreSQL restarts (docs/reliability/load.md, "Connections"):

- A slot whose connection failed is reconnected with a delay that doubles after each failure (1, 2, 4,
  8 s ...), and only one slot grows at a time. After an outage of 20 s the next attempt may be 16 s away
  while the server is long back: requests waited for the pool's timeout and failed for a minute.
  ``ArenaConnectionPool`` caps the delay between attempts at ``RECONNECT_DELAY_MAX_S`` (1 s), so the pool
  is whole again about a second after the server is.
- While the server cannot be reached at all, every request waited the full timeout (there is nothing to
  wait for). Once a connection attempt has failed and none has succeeded since, the requests waiting are
  told at once and a new one waits at most ``unreachable_timeout`` seconds; each gets the site's 503
  (core.http.server_error: PoolTimeout is psycopg's OperationalError). A pool that is merely
  busy (the server fine, every connection in use) still queues a request up to the full ``timeout``, which
  is what absorbs a burst without a 5xx.

Both rely on psycopg_pool internals (``_add_connection``'s attempt object, ``_connect``,
``_getconn_unchecked`` and the waiting clients): the versions are
pinned in pyproject.toml, and tests/reliability's PostgreSQL restart test (the pool on, as deployed) fails
if an upgrade changes them.
"""

from __future__ import annotations

import select
from time import monotonic
from typing import Any

import psycopg
from django.core.exceptions import ImproperlyConfigured
from django.db.backends.base.base import NO_DB_ALIAS
from django.db.backends.base.operations import BaseDatabaseOperations
from django.db.backends.postgresql import base, operations
from django.db.models.functions import Cast
from django.db.utils import DEFAULT_DB_ALIAS
from psycopg_pool import ConnectionPool, PoolTimeout
from psycopg_pool.base import AttemptWithBackoff

RECONNECT_DELAY_MAX_S = 1.0


class _CappedAttempt(AttemptWithBackoff):
    """psycopg_pool's reconnection schedule (with its jitter and its give-up time, the pool's
    ``reconnect_timeout``), the delay between two attempts capped at ``RECONNECT_DELAY_MAX_S``."""

    def update_delay(self, now: float) -> None:
        super().update_delay(now)
        self.delay = min(self.delay, RECONNECT_DELAY_MAX_S)


class ArenaConnectionPool(ConnectionPool):
    """A ``ConnectionPool`` whose reconnection never pauses longer than a second, and which answers at once
    (after ``unreachable_timeout``) while the server cannot be reached."""

    def __init__(self, *args: Any, unreachable_timeout: float = 1.0, **kwargs: Any) -> None:
        self.unreachable_timeout = unreachable_timeout
        self._unreachable_since: float | None = None
        self._unreachable_why = ""
        super().__init__(*args, **kwargs)

    @property
    def unreachable(self) -> bool:
        """The last connection attempt failed and none has succeeded since."""
        return self._unreachable_since is not None

    def _add_connection(self, attempt: AttemptWithBackoff | None, growing: bool = False) -> None:
        if attempt is None:
            attempt = _CappedAttempt(timeout=self.reconnect_timeout)
        super()._add_connection(attempt, growing=growing)

    def _connect(self, timeout: float | None = None) -> Any:
        try:
            connection = super()._connect(timeout)
        except Exception as exc:
            if self._unreachable_since is None:
                self._unreachable_since = monotonic()
            self._unreachable_why = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            # The clients already waiting would wait for nothing: they get the error now.
            with self._lock:
                waiting = list(self._waiting)
                self._waiting.clear()
            for client in waiting:
                client.fail(PoolTimeout("the database server cannot be reached"))
            raise
        self._unreachable_since = None
        return connection

    def getconn(self, timeout: float | None = None) -> Any:
        try:
            return super().getconn(timeout)
        except PoolTimeout:
            if self.unreachable:  # psycopg_pool's message would name the full timeout, not the cause
                raise PoolTimeout(f"the database server cannot be reached: {self._unreachable_why}") from None
            raise

    def _getconn_unchecked(self, timeout: float) -> Any:
        # Each wait of getconn's loop (a connection found dead is replaced, and waited for, in a loop).
        if self.unreachable:
            timeout = min(timeout, self.unreachable_timeout)
        return super()._getconn_unchecked(timeout)


def connection_check(conn: psycopg.Connection[Any]) -> None:
    """The pool's check of a connection it is about to hand out, without a round trip while nothing is amiss.

    psycopg_pool's ``check_connection`` sends an empty query each time: a round trip to the server on every
    request, for a connection that in all but a restart is fine. An idle connection has nothing to read: the
    server speaks only when asked. So the socket is polled first (no wait, one system call): a connection
    whose server ended it (a restart, a terminated backend, a relay cut) has the server's last error or the
    end of the stream waiting there, and only then is the empty query sent, which raises for a dead
    connection (the pool replaces it) and reads whatever else an idle session may have been sent. As Go's
    MySQL driver checks a connection before reuse. A server that vanished without a word (its host lost) is
    not seen here; the empty query would have waited for the network's timeout all the same."""
    if conn.closed:
        raise psycopg.OperationalError("the connection is closed")
    poller = select.poll()
    poller.register(conn.pgconn.socket, select.POLLIN | select.POLLPRI)
    if poller.poll(0):
        ConnectionPool.check_connection(conn)


class DatabaseOperations(operations.DatabaseOperations):
    """Django's, with one question remembered: whether a join's two columns differ in type (then the right
    one is cast). Django asks it of every join of every query, and for a foreign key to a ``BigAutoField``
    the answer builds a new ``BigIntegerField`` each time: 28 fields a rater's cycle, a few percent of its
    CPU (benchmarks/vote_cost.py). The answer depends on the two fields alone."""

    _casts: dict[tuple[Any, Any], bool] = {}

    def prepare_join_on_clause(self, lhs_table: Any, lhs_field: Any, rhs_table: Any, rhs_field: Any) -> Any:
        lhs_expr, rhs_expr = BaseDatabaseOperations.prepare_join_on_clause(
            self, lhs_table, lhs_field, rhs_table, rhs_field
        )
        key = (lhs_field, rhs_field)
        cast = self._casts.get(key)
        if cast is None:
            cast = self._casts[key] = lhs_field.db_type(self.connection) != rhs_field.db_type(self.connection)
        if cast:
            rhs_expr = Cast(rhs_expr, lhs_field)  # type: ignore[assignment]  # as Django does
        return lhs_expr, rhs_expr


class DatabaseWrapper(base.DatabaseWrapper):
    """Django's wrapper with ``ArenaConnectionPool`` for its pool, and the join's type check remembered
    (``DatabaseOperations``); everything else is Django's."""

    ops_class = DatabaseOperations

    @property
    def pool(self) -> ArenaConnectionPool | None:
        # Django 5.2's property, with the pool class replaced (and no ImportError path: psycopg_pool is a
        # dependency of this project).
        pool_options = self.settings_dict["OPTIONS"].get("pool")
        if self.alias == NO_DB_ALIAS or not pool_options:
            return None
        pools = self._connection_pools  # type: ignore[attr-defined]  # Django's, not in django-stubs
        if self.alias not in pools:
            if self.settings_dict.get("CONN_MAX_AGE", 0) != 0:
                raise ImproperlyConfigured("Pooling doesn't support persistent connections.")
            options = {} if pool_options is True else dict(pool_options)
            connect_kwargs = self.get_connection_params()
            connect_kwargs["autocommit"] = True  # Django sets it properly later, as in its own property
            pool = ArenaConnectionPool(
                kwargs=connect_kwargs,
                open=False,
                configure=self._configure_connection,  # type: ignore[attr-defined]
                check=connection_check if self.settings_dict["CONN_HEALTH_CHECKS"] else None,
                name=f"arena-{self.alias or DEFAULT_DB_ALIAS}",
                **options,
            )
            # As in Django: threads racing here each build a pool (not opened yet); the first one stored wins.
            pools.setdefault(self.alias, pool)
        return pools[self.alias]  # type: ignore[no-any-return]
