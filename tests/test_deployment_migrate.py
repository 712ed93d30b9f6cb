"""The documented deployment path, from an empty PostgreSQL database (docs/deployment/index.md, the
compose file's ``migrate`` service): the two roles from ``scripts/pg_roles.sql``, then, with
DATABASE_URL naming the application's role and DATABASE_MIGRATE_URL the owner,
``manage.py migrate --database migrate`` and ``manage.py db_grants --database migrate``, exactly as the
compose file runs them (the production settings module, as the image sets it); then the application,
as its own role, writes and reads.

Every data migration must work on the connection it is given (``schema_editor.connection.alias``): one
that queried through the default connection ran as the application's role, which owns nothing
("permission denied"), and, once granted, waited for the lock its own migration held on the other
connection, for ever. A timeout turns such a hang into a failure here."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.db_roles import _cluster_lock

pytestmark = pytest.mark.server

ROOT = Path(__file__).resolve().parents[1]
HOST, PORT = "127.0.0.1", "5432"
OWNER, APP = "arena_owner", "arena_app"


def _psql(*args: str, database: str = "postgres") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["psql", "-q", "-v", "ON_ERROR_STOP=1", "-h", HOST, "-p", PORT, "-U", "postgres", "-d", database, *args],
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.fixture
def empty_database() -> Iterator[str]:
    """A new, empty database owned by the owner role, the roles as scripts/pg_roles.sql makes them."""
    name = f"arena_deploy_{uuid.uuid4().hex[:10]}"
    _psql("-c", f'CREATE DATABASE "{name}"')
    try:
        with _cluster_lock(HOST, PORT):
            _psql(
                "-v", f"owner={OWNER}", "-v", f"app={APP}", "-v", f"database={name}",
                "-f", str(ROOT / "scripts" / "pg_roles.sql"),
            )  # fmt: skip
        yield name
    finally:
        _psql("-c", f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _manage(database: str, *args: str, timeout: int = 300) -> subprocess.CompletedProcess[str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("DJANGO_", "DATABASE_", "PYTEST_", "ARENA_TEST"))
    }
    env.update(
        DJANGO_SETTINGS_MODULE="arena.settings.base",  # the image's settings (docker/Dockerfile)
        DATABASE_URL=f"postgres://{APP}@{HOST}:{PORT}/{database}",
        DATABASE_MIGRATE_URL=f"postgres://{OWNER}@{HOST}:{PORT}/{database}",
        SECRET_KEY="deployment-test-" + "x" * 40,
        DEBUG="false",
        ALLOWED_HOSTS="localhost",
    )
    try:
        result = subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired as exc:
        raise AssertionError(f"manage.py {' '.join(args)} did not finish in {timeout} s (a lock?)") from exc
    output = f"{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    assert result.returncode == 0, f"manage.py {' '.join(args)} failed:\n{output}"
    return result


def test_a_fresh_database_is_migrated_by_the_documented_commands(empty_database: str) -> None:
    _manage(empty_database, "migrate", "--database", "migrate", "--noinput")
    _manage(empty_database, "db_grants", "--database", "migrate")

    # Every table is the owner's; the application's role owns nothing.
    owners = _psql(
        "-At", "-c", "SELECT DISTINCT tableowner FROM pg_tables WHERE schemaname = 'public'", database=empty_database
    ).stdout.split()
    assert owners == [OWNER]
    # Nothing left unapplied, as the application's role sees it (it reads django_migrations itself).
    plan = _manage(empty_database, "migrate", "--plan", "--check")
    assert "No planned migration operations" in plan.stdout

    # The application, as its own role: it writes and reads an organisation and a campaign.
    script = (
        "from django_scopes import scopes_disabled\n"
        "from raters.models import Organization\n"
        "from battles.models import Campaign\n"
        "with scopes_disabled():\n"
        "    org = Organization.objects.create(name='Deployed', slug='deployed')\n"
        "    Campaign.objects.create(organization=org, name='First', slug='first')\n"
        "    print('campaigns', Campaign.objects.filter(organization=org).count())\n"
    )
    shell = _manage(empty_database, "shell", "-c", script, timeout=120)
    assert "campaigns 1" in shell.stdout
