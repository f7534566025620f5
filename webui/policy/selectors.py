"""Reads of the policy's state for pages and other apps: what the box runs now, and what the
agent found its kernel can do."""
from jobs.models import PeriodicState

from .agent_jobs import CAPABILITIES
from .contracts import Capabilities
from .models import Revision, TargetState


def live_revision(fields=("number", "ruleset_sha256", "outcome"), state=None):
    """The revision loaded now: pending if any, else the confirmed one (None: empty)."""
    state = state or TargetState.objects.filter(pk=1).first()
    number = state and (state.pending or state.confirmed)
    if not number:
        return None
    revisions = Revision.objects.filter(number=number)
    return (revisions.only(*fields) if fields else revisions).first()


def seqrand_available():
    """As the agent found the target's kernel at its start (agent_jobs.capabilities);
    None when no agent has reported yet (or the row is not of its contract's shape)."""
    found = PeriodicState.read(CAPABILITIES, Capabilities)
    if found is None:
        return None
    return any(present is True for name, present in found.items() if "helper" in name)
