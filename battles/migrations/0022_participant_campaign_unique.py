"""A vendor's participant id is unique per campaign and vendor, not only per study: ``Participant``
gets its study's campaign and vendor (filled here from each row's study), and the constraint moves
from (study, id) to (campaign, vendor, id). Rows that already break the new rule (one id entered in
two studies of one campaign) stop the migration with their ids: which of the two accounts' votes
stand is a manager's decision, not a migration's."""

import django.db.models.deletion
from django.db import migrations, models


def participants_fill(apps, schema_editor):  # type: ignore[no-untyped-def]
    if schema_editor.connection.vendor == "postgresql":
        # Check the foreign keys now, not at commit: rows updated under deferred checks would block the
        # ALTER TABLE that follows in this transaction ("pending trigger events").
        schema_editor.execute("SET CONSTRAINTS ALL IMMEDIATE")
    Participant = apps.get_model("battles", "Participant")
    Study = apps.get_model("battles", "Study")
    db = schema_editor.connection.alias
    for study in Study.objects.using(db).all().iterator():
        Participant.objects.using(db).filter(study_id=study.pk).update(campaign_id=study.campaign_id, vendor=study.vendor)
    twice = (
        Participant.objects.using(db).values("campaign_id", "vendor", "vendor_participant_id")
        .annotate(n=models.Count("id"))
        .filter(n__gt=1)
    )
    if twice.exists():
        listed = ", ".join(
            f"campaign {row['campaign_id']} {row['vendor']} id {row['vendor_participant_id']} ({row['n']} times)"
            for row in twice[:20]
        )
        raise RuntimeError(
            "These vendor ids entered more than one study of one campaign; end or remove the extra "
            f"participations, then migrate again: {listed}"
        )


class Migration(migrations.Migration):

    dependencies = [
        ("battles", "0021_shared_items_and_qualification"),
    ]

    operations = [
        migrations.AddField(
            model_name="participant",
            name="campaign",
            field=models.ForeignKey(
                editable=False,
                help_text="The study's.",
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="participants",
                to="battles.campaign",
            ),
        ),
        migrations.AddField(
            model_name="participant",
            name="vendor",
            field=models.CharField(
                choices=[
                    ("prolific", "Prolific (PROLIFIC_PID, STUDY_ID, SESSION_ID)"),
                    ("generic", "Other vendor (worker_id, assignment_id)"),
                ],
                default="",
                editable=False,
                help_text="The study's.",
                max_length=16,
            ),
            preserve_default=False,
        ),
        migrations.RunPython(participants_fill, migrations.RunPython.noop),
        migrations.AlterField(
            model_name="participant",
            name="campaign",
            field=models.ForeignKey(
                editable=False,
                help_text="The study's.",
                on_delete=django.db.models.deletion.CASCADE,
                related_name="participants",
                to="battles.campaign",
            ),
        ),
        migrations.RemoveConstraint(
            model_name="participant",
            name="participant_unique_per_study",
        ),
        migrations.AddConstraint(
            model_name="participant",
            constraint=models.UniqueConstraint(
                fields=("campaign", "vendor", "vendor_participant_id"), name="participant_unique_per_campaign"
            ),
        ),
        migrations.AlterField(
            model_name="participant",
            name="status",
            field=models.CharField(
                choices=[
                    ("active", "Rating"),
                    ("completed", "Completed"),
                    ("declined", "Declined consent"),
                    ("timed_out", "Time ran out"),
                    ("left", "Left the study (returned)"),
                ],
                default="active",
                max_length=12,
            ),
        ),
        migrations.AlterField(
            model_name="participant",
            name="ended_at",
            field=models.DateTimeField(blank=True, help_text="Declined, timed out or left.", null=True),
        ),
    ]
