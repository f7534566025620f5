"""Every full page of a box that is the backup of an HA pair says so: the master's
policy and tuning profile replace what is changed here (ha/configsync.py)."""
from jobs.models import PeriodicState

from .agent_jobs import STATUS
from .contracts import HaStatus
from .models import HaState, in_pair


def pair_role(request):
    if request.headers.get("HX-Request") == "true" or not request.user.is_authenticated:
        return {}
    state = PeriodicState.read(STATUS, HaStatus)
    backup = state is not None and state.role == "BACKUP" and in_pair(HaState.current())
    return {"ha_backup": backup}
