# The ruleset's counter reading moves from the metrics app to the policy's (issue 37: the
# policy's page reads its class hits from it, and metrics depends on policy, never the
# reverse). The table and its row are kept: taken over as they are, then renamed.

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('policy', '0001_initial'),
        ('metrics', '0001_initial'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name='CounterReading',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('read_at', models.DateTimeField()),
                        ('observed_since', models.DateTimeField()),
                        ('table_loaded', models.BooleanField()),
                        ('counters', models.JSONField(default=dict)),
                    ],
                    options={
                        'ordering': ['-read_at'],
                        'db_table': 'metrics_counterreading',
                    },
                ),
            ],
        ),
        migrations.AlterModelTable(
            name='counterreading',
            table=None,
        ),
    ]
