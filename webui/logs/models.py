"""The Logs page's settings. The records themselves are files (core/storage.py), not
rows: ulogd writes them whether or not the database runs."""
from django.conf import settings
from django.db import models


class LogSettings(models.Model):
    """The storage bound and the remote syslog receivers, one row (pk 1): the document
    logs/core/settings.py checks - in the form, and again in the agent before it uses
    any of it. No row: the defaults (core.settings.Settings())."""

    document = models.JSONField(default=dict)
    updated_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                   on_delete=models.SET_NULL, related_name="+")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["pk"]
        verbose_name_plural = "log settings"

    def __str__(self):
        return "log settings"
