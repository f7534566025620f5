"""The Flows page's settings. The flows themselves are not rows: the agent's periodic
task flows.sample returns the fastest of them with the table's totals, and the page
reads that (jobs.PeriodicState.result)."""
from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

from .constants import ELEPHANT_MBPS, ROWS
from .core.flowref import CAPTURE_SECONDS


def _bounded(limits):
    low, high, _ = limits
    return [MinValueValidator(low), MaxValueValidator(high)]


class FlowSettings(models.Model):
    """One row (pk 1), set by an admin: the rate above which a flow is an elephant,
    how many flows the page lists, and how long its captures run."""

    elephant_mbps = models.PositiveIntegerField(default=ELEPHANT_MBPS[2],
                                                validators=_bounded(ELEPHANT_MBPS))
    rows = models.PositiveSmallIntegerField(default=ROWS[2], validators=_bounded(ROWS))
    capture_seconds = models.PositiveSmallIntegerField(default=CAPTURE_SECONDS[2],
                                                       validators=_bounded(CAPTURE_SECONDS))
    updated_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                   on_delete=models.SET_NULL, related_name="+")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["pk"]
        verbose_name_plural = "flow settings"

    def __str__(self):
        return f"elephants above {self.elephant_mbps} Mbit/s, {self.rows} rows"

    @classmethod
    def current(cls):
        """The settings row, or the defaults (unsaved) before an admin set any."""
        return cls.objects.filter(pk=1).first() or cls(pk=1)


class HookEntry(models.Model):
    """One block or bypass asked through the IDS hook (core/hook.py): what, why, who
    asked (and with which token) and until when. The kernel's set, with its timeout, is
    what acts; this row is the record the Flows page and the API list."""

    class Action(models.TextChoices):
        BLOCK = "block"
        BYPASS = "bypass"

    action = models.CharField(max_length=8, choices=Action.choices)
    match = models.CharField(max_length=120)        # the request as a person reads it
    request = models.JSONField()                     # core.hook.Request.as_dict()
    reason = models.CharField(max_length=200, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                   on_delete=models.SET_NULL, related_name="+")
    token = models.CharField(max_length=64, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField(db_index=True)
    job = models.ForeignKey("jobs.Job", null=True, blank=True, on_delete=models.SET_NULL,
                            related_name="+")

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self):
        return f"{self.match} until {self.expires_at:%Y-%m-%d %H:%M:%S}"


class FlowExportSettings(models.Model):
    """Flow export's settings, one row (pk 1): the document flows/core/export.py checks -
    in the page's form and the API, and again in the agent before it uses any of it. No
    row: no export."""

    document = models.JSONField(default=dict)
    updated_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                   on_delete=models.SET_NULL, related_name="+")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["pk"]
        verbose_name_plural = "flow export settings"

    def __str__(self):
        return "flow export settings"
