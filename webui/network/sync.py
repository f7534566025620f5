"""Agent side: mirror the network's revision store, its pending marker and the confirmed
network.toml into the database, for the unprivileged web process."""
import os
import threading
from datetime import datetime, timezone

from django.db import transaction

from tusklib.commit import PENDING

from .core.applier import APPLIED_NAME, CONFIG_NAME
from .core.normalise import TEXT_MAX
from .models import NetworkState, Revision

_LOCK = threading.Lock()   # the agent syncs from job threads and its periodic task
_last = {"state": None}


def _read(path):
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read(TEXT_MAX + 1)
    except (OSError, UnicodeDecodeError):
        return ""


def _mtime(path):
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return None


def sync(applier, periodic=False):
    """Copies new and changed revisions, then the pending/confirmed state and the
    confirmed file. A periodic call that finds nothing changed only notes that it looked."""
    with _LOCK:
        store = applier.store
        ids = store.ids()
        pending = store.pending()
        confirmed = store.confirmed_id()
        state_now = (ids[-1] if ids else None, pending and pending["revision"],
                     pending and pending["deadline"], confirmed, _mtime(applier.config_path))
        if periodic and state_now == _last["state"]:
            NetworkState.objects.filter(pk=1).update(synced_at=datetime.now(timezone.utc))
            return
        _last["state"] = state_now
        # only a pending revision's outcome changes later; the others are read once
        final = set(Revision.objects.exclude(outcome=PENDING).values_list("number", flat=True))
        for number in ids:
            if number in final:
                continue
            revision = store.get(number)
            Revision.objects.update_or_create(number=number, defaults={
                "created": datetime.fromisoformat(revision.meta["created"]),
                "user": str(revision.meta.get("user") or "")[:150],
                "action": str(revision.meta.get("action", ""))[:64],
                "outcome": str(revision.meta.get("outcome", ""))[:255],
                "text": _read(os.path.join(revision.path, CONFIG_NAME)),
                "applied": _read(os.path.join(revision.path, APPLIED_NAME)),
                "meta": revision.meta})
        with transaction.atomic():
            state, _ = NetworkState.objects.select_for_update().get_or_create(pk=1)
            state.confirmed = confirmed
            state.confirmed_text = _read(applier.config_path)
            state.pending = pending["revision"] if pending else None
            state.deadline = (datetime.fromtimestamp(pending["deadline"], timezone.utc)
                              if pending else None)
            state.confirm_over = (pending.get("confirm_over") or []) if pending else []
            state.token_sha256 = (pending.get("token_sha256") or "") if pending else ""
            state.synced_at = datetime.now(timezone.utc)
            state.save()
