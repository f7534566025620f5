"""What the web UI keeps of tusk-tune: the agent runs it (webui/tuning/agent_jobs.py)
and stores what it printed here, since the unprivileged web process may not read
every file tusk-tune reads, nor enter the lab's network namespace."""
from django.db import models


class TuningReport(models.Model):
    """The last result of one tuning job kind, as `tusk-tune --json` printed it. One
    row per kind: the plan (with the hardware it found) for the profile last planned,
    and the last apply, verify and rollback."""

    class Kind(models.TextChoices):
        PLAN = "plan"
        APPLY = "apply"
        VERIFY = "verify"
        ROLLBACK = "rollback"

    kind = models.CharField(max_length=16, choices=Kind.choices, unique=True)
    profile = models.CharField(max_length=64, blank=True)
    result = models.JSONField(null=True, blank=True)  # None when tusk-tune failed
    error = models.TextField(blank=True)              # tusk-tune's error lines when it failed
    job = models.ForeignKey("jobs.Job", null=True, blank=True, on_delete=models.SET_NULL,
                            related_name="+")
    finished_at = models.DateTimeField()

    class Meta:
        ordering = ["kind"]

    def __str__(self):
        return f"tuning {self.kind} {self.profile}".rstrip()
