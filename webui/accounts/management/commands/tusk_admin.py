"""Creates (or resets) an admin with a one-time password, printed once: the first
login must choose a new one. `make run` uses it; so does first boot on the image."""
import secrets

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.db import transaction

from accounts.models import AuditEntry, Profile, Role


class Command(BaseCommand):
    help = "Create or reset an admin user with a printed one-time password."

    def add_arguments(self, parser):
        parser.add_argument("username", nargs="?", default="admin")

    def handle(self, username, **options):
        password = secrets.token_urlsafe(12)
        with transaction.atomic():
            user, created = get_user_model().objects.get_or_create(username=username)
            user.set_password(password)
            user.is_active = True
            user.save()
            Profile.objects.update_or_create(user=user, defaults={
                "role": Role.ADMIN, "must_change_password": True})
            AuditEntry.objects.create(username="tusk_admin", action="admin one-time password",
                                      target=username, detail={"created": created})
        self.stdout.write(f"{'created' if created else 'reset'} admin {username!r} with "
                          f"one-time password: {password}\n")
