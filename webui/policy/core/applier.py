"""Stage 3 of 3: apply - the only code with side effects.

apply:   capability check, nft -c, then one atomic nft -f under a lock; the result
         is a pending revision that rolls back by itself unless confirmed.
confirm: makes the pending revision the confirmed one.
Commit-confirm itself - the lock, pending.json's deadline, the detached watchdog that
outlives the process that applied, expire_overdue() and `tusk policy recover` for a
watchdog that died with the machine - is tusklib/commit.py, which the network shares;
this class supplies what a rollback restores: a ruleset.
"""
import difflib
import hashlib
import re

from tusklib.commit import CommitConfirm, RestoreFailed, current_user, timeout_problem
from tusklib.names import BRIDGE_FAMILY, BRIDGE_TABLE, FAMILY, OFFLOAD_TABLE, TABLE
from tusklib.target import Target

from . import capabilities
from .constants import CONFIRM_TIMEOUT_MAX, CONFIRM_TIMEOUT_MIN, POLICY_MAX_BYTES
from .errors import Code, PolicyError, on_target
from .fastpath import TABLE_OF, fastpath_addition, ruleset_fastpath_devices, with_fastpath_devices
from .normalise import load_policy_text
from .render import render, render_bridge_closed
from .revisions import FAILURE_CODES, Store

__all__ = ["Applier", "EMPTY_RULESET", "current_user"]

EMPTY_RULESET = "".join(f"table {family} {table}\ndelete table {family} {table}\n"
                        for family, table in ((FAMILY, TABLE), (FAMILY, OFFLOAD_TABLE),
                                              (BRIDGE_FAMILY, BRIDGE_TABLE)))
ACCT_SYSCTL = "net.netfilter.nf_conntrack_acct"
# a revision's auto_fastpath: whether its fastpath: auto classes got the flowtable
AUTO_ON = "on"
AUTO_OFF = ("off: the kernel has no flowtable for these interfaces; auto classes stay on "
            "the slow path")


class Applier(CommitConfirm):
    """Applies policies to one target and keeps its revision history."""

    domain = "policy"
    error_class = PolicyError
    failure_codes = FAILURE_CODES
    restored = "ruleset"

    def __init__(self, state_dir, netns=None):
        super().__init__(state_dir, netns, store=Store(state_dir))
        with on_target():
            self.target = Target(netns)

    # -- apply ---------------------------------------------------------------------------

    def apply(self, policy_text, user=None, timeout=None, action="apply"):
        """Validate, render, check and load; returns the pending revision."""
        if not isinstance(policy_text, str) or len(policy_text) > POLICY_MAX_BYTES:
            raise PolicyError(Code.SCHEMA, "policy", "must be the text of a policy file of "
                              f"at most {POLICY_MAX_BYTES >> 20} MiB")
        policy = load_policy_text(policy_text)
        ruleset, extras = self.rendered(policy)
        timeout = _confirm_timeout(timeout, policy)
        user = user or current_user()
        with self.locked():
            self.expire_overdue()
            try:
                capabilities.check(policy, self.target)
                self._check(ruleset)
                if extras.get("auto_fastpath") == AUTO_ON:
                    self.count_bytes()
            except PolicyError as error:
                revision = self.store.create(user, action, policy_text, ruleset, **extras)
                revision.update(outcome=f"refused: {error.problems[0]}")
                raise
            previous = self.store.pending()
            base = self.store.confirmed_id()
            revision = self.store.create(user, action, policy_text, ruleset, base=base,
                                         confirm_timeout=timeout, **extras)
            self.begin(revision, base, timeout)
            result = self.target.nft_load(ruleset)
            if not result.ok:
                self.store.clear_pending()
                if previous:
                    self.rearm(previous)
                message = _first_error(result.stderr)
                revision.update(outcome=f"failed: {message}")
                raise PolicyError(Code.APPLY, _path_of(result.stderr, ruleset),
                                  f"nft refused the ruleset; nothing changed: {message}")
            if previous:
                self.store.get(previous["revision"]).update(outcome=f"superseded by {revision.id}")
            return revision

    def rendered(self, policy):
        """(the ruleset for this target, the revision's extras): fastpath: auto classes
        get the fast path where the kernel has flowtables (capabilities.auto_fastpath);
        the revision records which, and the hash of the ruleset as rendered for a kernel
        with flowtables - what a draft is compared with, on any kernel."""
        canonical = render(policy)
        extras = {"canonical_sha256": hashlib.sha256(canonical.encode()).hexdigest()}
        if not any(cls.auto_fast for cls in policy.classes):
            return canonical, extras
        if capabilities.auto_fastpath(policy, self.target):
            return canonical, {**extras, "auto_fastpath": AUTO_ON}
        return render(policy, flowtable=False), {**extras, "auto_fastpath": AUTO_OFF}

    def count_bytes(self):
        """Promotion reads conntrack's byte count, which only connections made while
        nf_conntrack_acct is on have (the image's sysctl.d sets it; a lab's namespace
        starts without)."""
        result = self.target.run(["sysctl", "-qw", f"{ACCT_SYSCTL}=1"])
        if not result.ok:
            raise PolicyError(Code.APPLY, "", f"{ACCT_SYSCTL}=1, which fastpath: auto needs: "
                              f"{result.stderr.strip() or 'refused'}")

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
        ruleset, _ = self.rendered(policy)
        capabilities.check(policy, self.target)
        self._check(ruleset)
        return ruleset

    # -- roll back and boot --------------------------------------------------------------

    def rollback_to(self, rev_id, user=None, timeout=None):
        """Apply an earlier revision's policy again, as a new revision to confirm."""
        old = self.store.get(rev_id)
        return self.apply(old.policy_text, user=user, timeout=timeout,
                          action=f"rollback to {rev_id}")

    def restore(self, pending):
        """The base revision's ruleset, or the no-policy ruleset, loaded again."""
        base = pending["base"]
        ruleset = (self.store.get(base).ruleset if base is not None
                   else self.store.no_policy_ruleset(EMPTY_RULESET))
        result = self.target.nft_load(self.loadable(ruleset))
        if not result.ok:
            raise RestoreFailed(_first_error(result.stderr))

    def boot(self):
        """At boot, before any interface is up: load the last confirmed revision. A revision
        still pending was never confirmed, so it counts as rolled back. Without a confirmed
        revision the target's no-policy ruleset is loaded. Returns the loaded revision or
        None; raises PolicyError when the kernel refuses the ruleset (nothing changed then:
        one transaction)."""
        with self.locked():
            self.drop_pending("rolled back: the firewall restarted before it was confirmed")
            rev_id = self.store.confirmed_id()
            revision = self.store.get(rev_id) if rev_id is not None else None
            ruleset = revision.ruleset if revision else self.store.no_policy_ruleset(EMPTY_RULESET)
            result = self.target.nft_load(self.loadable(ruleset))
            if not result.ok:
                what = f"revision {rev_id}" if revision else "the no-policy ruleset"
                raise PolicyError(Code.APPLY, "", f"loading {what} failed: "
                                  f"{_first_error(result.stderr)}")
            return revision

    # -- the fast path's devices ---------------------------------------------------------

    def loadable(self, ruleset):
        """A stored ruleset as it can be loaded now: its flowtables over the devices that
        exist (the kernel refuses a flowtable over one that does not), and one rendered
        before table tusk_offload existed deleting that too. At boot the firewall loads
        the policy before networkd makes the VLANs and bonds its zones name; a rollback
        may meet an interface the network no longer has. The others join the fast path
        when they appear (attach_fastpath_devices); until then their connections take
        the slow path through the same rules."""
        if f"table {FAMILY} {OFFLOAD_TABLE}\n" not in ruleset:
            # rendered before the hardware fast path had a table: a later revision's
            # must not outlive the rollback to it
            ruleset += f"table {FAMILY} {OFFLOAD_TABLE}\ndelete table {FAMILY} {OFFLOAD_TABLE}\n"
        if f"table {BRIDGE_FAMILY} {BRIDGE_TABLE}\n" not in ruleset:
            # rendered before bridged zones: a later revision's bridge classes go, and a
            # bridge fails closed as that revision's table would have it
            ruleset += render_bridge_closed()
        present = None
        for name in TABLE_OF:
            wanted = ruleset_fastpath_devices(ruleset, name)
            if not wanted:
                continue
            with on_target():
                present = self.target.interfaces() if present is None else present
            if any(device not in present for device in wanted):
                ruleset = with_fastpath_devices(ruleset, [d for d in wanted if d in present],
                                                name)
        return ruleset

    def attach_fastpath_devices(self):
        """Adds to the live flowtable the devices of the loaded revision that exist now
        and it lacks (made after the policy was loaded, or deleted and made again: the
        kernel drops a device from the flowtable when it goes). Returns (the devices
        added, the devices still missing)."""
        added_all, missing_all, present = [], [], None
        with self.locked():
            ruleset, _ = self.live_ruleset()
            for name, table in TABLE_OF.items():
                wanted = ruleset_fastpath_devices(ruleset, name)
                live = self.target.flowtable_devices(name, table) if wanted else None
                if live is None:
                    continue
                with on_target():
                    present = self.target.interfaces() if present is None else present
                added = [d for d in wanted if d in present and d not in live]
                missing_all += [d for d in wanted if d not in present and d not in missing_all]
                if added:
                    result = self.target.nft_load(fastpath_addition(added, name))
                    if not result.ok:
                        raise PolicyError(Code.APPLY, "", f"adding {', '.join(added)} to the "
                                          f"{name} flowtable failed: "
                                          f"{_first_error(result.stderr)}")
                    added_all += [d for d in added if d not in added_all]
            return added_all, missing_all

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
    reason = timeout_problem(timeout, CONFIRM_TIMEOUT_MIN, CONFIRM_TIMEOUT_MAX)
    if reason:
        code = Code.RANGE if isinstance(timeout, int) and not isinstance(timeout, bool) \
            else Code.SCHEMA
        raise PolicyError(code, "confirm_timeout", reason)
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
