"""Commit-confirm, for every domain that changes the live system (the policy, the network):
a change is applied as a pending revision that restores the previous one by itself unless
confirmed in time.

The revision store is files, not the database: at boot the last confirmed revision must
be found before PostgreSQL runs, and a rollback must work when the web UI is down.

    <state>/revisions/000042/meta.json    when, by whom, action, outcome, the domain's extras
    <state>/revisions/000042/<name>       the domain's files (policy.yaml, ruleset.nft, ...)
    <state>/pending.json                  the revision awaiting confirmation, its deadline
    <state>/confirmed                     id of the live, confirmed revision
    <state>/lock                          flock: one apply, confirm or rollback at a time

The rollback timer is a detached watchdog process in its own session, so it outlives
the process that applied (an SSH session that dies, a SIGKILL). It runs as
`python -m tusklib.commit DOMAIN STATE REV [NETNS]`, DOMAIN a key of DOMAINS: the
command line never names code to import. The deadline is also on disk:
expire_overdue() - run by every command - and recover() at start-up roll back a pending
revision whose watchdog died with the machine.

A domain subclasses CommitConfirm: restore(pending) puts the base revision (or the
no-revision state) back, `domain` names its DOMAINS key, `error_class` and
`failure_codes` say which of the domain's errors each Failure raises. Plain Python: no
Django, no app.
"""
import fcntl
import getpass
import importlib
import json
import os
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from datetime import datetime, timezone
from enum import Enum

from .files import write_atomically

# Where the two domains meet: the agent's policy jobs check a policy's zones against the
# network, its network jobs check a configuration against the policy's zones. Each check
# and the apply after it hold this lock, so that two jobs running side by side cannot both
# pass checks that together fail (a zone on a VLAN the other job removes).
ZONES_CHECKED = threading.Lock()

PENDING = "pending"
CONFIRMED = "confirmed"
LOCK_WAIT_SECONDS = 30
WATCHDOG_TICK = 0.2

# The classes a watchdog may start, by domain name. "network" is reserved for the
# network configuration's applier.
DOMAINS = {
    "policy": "policy.core.applier:Applier",
    "network": "box.appliers:NetworkApplier",   # with what follows it (box/dependents.py)
    "ha": "box.appliers:HaApplier",
    "snmp": "box.appliers:SnmpApplier",
}
# For the tests only: extra domains, "name=module:Class" comma-separated, which a test
# sets in its own environment (the watchdog inherits it). Like TUSK_AGENT_PLUGINS, an
# environment variable of root's own process: no file or row the web user writes names
# code to run.
TEST_DOMAINS_VARIABLE = "TUSK_COMMIT_TEST_DOMAINS"


class Failure(Enum):
    """What can go wrong in the mechanism itself, whatever the domain."""

    LOCKED = "another apply, confirm or rollback holds the lock"
    NOT_PENDING = "nothing awaits confirmation"
    REVISION = "no such revision"
    STATE_DIR = "the state directory cannot be created"
    RESTORE = "restoring the base revision failed"


class RestoreFailed(Exception):
    """Raised by restore() when the previous state could not be put back; the reason
    goes into the revision's outcome and the domain's error."""

    def __init__(self, reason):
        super().__init__(reason)
        self.reason = reason


def error_factory(error_class, codes):
    """The `error` of a Store and a CommitConfirm: error_class (a tusklib.problems.Problems
    subclass) with the domain's code for each Failure (codes: Failure -> code)."""
    missing = set(Failure) - set(codes)
    if missing:
        raise ValueError(f"no code for {', '.join(sorted(f.name for f in missing))}")

    def error(failure, message):
        return error_class(codes[failure], "", message)
    return error


def timeout_problem(timeout, low, high):
    """Why timeout (seconds to confirm, from a form, a job row or a command line) is not
    one, or None: a whole number within low..high."""
    if isinstance(timeout, bool) or not isinstance(timeout, int):
        return f"{str(timeout)[:40]!r} is not a whole number of seconds"
    if not low <= timeout <= high:
        return f"{timeout} s is outside {low}..{high} s"
    return None


def current_user():
    return os.environ.get("SUDO_USER") or getpass.getuser()


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

    def update(self, **fields):
        self.meta.update(fields)
        write_atomically(os.path.join(self.path, "meta.json"),
                         json.dumps(self.meta, indent=2) + "\n")


class Store:
    """Revisions, the pending marker and the confirmed pointer of one state directory.
    error(failure, message) gives the domain's exception (error_factory)."""

    revision_class = Revision

    def __init__(self, state_dir, error):
        self.state_dir = os.path.abspath(state_dir)
        self.error = error
        try:
            os.makedirs(os.path.join(self.state_dir, "revisions"), exist_ok=True)
        except OSError as exc:
            raise error(Failure.STATE_DIR, f"cannot create state directory {self.state_dir}: "
                        f"{exc.strerror}") from None

    def revision_dir(self, rev_id):
        return os.path.join(self.state_dir, "revisions", f"{rev_id:06d}")

    def ids(self):
        names = os.listdir(os.path.join(self.state_dir, "revisions"))
        return sorted(int(n) for n in names if n.isdigit())

    def get(self, rev_id):
        try:
            with open(os.path.join(self.revision_dir(rev_id), "meta.json"), encoding="utf-8") as f:
                return self.revision_class(self, json.load(f))
        except FileNotFoundError:
            raise self.error(Failure.REVISION, f"there is no revision {rev_id}") from None

    def all(self):
        return [self.get(i) for i in self.ids()]

    def create(self, user, action, files, **extra):
        """A new revision holding files ({name: text}); extra goes into its meta."""
        rev_id = (self.ids() or [0])[-1] + 1
        directory = self.revision_dir(rev_id)
        os.makedirs(directory)
        for name, text in files.items():
            write_atomically(os.path.join(directory, name), text)
        meta = {"id": rev_id, "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                "user": user, "action": action, "outcome": PENDING, **extra}
        revision = self.revision_class(self, meta)
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

    def set_pending(self, revision_id, base_id, timeout, **extra):
        """extra: what the domain needs at confirm time (given back by pending())."""
        pending = {"revision": revision_id, "base": base_id, "timeout": timeout,
                   "deadline": time.time() + timeout, **extra}
        write_atomically(os.path.join(self.state_dir, "pending.json"), json.dumps(pending) + "\n")
        return pending

    def clear_pending(self):
        try:
            os.unlink(os.path.join(self.state_dir, "pending.json"))
        except FileNotFoundError:
            pass


class CommitConfirm:
    """The lock, the pending revision's life and its watchdog, for one state directory
    and target (netns: a network namespace, or None for the system). A subclass sets
    the class attributes below and implements restore(pending)."""

    domain = None            # its key in DOMAINS: the watchdog starts this class
    error_class = None       # the domain's tusklib.problems.Problems subclass
    failure_codes = None     # Failure -> the domain's code
    restored = "state"       # what restore() puts back, for the message when it fails

    def __init__(self, state_dir, netns=None, store=None):
        """store: the domain's Store (subclass) for state_dir, if it has one."""
        self.error = error_factory(self.error_class, self.failure_codes)
        self.store = store if store is not None else Store(state_dir, self.error)
        self.netns = netns

    @property
    def where(self):
        """Where the changes go, for messages."""
        return f"namespace {self.netns}" if self.netns else "this system"

    def restore(self, pending):
        """Put pending["base"] back (None: the state without any revision); raise
        RestoreFailed when it could not be done."""
        raise NotImplementedError

    @contextmanager
    def locked(self, wait=LOCK_WAIT_SECONDS):
        path = os.path.join(self.store.state_dir, "lock")
        with open(path, "a") as handle:
            deadline = time.monotonic() + wait
            while True:
                try:
                    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        raise self.error(Failure.LOCKED, "another apply, confirm or rollback "
                                         f"is running on {self.where}; try again") from None
                    time.sleep(0.05)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    # -- pending: under locked() -------------------------------------------------------

    def begin(self, revision, base, timeout, **extra):
        """Make revision the pending one (base: what a rollback restores; extra: kept in
        pending.json for confirm's check) and start its watchdog. Returns the pending
        marker. Called under locked(), before the change is made live."""
        pending = self.store.set_pending(revision.id, base, timeout, **extra)
        revision.update(deadline=pending["deadline"])
        self._spawn_watchdog(revision.id)
        return pending

    def go_live(self, revision, previous, make_live):
        """Under locked(), after begin(revision): make_live() puts the pending revision
        into effect and returns what it did. When it raises the domain's error, the
        confirmed state comes back (restore), the revision records why, a pending
        revision it replaced (previous: its marker) records that it went with it, and the
        error goes on."""
        try:
            result = make_live()
        except self.error_class as error:
            self.store.clear_pending()
            outcome = f"failed: {error.problems[0]}"
            try:
                self.restore({"base": None})
            except RestoreFailed as failed:
                outcome += f"; restoring the confirmed {self.restored} failed too: {failed}"
            revision.update(outcome=outcome)
            if previous:
                self.store.get(previous["revision"]).update(
                    outcome=f"rolled back: superseded by {revision.id}, which failed")
            raise
        if previous:
            self.store.get(previous["revision"]).update(outcome=f"superseded by {revision.id}")
        return result

    def rearm(self, pending):
        """Make an earlier pending marker the pending one again (a change that replaced it
        failed to go live): its deadline, with at least a second left, and its extras."""
        extra = {key: value for key, value in pending.items()
                 if key not in ("revision", "base", "timeout", "deadline")}
        self.store.set_pending(pending["revision"], pending["base"],
                               max(pending["deadline"] - time.time(), 1), **extra)
        self._spawn_watchdog(pending["revision"])

    def expire_overdue(self):
        """Roll back the pending revision if its deadline has passed; True if it did."""
        pending = self.store.pending()
        if pending is not None and time.time() >= pending["deadline"]:
            self._roll_back(pending, f"rolled back: not confirmed within {pending['timeout']} s")
            return True
        return False

    def drop_pending(self, outcome):
        """At boot, before the confirmed revision is made live: a revision still pending
        was never confirmed, so it counts as rolled back (outcome says why). Returns the
        dropped pending marker, or None."""
        pending = self.store.pending()
        if pending is not None:
            self.store.get(pending["revision"]).update(outcome=outcome)
            self.store.clear_pending()
        return pending

    def _roll_back(self, pending, outcome):
        try:
            self.restore(pending)
        except RestoreFailed as failed:
            self.store.get(pending["revision"]).update(outcome=f"rollback failed: {failed.reason}")
            raise self.error(Failure.RESTORE, f"restoring the previous {self.restored} "
                             f"failed: {failed.reason}") from None
        revision = self.store.get(pending["revision"])
        self.store.clear_pending()
        revision.update(outcome=outcome)
        return revision

    # -- the operator's decisions --------------------------------------------------------

    def confirm(self, user=None, check=None):
        """Make the pending revision the confirmed one. check(pending), when given, may
        raise to refuse; the revision stays pending then."""
        with self.locked():
            self.expire_overdue()
            pending = self.store.pending()
            if pending is None:
                raise self.error(Failure.NOT_PENDING, "nothing awaits confirmation")
            if check is not None:
                check(pending)
            revision = self.store.get(pending["revision"])
            self.store.set_confirmed(revision.id)
            self.store.clear_pending()
            revision.update(outcome=CONFIRMED, confirmed_by=user or current_user())
            return revision

    def cancel(self, user=None):
        """Roll back the pending revision now, instead of waiting for the timer."""
        with self.locked():
            pending = self.store.pending()
            if pending is None:
                raise self.error(Failure.NOT_PENDING, "nothing awaits confirmation; "
                                 "name a revision to roll back to")
            return self._roll_back(pending, f"rolled back by {user or current_user()}")

    def recover(self):
        """At start-up: roll back what is overdue, re-arm a watchdog for what is not."""
        with self.locked():
            if self.expire_overdue():
                return "rolled back"
            pending = self.store.pending()
            if pending is not None:
                self._spawn_watchdog(pending["revision"])
                return "watching"
        return "nothing pending"

    # -- the watchdog --------------------------------------------------------------------

    def _spawn_watchdog(self, rev_id):
        argv = [sys.executable, "-m", __name__, self.domain, self.store.state_dir, str(rev_id)]
        if self.netns:
            argv.append(self.netns)
        # cwd is /, so the packages come from PYTHONPATH: webui's first, then the caller's
        package_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        path = os.pathsep.join(filter(None, [package_root, os.environ.get("PYTHONPATH")]))
        subprocess.Popen(argv, start_new_session=True, stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         close_fds=True, env=dict(os.environ, PYTHONPATH=path), cwd="/")

    def watch(self, rev_id):
        """Runs in the watchdog: waits for confirmation of rev_id or rolls it back."""
        while True:
            pending = self.store.pending()
            if pending is None or pending["revision"] != rev_id:
                return
            if time.time() >= pending["deadline"]:
                with self.locked(wait=3600):
                    self.expire_overdue()
                return
            time.sleep(min(WATCHDOG_TICK, max(pending["deadline"] - time.time(), 0.01)))



class ConfirmedFile(CommitConfirm):
    """A domain whose configuration is one text file (config_path) that only confirm()
    writes - HA's ha.toml, SNMP's snmp.toml: at boot what comes up is the last confirmed
    one, and a change still pending at power loss is gone. Each revision holds the file
    as config_name. A subclass sets config_name, text_max and config_mode and implements
    confirmed() (the model in force, from the file) and put(model) (the model into
    effect); confirmed_files(revision) writes what else a confirm makes confirmed."""

    config_name = None
    text_max = 1 << 16
    config_mode = 0o644
    config_path = None

    def confirmed(self):
        raise NotImplementedError

    def put(self, config):
        raise NotImplementedError

    def confirmed_text(self):
        try:
            with open(self.config_path, encoding="utf-8") as handle:
                return handle.read(self.text_max + 1)
        except (OSError, UnicodeDecodeError):
            return ""

    def pending_text(self):
        pending = self.store.pending()
        return self.store.get(pending["revision"]).read(self.config_name) if pending else ""

    def restore(self, pending):
        """The confirmed configuration again (only confirm() writes the file, so it is
        the base); without one, the domain's state without any."""
        try:
            config = self.confirmed()
        except self.error_class as error:
            raise RestoreFailed(f"{self.config_path}: {error.problems[0]}") from None
        try:
            self.put(config)
        except self.error_class as error:
            raise RestoreFailed(str(error.problems[0])) from None

    def confirmed_files(self, revision):
        """What a confirm writes besides the file (HA: the pair key)."""

    def confirm(self, user=None, check=None):
        """The pending revision's file made the confirmed one; check as CommitConfirm's."""
        def write(pending):
            if check is not None:
                check(pending)
            revision = self.store.get(pending["revision"])
            os.makedirs(os.path.dirname(self.config_path), exist_ok=True)
            write_atomically(self.config_path, revision.read(self.config_name),
                             self.config_mode)
            self.confirmed_files(revision)
        return super().confirm(user, write)


def domains():
    """DOMAINS, and the test domains of TUSK_COMMIT_TEST_DOMAINS."""
    found = dict(DOMAINS)
    for entry in filter(None, os.environ.get(TEST_DOMAINS_VARIABLE, "").split(",")):
        name, _, target = entry.strip().partition("=")
        if not name or ":" not in target or name in DOMAINS:
            raise ValueError(f"{TEST_DOMAINS_VARIABLE}: {entry.strip()!r} is not "
                             "name=module:Class with a name of its own")
        found[name] = target
    return found


def domain_class(name):
    """The CommitConfirm subclass registered as name; ValueError for any other name."""
    known = domains()
    if name not in known:
        raise ValueError(f"unknown commit domain {name!r}; known: {', '.join(sorted(known))}")
    module, _, class_name = known[name].partition(":")
    cls = getattr(importlib.import_module(module), class_name)
    if not (isinstance(cls, type) and issubclass(cls, CommitConfirm)) or cls.domain != name:
        raise ValueError(f"{known[name]} is not the CommitConfirm of domain {name!r}")
    return cls


def watchdog_main(argv):
    if len(argv) not in (3, 4) or not argv[2].isdigit():
        print("usage: python -m tusklib.commit DOMAIN STATE_DIR REVISION [NETNS]",
              file=sys.stderr)
        return 2
    try:
        cls = domain_class(argv[0])
    except ValueError as error:
        print(f"tusklib.commit: {error}", file=sys.stderr)
        return 2
    cls(argv[1], argv[3] if len(argv) > 3 else None).watch(int(argv[2]))
    return 0


if __name__ == "__main__":
    # Run from the imported module, not from __main__: the domain's class subclasses
    # tusklib.commit.CommitConfirm, which must be the same class as ours.
    sys.exit(importlib.import_module("tusklib.commit").watchdog_main(sys.argv[1:]))
