"""What the web UI keeps of this box's half of the pair. The on-box revision store
(core/applier.py, written by the agent) stays the authority; Revision and HaState mirror
it for the unprivileged web process (sync.py), after each HA job and every few seconds.
The pair key is never mirrored: it stays in root's files. The live role, the daemons and
the peer are status, not configuration: the agent's ha.status (contracts.py) has them."""
from django.db import models

from commitkit.models import RevisionBase, StateBase


class Revision(RevisionBase):
    """One apply of this box's ha.toml, as the agent's store records it."""

    label = "HA revision"

    text = models.TextField()                  # the revision's ha.toml


class HaState(StateBase):
    """This box's HA configuration state as the agent last saw it. One row."""

    label = "HA state"

    # the confirmed ha.toml, "" when there is none; the pending revision's, "" when none
    confirmed_text = models.TextField(blank=True)
    pending_text = models.TextField(blank=True)


def in_pair(state):
    """Whether this box has a half of a pair, confirmed or pending (state: HaState's row
    or None)."""
    return state is not None and bool(state.confirmed_text or state.pending)
