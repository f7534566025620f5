"""Captures the agent took and the reports of the analyser. Files live under
[agent] capture_dir, named from the capture's id (diag/files.py): a row holds no path,
so a forged row cannot point anyone at another file."""
from django.db import models

from jobs.models import JobSubject


class Capture(JobSubject):
    """One packet capture: taken by the agent on the box's interfaces (spec: the filter,
    interfaces, limits and format) or uploaded by an operator, with why it stopped and
    what it holds."""

    class Source(models.TextChoices):
        CAPTURE = "capture"
        UPLOAD = "upload"

    source = models.CharField(max_length=8, choices=Source.choices, default=Source.CAPTURE)
    name = models.CharField(max_length=200, blank=True)   # an upload's original file name
    spec = models.JSONField(default=dict)                  # diag.core.capture.Spec.as_dict()
    stop_requested = models.BooleanField(default=False)
    reason = models.CharField(max_length=16, blank=True)   # packets, bytes, duration, request...
    packets = models.BigIntegerField(default=0)
    bytes = models.BigIntegerField(default=0)

    def __str__(self):
        return f"capture {self.pk} ({self.state})"

    @property
    def format(self):
        if self.source == self.Source.UPLOAD:
            return "pcapng" if self.name.lower().endswith(".pcapng") else "pcap"
        return self.spec.get("format", "pcapng")


class Report(models.Model):
    """The analyser's JSON report (diag/core/analyze.py, version 1) of one capture."""
    capture = models.ForeignKey(Capture, on_delete=models.CASCADE, related_name="reports")
    job = models.ForeignKey("jobs.Job", null=True, blank=True, on_delete=models.SET_NULL,
                            related_name="+")
    result = models.JSONField(null=True, blank=True)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-id"]

    def __str__(self):
        return f"report {self.pk} of capture {self.capture_id}"
