"""Agent side: mirror the network's revision store, its pending marker and the confirmed
network.toml into the database, for the unprivileged web process."""
import os
import threading

from commitkit import mirror

from .core.applier import APPLIED_NAME, CONFIG_NAME
from .core.normalise import TEXT_MAX
from .models import NetworkState, Revision

_LOCK = threading.Lock()   # the agent syncs from job threads and its periodic task
_last = {"state": None}


def _read(path):
    return mirror.read_text(path, TEXT_MAX)


def sync(applier, periodic=False):
    """Copies new and changed revisions, then the pending/confirmed state and the
    confirmed file (commitkit/mirror.py). A periodic call that finds nothing changed only
    notes that it looked."""
    with _LOCK:
        store = applier.store
        key = mirror.store_key(store, mirror.mtime(applier.config_path))
        if periodic and key == _last["state"]:
            mirror.touch(NetworkState)
            return
        _last["state"] = key
        mirror.copy_revisions(Revision, store, lambda revision: {
            "text": _read(os.path.join(revision.path, CONFIG_NAME)),
            "applied": _read(os.path.join(revision.path, APPLIED_NAME))})
        pending = store.pending() or {}
        mirror.write_state(NetworkState, store, confirmed_text=_read(applier.config_path),
                           confirm_over=pending.get("confirm_over") or [],
                           token_sha256=pending.get("token_sha256") or "")
