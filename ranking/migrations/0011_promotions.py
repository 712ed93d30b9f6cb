"""Promotions (a board's winner rolled out in stages through an A/B experiment) and their decisions. The
decisions are a record: on PostgreSQL a trigger refuses to update them (they go only with their promotion)."""

import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models


PG_FORWARD = """
CREATE OR REPLACE FUNCTION ranking_promotiondecision_no_update() RETURNS trigger AS $$
BEGIN
    RAISE EXCEPTION 'promotion decisions are append-only: UPDATE on ranking_promotiondecision is not allowed'
        USING ERRCODE = 'insufficient_privilege';
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER ranking_promotiondecision_no_update BEFORE UPDATE ON ranking_promotiondecision
    FOR EACH ROW EXECUTE FUNCTION ranking_promotiondecision_no_update();
"""
PG_BACKWARD = """
DROP TRIGGER IF EXISTS ranking_promotiondecision_no_update ON ranking_promotiondecision;
DROP FUNCTION IF EXISTS ranking_promotiondecision_no_update();
"""


def forward(apps, schema_editor):  # type: ignore[no-untyped-def]
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(PG_FORWARD, params=None)


def backward(apps, schema_editor):  # type: ignore[no-untyped-def]
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(PG_BACKWARD, params=None)


class Migration(migrations.Migration):
    dependencies = [
        ("battles", "0031_experiment_rollout"),
        ("ranking", "0010_log_copy"),
        ("raters", "0018_append_only"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="Promotion",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                (
                    "stages",
                    models.JSONField(
                        help_text="Shares of units, increasing, each in (0, 1]: e.g. [0.05, 0.25, 0.5, 1]."
                    ),
                ),
                (
                    "stage",
                    models.PositiveSmallIntegerField(default=0, help_text="Index of the current stage in stages."),
                ),
                (
                    "min_votes",
                    models.PositiveIntegerField(
                        default=200,
                        help_text="New votes on the promoted competitor (on the board) a stage needs before it advances.",
                    ),
                ),
                (
                    "status",
                    models.CharField(
                        choices=[
                            ("running", "Running"),
                            ("completed", "Completed"),
                            ("rolled_back", "Rolled back (the board turned against it)"),
                            ("stopped", "Stopped by a manager"),
                        ],
                        default="running",
                        max_length=12,
                    ),
                ),
                ("stage_started_at", models.DateTimeField(default=django.utils.timezone.now)),
                (
                    "stage_votes_at_start",
                    models.PositiveIntegerField(
                        default=0, help_text="The promoted competitor's votes on the board when the stage began."
                    ),
                ),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                ("ended_at", models.DateTimeField(blank=True, null=True)),
                (
                    "baseline",
                    models.ForeignKey(
                        help_text="The variant it is watched against on the board (their competitors' difference).",
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to="battles.variant",
                    ),
                ),
                (
                    "campaign",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="promotions", to="battles.campaign"
                    ),
                ),
                (
                    "created_by",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
                (
                    "experiment",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="promotions", to="battles.experiment"
                    ),
                ),
                (
                    "organization",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="promotions", to="raters.organization"
                    ),
                ),
                (
                    "variant",
                    models.ForeignKey(
                        help_text="The variant promoted.",
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="promotions",
                        to="battles.variant",
                    ),
                ),
            ],
            options={
                "ordering": ["-created_at", "-id"],
            },
        ),
        migrations.CreateModel(
            name="PromotionDecision",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                (
                    "action",
                    models.CharField(
                        choices=[
                            ("start", "Started"),
                            ("advance", "Advanced to the next stage"),
                            ("hold", "Held at this stage"),
                            ("rollback", "Rolled back"),
                            ("complete", "Completed"),
                            ("stop", "Stopped by a manager"),
                        ],
                        max_length=10,
                    ),
                ),
                ("reason_code", models.CharField(blank=True, max_length=40)),
                ("reason", models.TextField(blank=True)),
                ("stage", models.PositiveSmallIntegerField(help_text="The stage in force after the decision.")),
                (
                    "share",
                    models.FloatField(
                        help_text="The promoted variant's share in force after it (0: the weights' again)."
                    ),
                ),
                ("board_version", models.PositiveIntegerField(blank=True, null=True)),
                ("figures", models.JSONField(blank=True, default=dict)),
                ("created_at", models.DateTimeField(default=django.utils.timezone.now)),
                (
                    "actor",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
                (
                    "organization",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="+", to="raters.organization"
                    ),
                ),
                (
                    "promotion",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="decisions", to="ranking.promotion"
                    ),
                ),
            ],
            options={
                "ordering": ["promotion", "id"],
            },
        ),
        migrations.AddConstraint(
            model_name="promotion",
            constraint=models.UniqueConstraint(
                condition=models.Q(("status", "running")), fields=("experiment",), name="promotion_one_running"
            ),
        ),
        migrations.RunPython(forward, backward),
    ]
