from django.conf import settings
from django.db import models


class Role(models.TextChoices):
    ADMIN = "admin", "admin (changes things)"
    VIEWER = "viewer", "viewer (only looks)"


class Profile(models.Model):
    """What Tusk adds to a Django user: the role (admin changes things, viewer only
    looks) and whether the password must be changed before anything else."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                                related_name="profile")
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.VIEWER)
    # set for a password someone else chose (a new user, `make run`'s one-time
    # password): every page leads to the password change until it is changed
    must_change_password = models.BooleanField(default=True)

    class Meta:
        ordering = ["user__username"]

    def __str__(self):
        return f"{self.user.username} ({self.role})"


class LoginFailure(models.Model):
    """A login whose password was checked and was wrong - or is being checked: the row is
    written before the check and deleted if the password was right (accounts/throttle.py)."""

    username = models.CharField(max_length=150, db_index=True)
    address = models.GenericIPAddressField(null=True, db_index=True)  # the peer nginx saw
    # what the throttle counts: an IPv4 address as 192.0.2.1/32, an IPv6 one by its /64
    # (2001:db8:1::/64), an IPv4-mapped IPv6 one as its IPv4 address; None with no address
    network = models.CharField(max_length=43, null=True, db_index=True)
    at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-at", "-id"]

    def __str__(self):
        return f"failed login of {self.username} from {self.address or 'no address'}"


class AuditEntry(models.Model):
    """Who changed what, when. Written in the same transaction as the change."""

    at = models.DateTimeField(auto_now_add=True, db_index=True)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL,
                             related_name="+")
    username = models.CharField(max_length=150)  # kept when the user is deleted
    address = models.GenericIPAddressField(null=True)
    action = models.CharField(max_length=64)
    target = models.CharField(max_length=255, blank=True)
    detail = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-at", "-id"]

    def __str__(self):
        return f"{self.username}: {self.action} {self.target}".rstrip()
