"""Grant the application's database role exactly what it needs, after the migrations (run as the owner).

The application role (DATABASES["default"]["USER"] unless --app-role says otherwise) may read and
write every table of the schema, except the vote log, the judge log and the attribute-judgement ledger,
which it may only read and append to: no UPDATE, DELETE, TRUNCATE, TRIGGER or REFERENCES there (the other
append-only rows, prompt texts, answers, snapshots and audit events, are held by triggers: see
docs/architecture/tenancy-and-log.md). It owns nothing, so it cannot alter or drop tables or
their triggers, and it is no superuser, so it cannot switch triggers off for its session
(session_replication_role). Idempotent: run it after every `migrate` (docker/compose.yaml does).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import DEFAULT_DB_ALIAS, connections

# Tables the application may only SELECT from and INSERT into.
APPEND_ONLY_TABLES = (
    "battles_vote",
    "battles_judgeverdict",
    "ranking_attributejudgement",
    # The vote log's copy the rankings read (written by a trigger on battles_vote, as the inserting role).
    "ranking_logvote",
    "ranking_logprompt",
)


class Command(BaseCommand):
    help = "Grant the application role its privileges (append-only on the vote log). Run as the owner."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--database",
            default=DEFAULT_DB_ALIAS,
            help="Connection to run as (the owner's: 'migrate' where DATABASE_MIGRATE_URL is set).",
        )
        parser.add_argument(
            "--app-role", default=None, help="The application's role; default: the user of DATABASES['default']."
        )

    def handle(self, *args: Any, database: str, app_role: str | None, **options: Any) -> None:
        connection = connections[database]
        if connection.vendor != "postgresql":
            self.stdout.write("not PostgreSQL: nothing to grant")
            return
        role = app_role or settings.DATABASES[DEFAULT_DB_ALIAS].get("USER")
        if not role:
            raise CommandError("no application role: pass --app-role or set a user in DATABASE_URL")
        with connection.cursor() as cursor:
            cursor.execute("SELECT current_user, rolsuper FROM pg_roles WHERE rolname = current_user")
            current, superuser = cursor.fetchone()
            if role == current:
                raise CommandError(
                    f"{role} is the role running this command (the tables' owner): the application "
                    "must connect as another role; see docs/deployment/index.md"
                )
            cursor.execute("SELECT rolsuper FROM pg_roles WHERE rolname = %s", [role])
            row = cursor.fetchone()
            if row is None:
                raise CommandError(f"role {role} does not exist: create it with scripts/pg_roles.sql")
            if row[0]:
                raise CommandError(f"{role} is a superuser: it could switch the vote log's triggers off")
            quoted = connection.ops.quote_name(role)
            cursor.execute(f"GRANT USAGE ON SCHEMA public TO {quoted}")
            cursor.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO {quoted}")
            cursor.execute(f"GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO {quoted}")
            # Never anything that changes or removes rows of, or hooks into, an append-only table.
            cursor.execute(f"REVOKE TRUNCATE, REFERENCES, TRIGGER ON ALL TABLES IN SCHEMA public FROM {quoted}")
            for table in APPEND_ONLY_TABLES:
                cursor.execute(f"REVOKE ALL ON {connection.ops.quote_name(table)} FROM {quoted}")
                cursor.execute(f"GRANT SELECT, INSERT ON {connection.ops.quote_name(table)} TO {quoted}")
        granted_as = f"{current}, a superuser" if superuser else current
        self.stdout.write(
            f"{role}: read-write on the schema, SELECT and INSERT only on "
            f"{', '.join(APPEND_ONLY_TABLES)} (granted as {granted_as})"
        )
