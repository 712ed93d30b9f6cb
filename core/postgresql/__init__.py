"""Django's PostgreSQL backend with a connection pool that recovers from an outage in about a second
(``base.DatabaseWrapper``): the ENGINE ``arena/settings/base.py`` names when the pool is on."""

from .base import ArenaConnectionPool, DatabaseWrapper

__all__ = ["ArenaConnectionPool", "DatabaseWrapper"]
