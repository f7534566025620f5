"""The on-box record of every apply: a directory per revision under the state directory.

Files, not the database, because the box must find its last confirmed ruleset at
boot before PostgreSQL runs, and a rollback must work when the web UI is down.

    <state>/revisions/000042/meta.json    when, by whom, action, outcome
    <state>/revisions/000042/policy.yaml  the policy as submitted
    <state>/revisions/000042/ruleset.nft  the rendered ruleset
    <state>/pending.json                  the revision awaiting confirmation
    <state>/confirmed                     id of the live, confirmed revision
"""
import json
import os
import time
from datetime import datetime, timezone

from tusklib.files import write_atomically

from .errors import Code, PolicyError

PENDING = "pending"
CONFIRMED = "confirmed"


class Revision:
    """One apply attempt. meta holds id, created, user, action, outcome and extras."""

    def __init__(self, store, meta):
        self.store = store
        self.meta = meta

    @property
    def id(self):
        return self.meta["id"]

    @property
    def outcome(self):
        return self.meta["outcome"]

    @property
    def path(self):
        return self.store.revision_dir(self.id)

    def read(self, name):
        with open(os.path.join(self.path, name), encoding="utf-8") as handle:
            return handle.read()

    @property
    def ruleset(self):
        return self.read("ruleset.nft")

    @property
    def policy_text(self):
        return self.read("policy.yaml")

    def update(self, **fields):
        self.meta.update(fields)
        write_atomically(os.path.join(self.path, "meta.json"),
                         json.dumps(self.meta, indent=2) + "\n")


FAILSAFE = "failsafe.nft"


class Store:
    """Revisions, the pending marker and the confirmed pointer of one target."""

    def __init__(self, state_dir):
        self.state_dir = os.path.abspath(state_dir)
        try:
            os.makedirs(os.path.join(self.state_dir, "revisions"), exist_ok=True)
        except OSError as exc:
            raise PolicyError(Code.IO, "", f"cannot create state directory {self.state_dir}: "
                              f"{exc.strerror}") from None

    def revision_dir(self, rev_id):
        return os.path.join(self.state_dir, "revisions", f"{rev_id:06d}")

    def ids(self):
        names = os.listdir(os.path.join(self.state_dir, "revisions"))
        return sorted(int(n) for n in names if n.isdigit())

    def get(self, rev_id):
        try:
            with open(os.path.join(self.revision_dir(rev_id), "meta.json"), encoding="utf-8") as f:
                return Revision(self, json.load(f))
        except FileNotFoundError:
            raise PolicyError(Code.REVISION, "", f"there is no revision {rev_id}") from None

    def all(self):
        return [self.get(i) for i in self.ids()]

    def create(self, user, action, policy_text, ruleset, **extra):
        rev_id = (self.ids() or [0])[-1] + 1
        directory = self.revision_dir(rev_id)
        os.makedirs(directory)
        write_atomically(os.path.join(directory, "policy.yaml"), policy_text)
        write_atomically(os.path.join(directory, "ruleset.nft"), ruleset)
        meta = {"id": rev_id, "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                "user": user, "action": action, "outcome": PENDING, **extra}
        revision = Revision(self, meta)
        revision.update()
        return revision

    # -- the confirmed pointer and the pending marker ----------------------------------

    def confirmed_id(self):
        try:
            with open(os.path.join(self.state_dir, "confirmed"), encoding="utf-8") as handle:
                return int(handle.read().strip())
        except FileNotFoundError:
            return None

    def set_confirmed(self, rev_id):
        write_atomically(os.path.join(self.state_dir, "confirmed"), f"{rev_id}\n")

    def pending(self):
        try:
            with open(os.path.join(self.state_dir, "pending.json"), encoding="utf-8") as handle:
                return json.load(handle)
        except FileNotFoundError:
            return None

    def set_pending(self, revision_id, base_id, timeout):
        pending = {"revision": revision_id, "base": base_id, "timeout": timeout,
                   "deadline": time.time() + timeout}
        write_atomically(os.path.join(self.state_dir, "pending.json"), json.dumps(pending) + "\n")
        return pending

    def no_policy_ruleset(self, default):
        """What the target runs when no revision is confirmed: `failsafe.nft` in the state
        directory when there is one (the appliance writes a forward-drop table there at
        boot, so a first apply that rolls back fails closed), else `default`."""
        try:
            with open(os.path.join(self.state_dir, FAILSAFE), encoding="utf-8") as handle:
                return handle.read()
        except FileNotFoundError:
            return default

    def clear_pending(self):
        try:
            os.unlink(os.path.join(self.state_dir, "pending.json"))
        except FileNotFoundError:
            pass
