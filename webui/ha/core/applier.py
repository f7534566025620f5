"""Applying a box's half of an HA pair (docs/HA.md): the document checked against this
machine, both daemons' files rendered and the daemons restarted, pending until confirmed -
the commit-confirm of the policy and the network (tusklib/commit.py): moving virtual
addresses can cut the operator off, so a change not confirmed in time puts the confirmed
one back by itself, also when the applying process is killed.

    appliance  HaApplier(state_dir)                  the confirmed file /etc/tusk/ha.toml,
               files in /run/tusk/ha, the daemons' systemd units (tusk-conntrackd,
               tusk-keepalived), the host table (VRRP, the peer's sync) reloaded
    lab        HaApplier(state_dir, netns="tusk-fw")   the confirmed file
               <state_dir>/ha.toml, files and pid files in <state_dir>/run, both daemons
               run in that namespace

Only confirm() writes the confirmed file, so at boot (tusk-boot ha) what comes up is the
last confirmed pair, and a change still pending at power loss is gone.

The pair key is part of the revision (issue 34): each revision carries the key it applies
(<revision>/ha.key: the one given, else the key in force), the key in force is the
pending revision's while one is pending, else the confirmed one (<state_dir>/ha.key), and
only confirm() writes that - so Roll back, the confirm deadline and a reboot give the
previous key back with the previous ha.toml. A revision of a release before (no key of
its own) leaves the confirmed key in force. Every key file is root's, 0600, in root's
state directory.

Fail over (maintenance): the master's keepalived is restarted. Stopping, it sends
priority-0 advertisements, so the backup takes the addresses at once; started again,
every instance begins as BACKUP and - preemption off - stays so. With preemption on, a
primary would take the addresses straight back: refused, with the reason.
"""
import os
import time

from tusklib.children import command_line, stop_daemon, systemctl_problem, unit_running
from tusklib.commit import ConfirmedFile, Failure, current_user, timeout_problem
from tusklib.files import write_atomically
from tusklib.target import Target

from . import peer, render, status
from .config import (
    DEFAULT_PATH,
    PRIMARY,
    TEXT_MAX,
    Code,
    HaError,
    interfaces_problems,
    load,
    parse,
    to_toml,
)

CONFIG_NAME = "ha.toml"
APPLIED_NAME = "applied.txt"
RUN_DIR = "/run/tusk/ha"
TCP_LOOSE = "net.netfilter.nf_conntrack_tcp_loose"
CONFIRM_TIMEOUT_DEFAULT = 120
CONFIRM_TIMEOUT_MIN, CONFIRM_TIMEOUT_MAX = 10, 3600   # as the policy's
UNITS = ("tusk-conntrackd.service", "tusk-keepalived.service")
STOP_SECONDS = 10
ROLE_SECONDS = 30     # fail over: how long the old master waits to see itself BACKUP


def confirm_timeout(timeout):
    if timeout is None:
        return CONFIRM_TIMEOUT_DEFAULT
    reason = timeout_problem(timeout, CONFIRM_TIMEOUT_MIN, CONFIRM_TIMEOUT_MAX)
    if reason:
        raise HaError(Code.VALUE, "confirm_timeout", reason)
    return timeout


class SystemdDaemons:
    """The appliance: the daemons' units (rootfs-overlay), which run only when their
    file is in /run/tusk/ha."""

    def __init__(self, run_dir):
        self.run_dir = run_dir

    def describe(self):
        return "systemd (tusk-conntrackd, tusk-keepalived)"

    def _systemctl(self, *argv):
        reason = systemctl_problem(*argv)
        if reason:
            raise HaError(Code.APPLY, "", reason)

    def restart(self, config):
        if config is None:
            self._systemctl("stop", *UNITS)
        elif config.cluster:        # no keepalived.conf: its unit's condition holds it off
            self._systemctl("stop", UNITS[1])
            self._systemctl("restart", UNITS[0])
        else:
            # conntrackd first: keepalived's notify drives it
            self._systemctl("restart", *UNITS)

    def restart_keepalived(self):
        self._systemctl("restart", UNITS[1])

    def running(self):
        return {"conntrackd": unit_running(UNITS[0]), "keepalived": unit_running(UNITS[1])}


def processes():
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


class NetnsDaemons:
    """The lab and the tests: both daemons in a namespace, as the units run them on the
    appliance, with their pid files in the (root's) run directory."""

    def __init__(self, target, run_dir):
        self.target = target
        self.run_dir = run_dir

    def describe(self):
        return f"keepalived and conntrackd in namespace {self.target.netns}"

    def _argv(self, name):
        """The command line the daemon of pid file `name` runs with: the pid file is
        believed only for a process with exactly that command line, so a stale file (or
        another box's daemon in the lab) is never signalled."""
        if name == "conntrackd.pid":
            return ["conntrackd", "-C", os.path.join(self.run_dir, "conntrackd.conf"), "-d"]
        return self.keepalived_argv()

    def _pid(self, name):
        try:
            with open(os.path.join(self.run_dir, name), encoding="ascii") as handle:
                pid = int(handle.read(16).strip())
        except (OSError, ValueError):
            return None
        return pid if command_line(pid) == self._argv(name) else None

    def _stop(self, name):
        stop_daemon(lambda: self._pid(name), STOP_SECONDS)

    def _start(self, argv, what):
        result = self.target.run(argv)
        if not result.ok:
            raise HaError(Code.APPLY, "", f"{what} did not start: "
                          f"{result.stderr.strip() or f'exit status {result.returncode}'}")

    def stop(self):
        self._stop("keepalived.pid")
        self._stop("conntrackd.pid")

    def keepalived_argv(self):
        return ["keepalived", "--vrrp", "-f", os.path.join(self.run_dir, "keepalived.conf"),
                "-p", os.path.join(self.run_dir, "keepalived.pid"),
                "-r", os.path.join(self.run_dir, "vrrp.pid")]

    def start_keepalived(self):
        self._start(self.keepalived_argv(), "keepalived")

    def restart(self, config):
        self.stop()
        if config is None:
            return
        # conntrackd has no pid file option: -d forks, and its lock file holds no pid. Its
        # pid is the process running this box's command line (not the newest conntrackd:
        # another box's, or another test's, may have started since)
        argv = self._argv("conntrackd.pid")
        self._start(argv, "conntrackd")
        pids = [pid for pid in processes() if command_line(pid) == argv]
        if len(pids) != 1:
            raise HaError(Code.APPLY, "", f"conntrackd: {len(pids)} processes run "
                          f"{' '.join(argv)} after it started")
        write_atomically(os.path.join(self.run_dir, "conntrackd.pid"), f"{pids[0]}\n")
        if not config.cluster:
            self.start_keepalived()

    def restart_keepalived(self):
        self._stop("keepalived.pid")
        self.start_keepalived()

    def running(self):
        return {"conntrackd": self._pid("conntrackd.pid") is not None,
                "keepalived": self._pid("keepalived.pid") is not None}


class HaApplier(ConfirmedFile):
    domain = "ha"
    config_name = CONFIG_NAME
    text_max = TEXT_MAX
    error_class = HaError
    failure_codes = {Failure.LOCKED: Code.LOCKED, Failure.NOT_PENDING: Code.NOT_PENDING,
                     Failure.REVISION: Code.REVISION, Failure.STATE_DIR: Code.IO,
                     Failure.RESTORE: Code.APPLY}
    restored = "HA pair"

    def __init__(self, state_dir, netns=None):
        super().__init__(state_dir, netns)
        self.target = Target(netns)
        if netns is None:
            self.config_path = DEFAULT_PATH
            self.run_dir = RUN_DIR
            self.daemons = SystemdDaemons(self.run_dir)
        else:
            self.config_path = os.path.join(self.store.state_dir, CONFIG_NAME)
            self.run_dir = os.path.join(self.store.state_dir, "run")
            self.daemons = NetnsDaemons(self.target, self.run_dir)

    # -- what the box has ----------------------------------------------------------------

    def confirmed(self):
        """The confirmed pair (the file), or None when there is none."""
        if not os.path.exists(self.config_path):
            return None
        return load(self.config_path)

    def key(self):
        """The pair key in force (bytes), or None: the pending revision's while one is
        pending and carries one, else the confirmed key."""
        pending = self.store.pending()
        if pending is not None:
            found = peer.read_key(self.store.revision_dir(pending["revision"]))
            if found is not None:
                return found
        return peer.read_key(self.store.state_dir)

    def check(self, text):
        """Everything apply does before it changes anything."""
        if not isinstance(text, str) or len(text) > TEXT_MAX:
            raise HaError(Code.SCHEMA, "", f"must be the text of an ha.toml of at most "
                          f"{TEXT_MAX >> 10} KiB")
        config = parse(text)
        problems = interfaces_problems(config, self.target.interfaces())
        if problems:
            raise HaError(problems)
        return config

    def role(self):
        """keepalived's role as its notify recorded it; None while keepalived does not
        run (a record it left when it stopped is no role)."""
        if not self.daemons.running()["keepalived"]:
            return None
        return status.role(self.run_dir)

    # -- apply, confirm ------------------------------------------------------------------

    def apply(self, text, user=None, timeout=None, key=None):
        """Validate, put into effect and leave pending; returns the revision. key: the
        pair key the revision brings (None: the key in force stays). A step that fails
        puts the confirmed pair back, and HaError says why."""
        timeout = confirm_timeout(timeout)
        if key is not None and peer.key_problem(key):
            raise HaError(Code.VALUE, "key", peer.key_problem(key))
        config = self.check(text)
        user = user or current_user()
        text = to_toml(config)
        with self.locked():
            self.expire_overdue()
            previous = self.store.pending()
            given = key is not None
            if not given:
                found = self.key()
                key = found.decode() if found is not None else None
            revision = self.store.create(user, "apply", {CONFIG_NAME: text},
                                         base=self.store.confirmed_id(),
                                         confirm_timeout=timeout,
                                         key="given" if given else "kept" if key else "none")
            if key is not None:     # before it is pending: the key in force at once
                peer.write_key(revision.path, key)
            self.begin(revision, self.store.confirmed_id(), timeout)
            lines = self.go_live(revision, previous, lambda: self.put(config))
            write_atomically(os.path.join(revision.path, APPLIED_NAME), "\n".join(lines) + "\n")
            return revision

    def put(self, config):
        """config (None, or disabled: no pair) into effect: the host table, the files,
        the daemons. Returns what was done, for the revision's record."""
        if config is not None and not config.enabled:
            config = None
        lines = []
        if config is not None:
            result = self.target.run(["sysctl", "-qw", f"{TCP_LOOSE}=0"])
            if not result.ok:
                raise HaError(Code.APPLY, "", f"{TCP_LOOSE}=0: {result.stderr.strip()}")
            lines.append(f"{TCP_LOOSE}=0: a TCP connection is never picked up midstream")
        if self.netns is None:
            lines += self.follow(config)
        if config is None:          # stopped first: keepalived's notify records STOP
            self.daemons.restart(None)
        render.write_files(config, self.run_dir, self.own_addresses(config),
                           notify=self.notify_path())
        if config is not None:
            self.daemons.restart(config)
        lines.append(f"{'restarted' if config else 'stopped'}: {self.daemons.describe()}")
        if config is not None and config.cluster:
            lines.append(f"this box is one of a cluster: conntrackd multicasts its "
                         f"connections to the other boxes on {config.sync_interface} "
                         f"({render.CLUSTER_GROUP}), keepalived stopped")
        elif config is not None:
            lines.append(f"this box is the {config.role} (VRRP priority {config.priority}), "
                         f"the peer {config.peer_address} on {config.sync_interface}")
        return lines

    def notify_path(self):
        """keepalived's notify: the image's, or the tree's own in the lab."""
        if self.netns is None:
            return render.NOTIFY
        here = os.path.dirname(os.path.abspath(__file__))
        tree = os.path.join(here, "..", "..", "..", "rootfs-overlay", "usr", "lib", "tusk",
                            "ha-notify")
        return os.path.normpath(tree) if os.path.exists(tree) else render.NOTIFY

    def own_addresses(self, config):
        """The box's own addresses conntrackd ignores: the namespace's global ones in the
        lab (the appliance's applier, box/appliers.py, reads network.toml's)."""
        if config is None:
            return ()
        result = self.target.run(["ip", "-o", "addr", "show", "scope", "global"])
        virtual = {a.split("/")[0] for v in config.virtual for a in v.addresses}
        found = []
        for line in result.stdout.splitlines():
            fields = line.split()
            if len(fields) > 3 and fields[3].split("/")[0] not in virtual:
                found.append(fields[3])
        return found

    def follow(self, config):
        """What follows the pair (box/dependents.py), before its daemons start: nothing
        here; the appliance's applier (box/appliers.py) loads the host table with
        config's VRRP and sync. Returns what was done."""
        return []

    def confirmed_files(self, revision):
        """The key the pending pair carries, made the confirmed one with it (restore():
        without a confirmed pair, both daemons stopped)."""
        key = peer.read_key(revision.path)
        if key is not None:
            peer.write_key(self.store.state_dir, key.decode())

    def fail_over(self):
        """Hand the addresses to the peer now (maintenance): only a master can, and a
        primary with preemption would take them straight back. Returns the new role."""
        with self.locked():
            config = self.pending_or_confirmed()
            if config is None or not config.enabled:
                raise HaError(Code.ROLE, "", "this box is not part of a pair")
            if config.cluster:
                raise HaError(Code.ROLE, "ha.mode", "this box is one of a cluster: it holds "
                              "no addresses to hand over. To take it out of service, stop "
                              "its routing (Network -> Routing): the routers move its "
                              "connections to the other boxes")
            role = self.role()
            if role != "MASTER":
                raise HaError(Code.ROLE, "", f"this box is {role or 'not reporting a role'}: "
                              "only the master hands the addresses over")
            if config.preempt and config.role == PRIMARY:
                raise HaError(Code.ROLE, "ha.preempt", "preemption is on and this box is the "
                              "primary: it would take the addresses straight back. Turn "
                              "preemption off for maintenance")
            self.daemons.restart_keepalived()
            deadline = time.monotonic() + ROLE_SECONDS
            # keepalived records STOP as it goes, then BACKUP once started again
            while self.role() != "BACKUP" and time.monotonic() < deadline:
                time.sleep(0.1)
            return self.role()

    def pending_or_confirmed(self):
        text = self.pending_text()
        return parse(text) if text else self.confirmed()

    def status(self):
        """What the HA page shows of this box."""
        pending = self.store.pending()
        return {"role": self.role(), "running": self.daemons.running(),
                "confirmed": self.store.confirmed_id(), "confirmed_text": self.confirmed_text(),
                "pending": pending, "pending_text": self.pending_text()}

    def stats(self):
        """conntrackd's statistics as sync_health gives them, or None when it does not
        answer."""
        conf = os.path.join(self.run_dir, "conntrackd.conf")
        if not os.path.exists(conf):
            return None
        result = self.target.run(["conntrackd", "-C", conf, "-s"])
        if not result.ok:
            return None
        try:
            return status.sync_health(status.conntrackd_stats(result.stdout))
        except ValueError:
            return None
