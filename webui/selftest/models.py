"""Self-test runs: Allman's middlebox measurement (IMC 2003) through the firewall and,
for a baseline, around it. The agent measures; the row keeps what was asked and the
summary (selftest.core.stats)."""
from django.db import models

from jobs.models import JobSubject


class SelfTest(JobSubject):
    """One run: lab mode between the lab's namespaces, hardware mode between two hosts
    that run the downloadable responder."""

    class Mode(models.TextChoices):
        LAB = "lab"
        HARDWARE = "hardware"

    mode = models.CharField(max_length=8, choices=Mode.choices)
    params = models.JSONField(default=dict)        # selftest.core.responder.check_params
    client_host = models.CharField(max_length=253, blank=True)   # hardware mode
    server_host = models.CharField(max_length=253, blank=True)
    direct_address = models.CharField(max_length=253, blank=True)  # empty: no baseline
    port = models.PositiveIntegerField(default=8009)
    result = models.JSONField(null=True, blank=True)   # selftest.core.stats.summarise

    def __str__(self):
        return f"self-test {self.pk} ({self.state})"
