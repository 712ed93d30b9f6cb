"""What the benchmarks that load their own data share: a PostgreSQL database of their own, made once."""

from __future__ import annotations


def database_ensure(url: str) -> None:
    """Create the database ``url`` names (on its server, through the ``postgres`` database) unless it
    exists: benchmarks keep their data between runs in a database of their own."""
    import psycopg

    name = url.rsplit("/", 1)[1]
    admin_url = url.rsplit("/", 1)[0] + "/postgres"
    with psycopg.connect(admin_url, autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
            conn.execute(f'CREATE DATABASE "{name}"')
