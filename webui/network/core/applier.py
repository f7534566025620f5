"""Applying a network configuration: validated against the machine, put into effect by a
backend, pending until confirmed - the policy's commit-confirm (tusklib/commit.py): a
detached watchdog applies the last confirmed configuration again unless confirmed in
time, also when the applying process is killed.

    appliance  NetworkApplier(state_dir)                 systemd-networkd (networkd.py);
               the confirmed configuration is /etc/tusk/network.toml
    lab        NetworkApplier(state_dir, netns="tusk-fw")  iproute2 in that namespace
               (iproute2.py); the confirmed configuration is <state_dir>/network.toml

The confirmed file is only ever written by confirm() (and by the console menu, which
is its own confirmation: the operator is at the box), so at boot it is what comes up and
a configuration still pending at power loss is dropped.

A change of the management addresses must be confirmed over a new one: the pending
marker records them (confirm_over), and confirm(arrived_at=...) refuses a confirm that
arrived elsewhere - if the operator's browser never reaches the new address, the old
one comes back by itself. The web UI's one-time link to the new address carries a token
whose hash the pending marker keeps (token_sha256). On the appliance the host table
(tusk_host) follows the management port into and out of every change: follow() is the
hook, which box/appliers.py's NetworkApplier fills in (box/hosttable.py).
"""
import hashlib
import hmac
import ipaddress
import os

from tusklib.commands import Runner
from tusklib.commit import (
    CONFIRMED,
    CommitConfirm,
    Failure,
    RestoreFailed,
    current_user,
    timeout_problem,
)
from tusklib.files import write_atomically
from tusklib.target import Target

from . import frr, model
from .errors import Code, NetworkError
from .facts import addresses
from .iproute2 import IprouteBackend
from .networkd import NetworkdBackend
from .normalise import DEFAULT_PATH, TEXT_MAX, load, parse, to_toml

CONFIRM_TIMEOUT_DEFAULT = 120
CONFIRM_TIMEOUT_MIN, CONFIRM_TIMEOUT_MAX = 30, 3600
CONFIG_NAME = "network.toml"
APPLIED_NAME = "applied.txt"
ROOT_NAME = "root"   # tests only: the --root tree this state directory belongs to
DHCP = "dhcp"       # confirm_over: an address DHCP or router advertisements give


def token_sha256(token):
    return hashlib.sha256(token.encode()).hexdigest()


class NetworkApplier(CommitConfirm):
    domain = "network"
    error_class = NetworkError
    failure_codes = {Failure.LOCKED: Code.LOCKED, Failure.NOT_PENDING: Code.NOT_PENDING,
                     Failure.REVISION: Code.REVISION, Failure.STATE_DIR: Code.IO,
                     Failure.RESTORE: Code.APPLY}
    restored = "network configuration"

    def __init__(self, state_dir, netns=None, runner=None):
        """runner: tusklib.commands.Runner (tusk-net's --root and program table), for
        the networkd backend; None: the real system."""
        super().__init__(state_dir, netns)
        if netns is None:
            runner = runner or Runner(self.recorded_root())
            if runner.root:
                # the watchdog gets the state directory only: it must find the same tree
                write_atomically(os.path.join(self.store.state_dir, ROOT_NAME),
                                 runner.root + "\n")
            self.backend = NetworkdBackend(runner)
            self.config_path = runner.path(DEFAULT_PATH)
            self.runner = runner
        else:
            self.backend = IprouteBackend(Target(netns),
                                          os.path.join(self.store.state_dir, "system"))
            self.config_path = os.path.join(self.store.state_dir, CONFIG_NAME)
            # the lab's fw has no host table: its policy filters forwarding only, and the
            # web UI's nginx there answers on every address
            self.runner = None

    def recorded_root(self):
        """The --root tree an earlier NetworkApplier of this state directory applied to
        (tests), so that its watchdog restores there and never on this host; "" for /."""
        try:
            with open(os.path.join(self.store.state_dir, ROOT_NAME), encoding="utf-8") as f:
                return f.read().strip()
        except FileNotFoundError:
            return ""

    # -- what the machine has ------------------------------------------------------------

    def present(self):
        return self.backend.ports()

    def confirmed(self):
        """The last confirmed configuration (the file), or None when there is none."""
        if not os.path.exists(self.config_path):
            return None
        return load(self.config_path)

    def check(self, text, zones=None):
        """Everything apply does before it changes anything: the configuration, checked
        against this machine's ports (and the policy's zones, when given)."""
        if not isinstance(text, str) or len(text) > TEXT_MAX:
            raise NetworkError(Code.SCHEMA, "", f"must be the text of a network.toml of at "
                               f"most {TEXT_MAX >> 10} KiB")
        return parse(text, "network.toml", present=self.present(), zones=zones)

    # -- apply, confirm ------------------------------------------------------------------

    def apply(self, text, user=None, timeout=None, zones=None, token_hash="", action="apply"):
        """Validate, apply, and leave it pending; returns the revision. On a failed step
        the backend puts the last confirmed configuration back and NetworkError says why."""
        config = self.check(text, zones)
        timeout = confirm_timeout(timeout)
        user = user or current_user()
        text = to_toml(config)
        with self.locked():
            self.expire_overdue()
            base_config = self.confirmed()
            previous = self.store.pending()
            revision = self.store.create(user, action, {CONFIG_NAME: text},
                                         base=self.store.confirmed_id(),
                                         confirm_timeout=timeout)
            over = confirm_over(base_config, config)
            self.begin(revision, self.store.confirmed_id(), timeout, confirm_over=over,
                       token_sha256=token_hash if isinstance(token_hash, str) else "")

            def make_live():
                lines = self.backend.apply(config)
                self.follow(config, lines)
                return lines
            lines = self.go_live(revision, previous, make_live)
            write_atomically(os.path.join(revision.path, APPLIED_NAME),
                             "\n".join(lines) + "\n")
            return revision

    def restore(self, pending):
        """The last confirmed configuration again (whatever the pending base: only
        confirm() writes the file, so it is the base)."""
        try:
            config = self.confirmed()
        except NetworkError as error:
            raise RestoreFailed(f"{self.config_path}: {error.problems[0]}") from None
        if config is None:
            raise RestoreFailed(f"there is no confirmed configuration ({self.config_path}) "
                                "to go back to")
        try:
            self.backend.apply(config)
            self.follow(config, [])
        except NetworkError as error:
            raise RestoreFailed(str(error.problems[0])) from None

    def follow(self, config, lines):
        """What follows the network configuration (box/dependents.py), after config was
        put into effect: nothing here; the appliance's applier (box/appliers.py) loads
        the host table for config's management port, adding what it did to lines."""

    def confirm(self, user=None, arrived_at=None, token=None):
        """Confirm the pending configuration and make it the confirmed file. arrived_at:
        the local address the confirming request came in on (the web UI's); when the
        management addresses change it must be a new one. None (the CLI, the console):
        no such check. token: the one-time link's, checked when given."""
        def check(pending):
            if token is not None and not hmac.compare_digest(
                    token_sha256(str(token)), pending.get("token_sha256") or "-"):
                raise NetworkError(Code.CONFIRM, "token", "this confirmation link is not "
                                   "the one of the pending change")
            if arrived_at is not None:
                reason = arrival_problem(pending.get("confirm_over") or [], arrived_at,
                                         self.management_addresses)
                if reason:
                    raise NetworkError(Code.CONFIRM, "", reason)
            text = self.store.get(pending["revision"]).read(CONFIG_NAME)
            config = parse(text, CONFIG_NAME)
            if config.routing.bgp.neighbours:
                down = frr.sessions_down(self.confirmed(), config, self.routing_status())
                if down:
                    raise NetworkError(down)
            secret = any(n.password for n in config.routing.bgp.neighbours)
            write_atomically(self.config_path, text, 0o600 if secret else 0o644)
        return super().confirm(user, check)

    def routing_status(self):
        """What FRR reports (frr.status()), from the backend's FRR."""
        runner = getattr(self.backend, "frr", None)
        if runner is None:
            return {"running": False, "sessions": [], "bfd": [], "ospf": []}
        return frr.status(runner.run)

    def management_addresses(self):
        """The management port's addresses now (DHCP's included), without prefixes."""
        config = self.pending_config() or self.confirmed()
        mgmt = config.management if config else None
        if mgmt is None:
            return []
        return [a.address.split("/")[0] for a in addresses(self.backend.target)
                if a.interface == mgmt.name]

    def pending_config(self):
        pending = self.store.pending()
        if pending is None:
            return None
        return parse(self.store.get(pending["revision"]).read(CONFIG_NAME), CONFIG_NAME)

    def apply_confirmed(self, user=None, action="apply network.toml"):
        """The confirmed file into effect now - at boot, and after the console menu wrote
        it (the operator at the box is its own confirmation). A change still pending is
        dropped: it was never confirmed. A file that differs from the last confirmed
        revision (the console's edit) becomes a confirmed revision. Returns the backend's
        lines."""
        with self.locked():
            self.drop_pending(f"rolled back: {self.config_path} was applied as it is "
                              f"({action})")
            config = self.confirmed()
            if config is None:
                raise NetworkError(Code.IO, self.config_path, "does not exist")
            lines = self.backend.apply(config)
            self.follow(config, lines)
            text = to_toml(config)
            last = self.store.confirmed_id()
            if last is None or self.store.get(last).read(CONFIG_NAME) != text:
                user = user or current_user()
                revision = self.store.create(user, action, {CONFIG_NAME: text})
                write_atomically(os.path.join(revision.path, APPLIED_NAME),
                                 "\n".join(lines) + "\n")
                self.store.set_confirmed(revision.id)
                revision.update(outcome=CONFIRMED, confirmed_by=user)
            return lines

    def status(self):
        return {"confirmed": self.store.confirmed_id(), "pending": self.store.pending()}

    def history(self):
        return self.store.all()


def confirm_timeout(timeout):
    if timeout is None:
        return CONFIRM_TIMEOUT_DEFAULT
    reason = timeout_problem(timeout, CONFIRM_TIMEOUT_MIN, CONFIRM_TIMEOUT_MAX)
    if reason:
        raise NetworkError(Code.VALUE, "confirm_timeout", reason)
    return timeout


def management_of(config):
    """(static addresses without prefix, dhcp, autoconf) of config's management port."""
    mgmt = config.management if config else None
    if mgmt is None:
        return set(), False, False
    return ({str(ipaddress.ip_interface(a).ip) for a in mgmt.addresses}, mgmt.dhcp,
            mgmt.autoconf)


def confirm_over(old, new):
    """The addresses a confirm must arrive over: [] when the management port keeps the
    address the operator is using (every old address stays, on the same port) or nothing
    was confirmed before, else the
    new static ones, plus DHCP when the new addresses come from DHCP or router
    advertisements."""
    if old is None:
        return []   # nothing confirmed to compare with: no address is known to move
    old_static, old_dhcp, old_auto = management_of(old)
    new_static, new_dhcp, new_auto = management_of(new)
    same_port = old and new and old.management and new.management and \
        old.management.name == new.management.name
    if same_port and old_static <= new_static and (new_dhcp or not old_dhcp) and \
            (new_auto or not old_auto):
        return []
    over = sorted(new_static - (old_static if same_port else set()))
    if new_dhcp or new_auto:
        over.append(DHCP)
    return over


def arrival_problem(over, arrived_at, live_addresses):
    """Why a confirm that arrived at arrived_at does not prove the new management address
    works, or None. live_addresses(): the management port's addresses now (for DHCP)."""
    if not over:
        return None
    try:
        ip = str(ipaddress.ip_address(str(arrived_at).split("%")[0]))
    except ValueError:
        return f"{str(arrived_at)[:60]!r} is not an address"
    statics = [a for a in over if a != DHCP]
    if ip in statics:
        return None
    if DHCP in over and ip in live_addresses():
        return None
    wanted = ", ".join(statics + (["the address DHCP gave the management port"]
                                  if DHCP in over else []))
    return (f"this change moves the management address: confirm it from the new address "
            f"({wanted}), not over {ip} - that proves the dashboard answers there")


__all__ = ["NetworkApplier", "model"]
