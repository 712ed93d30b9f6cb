"""The connection pool (core/postgresql/base.py) around a PostgreSQL outage: the real test server, reached
through a TCP relay of the test's own that can be cut (every connection dropped, new ones refused) and
restored, as a restart does. psycopg_pool's stock pool, beside it through the same relay, shows the failure
the subclass exists for: a reconnection delay that doubles while the server is down keeps the pool empty
for seconds after the server is back (requests failed with the pool's timeout for up to a minute)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from django.db import connection
from psycopg_pool import ConnectionPool, PoolTimeout

from core.postgresql.base import ArenaConnectionPool, connection_check

pytestmark = pytest.mark.django_db


class Relay:
    """127.0.0.1:<port> -> the test database's server, byte for byte, until ``cut``."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.port = 0
        self.sockets: list[socket.socket] = []
        self.lock = threading.Lock()
        self.listener: socket.socket | None = None
        self.restore()

    def restore(self) -> None:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(16)
        self.port = listener.getsockname()[1]
        self.listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def cut(self) -> None:
        with self.lock:
            assert self.listener is not None
            self.listener.shutdown(socket.SHUT_RDWR)  # wakes the accepting thread (close alone does not)
            self.listener.close()
            self.listener = None
            for sock in self.sockets:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                sock.close()
            self.sockets.clear()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # cut
            server = socket.create_connection(self.target)
            with self.lock:
                self.sockets += [client, server]
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        for sock in (source, sink):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


@pytest.fixture
def relay() -> Iterator[Relay]:
    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL only: the pool is psycopg's")
    params = connection.get_connection_params()
    relay = Relay((params.get("host") or "127.0.0.1", int(params.get("port") or 5432)))
    yield relay
    if relay.listener is not None:
        relay.cut()


def _pool(cls: type[Any], relay: Relay, **extra: object) -> Any:
    params = connection.get_connection_params()
    kwargs = {k: v for k, v in params.items() if k in ("dbname", "user", "password")}
    kwargs.update(host="127.0.0.1", port=relay.port, connect_timeout=2)
    # Each pool with its own check: ours with the deployed one (core.postgresql's, DatabaseWrapper.pool's).
    check = connection_check if cls is ArenaConnectionPool else ConnectionPool.check_connection
    pool = cls(kwargs=kwargs, min_size=1, max_size=2, timeout=10, check=check, open=True, **extra)
    pool.wait(timeout=10)
    return pool


def _select_one(pool: Any, timeout: float) -> int:
    with pool.connection(timeout=timeout) as conn:
        return int(conn.execute("SELECT 1").fetchone()[0])


def test_after_an_outage_the_pool_is_whole_within_a_second_and_answers_at_once_while_down(relay: Relay) -> None:
    ours = _pool(ArenaConnectionPool, relay, unreachable_timeout=1.0)
    stock = _pool(ConnectionPool, relay)
    try:
        assert _select_one(ours, 5) == 1 and _select_one(stock, 5) == 1
        relay.cut()
        # Down: each pool finds its connection dead, and every reconnection fails. Ours says so after its
        # unreachable_timeout (1 s), not after the full 10 s a busy pool would make a request wait.
        with pytest.raises(PoolTimeout):
            _select_one(stock, 1)
        t0 = time.monotonic()
        with pytest.raises(PoolTimeout, match="the database server cannot be reached: connection failed"):
            _select_one(ours, 10)
        assert time.monotonic() - t0 < 5
        assert ours.unreachable
        # Down for 8 s: the stock pool's attempts come after 1, 3, 7 and 15 s, ours at least once a second.
        time.sleep(8)
        relay.restore()
        # Back: ours hands out a connection within 3 s; the stock pool is still sitting out its doubled delay.
        assert _select_one(ours, 3) == 1
        assert not ours.unreachable
        with pytest.raises(PoolTimeout):
            _select_one(stock, 3)
    finally:
        ours.close()
        stock.close()


def test_a_busy_pool_queues_a_request_for_its_full_timeout_rather_than_failing_it(relay: Relay) -> None:
    """The server is fine and every connection is in use: the request waits for one to come back (a burst
    of votes is absorbed), it does not get the unreachable server's quick 503."""
    pool = _pool(ArenaConnectionPool, relay, unreachable_timeout=0.2)
    try:
        held = [pool.getconn(), pool.getconn()]  # max_size 2: both taken
        threading.Timer(1.0, pool.putconn, args=(held.pop(),)).start()
        assert _select_one(pool, 10) == 1  # waited ~1 s, more than unreachable_timeout
        pool.putconn(held.pop())
    finally:
        pool.close()


def test_an_exhausted_pool_is_the_sites_503_through_djangos_wrapper(relay: Relay) -> None:
    """Through Django (the ENGINE the settings name, core.postgresql): a request that finds every connection
    taken for longer than the pool's timeout gets Django's OperationalError, which the error handler
    answers with 503 and Retry-After (core.http.server_error), never a 500."""
    from django.db import OperationalError

    from core.http import database_unavailable
    from core.postgresql.base import DatabaseWrapper

    pool = {"min_size": 1, "max_size": 1, "timeout": 0.5, "unreachable_timeout": 0.5}
    settings_dict = {
        **connection.settings_dict,
        "ENGINE": "core.postgresql",
        "HOST": "127.0.0.1",
        "PORT": str(relay.port),
        "CONN_HEALTH_CHECKS": True,
        "OPTIONS": {**connection.settings_dict["OPTIONS"], "pool": pool},
    }
    holder = DatabaseWrapper(settings_dict, alias="pool-probe")
    waiter = DatabaseWrapper(settings_dict, alias="pool-probe")
    try:
        assert isinstance(holder.pool, ArenaConnectionPool) and holder.pool is waiter.pool
        holder.ensure_connection()  # the only connection
        with pytest.raises(OperationalError) as raised:
            waiter.ensure_connection()
        assert database_unavailable(raised.value)
        holder.close()  # given back: the waiter gets it now
        waiter.ensure_connection()
        with waiter.cursor() as cursor:
            cursor.execute("SELECT 1")
            assert cursor.fetchone() == (1,)
    finally:
        waiter.close()
        holder.close_pool()


def test_the_pools_backend_writes_the_same_joins_and_asks_each_pair_of_columns_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """core.postgresql's operations remember whether a join's columns differ in type (Django asks on every
    join, and builds a field to answer): the SQL is Django's own, the question is asked once a pair."""
    from django.db.backends.postgresql.operations import DatabaseOperations as DjangoOperations
    from django.db.models.fields.related import ForeignKey

    from battles.models import Battle
    from core.postgresql.base import DatabaseOperations

    query = Battle.objects.select_related("campaign", "prompt", "left__endpoint", "right__endpoint").filter(
        pk="00000000-0000-0000-0000-000000000001"
    )
    django_sql = str(query.query.get_compiler(connection=connection).as_sql()[0])
    asked: list[object] = []
    db_type = ForeignKey.db_type

    def counted(field: ForeignKey, connection: Any) -> Any:  # type: ignore[type-arg]
        asked.append(field)
        return db_type(field, connection)

    monkeypatch.setattr(ForeignKey, "db_type", counted)
    DatabaseOperations._casts.clear()
    monkeypatch.setattr(connection, "ops", DatabaseOperations(connection))
    ours = [str(query.query.get_compiler(connection=connection).as_sql()[0]) for _ in range(3)]
    assert ours == [django_sql] * 3
    assert 0 < len(asked) <= 5  # each join's foreign key asked once (two joins share one), not once a query
    assert issubclass(DatabaseOperations, DjangoOperations)


def _direct(**extra: Any) -> dict[str, Any]:
    """Connection arguments for the test database's server itself (no relay)."""
    params = connection.get_connection_params()
    kwargs = {k: v for k, v in params.items() if k in ("dbname", "user", "password", "host", "port")}
    return {**kwargs, "autocommit": True, **extra}


def test_the_pools_check_sends_nothing_to_a_live_connection_and_finds_one_the_server_ended() -> None:
    """The check the pool runs on every connection it hands out (every request's): nothing on the wire while
    the connection is fine (the server's own record of the session does not move, where the stock check's
    empty query moves it), and a connection whose server ended it, as a restart does, fails it; a pool then
    hands out a fresh one."""
    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL only: the pool is psycopg's")
    with psycopg.connect(**_direct()) as observer, psycopg.connect(**_direct()) as conn:
        pid = conn.info.backend_pid

        def state_change() -> Any:
            return observer.execute("SELECT state_change FROM pg_stat_activity WHERE pid = %s", [pid]).fetchone()

        conn.execute("SELECT 1")
        before = state_change()
        for _ in range(3):
            connection_check(conn)
        assert state_change() == before, "the check sent the server something"
        ConnectionPool.check_connection(conn)  # the stock check: a round trip, which the server records
        assert state_change() != before

        observer.execute("SELECT pg_terminate_backend(%s)", [pid])
        deadline = time.monotonic() + 5
        while state_change() is not None and time.monotonic() < deadline:
            time.sleep(0.01)
        with pytest.raises(psycopg.OperationalError):
            connection_check(conn)

    pool = ArenaConnectionPool(kwargs=_direct(), min_size=1, max_size=1, timeout=5, check=connection_check, open=True)
    try:
        with pool.connection() as first:
            pid = first.info.backend_pid
        with psycopg.connect(**_direct()) as observer:
            observer.execute("SELECT pg_terminate_backend(%s)", [pid])
            deadline = time.monotonic() + 5
            while observer.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", [pid]).fetchone():
                assert time.monotonic() < deadline
                time.sleep(0.01)
        with pool.connection() as second:  # the dead one found by the check and replaced: no error here
            assert second.info.backend_pid != pid and second.execute("SELECT 1").fetchone() == (1,)
    finally:
        pool.close()
