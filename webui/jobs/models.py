from django.conf import settings
from django.db import models

from tusklib import contracts


class Tracked(models.Model):
    """Who asked for it, when it ran, and why it failed: jobs and what they work on."""

    error = models.TextField(blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                   on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        abstract = True
        ordering = ["-id"]


class Job(Tracked):
    """One thing the web process asks the agent to do. The web process creates it
    (state queued); the agent claims it (running), reports progress and finishes it
    (succeeded or failed). Only the agent moves a job out of queued."""

    class State(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        SUCCEEDED = "succeeded"
        FAILED = "failed"

    kind = models.CharField(max_length=64)
    args = models.JSONField(default=dict, blank=True)
    state = models.CharField(max_length=16, choices=State.choices, default=State.QUEUED,
                             db_index=True)
    progress = models.PositiveSmallIntegerField(default=0)  # percent
    message = models.TextField(blank=True)                  # the latest progress line
    result = models.JSONField(null=True, blank=True)
    agent = models.CharField(max_length=128, blank=True)  # who claimed it: host:pid:start
    attempts = models.PositiveSmallIntegerField(default=0)

    def __str__(self):
        return f"job {self.pk} {self.kind} ({self.state})"

    @property
    def done(self):
        return self.state in (self.State.SUCCEEDED, self.State.FAILED)


class JobSubject(Tracked):
    """What a long-running job works on and the web UI lists (a capture, a self-test):
    the job that does it, its own state and times. The agent moves the state."""

    class State(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        DONE = "done"
        FAILED = "failed"

    job = models.ForeignKey("jobs.Job", null=True, blank=True, on_delete=models.SET_NULL,
                            related_name="+")
    state = models.CharField(max_length=8, choices=State.choices, default=State.QUEUED)

    class Meta(Tracked.Meta):
        abstract = True

    @property
    def active(self):
        return self.state in (self.State.QUEUED, self.State.RUNNING)


class AgentHeartbeat(models.Model):
    """One row per agent process that has run: when it started and last beat (its own
    periodic task, agent.heartbeat: the dashboard's health panel reads it)."""

    agent = models.CharField(max_length=128, unique=True)
    started_at = models.DateTimeField()
    seen_at = models.DateTimeField()

    class Meta:
        ordering = ["-seen_at"]

    def __str__(self):
        return f"agent {self.agent}"


class PeriodicState(models.Model):
    """The last run of one of the agent's periodic tasks or start-up hooks (registry
    periodic, on_start), one row per name, for the Jobs page; the counters start again
    with each agent. result: what the task returned (the pages read it)."""

    name = models.CharField(max_length=64, unique=True)
    agent = models.CharField(max_length=128, blank=True)
    interval = models.FloatField(null=True, blank=True)   # seconds; null: at start only
    started_at = models.DateTimeField(null=True, blank=True)   # of the last run
    duration = models.FloatField(null=True, blank=True)        # seconds
    error = models.TextField(blank=True)                       # the last run's, or ""
    result = models.JSONField(null=True, blank=True)           # the last good run's
    runs = models.PositiveIntegerField(default=0)
    failures = models.PositiveIntegerField(default=0)
    skipped = models.PositiveIntegerField(default=0)   # ticks missed: a run overran

    class Meta:
        ordering = ["name"]

    def __str__(self):
        return f"agent task {self.name}"

    @classmethod
    def last_result(cls, name):
        """What the task's last good run returned; None before it has run."""
        return cls.objects.filter(name=name).values_list("result", flat=True).first()

    @classmethod
    def read(cls, name, contract):
        """The task's last result as its contract's dataclass (tusklib/contracts.py);
        None before it has run, or when the row is not of that shape (a forged row)."""
        return contracts.read(contract, cls.last_result(name))
