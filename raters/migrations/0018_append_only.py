"""The audit log is held append-only by the database, as the vote log is (battles 0002):
``raters_auditevent`` rows are never rewritten (one change is allowed: ``actor_id`` set to NULL, which is
what deleting the user does, ``on_delete=SET_NULL``) and are deleted only together with their
organisation (the check runs at commit, so deleting an organisation takes its audit rows along, while
deleting audit rows by themselves is refused). An organisation with votes cannot be deleted (the vote
log's own foreign key), so an audited tenant with history keeps its audit trail.

PostgreSQL only, as 0002; the application's role owns nothing, so it cannot drop or disable the triggers
(docs/architecture/tenancy-and-log.md).
"""

from django.db import migrations

PG_FORWARD = """
CREATE OR REPLACE FUNCTION raters_auditevent_no_rewrite() RETURNS trigger AS $$
BEGIN
    IF NEW.organization_id IS NOT DISTINCT FROM OLD.organization_id
            AND NEW.action IS NOT DISTINCT FROM OLD.action
            AND NEW.object_type IS NOT DISTINCT FROM OLD.object_type
            AND NEW.object_id IS NOT DISTINCT FROM OLD.object_id
            AND NEW.data IS NOT DISTINCT FROM OLD.data
            AND NEW.created_at IS NOT DISTINCT FROM OLD.created_at
            AND (NEW.actor_id IS NOT DISTINCT FROM OLD.actor_id OR NEW.actor_id IS NULL) THEN
        RETURN NEW;  -- unchanged, or the actor's user deleted (SET NULL)
    END IF;
    RAISE EXCEPTION 'the audit log is append-only: UPDATE on raters_auditevent is not allowed'
        USING ERRCODE = 'insufficient_privilege';
END;
$$ LANGUAGE plpgsql;
CREATE OR REPLACE FUNCTION raters_auditevent_only_with_organization() RETURNS trigger AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM raters_organization WHERE id = OLD.organization_id) THEN
        RAISE EXCEPTION 'the audit log is append-only: DELETE on raters_auditevent is allowed only with its organisation'
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN NULL;
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER raters_auditevent_no_update BEFORE UPDATE ON raters_auditevent
    FOR EACH ROW EXECUTE FUNCTION raters_auditevent_no_rewrite();
CREATE CONSTRAINT TRIGGER raters_auditevent_delete_with_organization AFTER DELETE ON raters_auditevent
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION raters_auditevent_only_with_organization();
"""
PG_BACKWARD = """
DROP TRIGGER IF EXISTS raters_auditevent_delete_with_organization ON raters_auditevent;
DROP TRIGGER IF EXISTS raters_auditevent_no_update ON raters_auditevent;
DROP FUNCTION IF EXISTS raters_auditevent_only_with_organization();
DROP FUNCTION IF EXISTS raters_auditevent_no_rewrite();
"""


def forward(apps, schema_editor):  # type: ignore[no-untyped-def]
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(PG_FORWARD, params=None)


def backward(apps, schema_editor):  # type: ignore[no-untyped-def]
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(PG_BACKWARD, params=None)


class Migration(migrations.Migration):
    dependencies = [("raters", "0017_apikey_owner_scope")]
    operations = [migrations.RunPython(forward, backward)]
