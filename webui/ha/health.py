"""The HA pair's (or cluster's) rows of the dashboard's health panel (dashboard/health.py),
registered in HaConfig.ready()."""
import time

from dashboard.health import check, register, stale_after
from jobs.models import PeriodicState

from .agent_jobs import STATUS
from .contracts import HaStatus, PeerStatus
from .models import HaState, in_pair

HA_ROLES = ("MASTER", "BACKUP")


@register
def pair_checks():
    """An HA pair's box (the agent's ha.status, ha/contracts.py): its role and daemons, the
    peer as it answers over the sync link, and the sync link's state sync. Nothing for a
    box alone."""
    state = PeriodicState.read(STATUS, HaStatus)
    if state is None or not in_pair(HaState.current()):
        return []
    age = time.time() - state.at
    if age > stale_after(STATUS):
        return [check("HA", False, f"the agent has not reported the pair's state for "
                      f"{age:.0f} s")]
    if state.cluster:
        return cluster_checks(state)
    role = state.role
    stopped = [name for name in ("keepalived", "conntrackd") if not state.running.get(name)]
    checks = [check("HA", role in HA_ROLES and not stopped,
                    f"this box is {role or 'not reporting a role'}"
                    + (f"; {' and '.join(stopped)} stopped" if stopped else
                       "; keepalived and conntrackd running"))]
    peer = state.peer or PeerStatus()
    peer_role = peer.role
    if peer.error:
        checks.append(check("HA peer", False, peer.error))
    elif role == peer_role == "MASTER":
        checks.append(check("HA peer", False, "both boxes are MASTER: they do not hear each "
                            "other's VRRP on the segments (split brain)"))
    elif "MASTER" not in (role, peer_role):
        checks.append(check("HA peer", False, f"the peer is {peer_role or 'without a role'} "
                            f"and this box {role or 'without one'}: no box holds the "
                            "addresses"))
    else:
        checks.append(check("HA peer", True, f"{state.peer_address} is {peer_role}, "
                            "answering over the sync link"))
    for sync, name in ((state.config_sync, "HA policy"), (state.tuning_sync, "HA tuning")):
        if sync is not None:
            checks.append(check(name, {"in sync": True, "refused": False}.get(sync.state),
                                f"{sync.state}: {sync.detail}"))
    checks.append(sync_check(state.stats, "the peer", peer.error))
    return checks


def sync_check(stats, source, trouble=None, counts_lost=True):
    """conntrackd's sync health as one row (stats None: it does not answer). counts_lost
    False: a cluster's, whose "lost" counts the gaps between the senders' sequence
    numbers on the group (every box numbers its own), not messages lost."""
    if stats is None:
        return check("HA sync", False, "conntrackd does not answer")
    failed = stats.get("inject_failures", 0) + stats.get("send_errors", 0)
    return check("HA sync", not trouble and not failed,
                 f"{stats.get('entries', 0)} connections in the sync cache; "
                 f"{stats.get('injected', 0)} put into this kernel from {source} "
                 f"({stats.get('inject_failures', 0)} failed); "
                 + (f"{stats.get('lost', 0)} messages lost, " if counts_lost else "")
                 + f"{stats.get('send_errors', 0)} send errors")


def cluster_checks(state):
    """A cluster's box (docs/SCALE.md): no role and no peer - conntrackd running and
    its multicast sync healthy are what keep its connections alive on the others."""
    running = bool(state.running.get("conntrackd"))
    return [check("HA", running, "this box is one of a cluster sharing the load; "
                  + ("conntrackd running" if running else "conntrackd stopped: its "
                     "connections would not go on through another box")),
            sync_check(state.stats, "the other boxes", counts_lost=False)]
