from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("battles", "0012_shadow_and_experiments"),
    ]

    operations = [
        migrations.AddField(
            model_name="prompt",
            name="external_id",
            field=models.CharField(blank=True, default="", max_length=200),
        ),
        migrations.AddConstraint(
            model_name="prompt",
            constraint=models.UniqueConstraint(
                condition=models.Q(("external_id", ""), _negated=True),
                fields=("campaign", "external_id"),
                name="prompt_unique_external_id",
            ),
        ),
    ]
