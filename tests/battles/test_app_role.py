"""The vote log cannot be rewritten by the application's own database user.

The attack: the application connected as the tables' owner (a superuser in the compose file), so
besides the refused UPDATE/DELETE/TRUNCATE it could switch the append-only triggers off for its
session, disable or drop them, or rewrite a column in place with ALTER ... USING. The application now
connects as a role that owns nothing and is no superuser, with SELECT and INSERT only on the log; this
test connects as that role and tries each rewrite."""

from __future__ import annotations

import psycopg
import pytest
from django.core.management import CommandError, call_command
from django.db import connection

from battles.models import Vote
from tests.conftest import start_battle
from tests.db_roles import APP_ROLE, app_role_ready

REWRITES = [
    "SET LOCAL session_replication_role = replica",
    "SELECT set_config('session_replication_role', 'replica', true)",
    "ALTER TABLE battles_vote DISABLE TRIGGER ALL",
    "ALTER TABLE battles_vote DISABLE TRIGGER battles_vote_no_update",
    "DROP TRIGGER battles_vote_no_update ON battles_vote",
    "DROP FUNCTION battles_vote_append_only() CASCADE",
    "ALTER TABLE battles_vote ALTER COLUMN choice TYPE varchar(20) USING 'tie'",
    "ALTER TABLE battles_vote RENAME TO battles_vote_old",
    "CREATE RULE rewrite AS ON INSERT TO battles_vote DO INSTEAD NOTHING",
    "UPDATE battles_vote SET choice = 'tie'",
    "DELETE FROM battles_vote",
    "TRUNCATE battles_vote",
    "DROP TABLE battles_vote",
    "CREATE TABLE battles_vote_copy (id int)",
]


@pytest.fixture
def stored_vote(acme, bob_client, vote_log_purge, triton_server) -> Vote:  # type: ignore[no-untyped-def]
    battle, _ = start_battle(bob_client, acme.campaign)
    assert bob_client.post(f"/b/{battle.pk}/vote/", {"choice": "left"}).status_code == 302
    return Vote.objects.get(battle=battle)


@pytest.mark.triton
@pytest.mark.parametrize("statement", REWRITES)
def test_the_application_role_cannot_rewrite_the_vote_log(stored_vote, statement):
    with psycopg.connect(**app_role_ready()) as app:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            with app.transaction():
                app.execute(statement)
                # Where a statement could pass (it cannot), the rewrite it enables is tried at once.
                app.execute("UPDATE battles_vote SET choice = 'tie'")
    stored_vote.refresh_from_db()
    assert stored_vote.choice == "left"
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_trigger WHERE tgrelid = 'battles_vote'::regclass "
            "AND NOT tgisinternal AND tgenabled = 'O'"
        )
        assert cursor.fetchone()[0] == 4  # no update, no delete, no truncate; and ranking's copy (ranking 0010)


@pytest.mark.triton
def test_the_application_role_reads_and_appends(stored_vote):
    with psycopg.connect(**app_role_ready()) as app:
        assert app.execute("SELECT count(*) FROM battles_vote").fetchone() == (1,)
        privileges = app.execute(
            "SELECT has_table_privilege('battles_vote', p) FROM unnest(ARRAY['SELECT', 'INSERT', 'UPDATE', "
            "'DELETE', 'TRUNCATE', 'TRIGGER', 'REFERENCES']) AS p"
        ).fetchall()
        assert [row[0] for row in privileges] == [True, True, False, False, False, False, False]
        # The copy the rankings read is the log's: appended by the trigger (as this role), never rewritten.
        assert app.execute("SELECT count(*) FROM ranking_logvote").fetchone() == (1,)
        for table in ("ranking_logvote", "ranking_logprompt"):
            privileges = app.execute(
                f"SELECT has_table_privilege('{table}', p) FROM unnest(ARRAY['SELECT', 'INSERT', 'UPDATE', "
                "'DELETE', 'TRUNCATE']) AS p"
            ).fetchall()
            assert [row[0] for row in privileges] == [True, True, False, False, False], table
        # The rest of the schema is the application's to read and write (battles are updated, for one).
        assert app.execute(
            "SELECT has_table_privilege('battles_battle', 'UPDATE'), "
            "has_table_privilege('battles_battle', 'DELETE'), "
            "has_sequence_privilege('battles_vote_id_seq', 'USAGE')"
        ).fetchone() == (True, True, True)
        role = app.execute("SELECT rolsuper, rolcreaterole, rolbypassrls FROM pg_roles WHERE rolname = current_user")
        assert role.fetchone() == (False, False, False)


@pytest.mark.django_db
def test_db_grants_refuses_to_treat_the_owner_as_the_application():
    app_role_ready()
    assert APP_ROLE != connection.settings_dict["USER"]
    with pytest.raises(CommandError, match="running this command"):
        call_command("db_grants", app_role=connection.settings_dict["USER"])
    with pytest.raises(CommandError, match="does not exist"):
        call_command("db_grants", app_role="arena_no_such_role")
