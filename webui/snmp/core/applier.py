"""Applying the SNMP agent's configuration (docs/MONITORING.md, "SNMP"): the document
checked, its secrets filled in from the configuration in force, snmpd.conf rendered and
snmpd restarted, pending until confirmed - the commit-confirm of the other domains
(tusklib/commit.py): the host table follows the allowed prefixes, so a change not
confirmed in time puts the confirmed one back by itself.

    appliance  SnmpApplier(state_dir)                  the confirmed file /etc/tusk/snmp.toml,
               snmpd.conf in /run/tusk/snmp, the unit tusk-snmpd.service (rootfs-overlay),
               the host table reloaded (box/appliers.py)
    lab        SnmpApplier(state_dir, netns="tusk-fw")   the confirmed file
               <state_dir>/snmp.toml, the files in <state_dir>/run, snmpd in that namespace

snmpd reads its file as root, binds UDP 161 and becomes DAEMON_USER (-u/-g): its
pass_persist responder (tusk-snmp-pass) runs as that user too and reads only the
counters the agent writes for it (group-readable). -C: snmpd reads no file but ours - no
persistent state, so a new engine id at every start (managers rediscover it, RFC 3414
4), and the localized keys it saves at exit land in a directory emptied at each start.
Every file holding a passphrase (snmp.toml, the revisions, snmpd.conf) is root's, 0600,
in root's directories."""
import os
import pwd
import shutil
import sys
import time

from tusklib.children import command_line, stop_daemon, systemctl_problem, unit_running
from tusklib.commit import ConfirmedFile, Failure, current_user, timeout_problem
from tusklib.files import write_atomically
from tusklib.formats import FormatRefused
from tusklib.target import Target
from tusklib.values import Refused

from . import render
from .config import DEFAULT_PATH, TEXT_MAX, Code, SnmpError, fill, load, parse, to_toml

CONFIG_NAME = "snmp.toml"
APPLIED_NAME = "applied.txt"
RUN_DIR = "/run/tusk/snmp"
CONF, PID, LOG, COUNTERS, PERSIST = ("snmpd.conf", "snmpd.pid", "snmpd.log", "counters.json",
                                     "persist")
DAEMON_USER = "tusk-snmp"
UNIT = "tusk-snmpd.service"
SNMPD = "snmpd"
CONFIRM_TIMEOUT_DEFAULT = 120
CONFIRM_TIMEOUT_MIN, CONFIRM_TIMEOUT_MAX = 10, 3600   # as the other domains'
STOP_SECONDS = 10
START_SECONDS = 10
WEBUI = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PASS_PROGRAM = os.path.join(WEBUI, "bin", "tusk-snmp-pass")


def confirm_timeout(timeout):
    if timeout is None:
        return CONFIRM_TIMEOUT_DEFAULT
    reason = timeout_problem(timeout, CONFIRM_TIMEOUT_MIN, CONFIRM_TIMEOUT_MAX)
    if reason:
        raise SnmpError(Code.VALUE, "confirm_timeout", reason)
    return timeout


def daemon_ids():
    """(uid, gid) of DAEMON_USER; SnmpError when this machine has no such user."""
    try:
        entry = pwd.getpwnam(DAEMON_USER)
    except KeyError:
        raise SnmpError(Code.APPLY, "", f"this machine has no user {DAEMON_USER} for snmpd to "
                        "run as (the image's users table creates it)") from None
    return entry.pw_uid, entry.pw_gid


def program(python):
    """The pass_persist responder's argv (before the counters' path)."""
    return [python, PASS_PROGRAM]


class SystemdDaemon:
    """The appliance: tusk-snmpd.service, which runs only when snmpd.conf is in
    /run/tusk/snmp."""

    def __init__(self, run_dir):
        self.run_dir = run_dir

    def describe(self):
        return f"systemd ({UNIT})"

    def stop(self):
        self._systemctl("stop")

    def start(self):
        self._systemctl("start")

    def _systemctl(self, verb):
        reason = systemctl_problem(verb, UNIT)
        if reason:
            raise SnmpError(Code.APPLY, "", reason)

    def running(self):
        return unit_running(UNIT)


class NetnsDaemon:
    """The lab and the tests: snmpd in a namespace, as the unit runs it on the appliance,
    its pid file in the (root's) run directory, believed only for a process with exactly
    this box's command line."""

    def __init__(self, target, run_dir):
        self.target = target
        self.run_dir = run_dir

    def describe(self):
        return f"snmpd in namespace {self.target.netns}"

    def argv(self):
        return [SNMPD, "-C", "-c", os.path.join(self.run_dir, CONF), "-u", DAEMON_USER,
                "-g", DAEMON_USER, "-Lf", os.path.join(self.run_dir, LOG),
                "-p", os.path.join(self.run_dir, PID)]

    def _pid(self):
        try:
            with open(os.path.join(self.run_dir, PID), encoding="ascii") as handle:
                pid = int(handle.read(16).strip())
        except (OSError, ValueError):
            return None
        found = command_line(pid)
        return pid if found and found[1:] == self.argv()[1:] else None

    def stop(self):
        stop_daemon(self._pid, STOP_SECONDS)

    def start(self):
        env = {"MIBS": "", "SNMP_PERSISTENT_DIR": os.path.join(self.run_dir, PERSIST)}
        result = self.target.run(["env", *(f"{k}={v}" for k, v in env.items()), *self.argv()])
        deadline = time.monotonic() + START_SECONDS
        while result.ok and self._pid() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        if not result.ok or self._pid() is None:
            said = result.stderr.strip() or _tail(os.path.join(self.run_dir, LOG))
            raise SnmpError(Code.APPLY, "", f"snmpd did not start: {said or 'no reason given'}")

    def running(self):
        return self._pid() is not None


def _tail(path, size=2000):
    try:
        with open(path, "rb") as handle:
            handle.seek(max(0, os.path.getsize(path) - size))
            return handle.read().decode(errors="replace").strip()
    except OSError:
        return ""


class SnmpApplier(ConfirmedFile):
    domain = "snmp"
    config_name = CONFIG_NAME
    text_max = TEXT_MAX
    config_mode = 0o600          # the passphrases
    error_class = SnmpError
    failure_codes = {Failure.LOCKED: Code.LOCKED, Failure.NOT_PENDING: Code.NOT_PENDING,
                     Failure.REVISION: Code.REVISION, Failure.STATE_DIR: Code.IO,
                     Failure.RESTORE: Code.APPLY}
    restored = "SNMP agent"

    def __init__(self, state_dir, netns=None, python=None):
        """python: the interpreter tusk-snmp-pass runs with (None: this process's - the
        agent's, or its watchdog's, which runs the agent's)."""
        super().__init__(state_dir, netns)
        # revisions hold passphrases (each file 0600); search only, for the lab's run
        # directory inside, which snmpd's user enters for the counters
        os.chmod(self.store.state_dir, 0o711)
        self.target = Target(netns)
        self.python = os.path.abspath(python or sys.executable)
        if netns is None:
            self.config_path = DEFAULT_PATH
            self.run_dir = RUN_DIR
            self.daemon = SystemdDaemon(self.run_dir)
        else:
            self.config_path = os.path.join(self.store.state_dir, CONFIG_NAME)
            self.run_dir = os.path.join(self.store.state_dir, "run")
            self.daemon = NetnsDaemon(self.target, self.run_dir)

    @property
    def counters_path(self):
        return os.path.join(self.run_dir, COUNTERS)

    # -- what the box has ----------------------------------------------------------------

    def confirmed(self):
        """The confirmed configuration (the file), OFF when there is none."""
        return load(self.config_path)

    def pending_or_confirmed(self):
        text = self.pending_text()
        return parse(text) if text else self.confirmed()

    def check(self, text):
        """Everything apply does before it changes anything: the text parsed, its
        secrets filled in from the configuration in force, the file rendered."""
        if not isinstance(text, str) or len(text) > TEXT_MAX:
            raise SnmpError(Code.SCHEMA, "", f"must be the text of an snmp.toml of at most "
                            f"{TEXT_MAX >> 10} KiB")
        try:
            keep = self.pending_or_confirmed()
        except SnmpError:
            keep = None
        config = fill(parse(text), keep)
        if config.enabled:
            daemon_ids()
            self.rendered(config)
        return config

    def rendered(self, config):
        """snmpd.conf's text; SnmpError when a value cannot be written (the check before
        refuses those: this is the format's own last word)."""
        try:
            return render.render(config, program(self.python), self.counters_path)
        except (FormatRefused, Refused) as refused:
            raise SnmpError(Code.APPLY, "", f"snmpd.conf: {refused}") from None

    # -- apply, confirm ------------------------------------------------------------------

    def apply(self, text, user=None, timeout=None):
        """Validate, put into effect and leave pending; returns the revision. A step that
        fails puts the confirmed configuration back, and SnmpError says why."""
        timeout = confirm_timeout(timeout)
        user = user or current_user()
        with self.locked():
            self.expire_overdue()
            config = self.check(text)
            previous = self.store.pending()
            revision = self.store.create(user, "apply", {CONFIG_NAME: to_toml(config)},
                                         base=self.store.confirmed_id(),
                                         confirm_timeout=timeout)
            self.begin(revision, self.store.confirmed_id(), timeout)
            lines = self.go_live(revision, previous, lambda: self.put(config))
            write_atomically(os.path.join(revision.path, APPLIED_NAME), "\n".join(lines) + "\n")
            return revision

    def write_files(self, config):
        """snmpd's files for config into the run directory (disabled: removed) - what
        boot does before tusk-snmpd.service starts. Returns whether snmpd should run."""
        running = config.enabled
        if running:
            uid, gid = daemon_ids()
            os.makedirs(self.run_dir, mode=0o750, exist_ok=True)
            os.chown(self.run_dir, 0, gid)          # snmpd's user reaches the counters
            os.chmod(self.run_dir, 0o750)
            persist = os.path.join(self.run_dir, PERSIST)
            shutil.rmtree(persist, ignore_errors=True)   # rmtree follows no link
            os.mkdir(persist, 0o700)
            os.chown(persist, uid, gid)
            write_atomically(os.path.join(self.run_dir, CONF), self.rendered(config),
                             0o600, owner=(0, 0))
        else:
            for name in (CONF, PERSIST):
                path = os.path.join(self.run_dir, name)
                shutil.rmtree(path, ignore_errors=True) if os.path.isdir(path) \
                    else _unlink(path)
        return running

    def put(self, config):
        """config into effect: the host table, the files, snmpd. Returns what was done.
        snmpd is stopped before its files change: it saves its state into the persist
        directory after it wrote its pid file at start and again at exit, so that
        directory is emptied only while no snmpd runs."""
        lines = self.follow(config) if self.netns is None else []
        running = config.enabled
        self.daemon.stop()
        self.write_files(config)
        if not running:
            lines.append(f"stopped: {self.daemon.describe()}")
            return lines
        self.daemon.start()
        users = len(config.users)
        lines.append(f"restarted: {self.daemon.describe()}; {users} SNMPv3 user"
                     f"{'s' if users != 1 else ''} (authPriv)"
                     + (", a read-only SNMPv2c community" if config.community else "")
                     + f", from {', '.join(config.allow)}")
        return lines

    def follow(self, config):
        """What follows SNMP (box/dependents.py): the appliance's applier
        (box/appliers.py) loads the host table with config's prefixes. Returns what was
        done."""
        return []

    def start(self):
        """At boot or agent start: the confirmed configuration into effect (a pending one
        never outlives a restart of the box: boot drops it)."""
        with self.locked():
            return self.put(self.confirmed())

    def running(self):
        return self.daemon.running()


def _unlink(path):
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass

