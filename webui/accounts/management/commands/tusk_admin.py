"""Creates (or resets) an admin with a one-time password, printed once: the first
login must choose a new one. `make run` uses it; so does first boot on the image.
--unlock USER instead lifts the login throttling of that user name (the console menu's
"Unlock admin login"): its failed logins are forgotten, whatever the case of the name.
Resetting an admin (and --reset-second-factor USER alone) also turns the user's second
factor off: the console is how an admin who lost the phone and the recovery codes gets
back in."""
import secrets

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.db import transaction

from accounts import totp
from accounts.models import AuditEntry, LoginFailure, Profile, Role


class Command(BaseCommand):
    help = "Create or reset an admin user with a printed one-time password."

    def add_arguments(self, parser):
        parser.add_argument("username", nargs="?", default="admin")
        parser.add_argument("--unlock", metavar="USER",
                            help="forget USER's failed logins instead (lifts the throttling)")
        parser.add_argument("--reset-second-factor", metavar="USER",
                            help="turn USER's second factor off instead")

    def handle(self, username, unlock=None, reset_second_factor=None, **options):
        if unlock is not None:
            return self.unlock(unlock)
        if reset_second_factor is not None:
            return self.reset_second_factor(reset_second_factor)
        password = secrets.token_urlsafe(12)
        with transaction.atomic():
            user, created = get_user_model().objects.get_or_create(username=username)
            user.set_password(password)
            user.is_active = True
            user.save()
            Profile.objects.update_or_create(user=user, defaults={
                "role": Role.ADMIN, "must_change_password": True})
            totp.turn_off(user)
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

    def reset_second_factor(self, username):
        user = get_user_model().objects.filter(username__iexact=username).first()
        if user is None:
            self.stderr.write(f"no user {username!r}\n")
            raise SystemExit(1)
        with transaction.atomic():
            totp.turn_off(user)
            AuditEntry.objects.create(username="tusk_admin", action="second factor reset",
                                      target=user.get_username())
        self.stdout.write(f"second factor of {user.get_username()!r} turned off\n")
