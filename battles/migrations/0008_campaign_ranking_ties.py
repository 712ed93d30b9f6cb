from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('battles', '0007_active_sampling'),
    ]

    operations = [
        migrations.AddField(
            model_name='campaign',
            name='ranking_ties',
            field=models.CharField(choices=[('half', 'A tie is half a win each side'), ('davidson', "Davidson's tie model (a tie parameter, estimated)")], default='half', help_text="How ties enter the raw leaderboard's scores.", max_length=10),
        ),
    ]
