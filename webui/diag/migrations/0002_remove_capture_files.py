# The files of a capture are named from its id (diag/files.py): a path in the row was
# something the web user could forge for the root agent to act on.
from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('diag', '0001_initial'),
    ]

    operations = [
        migrations.RemoveField(
            model_name='capture',
            name='files',
        ),
    ]
