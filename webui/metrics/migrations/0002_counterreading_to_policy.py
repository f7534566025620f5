# CounterReading is the policy app's now (policy/migrations/0002_counterreading.py took
# the table over): only the state forgets it here.

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('metrics', '0001_initial'),
        ('policy', '0002_counterreading'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.DeleteModel(
                    name='CounterReading',
                ),
            ],
        ),
    ]
