from django.conf import settings
from django.db import models


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
    """One row per agent process that has run: when it started and last sampled."""

    agent = models.CharField(max_length=128, unique=True)
    started_at = models.DateTimeField()
    seen_at = models.DateTimeField()
    capabilities = models.JSONField(default=dict, blank=True)
    # the agent's own check of the web UI, as a client would use it:
    # {"url", "status", "ms", "error", "at"}
    web_check = models.JSONField(default=dict, blank=True)

    @property
    def seqrand_available(self):
        return any(v is True for k, v in self.capabilities.items() if "helper" in k)
