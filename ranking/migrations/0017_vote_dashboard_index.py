"""A covering index on the vote log for the managers' dashboard (issue 23.3: the page at a million votes in
2 s with nothing cached). Every figure of the dashboard reads a few narrow columns of every vote of a
campaign; the log's rows are wide (texts, JSON), so each scan read the whole table (651 MB at a million
votes). With this index (the campaign, the vote id, and the columns the dashboard reads) PostgreSQL answers
those scans from the index alone (an index-only scan, once autovacuum has marked the log's pages visible:
an append-only log is vacuumed after inserts). PostgreSQL only: elsewhere nothing is created.

It is the ranking app's read path on the battles app's table, hence raw SQL here and no model index. Built
CONCURRENTLY (the migration is not atomic), so that a large log keeps taking votes meanwhile.
"""

from typing import Any

from django.db import migrations

INDEX = "vote_dashboard_cover"
CREATE = (
    f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {INDEX} ON battles_vote (campaign_id, id) "
    "INCLUDE (rater_id, created_at, decision_ms, source, left_id, right_id)"
)
DROP = f"DROP INDEX CONCURRENTLY IF EXISTS {INDEX}"


def forward(apps: Any, schema_editor: Any) -> None:
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(CREATE)


def backward(apps: Any, schema_editor: Any) -> None:
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(DROP)


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("ranking", "0016_listed_boards"),
        ("battles", "0031_experiment_rollout"),
    ]

    operations = [migrations.RunPython(forward, backward)]
