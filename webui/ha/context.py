"""Every full page of a box that is the backup of an HA pair says so: the master's
policy and tuning profile replace what is changed here (ha/configsync.py)."""
from jobs.models import PeriodicState

from .agent_jobs import STATUS


def pair_role(request):
    if request.headers.get("HX-Request") == "true" or not request.user.is_authenticated:
        return {}
    state = PeriodicState.last_result(STATUS) or {}
    backup = isinstance(state, dict) and state.get("role") == "BACKUP" and \
        bool(state.get("confirmed_text") or state.get("pending"))
    return {"ha_backup": backup}
