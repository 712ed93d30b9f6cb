# New campaigns sample actively by default: the active rule now spends its battles on the top of the
# leaderboard and separates the leader with fewer votes than uniform sampling (benchmarks/sampling.py).
# Existing campaigns keep the policy they have.

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("battles", "0024_ranking_interval_auto"),
    ]

    operations = [
        migrations.AlterField(
            model_name="campaign",
            name="sampling",
            field=models.CharField(
                choices=[
                    ("uniform", "Uniform over pairs"),
                    ("active", "Active: more battles where the leader is undecided, a floor for every pair"),
                ],
                default="active",
                max_length=16,
            ),
        ),
    ]
