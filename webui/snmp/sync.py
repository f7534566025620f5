"""Agent side: mirror the SNMP revision store, its pending marker and the confirmed and
pending snmp.toml - each redacted: no passphrase, no community - into the database
(commitkit/mirror.py), for the unprivileged web process."""
import os
import threading

from commitkit import mirror

from .core.applier import CONFIG_NAME
from .core.config import TEXT_MAX, redacted
from .models import Revision, SnmpState

_LOCK = threading.Lock()   # the agent syncs from job threads and its periodic task
_last = {"state": None}


def _read(path):
    text = mirror.read_text(path, TEXT_MAX)
    return redacted(text) if text else ""


def sync(applier, periodic=False):
    """Copies new and changed revisions, then the state row. A periodic call that finds
    nothing changed only notes that it looked."""
    with _LOCK:
        store = applier.store
        key = mirror.store_key(store, mirror.mtime(applier.config_path))
        if periodic and key == _last["state"]:
            mirror.touch(SnmpState)
            return
        _last["state"] = key
        mirror.copy_revisions(Revision, store, lambda revision: {
            "text": _read(os.path.join(revision.path, CONFIG_NAME))})
        pending = store.pending()
        mirror.write_state(
            SnmpState, store, confirmed_text=_read(applier.config_path),
            pending_text=(_read(os.path.join(store.revision_dir(pending["revision"]),
                                             CONFIG_NAME)) if pending else ""))
