"""What the agent's ha.status task keeps for the pages (the HA page, every page's banner
on a backup, the dashboard's health panel): one contract (tusklib/contracts.py), checked
by the agent when it stores it and by the web process when it reads it back."""
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class PeerStatus:
    """The peer's own report over the sync link, or why there is none (error)."""

    error: str | None = None
    role: str | None = None
    running: dict[str, Any] = field(default_factory=dict)   # the peer's word, as it gave it
    policy: dict[str, Any] = field(default_factory=dict)
    tuning: str | None = None
    at: float | None = None


@dataclass(frozen=True)
class SyncState:
    """How the master's policy or tuning profile reaches the backup."""

    state: str        # "in sync", "syncing" or "refused"
    detail: str


@dataclass(frozen=True)
class HaStatus:
    """This box's half of the pair live: its role and daemons, the sync's numbers, the
    peer and the config sync, when the agent read them (at, Unix time). Its
    configuration's state (revisions, pending) is the HaState row's (models.py)."""

    role: str | None                     # keepalived's MASTER or BACKUP; None: not running
    running: dict[str, bool]             # {"keepalived": ..., "conntrackd": ...}
    stats: dict[str, int] | None         # conntrackd's sync health; None: no answer
    has_key: bool
    listener_error: str | None
    peer: PeerStatus | None
    peer_address: str | None
    config_sync: SyncState | None
    tuning_sync: SyncState | None
    at: float
    cluster: bool = False                # one box of a cluster: no role, no peer
