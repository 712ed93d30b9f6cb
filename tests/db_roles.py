"""The application's PostgreSQL role for tests that connect as it (scripts/pg_roles.sql + db_grants).

The suite itself connects as the tables' owner (it creates and flushes the test database); these
helpers create the application role in the local cluster, if it is not there yet, and grant it its
privileges on the test database, exactly as a deployment does after `migrate`."""

from __future__ import annotations

import os
import subprocess
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
    return {"host": env["PGHOST"], "port": env["PGPORT"], "user": APP_ROLE, "dbname": database["NAME"]}


def app_role_url() -> str:
    kwargs = app_role_ready()
    return f"postgres://{kwargs['user']}@{kwargs['host']}:{kwargs['port']}/{kwargs['dbname']}"
