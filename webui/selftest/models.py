"""Self-test runs: Allman's middlebox measurement (IMC 2003) through the firewall and,
for a baseline, around it. The agent measures; the row keeps what was asked and the
summary (selftest.core.stats)."""
from django.conf import settings
from django.db import models


class SelfTest(models.Model):
    """One run: lab mode between the lab's namespaces, hardware mode between two hosts
    that run the downloadable responder."""

    class State(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        DONE = "done"
        FAILED = "failed"

    class Mode(models.TextChoices):
        LAB = "lab"
        HARDWARE = "hardware"

    mode = models.CharField(max_length=8, choices=Mode.choices)
    params = models.JSONField(default=dict)        # selftest.core.responder.check_params
    client_host = models.CharField(max_length=253, blank=True)   # hardware mode
    server_host = models.CharField(max_length=253, blank=True)
    direct_address = models.CharField(max_length=253, blank=True)  # empty: no baseline
    port = models.PositiveIntegerField(default=8009)
    job = models.ForeignKey("jobs.Job", null=True, blank=True, on_delete=models.SET_NULL,
                            related_name="+")
    state = models.CharField(max_length=8, choices=State.choices, default=State.QUEUED)
    result = models.JSONField(null=True, blank=True)   # selftest.core.stats.summarise
    error = models.TextField(blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                   on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-id"]

    def __str__(self):
        return f"self-test {self.pk} ({self.state})"

    @property
    def active(self):
        return self.state in (self.State.QUEUED, self.State.RUNNING)
