"""Leaderboard snapshots and the attribute-judgement ledger are held append-only by the database, as the
vote log is (battles 0002):

- ``ranking_leaderboardsnapshot``: a recompute writes a new version, never an edit, so rows are never
  updated; they are deleted only together with their campaign (the check runs at commit, so deleting a
  campaign, which only one without battles may be, takes its snapshots along, while deleting snapshots by
  themselves is refused).
- ``ranking_attributejudgement`` (the judgement ledger): never updated, never deleted (its run is
  protected by it, so no cascade reaches it either).

PostgreSQL only, as 0002; the application's role owns nothing, so it cannot drop or disable the triggers,
and ``db_grants`` gives it SELECT and INSERT only on the ledger (docs/architecture/tenancy-and-log.md).
"""

from django.db import migrations

PG_FORWARD = """
CREATE OR REPLACE FUNCTION ranking_snapshot_no_update() RETURNS trigger AS $$
BEGIN
    RAISE EXCEPTION 'leaderboard snapshots are append-only: UPDATE on ranking_leaderboardsnapshot is not allowed'
        USING ERRCODE = 'insufficient_privilege';
END;
$$ LANGUAGE plpgsql;
CREATE OR REPLACE FUNCTION ranking_snapshot_only_with_campaign() RETURNS trigger AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM battles_campaign WHERE id = OLD.campaign_id) THEN
        RAISE EXCEPTION 'leaderboard snapshots are append-only: DELETE on ranking_leaderboardsnapshot is allowed only with its campaign'
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN NULL;
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER ranking_snapshot_no_update BEFORE UPDATE ON ranking_leaderboardsnapshot
    FOR EACH ROW EXECUTE FUNCTION ranking_snapshot_no_update();
CREATE CONSTRAINT TRIGGER ranking_snapshot_delete_with_campaign AFTER DELETE ON ranking_leaderboardsnapshot
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION ranking_snapshot_only_with_campaign();

CREATE OR REPLACE FUNCTION ranking_attributejudgement_append_only() RETURNS trigger AS $$
BEGIN
    RAISE EXCEPTION 'the judgement ledger is append-only: % on ranking_attributejudgement is not allowed', TG_OP
        USING ERRCODE = 'insufficient_privilege';
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER ranking_attributejudgement_no_update BEFORE UPDATE ON ranking_attributejudgement
    FOR EACH ROW EXECUTE FUNCTION ranking_attributejudgement_append_only();
CREATE TRIGGER ranking_attributejudgement_no_delete BEFORE DELETE ON ranking_attributejudgement
    FOR EACH ROW EXECUTE FUNCTION ranking_attributejudgement_append_only();
"""
PG_BACKWARD = """
DROP TRIGGER IF EXISTS ranking_attributejudgement_no_delete ON ranking_attributejudgement;
DROP TRIGGER IF EXISTS ranking_attributejudgement_no_update ON ranking_attributejudgement;
DROP TRIGGER IF EXISTS ranking_snapshot_delete_with_campaign ON ranking_leaderboardsnapshot;
DROP TRIGGER IF EXISTS ranking_snapshot_no_update ON ranking_leaderboardsnapshot;
DROP FUNCTION IF EXISTS ranking_attributejudgement_append_only();
DROP FUNCTION IF EXISTS ranking_snapshot_only_with_campaign();
DROP FUNCTION IF EXISTS ranking_snapshot_no_update();
"""


def forward(apps, schema_editor):  # type: ignore[no-untyped-def]
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(PG_FORWARD, params=None)


def backward(apps, schema_editor):  # type: ignore[no-untyped-def]
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(PG_BACKWARD, params=None)


class Migration(migrations.Migration):
    dependencies = [("ranking", "0006_judge_calibration_extra")]
    operations = [migrations.RunPython(forward, backward)]
