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
    # the token the user acted through (its name; "" for a person in the dashboard)
    token = models.CharField(max_length=64, blank=True)
    action = models.CharField(max_length=64)
    target = models.CharField(max_length=255, blank=True)
    detail = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-at", "-id"]

    def __str__(self):
        via = f" (token {self.token})" if self.token else ""
        return f"{self.username}{via}: {self.action} {self.target}".rstrip()


class Scope(models.TextChoices):
    """What a token may do, each including the ones before it: metrics only scrapes
    /metrics; read reads every API resource (and scrapes); operate also runs captures,
    drops flows and confirms or rolls back a pending change, but changes no
    configuration; admin does what an admin does in the dashboard."""

    METRICS = "metrics", "metrics (scrape /metrics only)"
    READ = "read", "read (look, change nothing)"
    OPERATE = "operate", "operate (captures, flows, confirm; no configuration change)"
    ADMIN = "admin", "admin (everything an admin does)"


SCOPE_ORDER = [Scope.METRICS, Scope.READ, Scope.OPERATE, Scope.ADMIN]


class Token(models.Model):
    """A bearer token a program acts with (accounts/tokens.py): an API client's, an IDS
    hook's, a Prometheus scrape's. Only its SHA-256 is kept: the token itself is shown
    once, when it is made. It acts with its scope, never more than the person who made it
    may do now (a viewer's token reads; a deleted or deactivated maker's token is
    refused), until it expires or is revoked, from the addresses it allows. A revoked
    token stays listed (who made it, when it was last used) and is never valid again."""

    name = models.CharField(max_length=64)
    sha256 = models.CharField(max_length=64, unique=True)   # hex digest of the token
    scope = models.CharField(max_length=16, choices=Scope.choices)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                   on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    # networks (CIDR, as ipaddress prints them) the token is taken from; [] anywhere
    allowed_from = models.JSONField(default=list, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    last_used_from = models.GenericIPAddressField(null=True, blank=True)
    # the rate limit's fixed window: its start and the calls counted in it
    window_start = models.DateTimeField(null=True, blank=True)
    window_calls = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self):
        return f"token {self.name} ({self.scope})"


class SecondFactor(models.Model):
    """A person's TOTP (accounts/totp.py): the confirmed secret, a new one being enrolled
    (it replaces the confirmed one only once a code of it was entered), and the last
    30-second step whose code was accepted - no code is taken twice."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                                related_name="second_factor")
    secret = models.CharField(max_length=64, blank=True)          # base32; "" until confirmed
    pending_secret = models.CharField(max_length=64, blank=True)  # being enrolled
    confirmed_at = models.DateTimeField(null=True, blank=True)
    last_step = models.BigIntegerField(default=0)

    class Meta:
        ordering = ["user__username"]

    def __str__(self):
        state = "on" if self.confirmed_at else "being set up"
        return f"second factor of {self.user.get_username()} ({state})"


class RecoveryCode(models.Model):
    """One of a person's ten recovery codes (SHA-256 only): each logs in once, in place
    of a TOTP code."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                             related_name="+")
    sha256 = models.CharField(max_length=64)
    used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["user_id", "id"]

    def __str__(self):
        return f"recovery code {self.pk} of user {self.user_id}"


class LoginSettings(models.Model):
    """How people log in, set by an admin on the Users page. One row (pk=1)."""

    admins_need_second_factor = models.BooleanField(default=False)
    updated_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                   on_delete=models.SET_NULL, related_name="+")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["pk"]

    def __str__(self):
        need = "need" if self.admins_need_second_factor else "may choose"
        return f"login settings: admins {need} a second factor"

    @classmethod
    def current(cls):
        return cls.objects.filter(pk=1).first() or cls(pk=1)
