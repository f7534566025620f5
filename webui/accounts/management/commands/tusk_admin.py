"""Creates (or resets) an admin with a one-time password, printed once: the first
login must choose a new one. `make run` uses it; so does first boot on the image.
--unlock USER instead lifts the login throttling of that user name (the console menu's
"Unlock admin login"): its failed logins are forgotten, whatever the case of the name."""
import secrets

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.db import transaction

from accounts.models import AuditEntry, LoginFailure, Profile, Role


class Command(BaseCommand):
    help = "Create or reset an admin user with a printed one-time password."

    def add_arguments(self, parser):
        parser.add_argument("username", nargs="?", default="admin")
        parser.add_argument("--unlock", metavar="USER",
                            help="forget USER's failed logins instead (lifts the throttling)")

    def handle(self, username, unlock=None, **options):
        if unlock is not None:
            return self.unlock(unlock)
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

    def unlock(self, username):
        with transaction.atomic():
            forgotten, _ = LoginFailure.objects.filter(username__iexact=username).delete()
            AuditEntry.objects.create(username="tusk_admin", action="login unlocked",
                                      target=username, detail={"failures": forgotten})
        self.stdout.write(f"unlocked {username!r}: {forgotten} failed login"
                          f"{'' if forgotten == 1 else 's'} forgotten\n")
