"""Agent side: the one sync of a commit-confirm store (tusklib/commit.py's Store) into a
domain's rows. Only a pending revision's outcome changes later, so the others are read
from disk once; the state row is replaced in one transaction."""
import os
import threading
from datetime import datetime, timezone

from django.db import transaction

from tusklib.commit import PENDING


def copy_revisions(model, store, fields=None):
    """Copies the store's new revisions, and the ones still pending, into model (a
    RevisionBase), and drops a row of a revision the store does not have (the rows are
    the web user's to write: history is what the store says). fields(revision) -> the
    domain's own columns."""
    ids = store.ids()
    model.objects.exclude(number__in=ids).delete()
    final = set(model.objects.exclude(outcome=PENDING).values_list("number", flat=True))
    for number in ids:
        if number in final:
            continue
        revision = store.get(number)
        meta = revision.meta
        model.objects.update_or_create(number=number, defaults={
            "created": datetime.fromisoformat(meta["created"]),
            "user": str(meta.get("user") or "")[:150],
            "action": str(meta.get("action", ""))[:64],
            "outcome": str(meta.get("outcome", ""))[:255],
            "meta": meta, **(fields(revision) if fields else {})})


def write_state(model, store, **extra):
    """The store's confirmed and pending revision, the pending deadline and extra (the
    domain's own columns) into model's one row (a StateBase). -> the row."""
    pending = store.pending()
    with transaction.atomic():
        state, _ = model.objects.select_for_update().get_or_create(pk=1)
        state.confirmed = store.confirmed_id()
        state.pending = pending["revision"] if pending else None
        state.deadline = (datetime.fromtimestamp(pending["deadline"], timezone.utc)
                          if pending else None)
        for name, value in extra.items():
            setattr(state, name, value)
        state.synced_at = datetime.now(timezone.utc)
        state.save()
    return state


def touch(model):
    """A periodic sync that found nothing changed: it looked, just now."""
    model.objects.filter(pk=1).update(synced_at=datetime.now(timezone.utc))


def store_key(store, *more):
    """What changes when a sync has something to copy: a new revision, a decision
    (confirm, rollback, supersede), a re-armed deadline; more: the domain's own."""
    ids = store.ids()
    pending = store.pending()
    return (ids[-1] if ids else None, pending and pending["revision"],
            pending and pending["deadline"], store.confirmed_id(), *more)


def read_text(path, limit):
    """A file of a revision (root's store) as text, at most limit + 1 characters (the
    domain's parser refuses more); "" when it cannot be read."""
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read(limit + 1)
    except (OSError, UnicodeDecodeError):
        return ""


def mtime(path):
    """path's modification time in ns, None when there is no file: a confirmed file
    written outside a revision (the console's) changes it."""
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return None


class TextMirror:
    """The sync of a domain whose revisions hold one text file (config_name) and whose
    state row keeps the confirmed and the pending text (HA, SNMP): copies new and changed
    revisions, then the state row; a periodic call that finds nothing changed only notes
    that it looked. shown(text): what the web process may see of a text (SNMP's without
    its secrets); limit: the longest text read."""

    def __init__(self, state_model, revision_model, config_name, limit, shown=None):
        self.state_model, self.revision_model = state_model, revision_model
        self.config_name, self.limit, self.shown = config_name, limit, shown
        self.lock = threading.Lock()   # the agent syncs from job threads and its task
        self.last = None

    def read(self, path):
        text = read_text(path, self.limit)
        return self.shown(text) if self.shown and text else text

    def sync(self, applier, periodic=False):
        with self.lock:
            store = applier.store
            key = store_key(store, mtime(applier.config_path))
            if periodic and key == self.last:
                touch(self.state_model)
                return
            self.last = key
            copy_revisions(self.revision_model, store, lambda revision: {
                "text": self.read(os.path.join(revision.path, self.config_name))})
            pending = store.pending()
            write_state(self.state_model, store, confirmed_text=self.read(applier.config_path),
                        pending_text=(self.read(os.path.join(
                            store.revision_dir(pending["revision"]), self.config_name))
                            if pending else ""))
