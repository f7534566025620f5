"""The web tier's HA pair (conftest.py's ha_peer): the addresses of the agent's box and
its peer box, the pair key, and one box's half of the pair as the HA page's form makes
it. A module of its own: test modules import it (conftest is not importable by name
when several tiers run in one session)."""
import dataclasses
import time

from ha.contracts import HaStatus, PeerStatus, SyncState
from ha.models import HaState

HA_SEGMENT = ("198.51.100.2/24", "198.51.100.3/24")     # the agent's box, its peer's
HA_SYNC = ("192.168.255.1/30", "192.168.255.2/30")
HA_VIRTUAL = "198.51.100.1/24"
HA_KEY = "the web tier's pair key"


def ha_document(role="primary", advert_ms=100, **changes):
    """One box's half of the pair ha_peer sets up: the agent's box (primary) or its peer."""
    own, peer = (0, 1) if role == "primary" else (1, 0)
    return {"ha": {"enabled": True, "role": role, "vrid": 61, "advert_ms": advert_ms,
                   "preempt": False, "sync_interface": "sync0", "sync_address": HA_SYNC[own],
                   "peer_address": HA_SYNC[peer].split("/")[0], **changes},
            "virtual": [{"interface": "seg0", "addresses": [HA_VIRTUAL]}]}


def ha_status(**changes):
    """A whole ha.status row as the agent stores it (ha/contracts.py), with changes: a box
    of a confirmed pair, MASTER, both daemons running, no peer yet, read now."""
    row = dataclasses.asdict(HaStatus(
        role="MASTER", running={"keepalived": True, "conntrackd": True}, stats=None,
        has_key=True,
        listener_error=None, peer=None, peer_address=None, config_sync=None,
        tuning_sync=None, at=time.time()))
    for key in ("peer",):
        if isinstance(changes.get(key), dict):
            changes[key] = dataclasses.asdict(PeerStatus(**changes[key]))
    for key in ("config_sync", "tuning_sync"):
        if isinstance(changes.get(key), dict):
            changes[key] = dataclasses.asdict(SyncState(**changes[key]))
    return {**row, **changes}


def in_pair(**changes):
    """The HaState row of a box with a confirmed half of a pair (ha/models.py), as the
    agent's ha sync writes it."""
    fields = {"confirmed": 1, "confirmed_text": "[ha]", **changes}
    return HaState.objects.update_or_create(pk=1, defaults=fields)[0]
