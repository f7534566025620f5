"""What the Metrics page and the scrape at /metrics keep: the scrape tokens (hashed) and
the latest reading of the ruleset's named counters, which the agent writes."""
from django.conf import settings
from django.db import models

from .constants import TOKEN_NAME_MAX


class ScrapeToken(models.Model):
    """A bearer token a Prometheus server scrapes /metrics with. Only its SHA-256 is
    kept: the token itself is shown once, when it is made. A revoked token stays listed
    (who made it, when it was last used) and is never valid again."""

    name = models.CharField(max_length=TOKEN_NAME_MAX)
    sha256 = models.CharField(max_length=64, unique=True)   # hex digest of the token
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                   on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    last_used_from = models.GenericIPAddressField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self):
        return f"scrape token {self.name}"
