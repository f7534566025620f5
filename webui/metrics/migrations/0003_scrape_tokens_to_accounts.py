"""The scrape tokens become tokens of scope metrics (accounts.Token, issue 38): the same
hashes, names, makers and uses, so every Prometheus keeps scraping. Tokens now expire;
one made before gets a year from this upgrade (the Tokens page shows when)."""
from datetime import timedelta

from django.db import migrations
from django.utils import timezone


def move(apps, schema_editor):
    ScrapeToken = apps.get_model("metrics", "ScrapeToken")
    Token = apps.get_model("accounts", "Token")
    expires = timezone.now() + timedelta(days=365)
    for old in ScrapeToken.objects.all():
        Token.objects.create(
            name=old.name, sha256=old.sha256, scope="metrics", created_by=old.created_by,
            expires_at=expires, revoked_at=old.revoked_at, last_used_at=old.last_used_at,
            last_used_from=old.last_used_from)
        Token.objects.filter(sha256=old.sha256).update(created_at=old.created_at)


def back(apps, schema_editor):
    ScrapeToken = apps.get_model("metrics", "ScrapeToken")
    Token = apps.get_model("accounts", "Token")
    for new in Token.objects.filter(scope="metrics"):
        ScrapeToken.objects.create(
            name=new.name, sha256=new.sha256, created_by=new.created_by,
            revoked_at=new.revoked_at, last_used_at=new.last_used_at,
            last_used_from=new.last_used_from)
        new.delete()


class Migration(migrations.Migration):

    dependencies = [
        ("accounts", "0004_tokens_and_second_factor"),
        ("metrics", "0002_counterreading_to_policy"),
    ]

    operations = [
        migrations.RunPython(move, back),
        migrations.DeleteModel(name="ScrapeToken"),
    ]
