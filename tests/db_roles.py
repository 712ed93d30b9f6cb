"""The application's PostgreSQL role for tests that connect as it (scripts/pg_roles.sql + db_grants).

The suite itself connects as the tables' owner (it creates and flushes the test database); these
helpers create the application role in the local cluster, if it is not there yet, and grant it its
privileges on the test database, exactly as a deployment does after `migrate`."""

from __future__ import annotations

import fcntl
import os
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from django.core.management import call_command
from django.db import connection

ROOT = Path(__file__).resolve().parents[1]
APP_ROLE = "arena_app"


def app_role_ready() -> dict[str, Any]:
    """Create the roles (idempotent) and grant the app role on the test database; its connection kwargs."""
    if connection.vendor != "postgresql":
        raise AssertionError("the database roles are PostgreSQL's: run on PostgreSQL (scripts/test)")
    database = connection.settings_dict
    env = {
        **os.environ,
        "PGHOST": database["HOST"] or "127.0.0.1",
        "PGPORT": str(database["PORT"] or 5432),
        "PGUSER": database["USER"] or "postgres",
    }
    if database.get("PASSWORD"):
        env["PGPASSWORD"] = database["PASSWORD"]
    # The roles are the cluster's, shared by every pytest-xdist worker: two workers altering the same role at
    # once fail with "tuple concurrently updated", so one worker at a time (a lock file on this machine).
    with _cluster_lock(env["PGHOST"], env["PGPORT"]):
        _roles_and_grants(env)
    return {"host": env["PGHOST"], "port": env["PGPORT"], "user": APP_ROLE, "dbname": database["NAME"]}


def _roles_and_grants(env: dict[str, str]) -> None:
    subprocess.run(
        [
            "psql",
            "-q",
            "-v",
            "ON_ERROR_STOP=1",
            "-v",
            f"app={APP_ROLE}",
            "-f",
            str(ROOT / "scripts" / "pg_roles.sql"),
            "-d",
            "postgres",
        ],
        env=env,
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    )
    call_command("db_grants", app_role=APP_ROLE, stdout=open(os.devnull, "w"))  # noqa: SIM115


@contextmanager
def _cluster_lock(host: str, port: str) -> Iterator[None]:
    path = Path(tempfile.gettempdir()) / f"arena-pg-roles-{host}-{port}.lock"
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def app_role_url() -> str:
    kwargs = app_role_ready()
    return f"postgres://{kwargs['user']}@{kwargs['host']}:{kwargs['port']}/{kwargs['dbname']}"
