"""FRR's configuration (frr.conf) for a network configuration's routing, and FRR put into
effect: the daemons started or stopped, the file checked by FRR's own parser (`vtysh -C`)
before it is used, and loaded with FRR's frr-reload.py (what changed only: a session
that stays is not reset).

    render(config) -> text          pure; "" when config.routing has neither BGP nor OSPF
    SystemFrr(runner)               the appliance: /etc/frr, the frr service (watchfrr);
                                    the image's FRR (Buildroot's package, 10.x)
    LabFrr(netns, directory)        the lab: FRR's daemons inside the fw namespace, with
                                    their sockets and file in a directory of the agent's

The file holds only what this module writes, each value typed (tusklib/values.py) and
written by the one quoting point of the format (tusklib/formats/frr.py). What it says:

  BGP    the box's AS and router id; `no bgp default ipv4-unicast`, so a neighbour
         carries the routes of its own address's family only; per neighbour its remote
         AS, TCP MD5 password, BFD; what it announces: routing.bgp.prefixes of that
         family (`network` statements - announced while the box routes them, FRR's
         import check) through route-map TUSK-OUT-V4/-V6, which sets the communities;
         what it takes: its accept prefixes with their more specifics, through
         TUSK-IN-<n> (nothing when it has none). A neighbour with blackhole gets
         TUSK-OUT-BH-V4/-V6 instead, which also pass the box's black-hole routes:
         staticd's routes tagged BLACKHOLE_TAG (box/blackhole.py adds and withdraws
         them at run time), redistributed with BLACKHOLE set and sent with NO_EXPORT
         added (set on the route itself, it would keep FRR from sending it). FRR
         refuses an eBGP session's routes without a policy (ebgp-requires-policy):
         every session has both route-maps.
  HA     routing.standby (the pair's secondary): its announcements' AS path is longer
         by its AS three times, and its OSPF cost is 65535 on every link: while both
         boxes run, their neighbours send traffic to the primary; when the primary
         goes silent, BFD takes its sessions down in under a second and the
         secondary's routes are the only ones left.
  OSPF   per link `ip ospf area` (v2, where the link has IPv4) and `ipv6 ospf6 area`
         (v3, IPv6), cost, passive, point-to-point, BFD; `router ospf`/`ospf6` with
         the router id.
  BFD    one profile, tusk, with the interval and multiplier, always written: FRR
         prints neither when it is its default (300 ms, 3), and frr-reload.py (8.4)
         cannot take back a profile's value that the new file leaves out. A peer is
         down after interval x multiplier.
"""
import functools
import grp
import ipaddress
import json
import os
import pwd
import re
import signal
import subprocess
import time

from tusklib.commands import CommandError
from tusklib.files import write_atomically
from tusklib.formats.frr import line
from tusklib.values import Community, Integer, InterfaceName, IPAddress, IPNetwork, Secret

from . import model
from .errors import Code, NetworkError, Problem
from .routing import ospf_area

PROFILE = "tusk"
FRR_DEFAULTS = {"transmit-interval": "300", "receive-interval": "300",
                "detect-multiplier": "3"}   # what FRR does not print
DAEMONS = ("zebra", "bgpd", "ospfd", "ospf6d", "bfdd", "staticd")
CONFIG_NAME = "frr.conf"
RELOAD = "/usr/lib/frr/frr-reload.py"
DAEMON_DIR = "/usr/lib/frr"
START_SECONDS = 10
# the box's black-hole routes (box/blackhole.py): staticd's, with this tag, redistributed
# into BGP through BLACKHOLE_MAP, which sets BLACKHOLE (RFC 7999) and NO_EXPORT
BLACKHOLE_TAG = 666
BLACKHOLE_MAP, BLACKHOLE_LIST = "TUSK-BLACKHOLE", "TUSK-BLACKHOLE"
LAB_DIR = "/run/tusk-frr"


def _asn(value):
    return Integer(value, model.ASN_MIN, model.ASN_MAX)


def _family(version):
    return ("ip", "V4", 32) if version == 4 else ("ipv6", "V6", 128)


def _prefix_list(name, prefixes, version, more_specific):
    """`ip prefix-list name seq N permit P [le max]` lines."""
    keyword, _, longest = _family(version)
    lines = []
    for seq, prefix in enumerate(prefixes, 1):
        upto = ("le", longest) if more_specific and prefix.network.prefixlen < longest else ()
        lines.append(line(0, f"{keyword}", "prefix-list", name, "seq", seq * 5, "permit",
                          prefix, *upto))
    return lines


def _route_map(name, prefix_list, version, communities=(), blackholes=False, prepend=()):
    """A route-map passing what prefix_list permits (and setting communities on it), or
    denying everything when there is no list; with blackholes, the box's black-hole
    routes too (BLACKHOLE_LIST's community, which BLACKHOLE_MAP set)."""
    lines = []
    if prefix_list is None and not blackholes:
        return [line(0, "route-map", name, "deny", 10), "exit"]
    if prefix_list is not None:
        keyword = "ip" if version == 4 else "ipv6"
        lines += [line(0, "route-map", name, "permit", 10),
                  line(1, "match", keyword, "address", "prefix-list", prefix_list)]
        if communities:
            lines.append(line(1, "set", "community", *communities, "additive"))
        if prepend:
            lines.append(line(1, "set", "as-path", "prepend", *prepend))
        lines.append("exit")
    if blackholes:      # NO_EXPORT set here: on the route itself FRR would send it nowhere
        lines += [line(0, "route-map", name, "permit", 20),
                  line(1, "match", "community", BLACKHOLE_LIST),
                  line(1, "set", "community", Community("no-export"), "additive"), "exit"]
    return lines


def render(config):
    """frr.conf for config.routing (a network model.NetworkConfig). FormatRefused when a
    value cannot be written - which validation refuses first."""
    routing = config.routing
    if not routing.enabled:
        return ""
    router_id = IPAddress(routing.router_id) if routing.router_id else None
    lines = ["frr defaults traditional", "!"]
    bgp = routing.bgp
    if bgp.asn:
        lines += _bgp(bgp, router_id, routing.standby)
    if routing.ospf:
        lines += _ospf(config, routing, router_id)
    if any(n.bfd for n in bgp.neighbours) or any(link.bfd for link in routing.ospf):
        interval = Integer(routing.bfd_interval, model.BFD_INTERVAL_MIN,
                           model.BFD_INTERVAL_MAX)
        lines += ["bfd", line(1, "profile", PROFILE),
                  line(2, "transmit-interval", interval),
                  line(2, "receive-interval", interval),
                  line(2, "detect-multiplier", Integer(
                      routing.bfd_multiplier, model.BFD_MULTIPLIER_MIN,
                      model.BFD_MULTIPLIER_MAX))]
        lines += [" exit", "exit", "!"]
    return "\n".join(lines) + "\n"


def _bgp(bgp, router_id, standby=False):
    lines = []
    prepend = (_asn(bgp.asn),) * model.STANDBY_PREPEND if standby else ()
    announced = [IPNetwork(p) for p in bgp.prefixes]
    communities = [Community(c) for c in bgp.communities]
    neighbours = [(IPAddress(n.address), n) for n in bgp.neighbours]
    versions = sorted({address.version for address, _ in neighbours}
                      | {p.version for p in announced})
    blackholes = any(n.blackhole for _, n in neighbours)
    if blackholes:
        lines += [line(0, "bgp", "community-list", "standard", BLACKHOLE_LIST, "seq", 5,
                       "permit", Community("blackhole")),
                  line(0, "route-map", BLACKHOLE_MAP, "permit", 10),
                  line(1, "match", "tag", BLACKHOLE_TAG),
                  line(1, "set", "community", Community("blackhole")), "exit"]
    for version in versions:
        _, suffix, _ = _family(version)
        mine = [p for p in announced if p.version == version]
        lines += _prefix_list(f"TUSK-ANNOUNCE-{suffix}", mine, version, False)
        lines += _route_map(f"TUSK-OUT-{suffix}", f"TUSK-ANNOUNCE-{suffix}" if mine else None,
                            version, communities, prepend=prepend)
        if any(n.blackhole for a, n in neighbours if a.version == version):
            lines += _route_map(f"TUSK-OUT-BH-{suffix}", f"TUSK-ANNOUNCE-{suffix}" if mine
                                else None, version, communities, blackholes=True,
                                prepend=prepend)
    for number, (address, neighbour) in enumerate(neighbours, 1):
        accept = [p for p in (IPNetwork(a) for a in neighbour.accept)
                  if p.version == address.version]
        lines += _prefix_list(f"TUSK-ACCEPT-{number}", accept, address.version, True)
        lines += _route_map(f"TUSK-IN-{number}", f"TUSK-ACCEPT-{number}" if accept else None,
                            address.version)
    lines += [blackhole_line(p) for p in sorted(
        (IPNetwork(b) for b in bgp.blackholes), key=lambda p: (p.version, p.network))]
    lines += [line(0, "router", "bgp", _asn(bgp.asn))]
    if router_id:
        lines.append(line(1, "bgp", "router-id", router_id))
    lines.append(line(1, "no", "bgp", "default", "ipv4-unicast"))
    for address, neighbour in neighbours:
        lines.append(line(1, "neighbor", address, "remote-as", _asn(neighbour.remote_as)))
        if neighbour.password:
            lines.append(line(1, "neighbor", address, "password",
                              Secret(neighbour.password, model.MD5_KEY_MAX)))
        if neighbour.bfd:
            lines += [line(1, "neighbor", address, "bfd"),
                      line(1, "neighbor", address, "bfd", "profile", PROFILE)]
    for version in versions:
        keyword, suffix, _ = _family(version)
        lines.append(line(1, "address-family", f"ipv{version}", "unicast"))
        lines += [line(2, "network", p) for p in announced if p.version == version]
        if blackholes:
            lines.append(line(2, "redistribute", "static", "route-map", BLACKHOLE_MAP))
        for number, (address, neighbour) in enumerate(neighbours, 1):
            if address.version == version:
                out = f"TUSK-OUT-BH-{suffix}" if neighbour.blackhole else f"TUSK-OUT-{suffix}"
                lines += [line(2, "neighbor", address, "activate"),
                          line(2, "neighbor", address, "route-map", f"TUSK-IN-{number}", "in"),
                          line(2, "neighbor", address, "route-map", out, "out")]
        lines.append(line(1, "exit-address-family"))
    return lines + ["exit", "!"]


def _ospf(config, routing, router_id):
    lines, versions = [], set()
    for link in routing.ospf:
        name = InterfaceName(link.interface)
        area = IPAddress(ospf_area(link.area))
        families = {ipaddress.ip_interface(a).version
                    for a in config.link(link.interface).addresses}
        lines.append(line(0, "interface", name))
        for version in sorted(families):
            versions.add(version)
            proto = ("ip", "ospf") if version == 4 else ("ipv6", "ospf6")
            lines.append(line(1, *proto, "area", area))
            cost = model.STANDBY_COST if routing.standby else link.cost
            if cost:
                lines.append(line(1, *proto, "cost", Integer(cost, 1, model.OSPF_COST_MAX)))
            if link.passive:
                lines.append(line(1, *proto, "passive"))
            if link.point_to_point:
                lines.append(line(1, *proto, "network", "point-to-point"))
            if link.bfd:
                lines += [line(1, *proto, "bfd"), line(1, *proto, "bfd", "profile", PROFILE)]
        lines += ["exit", "!"]
    for version in sorted(versions):
        router = "ospf" if version == 4 else "ospf6"
        lines.append(line(0, "router", router))
        if router_id:
            lines.append(line(1, router, "router-id", router_id))
        lines += ["exit", "!"]
    return lines


# -- FRR put into effect ---------------------------------------------------------------------

def _fail(message):
    raise NetworkError(Code.APPLY, "routing", message)


def _output(result):
    return (result.stderr or result.stdout or "").strip()[-400:]


_BLACKHOLE_ROUTE = re.compile(rf"^(ip|ipv6) route (\S+) blackhole tag {BLACKHOLE_TAG}$")


def blackhole_line(prefix, remove=False):
    """staticd's line of a black-hole route (an IPNetwork), or the one taking it away."""
    words = ("ip" if prefix.version == 4 else "ipv6", "route", prefix, "blackhole", "tag",
             BLACKHOLE_TAG)
    return line(0, *(("no",) + words if remove else words))


def blackhole_routes(run):
    """The black-hole routes FRR holds now ({IPNetwork} of hosts), from its running
    configuration; a line that is not exactly one of box/blackhole.py's is ignored."""
    result = _asked(run, "-c", "show running-config")
    return blackhole_routes_in(result.stdout) if result is not None else set()


def blackhole_routes_in(config_text):
    """The black-hole routes an frr.conf text (or a running configuration) holds."""
    found = set()
    for text in config_text.splitlines():
        match = _BLACKHOLE_ROUTE.match(text.strip())
        if not match:
            continue
        try:
            prefix = IPNetwork(match.group(2))
        except ValueError:
            continue
        if prefix.is_host and (prefix.version == 4) == (match.group(1) == "ip"):
            found.add(prefix)
    return found


def with_blackholes(text, run):
    """text with the black-hole routes box/blackhole.py added at run time (a reload takes
    away whatever its file does not say)."""
    kept = sorted(blackhole_routes(run) - blackhole_routes_in(text),
                  key=lambda p: (p.version, p.network))
    return text + "".join(blackhole_line(p) + "\n" for p in kept)


def check(text, run, scratch):
    """FRR's own parser on text (`vtysh -C -f`, which loads nothing); NetworkError
    naming the line it refused. run(name, *args) -> a CompletedProcess."""
    path = os.path.join(scratch, CONFIG_NAME + ".check")
    write_atomically(path, text, mode=0o600)
    try:
        result = run("vtysh", "-C", "-f", path)
    finally:
        os.unlink(path)
    if result.returncode != 0:
        _fail(f"FRR's parser (vtysh -C) refused the routing configuration: {_output(result)}")


@functools.cache
def _reads_a_file(daemon):
    """Whether the daemon takes a file of its own (-f): then it is given an empty one, so
    that it never reads one lying in /etc/frr - what it runs comes from frr.conf through
    frr-reload.py. FRR 10's staticd has no -f (it reads none)."""
    result = subprocess.run([f"{DAEMON_DIR}/{daemon}", "--help"], capture_output=True,
                            text=True, check=False, stdin=subprocess.DEVNULL)
    return "--config_file" in result.stdout + result.stderr


class LabFrr:
    """FRR's daemons in the lab's fw namespace: started by the first apply with routing,
    stopped by one without. directory (root's, /run/tusk-frr/<namespace> unless given)
    holds frr.conf; its vty/ (FRR's user's) the daemons' sockets and pid files. A pid is
    only signalled when it is a process of that daemon's name."""

    def __init__(self, netns, directory=None):
        self.netns = netns
        self.directory = directory or os.path.join(LAB_DIR, netns)
        self.sockets = os.path.join(self.directory, "vty")

    def run(self, name, *args):
        argv = {"vtysh": ["vtysh", "--vty_socket", self.sockets],
                "frr-reload": [RELOAD, "--vty_socket", self.sockets, "--rundir",
                               self.directory, "--confdir", self.directory, "--bindir",
                               "/usr/bin", "--log-level", "error", "--stdout"]}[name]
        return subprocess.run(argv + list(args), capture_output=True, text=True,
                              stdin=subprocess.DEVNULL, check=False)

    def pid(self, daemon):
        try:
            with open(os.path.join(self.sockets, f"{daemon}.pid"), encoding="ascii") as f:
                pid = int(f.read(16).strip())
            with open(f"/proc/{pid}/comm", encoding="ascii") as f:
                return pid if f.read().strip() == daemon else None
        except (OSError, ValueError):
            return None

    def prepare(self):
        """directory, root's, with an empty vtysh.conf (vtysh reads it)."""
        os.makedirs(self.directory, mode=0o755, exist_ok=True)
        write_atomically(os.path.join(self.directory, "vtysh.conf"), "", mode=0o644)

    def running(self):
        return all(self.pid(daemon) for daemon in DAEMONS)

    def start(self, lines):
        self.prepare()
        os.makedirs(self.sockets, mode=0o750, exist_ok=True)
        os.chown(self.sockets, pwd.getpwnam("frr").pw_uid, grp.getgrnam("frr").gr_gid)
        os.chmod(self.sockets, 0o750)
        for daemon in DAEMONS:
            if self.pid(daemon):
                continue
            argv = ["ip", "netns", "exec", self.netns, f"{DAEMON_DIR}/{daemon}", "-d",
                    "-u", "frr", "-g", "frr", "-z", os.path.join(self.sockets, "zserv.api"),
                    "--vty_socket", self.sockets, "-i",
                    os.path.join(self.sockets, f"{daemon}.pid"),
                    *(["-f", "/dev/null"] if _reads_a_file(daemon) else []),
                    "-A", "127.0.0.1"]
            # the daemon's output to a file of its own, not a pipe: FRR 10's daemons keep
            # the descriptors they were started with, and a pipe would never reach its end
            log = os.path.join(self.directory, f"{daemon}.log")
            with open(log, "w+", encoding="utf-8") as output:
                code = subprocess.run(argv, stdout=output, stderr=subprocess.STDOUT,
                                      check=False, stdin=subprocess.DEVNULL).returncode
                if code != 0:
                    output.seek(0)
                    _fail(f"FRR's {daemon} did not start in {self.netns}: "
                          f"{output.read().strip()[-400:]}")
        deadline = time.monotonic() + START_SECONDS
        while not all(os.path.exists(os.path.join(self.sockets, f"{d}.vty"))
                      for d in DAEMONS):
            if time.monotonic() > deadline:
                _fail(f"FRR's daemons did not open their sockets in {START_SECONDS} s")
            time.sleep(0.05)
        lines.append(f"started FRR ({' '.join(DAEMONS)}) in {self.netns}")

    def stop(self, lines):
        pids = [p for p in (self.pid(d) for d in DAEMONS) if p]
        for pid in pids:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + START_SECONDS
        while any(os.path.exists(f"/proc/{pid}") for pid in pids):
            if time.monotonic() > deadline:
                for pid in pids:
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                break
            time.sleep(0.05)
        if pids:
            lines.append(f"stopped FRR in {self.netns}")

    def apply(self, text, lines):
        """FRR as text says: stopped when it is "", else started if need be and reloaded
        with text (frr-reload.py: the changes only). The backend ran check() on text
        before it changed anything."""
        if not text:
            self.stop(lines)
            return
        self.prepare()
        if not self.running():
            self.stop([])
            self.start(lines)
        path = os.path.join(self.directory, CONFIG_NAME)
        write_atomically(path, with_blackholes(text, self.run), mode=0o640)
        result = self.run("frr-reload", "--reload", path)
        if result.returncode != 0:
            _fail(f"frr-reload.py failed: {_output(result)}")
        lines.append(f"FRR reloaded in {self.netns}")


# -- what FRR reports -----------------------------------------------------------------------

def _asked(run, *args):
    """run("vtysh", *args), or None when vtysh cannot be run at all (no FRR installed,
    a --root tree whose table does not name it): FRR is then simply not running."""
    try:
        result = run("vtysh", *args)
    except (NetworkError, OSError):
        return None
    return result if result.returncode == 0 else None


def _json(run, command):
    result = _asked(run, "-c", command)
    if result is None:
        return None
    try:
        return json.loads(result.stdout)
    except ValueError:
        return None


def status(run):
    """FRR's sessions as the pages and /metrics show them, read with vtysh:
    {"running", "sessions": [{address, remote_as, state, up_seconds, received, sent}],
    "bfd": [{peer, status}], "ospf": [{neighbour, interface, state, version}]}; running
    False (and nothing else) when FRR does not answer."""
    neighbours = _json(run, "show bgp neighbors json")
    if neighbours is None:
        return {"running": False, "sessions": [], "bfd": [], "ospf": []}
    sessions = []
    for address, peer in sorted(neighbours.items()):
        if not isinstance(peer, dict):
            continue
        families = peer.get("addressFamilyInfo") or {}
        established = peer.get("bgpState") == "Established"
        sessions.append({
            "address": address, "remote_as": int(peer.get("remoteAs") or 0),
            "state": str(peer.get("bgpState") or "?"),
            "up_seconds": (int(peer.get("bgpTimerUpMsec") or 0) // 1000) if established else 0,
            "received": sum(int(f.get("acceptedPrefixCounter") or 0)
                            for f in families.values() if isinstance(f, dict)),
            "sent": sum(int(f.get("sentPrefixCounter") or 0)
                        for f in families.values() if isinstance(f, dict))})
    bfd = [{"peer": str(p.get("peer")), "status": str(p.get("status"))}
           for p in _json(run, "show bfd peers json") or [] if isinstance(p, dict)]
    ospf = []
    v2 = (_json(run, "show ip ospf neighbor json") or {}).get("neighbors") or {}
    for router_id, entries in sorted(v2.items()):
        for entry in entries if isinstance(entries, list) else []:
            ospf.append({"neighbour": router_id, "version": 2,
                         "interface": str(entry.get("ifaceName", "")).split(":")[0],
                         "state": str(entry.get("state", "?")).split("/")[0]})
    v3 = (_json(run, "show ipv6 ospf6 neighbor json") or {}).get("neighbors") or []
    for entry in v3 if isinstance(v3, list) else []:
        ospf.append({"neighbour": str(entry.get("neighborId")), "version": 3,
                     "interface": str(entry.get("interfaceName", "")),
                     "state": str(entry.get("state", "?"))})
    return {"running": True, "sessions": sessions, "bfd": bfd, "ospf": ospf}


def sessions_down(old, new, found):
    """The problems that keep new (a pending network configuration) from being confirmed:
    each BGP neighbour it adds or changes over old (the confirmed one, or None) whose
    session is not Established in found (status()). A session that does not come up
    before the deadline so rolls back with the rest of the change; the neighbours old
    already had are not held against it (their peers' maintenance does not block an
    unrelated change)."""
    before = set(old.routing.bgp.neighbours) if old is not None else set()
    states = {s["address"]: s["state"] for s in found.get("sessions") or []}
    problems = []
    for index, neighbour in enumerate(new.routing.bgp.neighbours):
        if neighbour in before:
            continue
        address = str(IPAddress(neighbour.address))
        state = states.get(address, "not running" if not found.get("running") else "absent")
        if state != "Established":
            problems.append(Problem(Code.CONFIRM, f"routing.bgp.neighbours[{index}]", (
                f"the BGP session with {address} is {state}, not Established: not "
                "confirmed - it rolls back at the deadline unless it comes up")))
    return problems


def _read(path):
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read(4096)
    except (OSError, UnicodeDecodeError):
        return None


class SystemFrr:
    """The appliance's FRR: the frr service (watchfrr starts the daemons /etc/frr/daemons
    names, then loads /etc/frr/frr.conf), enabled and started by the first apply with
    routing, reloaded by the next ones (frr-reload.py), stopped and disabled by one
    without. Programs and paths through runner (tusklib.commands.Runner: --root and
    its program table).

    Enabled and disabled with --no-reload: systemctl's implicit daemon-reload makes PID 1
    re-run every generator and load every unit again, and PID 1 feeds the hardware
    watchdog (RuntimeWatchdogSec=60s) only from its main loop, never during a reload.
    Under QEMU on a busy host each of these reloads took 41-45 s of a watchdog's 60, and
    one reset the box in make test. All a reload would add here is multi-user.target's
    new want, which only the next boot needs and reads anyway: the unit itself is
    started and stopped by name."""

    UNIT = "frr.service"
    CONFIG = "/etc/frr/frr.conf"
    DAEMONS_FILE = "/etc/frr/daemons"
    # the daemons Tusk's routing uses, each bound to the loopback for its vty
    DAEMONS_TEXT = "".join(f"{d}=yes\n" for d in DAEMONS if d != "zebra") + "".join(
        f'{d}_options="-A 127.0.0.1"\n' for d in DAEMONS) + "vtysh_enable=yes\n"

    DAEMONS_OFF = "# Tusk's routing is off: frr.service is stopped and disabled\n"

    def __init__(self, runner):
        self.runner = runner

    def run(self, name, *args):
        try:
            return self.runner.run(name, *args)
        except CommandError as error:
            _fail(str(error))

    def _active(self):
        try:
            return self.runner.run("systemctl", "is-active", "--quiet", self.UNIT).returncode == 0
        except CommandError:
            return False

    def _systemctl(self, *args):
        result = self.run("systemctl", *args, self.UNIT)
        if result.returncode != 0:
            _fail(f"`systemctl {' '.join(args)} {self.UNIT}` failed: {_output(result)}")

    def prepare(self):
        os.makedirs(self.runner.path(os.path.dirname(self.CONFIG)), mode=0o750, exist_ok=True)

    @property
    def directory(self):
        return self.runner.path(os.path.dirname(self.CONFIG))

    def apply(self, text, lines):
        """FRR as text says: "" stops and disables it; else the file (checked by the
        backend with check() before anything changed) written - root's and FRR's
        group's only: it may hold passwords - and the service started, or the running
        daemons reloaded with what changed."""
        daemons = self.runner.path(self.DAEMONS_FILE)
        if not text:
            if _read(daemons) == self.DAEMONS_TEXT:     # Tusk's routing ran it
                self._systemctl("disable", "--now", "--no-reload")
                write_atomically(daemons, self.DAEMONS_OFF, mode=0o640)
                lines.append("stopped FRR")
            return
        active = self._active()
        self.prepare()
        write_atomically(daemons, self.DAEMONS_TEXT, mode=0o640)
        path = self.runner.path(self.CONFIG)
        write_atomically(path, with_blackholes(text, self.run) if active else text,
                         mode=0o640)
        if not active:
            self._systemctl("enable", "--now", "--no-reload")
            lines.append("started FRR (frr.service) with the routing configuration")
            return
        result = self.run("frr-reload", "--reload", "--log-level", "error", "--stdout",
                          self.CONFIG)
        if result.returncode != 0:
            _fail(f"frr-reload.py failed: {_output(result)}")
        lines.append("FRR reloaded")
