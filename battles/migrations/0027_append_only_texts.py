"""What a rater was shown and judged is held append-only by the database, as the vote log is (0002):

- ``battles_prompt``: once a battle names a prompt, its text, text hash and organisation never change and
  the row is never deleted (votes record the hash; the text is what both models answered). Before that a
  manager may still edit it; category, language and ``active`` stay editable always.
- ``battles_turn`` and ``battles_generation`` (a rater's later turns, the models' answers): never updated;
  deleted only together with their battle (the check runs at commit, so deleting a battle that has no vote
  takes them along, while deleting the rows themselves is refused). A battle with a vote cannot be
  deleted (the vote log's own triggers), so a judged answer is never removed.

PostgreSQL only (SQLite is the local demo's database, where the ORM rules still hold); the application's
role owns nothing, so it cannot drop or disable these triggers (docs/architecture/tenancy-and-log.md).
"""

from django.db import migrations

PG_FORWARD = """
CREATE OR REPLACE FUNCTION battles_prompt_judged_text() RETURNS trigger AS $$
BEGIN
    IF TG_OP = 'UPDATE' AND NEW.text IS NOT DISTINCT FROM OLD.text
            AND NEW.text_hash IS NOT DISTINCT FROM OLD.text_hash
            AND NEW.organization_id IS NOT DISTINCT FROM OLD.organization_id THEN
        RETURN NEW;
    END IF;
    IF EXISTS (SELECT 1 FROM battles_battle WHERE prompt_id = OLD.id) THEN
        RAISE EXCEPTION 'prompt texts are append-only once battled: % of its text on battles_prompt % is not allowed',
            TG_OP, OLD.id USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF TG_OP = 'DELETE' THEN
        RETURN OLD;
    END IF;
    RETURN NEW;
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER battles_prompt_judged_no_update BEFORE UPDATE ON battles_prompt
    FOR EACH ROW EXECUTE FUNCTION battles_prompt_judged_text();
CREATE TRIGGER battles_prompt_judged_no_delete BEFORE DELETE ON battles_prompt
    FOR EACH ROW EXECUTE FUNCTION battles_prompt_judged_text();

CREATE OR REPLACE FUNCTION battles_answer_no_update() RETURNS trigger AS $$
BEGIN
    RAISE EXCEPTION 'answers and turns are append-only: UPDATE on % is not allowed', TG_TABLE_NAME
        USING ERRCODE = 'insufficient_privilege';
END;
$$ LANGUAGE plpgsql;
CREATE OR REPLACE FUNCTION battles_answer_only_with_battle() RETURNS trigger AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM battles_battle WHERE id = OLD.battle_id) THEN
        RAISE EXCEPTION 'answers and turns are append-only: DELETE on % is allowed only with its battle', TG_TABLE_NAME
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN NULL;
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER battles_generation_no_update BEFORE UPDATE ON battles_generation
    FOR EACH ROW EXECUTE FUNCTION battles_answer_no_update();
CREATE CONSTRAINT TRIGGER battles_generation_delete_with_battle AFTER DELETE ON battles_generation
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION battles_answer_only_with_battle();
CREATE TRIGGER battles_turn_no_update BEFORE UPDATE ON battles_turn
    FOR EACH ROW EXECUTE FUNCTION battles_answer_no_update();
CREATE CONSTRAINT TRIGGER battles_turn_delete_with_battle AFTER DELETE ON battles_turn
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION battles_answer_only_with_battle();
"""
PG_BACKWARD = """
DROP TRIGGER IF EXISTS battles_turn_delete_with_battle ON battles_turn;
DROP TRIGGER IF EXISTS battles_turn_no_update ON battles_turn;
DROP TRIGGER IF EXISTS battles_generation_delete_with_battle ON battles_generation;
DROP TRIGGER IF EXISTS battles_generation_no_update ON battles_generation;
DROP TRIGGER IF EXISTS battles_prompt_judged_no_delete ON battles_prompt;
DROP TRIGGER IF EXISTS battles_prompt_judged_no_update ON battles_prompt;
DROP FUNCTION IF EXISTS battles_answer_only_with_battle();
DROP FUNCTION IF EXISTS battles_answer_no_update();
DROP FUNCTION IF EXISTS battles_prompt_judged_text();
"""


def forward(apps, schema_editor):  # type: ignore[no-untyped-def]
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(PG_FORWARD, params=None)


def backward(apps, schema_editor):  # type: ignore[no-untyped-def]
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(PG_BACKWARD, params=None)


class Migration(migrations.Migration):
    dependencies = [("battles", "0026_session_window_and_wall_seconds")]
    operations = [migrations.RunPython(forward, backward)]
