"""What the web UI keeps of the network configuration. The on-box revision store
(core/applier.py, written by the agent) stays the authority for what was applied and
confirmed; Revision and NetworkState mirror it for the unprivileged web process,
refreshed by the agent (sync.py) after each network job and every few seconds."""
from django.conf import settings
from django.db import models

from commitkit.models import DraftBase, RevisionBase, StateBase


class Draft(DraftBase):
    """The network being edited: the same structure as network.toml (normalise.
    to_document). One row. Every save is validated whole first (nothing half-saved);
    version detects an edit made from a stale form."""

    label = "network draft"


class Revision(RevisionBase):
    """One apply of a network configuration, as the agent's store records it."""

    label = "network revision"

    text = models.TextField()                  # the revision's network.toml
    applied = models.TextField(blank=True)     # what the backend said it changed


class NetworkState(StateBase):
    """The box's network state as the agent last saw it. One row."""

    label = "network state"

    # the confirmed configuration's file (network.toml), "" when there is none: a box
    # set up on the console has one before any revision
    confirmed_text = models.TextField(blank=True)
    # the addresses a confirm of the pending change must arrive over ([]: any)
    confirm_over = models.JSONField(default=list)
    token_sha256 = models.CharField(max_length=64, blank=True)   # of its one-time link


class ConfirmToken(models.Model):
    """The one-time link to the new management address: only the token's hash is kept
    (the token itself is in the applying operator's session and in the link). Used once,
    before expires, it signs that operator in at the new address."""

    token_sha256 = models.CharField(max_length=64, unique=True)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                             related_name="+")
    created = models.DateTimeField(auto_now_add=True)
    expires = models.DateTimeField()
    used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created", "-id"]

    def __str__(self):
        return f"confirm link of {self.created:%Y-%m-%d %H:%M:%S}"
