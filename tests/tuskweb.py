"""Helpers of the web and browser tiers, imported by name (not `from conftest`: with
every tier in one session, that would be whichever tier's conftest loaded last)."""
from django.contrib.auth import get_user_model

# the browser tier's tools/tusk-lab: its own lab name and ports, apart from make run's
BROWSER_LAB, BROWSER_HTTP_PORT, BROWSER_PG_PORT = "e2e", 8021, 5442


def make_user(username, role, password="correct horse battery", must_change=False):
    from accounts.models import Profile
    user = get_user_model().objects.create_user(username, password=password)
    Profile.objects.create(user=user, role=role, must_change_password=must_change)
    return user
