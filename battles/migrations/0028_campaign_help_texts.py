# The campaign's description and instructions say what each is for (both said "for raters"); no schema change.

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("battles", "0027_append_only_texts"),
    ]

    operations = [
        migrations.AlterField(
            model_name="campaign",
            name="description",
            field=models.TextField(
                blank=True,
                help_text="What the campaign compares, in a sentence or two of plain text (no markup): the first lines on the campaign's page that raters open, and the description the API lists. How to judge goes in the instructions.",
            ),
        ),
        migrations.AlterField(
            model_name="campaign",
            name="instructions",
            field=models.TextField(
                blank=True,
                default="",
                help_text="How to judge (what 'better' means here), in markdown: shown to every rater on the campaign's page, under the description, before they start; not repeated on the battle page.",
            ),
        ),
    ]
