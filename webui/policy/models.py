"""What the web UI keeps of the policy. The on-box revision store (core/revisions.py,
written by the agent) stays the authority for what was applied; Revision and
TargetState mirror it for the unprivileged web process, refreshed by the agent
(sync.py) after each policy job and every few seconds."""
from django.db import models

from commitkit.models import DraftBase, RevisionBase, StateBase


class Draft(DraftBase):
    """The policy being edited, as the same plain structure the YAML file has. One row.
    Every save is validated whole by the policy engine first (nothing half-saved);
    version detects an edit made from a stale form."""

    label = "policy draft"

    ruleset_sha256 = models.CharField(max_length=64, blank=True)  # of render(document)


class Revision(RevisionBase):
    """One apply of a policy, as the agent's store records it (core/revisions.py)."""

    policy_text = models.TextField()
    ruleset = models.TextField()
    ruleset_sha256 = models.CharField(max_length=64)
    # `nft -s list table inet tusk` right after it was loaded: what the health
    # check compares the live table with
    listing = models.TextField(blank=True)


class TargetState(StateBase):
    """The firewall's policy state as the agent last saw it. One row."""

    label = "policy state"

    table_loaded = models.BooleanField(default=False)
    # None: nothing to compare with; True/False: live table == the live revision's listing
    matches = models.BooleanField(null=True)


# the one row of CounterReading
READING_PK = 1


class CounterReading(models.Model):
    """The named counters of table inet tusk (class_<name>, invalid, default_deny) as the
    agent last read them. One row (pk=1), replaced at every reading: latest values only.

    counters: {counter name: [packets, bytes, last hit]}, the last hit being the Unix time
    of the reading in which the agent first saw the counter higher than in the reading
    before (a counter that starts again from zero - every apply replaces the table - and
    has any packets counts too); null when it has not been seen to grow since
    observed_since, the agent's first reading, before which nothing is known."""

    read_at = models.DateTimeField()
    observed_since = models.DateTimeField()
    table_loaded = models.BooleanField()
    counters = models.JSONField(default=dict)

    class Meta:
        ordering = ["-read_at"]

    def __str__(self):
        return f"counter reading of {self.read_at:%Y-%m-%d %H:%M:%S}"
