"""Stage 3 of 3: apply - the only code with side effects.

apply:   capability check, nft -c, then one atomic nft -f under a lock; the result
         is a pending revision that rolls back by itself unless confirmed.
confirm: makes the pending revision the confirmed one.
The rollback timer is a detached watchdog process in its own session, so it
outlives the process that applied (an SSH session that dies, a SIGKILL). Its
deadline is also on disk: expire_overdue() - run by every command and by
`tusk policy recover` at start-up - rolls back a pending revision whose
watchdog died with the machine.
"""
import difflib
import fcntl
import getpass
import os
import re
import subprocess
import sys
import time
from contextlib import contextmanager

from . import capabilities
from .constants import CONFIRM_TIMEOUT_MAX, CONFIRM_TIMEOUT_MIN, FAMILY, POLICY_MAX_BYTES, TABLE
from .errors import Code, PolicyError
from .normalise import load_policy_text
from .render import render
from .revisions import CONFIRMED, Store
from .target import Target

EMPTY_RULESET = f"table {FAMILY} {TABLE}\ndelete table {FAMILY} {TABLE}\n"
LOCK_WAIT_SECONDS = 30
WATCHDOG_TICK = 0.2


def current_user():
    return os.environ.get("SUDO_USER") or getpass.getuser()


class Applier:
    """Applies policies to one target and keeps its revision history."""

    def __init__(self, state_dir, netns=None):
        self.store = Store(state_dir)
        self.netns = netns
        self.target = Target(netns)

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
                        raise PolicyError(Code.LOCKED, "", "another apply, confirm or rollback "
                                          f"is running on {self.target}; try again") from None
                    time.sleep(0.05)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    # -- apply ---------------------------------------------------------------------------

    def apply(self, policy_text, user=None, timeout=None, action="apply"):
        """Validate, render, check and load; returns the pending revision."""
        if not isinstance(policy_text, str) or len(policy_text) > POLICY_MAX_BYTES:
            raise PolicyError(Code.SCHEMA, "policy", "must be the text of a policy file of "
                              f"at most {POLICY_MAX_BYTES >> 20} MiB")
        policy = load_policy_text(policy_text)
        ruleset = render(policy)
        timeout = _confirm_timeout(timeout, policy)
        user = user or current_user()
        with self.locked():
            self._expire_overdue()
            try:
                capabilities.check(policy, self.target)
                self._check(ruleset)
            except PolicyError as error:
                revision = self.store.create(user, action, policy_text, ruleset)
                revision.update(outcome=f"refused: {error.problems[0]}")
                raise
            previous = self.store.pending()
            base = self.store.confirmed_id()
            revision = self.store.create(user, action, policy_text, ruleset, base=base,
                                         confirm_timeout=timeout)
            pending = self.store.set_pending(revision.id, base, timeout)
            revision.update(deadline=pending["deadline"])
            self._spawn_watchdog(revision.id)
            result = self.target.nft_load(ruleset)
            if not result.ok:
                self.store.clear_pending()
                if previous:
                    self.store.set_pending(previous["revision"], previous["base"],
                                           max(previous["deadline"] - time.time(), 1))
                    self._spawn_watchdog(previous["revision"])
                message = _first_error(result.stderr)
                revision.update(outcome=f"failed: {message}")
                raise PolicyError(Code.APPLY, _path_of(result.stderr, ruleset),
                                  f"nft refused the ruleset; nothing changed: {message}")
            if previous:
                self.store.get(previous["revision"]).update(outcome=f"superseded by {revision.id}")
            return revision

    def _check(self, ruleset):
        result = self.target.nft_check(ruleset)
        if not result.ok:
            raise PolicyError(Code.NFT_CHECK, _path_of(result.stderr, ruleset),
                              f"nft -c refused the ruleset: {_first_error(result.stderr)}")

    def check_and_load(self, ruleset):
        """nft -c, then one nft -f, under the lock, for a ruleset that is no revision (the
        tables tusk-boot loads). Raises PolicyError - NFT_CHECK when the check refused it,
        APPLY when the load did - and nothing changed then."""
        with self.locked():
            self._check(ruleset)
            result = self.target.nft_load(ruleset)
            if not result.ok:
                raise PolicyError(Code.APPLY, "", "nft refused the ruleset; nothing changed: "
                                  f"{_first_error(result.stderr)}")

    def check(self, policy_text):
        """Everything apply does before it changes anything."""
        policy = load_policy_text(policy_text)
        ruleset = render(policy)
        capabilities.check(policy, self.target)
        self._check(ruleset)
        return ruleset

    # -- confirm and roll back -----------------------------------------------------------

    def confirm(self, user=None):
        with self.locked():
            self._expire_overdue()
            pending = self.store.pending()
            if pending is None:
                raise PolicyError(Code.NOT_PENDING, "", "nothing awaits confirmation")
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
                raise PolicyError(Code.NOT_PENDING, "", "nothing awaits confirmation; "
                                  "name a revision to roll back to")
            return self._roll_back(pending, f"rolled back by {user or current_user()}")

    def rollback_to(self, rev_id, user=None, timeout=None):
        """Apply an earlier revision's policy again, as a new revision to confirm."""
        old = self.store.get(rev_id)
        return self.apply(old.policy_text, user=user, timeout=timeout,
                          action=f"rollback to {rev_id}")

    def _roll_back(self, pending, outcome):
        base = pending["base"]
        ruleset = (self.store.get(base).ruleset if base is not None
                   else self.store.no_policy_ruleset(EMPTY_RULESET))
        result = self.target.nft_load(ruleset)
        revision = self.store.get(pending["revision"])
        if not result.ok:
            revision.update(outcome=f"rollback failed: {_first_error(result.stderr)}")
            raise PolicyError(Code.APPLY, "", "restoring the previous ruleset failed: "
                              f"{_first_error(result.stderr)}")
        self.store.clear_pending()
        revision.update(outcome=outcome)
        return revision

    def _expire_overdue(self):
        pending = self.store.pending()
        if pending is not None and time.time() >= pending["deadline"]:
            self._roll_back(pending, f"rolled back: not confirmed within {pending['timeout']} s")
            return True
        return False

    def recover(self):
        """At start-up: roll back what is overdue, re-arm a watchdog for what is not."""
        with self.locked():
            if self._expire_overdue():
                return "rolled back"
            pending = self.store.pending()
            if pending is not None:
                self._spawn_watchdog(pending["revision"])
                return "watching"
        return "nothing pending"

    def boot(self):
        """At boot, before any interface is up: load the last confirmed revision. A revision
        still pending was never confirmed, so it counts as rolled back. Without a confirmed
        revision the target's no-policy ruleset is loaded. Returns the loaded revision or
        None; raises PolicyError when the kernel refuses the ruleset (nothing changed then:
        one transaction)."""
        with self.locked():
            pending = self.store.pending()
            if pending is not None:
                self.store.get(pending["revision"]).update(
                    outcome="rolled back: the firewall restarted before it was confirmed")
                self.store.clear_pending()
            rev_id = self.store.confirmed_id()
            revision = self.store.get(rev_id) if rev_id is not None else None
            ruleset = revision.ruleset if revision else self.store.no_policy_ruleset(EMPTY_RULESET)
            result = self.target.nft_load(ruleset)
            if not result.ok:
                what = f"revision {rev_id}" if revision else "the no-policy ruleset"
                raise PolicyError(Code.APPLY, "", f"loading {what} failed: "
                                  f"{_first_error(result.stderr)}")
            return revision

    # -- the watchdog --------------------------------------------------------------------

    def _spawn_watchdog(self, rev_id):
        argv = [sys.executable, "-m", "policy.core.applier", self.store.state_dir, str(rev_id)]
        if self.netns:
            argv.append(self.netns)
        package_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        env = dict(os.environ, PYTHONPATH=package_root)
        subprocess.Popen(argv, start_new_session=True, stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         close_fds=True, env=env, cwd="/")

    def watch(self, rev_id):
        """Runs in the watchdog: waits for confirmation of rev_id or rolls it back."""
        while True:
            pending = self.store.pending()
            if pending is None or pending["revision"] != rev_id:
                return
            if time.time() >= pending["deadline"]:
                with self.locked(wait=3600):
                    self._expire_overdue()
                return
            time.sleep(min(WATCHDOG_TICK, max(pending["deadline"] - time.time(), 0.01)))

    # -- history -------------------------------------------------------------------------

    def history(self):
        return self.store.all()

    def status(self):
        confirmed = self.store.confirmed_id()
        return {"confirmed": confirmed, "pending": self.store.pending(),
                "live": self.target.tusk_table() is not None}

    def diff(self, old_text, new_text, old_name, new_name):
        return "".join(difflib.unified_diff(old_text.splitlines(True), new_text.splitlines(True),
                                            old_name, new_name))

    def live_ruleset(self):
        """The rendered ruleset of what is loaded now (pending, else confirmed)."""
        pending = self.store.pending()
        rev_id = pending["revision"] if pending else self.store.confirmed_id()
        return (self.store.get(rev_id).ruleset, f"revision {rev_id}") if rev_id else ("", "empty")


def _confirm_timeout(timeout, policy):
    if timeout is None:
        return policy.settings.confirm_timeout
    if isinstance(timeout, bool) or not isinstance(timeout, int):
        raise PolicyError(Code.SCHEMA, "confirm_timeout",
                          f"{str(timeout)[:40]!r} is not a whole number of seconds")
    if not CONFIRM_TIMEOUT_MIN <= timeout <= CONFIRM_TIMEOUT_MAX:
        raise PolicyError(Code.RANGE, "confirm_timeout", f"{timeout} s is outside "
                          f"{CONFIRM_TIMEOUT_MIN}..{CONFIRM_TIMEOUT_MAX} s")
    return timeout


def _first_error(stderr):
    for line in stderr.splitlines():
        if "Error" in line or "error" in line:
            return line.split("Error:", 1)[-1].strip()
    return stderr.strip().splitlines()[0] if stderr.strip() else "unknown error"


def _path_of(stderr, ruleset):
    """The policy path in the comment of the ruleset line nft complains about."""
    match = re.search(r"^[^:\n]*:(\d+):\d+", stderr, re.MULTILINE)
    if not match:
        return ""
    lines = ruleset.splitlines()
    number = int(match.group(1))
    if not 1 <= number <= len(lines):
        return ""
    found = re.search(r'comment "tusk: (classes\[\d+\])', lines[number - 1])
    return found.group(1) if found else ""


def _watchdog_main(argv):
    state_dir, rev_id = argv[0], int(argv[1])
    netns = argv[2] if len(argv) > 2 else None
    Applier(state_dir, netns).watch(rev_id)


if __name__ == "__main__":
    _watchdog_main(sys.argv[1:])
