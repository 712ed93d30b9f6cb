"""The per-pair grids of a board's pairwise section stored compactly beside its JSON
(``ranking.board_pairwise.PairwiseGrids``): at 1,000 competitors about 5 MB a snapshot instead of 82 MB of
lists. Snapshots are append-only, so the ones stored before keep their grids in ``pairwise``; readers take
either (``pairwise_expand``). Adding a column fires no row trigger."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("ranking", "0007_append_only"),
    ]

    operations = [
        migrations.AddField(
            model_name="judgeboard",
            name="pairwise_arrays",
            field=models.BinaryField(blank=True, default=b"", help_text="As LeaderboardSnapshot's."),
        ),
        migrations.AddField(
            model_name="leaderboardsnapshot",
            name="pairwise_arrays",
            field=models.BinaryField(
                blank=True,
                default=b"",
                help_text="Every pair's win rate, Wilson interval, p-values, battles and anytime-valid sequence: "
                "k x k grids, compact (ranking.board_pairwise.PairwiseGrids); empty before they were stored apart.",
            ),
        ),
        migrations.AlterField(
            model_name="leaderboardsnapshot",
            name="pairwise",
            field=models.JSONField(
                default=dict,
                help_text="The pairwise section: competitors, Holm correction, triads, the anytime-valid rule, "
                "difference intervals (up to 60 competitors); the per-pair grids are in pairwise_arrays.",
            ),
        ),
    ]
