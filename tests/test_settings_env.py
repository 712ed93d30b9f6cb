"""Settings from the environment fail loudly on malformed values."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from arena.settings.env import ImproperEnvironment, env_bool, env_int, env_list, env_url

ROOT = Path(__file__).resolve().parents[1]


def test_typed_readers(monkeypatch):
    monkeypatch.setenv("X_BOOL", "yes")
    assert env_bool("X_BOOL", False) is True
    monkeypatch.setenv("X_BOOL", "ture")
    with pytest.raises(ImproperEnvironment, match="X_BOOL"):
        env_bool("X_BOOL", False)
    monkeypatch.setenv("X_INT", "12a")
    with pytest.raises(ImproperEnvironment, match="X_INT"):
        env_int("X_INT", 1)
    monkeypatch.setenv("X_INT", "0")
    with pytest.raises(ImproperEnvironment, match="minimum"):
        env_int("X_INT", 1, minimum=1)
    monkeypatch.setenv("X_LIST", "a,,b")
    with pytest.raises(ImproperEnvironment):
        env_list("X_LIST", [])
    monkeypatch.setenv("X_URL", "mysql://x")
    with pytest.raises(ImproperEnvironment, match="schemes"):
        env_url("X_URL", None, schemes=("postgres",))
    monkeypatch.delenv("X_URL")
    assert env_url("X_URL", None, schemes=("redis",)) is None


# The settings module is what reads the environment and refuses a malformed one: a child process that only
# loads it (Django's lazy settings, on first use) shows what it made of an environment in a fraction of a
# second. ``django.setup()`` (the apps, and all they import: about 2 s a process) is run where a test says that
# a process starts with those settings.
SETUP = "django.setup(); "


def _settings_in_subprocess(
    module: str = "arena.settings.local", *, apps: bool = False, **env: str
) -> subprocess.CompletedProcess[str]:
    environment = {
        k: v
        for k, v in os.environ.items()
        if k not in {"DATABASE_URL", "REDIS_URL", "DEBUG", "SECRET_KEY", "DJANGO_SETTINGS_MODULE"}
    }
    environment.update(env)
    code = (
        f"import django, os; os.environ['DJANGO_SETTINGS_MODULE']='{module}'; {SETUP if apps else ''}"
        "from django.conf import settings as s; "
        "print(s.DATABASES['default']['ENGINE'], s.CELERY_TASK_ALWAYS_EAGER, s.CACHES['default']['BACKEND'], "
        "s.DEBUG)"
    )
    return subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=environment, capture_output=True, text=True, timeout=60
    )


@pytest.mark.server
def test_defaults_are_a_working_local_platform():
    result = _settings_in_subprocess(apps=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [
        "django.db.backends.sqlite3",
        "True",
        "django.core.cache.backends.locmem.LocMemCache",
        "True",
    ]


@pytest.mark.server
def test_redis_url_switches_to_real_broker_and_cache():
    result = _settings_in_subprocess(
        REDIS_URL="redis://127.0.0.1:6379/3", DATABASE_URL="postgres://postgres@127.0.0.1:5432/x"
    )
    assert result.returncode == 0, result.stderr
    # PostgreSQL through core.postgresql: the connection pool is on by default.
    assert result.stdout.split() == ["core.postgresql", "False", "arena.cache.FailoverRedisCache", "True"]


@pytest.mark.server
def test_production_without_secret_key_refuses_to_start():
    result = _settings_in_subprocess(DEBUG="false")
    assert result.returncode != 0
    assert "SECRET_KEY must be set" in result.stderr


@pytest.mark.server
def test_production_settings_fail_closed():
    """What a WSGI server imports: DEBUG is off unless asked for, and then a SECRET_KEY is required."""
    result = _settings_in_subprocess("arena.settings.base")
    assert result.returncode != 0 and "SECRET_KEY must be set" in result.stderr
    result = _settings_in_subprocess("arena.settings.base", apps=True, SECRET_KEY="k" * 50)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split()[-1] == "False"


def test_entry_points_default_to_the_right_settings():
    assert "arena.settings.base" in (ROOT / "arena" / "wsgi.py").read_text()
    assert "arena.settings.base" in (ROOT / "arena" / "asgi.py").read_text()
    assert "arena.settings.local" in (ROOT / "manage.py").read_text()


@pytest.mark.server
def test_trusted_proxies_are_addresses_and_the_former_proxy_count_stops_start_up():
    """The count trusted X-Forwarded-For from anyone who reached the web port directly (issue 21.8): a
    deployment that still sets it must not start as though it had listed no proxy."""
    result = _settings_in_subprocess("arena.settings.base", SECRET_KEY="k" * 50, ARENA_TRUSTED_PROXY_COUNT="1")
    assert result.returncode != 0 and "ARENA_TRUSTED_PROXY_COUNT is replaced by ARENA_TRUSTED_PROXIES" in result.stderr
    result = _settings_in_subprocess("arena.settings.base", SECRET_KEY="k" * 50, ARENA_TRUSTED_PROXIES="10.0.0.0/24,x")
    assert result.returncode != 0 and "ARENA_TRUSTED_PROXIES: 'x' is not an IP address" in result.stderr
    result = _settings_in_subprocess(
        "arena.settings.base", SECRET_KEY="k" * 50, ARENA_TRUSTED_PROXY_COUNT="0", ARENA_TRUSTED_PROXIES="10.0.0.0/24"
    )
    assert result.returncode == 0, result.stderr


@pytest.mark.server
def test_malformed_debug_refuses_to_start():
    result = _settings_in_subprocess(DEBUG="maybe")
    assert result.returncode != 0
    assert "DEBUG='maybe' is not a boolean" in result.stderr


def _database_settings(printed: str, **env: str) -> subprocess.CompletedProcess[str]:
    """Settings loaded in a fresh process with ``env`` (a PostgreSQL DATABASE_URL unless given); prints
    ``printed`` as JSON, an expression over ``d`` (the default database) and ``o`` (its OPTIONS)."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith(("DATABASE_URL", "DB_", "DJANGO_"))}
    environment.update({"DATABASE_URL": "postgres://postgres@127.0.0.1:5432/x", **env})
    code = (
        "import django, json, os; os.environ['DJANGO_SETTINGS_MODULE']='arena.settings.local'; "
        "from django.conf import settings as s; d = s.DATABASES['default']; o = d.get('OPTIONS', {}); "
        f"print(json.dumps({printed}))"
    )
    return subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=environment, capture_output=True, text=True, timeout=60
    )


def _pool_settings(**env: str) -> subprocess.CompletedProcess[str]:
    return _database_settings("[d['ENGINE'], o.get('pool'), d['CONN_HEALTH_CHECKS'], d['CONN_MAX_AGE']]", **env)


@pytest.mark.server
def test_a_connection_pool_is_the_default_on_postgresql_and_checks_what_it_hands_out():
    import json

    result = _pool_settings()  # the default: a pool of 10 through core.postgresql
    assert result.returncode == 0, result.stderr
    pool = {"min_size": 2, "max_size": 10, "timeout": 10.0, "unreachable_timeout": 1.0}
    assert json.loads(result.stdout) == ["core.postgresql", pool, True, 0]
    result = _pool_settings(DB_POOL_MAX_SIZE="12", DB_POOL_TIMEOUT_S="5", DB_POOL_UNREACHABLE_TIMEOUT_S="2")
    pool = {"min_size": 2, "max_size": 12, "timeout": 5.0, "unreachable_timeout": 2.0}
    assert json.loads(result.stdout) == ["core.postgresql", pool, True, 0]
    assert json.loads(_pool_settings(DB_POOL_MAX_SIZE="1").stdout)[1]["min_size"] == 1
    result = _pool_settings(DB_POOL_MAX_SIZE="0")  # none: Django's own backend, a connection per request
    assert json.loads(result.stdout)[:2] == ["django.db.backends.postgresql", None]
    result = _pool_settings(DATABASE_URL="sqlite:////tmp/arena-pool-check.sqlite3")  # SQLite has no pool
    assert json.loads(result.stdout)[:2] == ["django.db.backends.sqlite3", None]
    result = _pool_settings(DB_POOL_MAX_SIZE="12", DB_CONN_MAX_AGE="60")  # Django refuses both at once
    assert result.returncode != 0 and "exclude each other" in result.stderr


def _binding_settings(**env: str) -> subprocess.CompletedProcess[str]:
    return _database_settings("[o.get('server_side_binding'), o.get('prepare_threshold')]", **env)


@pytest.mark.server
def test_server_side_binding_is_asked_for_on_postgresql_only():
    import json

    result = _binding_settings(DB_SERVER_SIDE_BINDING="1")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == [True, 5]
    # The default: on with the pool or persistent connections (connections that live across requests), off
    # with a connection a request (Django's own client-side binding: nothing prepared), and off when asked
    # (behind a transaction-mode PgBouncer).
    assert json.loads(_binding_settings().stdout) == [True, 5]
    assert json.loads(_binding_settings(DB_POOL_MAX_SIZE="0", DB_CONN_MAX_AGE="60").stdout) == [True, 5]
    assert json.loads(_binding_settings(DB_POOL_MAX_SIZE="0").stdout) == [None, None]
    assert json.loads(_binding_settings(DB_SERVER_SIDE_BINDING="0").stdout) == [None, None]
    sqlite = _binding_settings(DATABASE_URL="sqlite:////tmp/arena-binding.sqlite3", DB_SERVER_SIDE_BINDING="1")
    assert sqlite.returncode == 0, sqlite.stderr
    assert json.loads(sqlite.stdout) == [None, None]  # SQLite has no such option


@pytest.mark.django_db
def test_with_server_side_binding_a_repeated_orm_query_is_prepared_and_planned_once():
    """What the setting is for: psycopg prepares a statement sent five times on a connection (its
    prepare_threshold), so PostgreSQL stops planning it on every execution; with Django's default
    client-side binding nothing is ever prepared. Two real connections to the test database."""
    from django.contrib.auth.models import User
    from django.db import connection
    from django.db.backends.postgresql.base import DatabaseWrapper

    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL only: the option is psycopg's")

    def prepared_after_repeats(options: dict[str, object]) -> int:
        # The test database's options without either key (the suite may run with the setting on).
        base = {
            k: v
            for k, v in connection.settings_dict["OPTIONS"].items()
            if k not in ("server_side_binding", "prepare_threshold")
        }
        settings_dict = {**connection.settings_dict, "OPTIONS": {**base, **options}}
        wrapper = DatabaseWrapper(settings_dict, alias="binding-probe")
        try:
            query = User.objects.filter(username="nobody", is_active=True).values_list("pk").query
            for _ in range(7):
                sql, params = query.sql_with_params()
                with wrapper.cursor() as cursor:
                    cursor.execute(sql, params)
                    cursor.fetchall()
            with wrapper.cursor() as cursor:
                cursor.execute("SELECT count(*) FROM pg_prepared_statements")
                return int(cursor.fetchone()[0])
        finally:
            wrapper.close()

    assert prepared_after_repeats({"server_side_binding": True, "prepare_threshold": 5}) >= 1
    assert prepared_after_repeats({"server_side_binding": True}) == 0  # Django's None: never prepared
    assert prepared_after_repeats({}) == 0


# Two connections to the demo's SQLite file, as the demo's worker threads hold them: one transaction reads
# first and writes later (the buffer's fill: count what is waiting, pick, create), another writes in between.
SQLITE_RACE = """
import django, os, threading
os.environ['DJANGO_SETTINGS_MODULE'] = 'arena.settings.local'
django.setup()
from django.db import connection, connections, transaction
with connection.cursor() as c:
    c.execute('create table race (x int)')
connections.close_all()
errors, read, wrote = [], threading.Event(), threading.Event()
def filler():
    try:
        with transaction.atomic(), connection.cursor() as c:
            c.execute('select count(*) from race'); read.set(); wrote.wait(0.5)
            c.execute('insert into race values (1)')
    except Exception as exc:
        errors.append(str(exc))
    finally:
        connections.close_all()
def writer():
    read.wait(5)
    try:
        with transaction.atomic(), connection.cursor() as c:
            c.execute('insert into race values (2)'); wrote.set()
    except Exception as exc:
        errors.append(str(exc))
    finally:
        connections.close_all()
threads = [threading.Thread(target=filler), threading.Thread(target=writer)]
[t.start() for t in threads]; [t.join() for t in threads]
with connection.cursor() as c:
    c.execute('select count(*) from race'); print(c.fetchone()[0], errors)
"""


@pytest.mark.server
def test_sqlite_transactions_wait_for_a_concurrent_writer_instead_of_failing_as_locked(tmp_path: Path) -> None:
    """The demo's SQLite said "database is locked" in the buffer's refill: a transaction that had read and
    then wrote could not wait for a writer that came in between. Transactions now take the write lock
    when they begin, so the second one waits (the settings' timeout) and both rows are written."""
    environment = {k: v for k, v in os.environ.items() if k not in {"REDIS_URL", "DJANGO_SETTINGS_MODULE"}}
    environment["DATABASE_URL"] = f"sqlite:///{tmp_path / 'race.sqlite3'}"
    result = subprocess.run(
        [sys.executable, "-c", SQLITE_RACE], cwd=ROOT, env=environment, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().split(maxsplit=1) == ["2", "[]"]


@pytest.mark.server
def test_blas_runs_one_thread_a_process_unless_the_operator_says():
    """Set when the ``arena`` package loads, before numpy: the operator's own variables win."""
    code = "import arena, os; print(os.environ['OPENBLAS_NUM_THREADS'], os.environ['OMP_NUM_THREADS'])"

    def threads(**env: str) -> str:
        environment = {
            k: v for k, v in os.environ.items() if not k.endswith("_NUM_THREADS") and k != "ARENA_BLAS_THREADS"
        }
        result = subprocess.run(
            [sys.executable, "-c", code],
            cwd=ROOT,
            env={**environment, **env},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert result.returncode == 0, result.stderr
        return result.stdout.strip()

    assert threads() == "1 1"
    assert threads(ARENA_BLAS_THREADS="2") == "2 2"
    assert threads(ARENA_BLAS_THREADS="2", OPENBLAS_NUM_THREADS="4") == "4 2"


@pytest.mark.server
def test_the_web_threads_follow_the_connection_pool_unless_set():
    """A web thread holds at most one pooled connection: by default there are as many threads as connections."""

    def threads(**env: str) -> str:
        environment = {k: v for k, v in os.environ.items() if k not in {"DB_POOL_MAX_SIZE", "ARENA_WEB_THREADS"}}
        environment.update(env, DJANGO_SETTINGS_MODULE="arena.settings.local")
        code = "from django.conf import settings as s; print(s.ARENA_WEB_THREADS)"
        result = subprocess.run(
            [sys.executable, "-c", code], cwd=ROOT, env=environment, capture_output=True, text=True, timeout=60
        )
        assert result.returncode == 0, result.stderr
        return result.stdout.strip()

    postgres = "postgres://postgres@127.0.0.1:5432/unused"
    assert threads(DATABASE_URL=postgres, DB_POOL_MAX_SIZE="4") == "4"
    assert threads(DATABASE_URL=postgres, DB_POOL_MAX_SIZE="0") == "10"
    assert threads(DATABASE_URL=postgres, DB_POOL_MAX_SIZE="4", ARENA_WEB_THREADS="3") == "3"
