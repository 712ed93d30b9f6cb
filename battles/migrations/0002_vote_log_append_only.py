"""The vote log refuses UPDATE and DELETE in the database itself, not only in the ORM, so that no
script, admin shell or buggy migration can rewrite history. Later judgements are new rows."""

from django.db import migrations

PG_FORWARD = """
CREATE OR REPLACE FUNCTION battles_vote_append_only() RETURNS trigger AS $$
BEGIN
    RAISE EXCEPTION 'the vote log is append-only: % on battles_vote is not allowed', TG_OP
        USING ERRCODE = 'insufficient_privilege';
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER battles_vote_no_update BEFORE UPDATE ON battles_vote
    FOR EACH ROW EXECUTE FUNCTION battles_vote_append_only();
CREATE TRIGGER battles_vote_no_delete BEFORE DELETE ON battles_vote
    FOR EACH ROW EXECUTE FUNCTION battles_vote_append_only();
CREATE OR REPLACE FUNCTION battles_vote_no_truncate() RETURNS trigger AS $$
BEGIN
    -- Truncating an empty log destroys nothing (a freshly created test database is flushed so).
    IF EXISTS (SELECT 1 FROM battles_vote) THEN
        RAISE EXCEPTION 'the vote log is append-only: TRUNCATE on battles_vote is not allowed'
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN NULL;
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER battles_vote_no_truncate BEFORE TRUNCATE ON battles_vote
    FOR EACH STATEMENT EXECUTE FUNCTION battles_vote_no_truncate();
"""
PG_BACKWARD = """
DROP TRIGGER IF EXISTS battles_vote_no_truncate ON battles_vote;
DROP TRIGGER IF EXISTS battles_vote_no_delete ON battles_vote;
DROP TRIGGER IF EXISTS battles_vote_no_update ON battles_vote;
DROP FUNCTION IF EXISTS battles_vote_append_only();
DROP FUNCTION IF EXISTS battles_vote_no_truncate();
"""
SQLITE_FORWARD = [
    """CREATE TRIGGER battles_vote_no_update BEFORE UPDATE ON battles_vote
       BEGIN SELECT RAISE(ABORT, 'the vote log is append-only: UPDATE on battles_vote is not allowed'); END;""",
    """CREATE TRIGGER battles_vote_no_delete BEFORE DELETE ON battles_vote
       BEGIN SELECT RAISE(ABORT, 'the vote log is append-only: DELETE on battles_vote is not allowed'); END;""",
]
SQLITE_BACKWARD = ["DROP TRIGGER IF EXISTS battles_vote_no_update;", "DROP TRIGGER IF EXISTS battles_vote_no_delete;"]


def forward(apps, schema_editor):  # type: ignore[no-untyped-def]
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(PG_FORWARD, params=None)
    elif schema_editor.connection.vendor == "sqlite":
        for statement in SQLITE_FORWARD:
            schema_editor.execute(statement)


def backward(apps, schema_editor):  # type: ignore[no-untyped-def]
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(PG_BACKWARD, params=None)
    elif schema_editor.connection.vendor == "sqlite":
        for statement in SQLITE_BACKWARD:
            schema_editor.execute(statement)


class Migration(migrations.Migration):
    dependencies = [("battles", "0001_initial")]
    operations = [migrations.RunPython(forward, backward)]
