"""The rows a commit-confirm domain keeps for the web process. The agent's on-box store
(tusklib/commit.py) stays the authority; the agent mirrors it here (mirror.py) after
each job and every few seconds. A domain's models subclass these and add what only it
has (a policy revision's ruleset, a network revision's backend report)."""
from django.conf import settings
from django.db import models


class DraftBase(models.Model):
    """The configuration being edited, as the plain structure of its file. One row. Every
    save is validated whole first (nothing half-saved); version detects an edit made
    from a stale form."""

    label = "draft"

    document = models.JSONField()
    version = models.PositiveIntegerField(default=1)
    updated_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                   on_delete=models.SET_NULL, related_name="+")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        abstract = True
        ordering = ["pk"]

    def __str__(self):
        return f"{self.label} version {self.version}"


class RevisionBase(models.Model):
    """One apply, as the agent's store records it."""

    label = "revision"

    number = models.PositiveIntegerField(unique=True)
    created = models.DateTimeField()
    user = models.CharField(max_length=150, blank=True)
    action = models.CharField(max_length=64)
    outcome = models.CharField(max_length=255)
    meta = models.JSONField(default=dict)

    class Meta:
        abstract = True
        ordering = ["-number"]

    def __str__(self):
        return f"{self.label} {self.number}"


class StateBase(models.Model):
    """The domain's pending/confirmed state as the agent last saw it. One row (pk=1)."""

    label = "state"

    confirmed = models.PositiveIntegerField(null=True, blank=True)
    pending = models.PositiveIntegerField(null=True, blank=True)
    deadline = models.DateTimeField(null=True, blank=True)
    synced_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        abstract = True
        ordering = ["pk"]

    def __str__(self):
        return f"{self.label}: confirmed {self.confirmed}, pending {self.pending}"

    @classmethod
    def current(cls):
        """The one row, or None before the agent's first sync."""
        return cls.objects.filter(pk=1).first()

    def seconds_left(self, now):
        """Seconds until a pending change rolls back by itself; None when none is."""
        if not self.pending or not self.deadline:
            return None
        return max(0, int((self.deadline - now).total_seconds()))
