"""What the web UI keeps of the SNMP agent's configuration. The on-box revision store
(core/applier.py, written by the agent) stays the authority; Revision and SnmpState
mirror it for the unprivileged web process (sync.py) without a single secret: the
passphrases and the community stay in root's files (core/config.py redacted())."""
from django.db import models

from commitkit.models import RevisionBase, StateBase


class Revision(RevisionBase):
    """One apply of snmp.toml, as the agent's store records it, its secrets left out."""

    label = "SNMP revision"

    text = models.TextField()                  # the revision's snmp.toml, redacted


class SnmpState(StateBase):
    """The SNMP configuration's state as the agent last saw it. One row."""

    label = "SNMP state"

    # the confirmed snmp.toml, redacted ("" when there is none); the pending revision's
    confirmed_text = models.TextField(blank=True)
    pending_text = models.TextField(blank=True)
