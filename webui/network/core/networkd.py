"""The appliance's backend: a configuration put into effect by systemd-networkd (links,
addresses, routes), systemd-resolved (DNS), systemd-timesyncd (NTP), the host name and
the time zone.

    backend = NetworkdBackend(runner)   # tusklib.commands.Runner, or a root directory
    backend.render(config) -> {path: text}    pure (golden-tested: tests/golden/network/)
    backend.apply(config)  -> [line]          writes, deletes, reloads; declarative

The files (paths under the runner's root; /run is a tmpfs, so a boot starts from none
and the last confirmed configuration is applied again, before networkd starts):

    /run/systemd/network/10-tusk-<link>.network   one per configured link
    /run/systemd/network/10-tusk-<link>.netdev    one per bond, VLAN and bridge
    /run/systemd/resolved.conf.d/50-tusk.conf     DNS= (global: not per link)
    /run/systemd/timesyncd.conf.d/50-tusk.conf    NTP=
    /etc/hostname                                  and sethostname(2)
    /etc/timezone                                  the zone's name (as Buildroot has it)
    /etc/localtime -> ../usr/share/zoneinfo/<zone> as systemd-timedated writes it

Choices, each checked against systemd.network(5), systemd.netdev(5) and systemd.link(5)
of systemd 258 (Buildroot 2026.02.3 ships 258.7) and against what Debian trixie's 257
accepts (every key below exists unchanged since 251 or earlier; Kind= of a .link's
[Match], the newest thing considered, is from 251):
- [Link] RequiredForOnline=yes on the management port only: systemd-networkd-wait-online
  waits for the port the dashboard answers on, never for a traffic cable.
- An unused port gets a file, not none: ActivationPolicy=down (248) keeps it down and
  networkd drops what it had - with no file networkd would leave a former traffic
  port's addresses and link as they were, and rolling back to "unused" would not work.
- [Link] MTUBytes= on the .network, never the .netdev: networkd applies a .netdev's MTU
  only when it creates the link, a .network's on every reconfigure; and a VLAN created
  with a jumbo MTU before its parent has one would be refused by the kernel.
- IPv6 link-local addresses (LinkLocalAddressing=ipv6) on the management port (what
  release 1 had, networkd's default: router advertisements need it when autoconf is on,
  and it reaches the dashboard over fe80::...%port from a laptop on the same wire) and
  on every link with an IPv6 address or an IPv6 route: Linux solicits a neighbour for a
  forwarded packet only from the link's link-local address and sends nothing without
  one (ndisc_send_ns), so such a link could not forward IPv6 (RFC 4291 2.1 wants one on
  every IPv6 interface anyway). LinkLocalAddressing=no on the other traffic links, bond
  members and unused ports: no address the operator did not give.
- IPv6AcceptRA=no everywhere but on the management port with autoconf: networkd
  handles router advertisements itself, so autoconf works although the box forwards.
- ConfigureWithoutCarrier=yes on traffic links (release 1's): their addresses and
  routes exist before the cable is in, so the policy and the routes do not wait.
- Bonds: MIIMonitorSec=100ms (a member's carrier loss noticed within 0.1 s),
  LACPTransmitRate=fast and TransmitHashPolicy= for 802.3ad only (the kernel ignores
  both in active-backup).
- [Route] Metric= only when not 0: networkd then leaves it to the kernel (0 for IPv4,
  1024 for IPv6), as `ip route add` without a metric does in the lab. A route without a
  gateway is a direct one (networkd gives it scope link, as ip does).

Which bonds and VLANs are Tusk's: the netdevs its previous rendering declared - the
10-tusk-*.netdev files in /run/systemd/network that apply() reads before it writes. The
lab marks its links with the ifalias "tusk", but networkd cannot set one: a .netdev has
no such key, and a .link file's Alias= is applied by udev when the device appears, which
would make the marker depend on udev having re-read its .link files (a reload the
runner's program table does not offer) before networkd creates the link. The files
need nothing else: they and the netdevs live exactly as long as one boot (/run), and a
netdev whose file is gone or changed (kind, id, bond mode, a VLAN's parent - none of
which a live link can change) is deleted with `ip link delete` before networkd reloads,
which then creates it anew. networkd itself never deletes a netdev whose file went.
"""
import ipaddress
import os
import socket

from tusklib import checks, values
from tusklib.commands import CommandError, Runner
from tusklib.files import write_atomically
from tusklib.formats import systemd
from tusklib.names import VLAN_ID_MAX, VLAN_ID_MIN
from tusklib.target import Target

from . import bpdu, facts, frr, model
from .errors import Code, NetworkError
from .model import LACP, MANAGEMENT, UNUSED
from .normalise import DEFAULT_PATH
from .sysfs import SYSFS_NET, detect_interfaces
from .validate import KIND_KEY

NETWORK_DIR = "/run/systemd/network"
RESOLVED_DROPIN = "/run/systemd/resolved.conf.d/50-tusk.conf"
TIMESYNCD_DROPIN = "/run/systemd/timesyncd.conf.d/50-tusk.conf"
HOSTNAME_FILE = "/etc/hostname"
LOCALTIME = "/etc/localtime"
TIMEZONE_FILE = "/etc/timezone"   # the zone's name, which Buildroot's tzdata writes too

FILE_PREFIX = "10-tusk-"
NETWORK, NETDEV = ".network", ".netdev"
MII_MONITOR = "100ms"
NETWORKD = "systemd-networkd.service"
SERVICES = {RESOLVED_DROPIN: "systemd-resolved.service",
            TIMESYNCD_DROPIN: "systemd-timesyncd.service"}
# The words of the code's own that these files hold
WORDS = {word: values.Word(word) for word in (
    "yes", "no", "down", "ipv4", "ipv6", "fast", "vlan", "bond", "bridge", MII_MONITOR)}
HEADER = (f"# Written by Tusk from {DEFAULT_PATH} (the dashboard's Network page, the console\n"
          "# menu) on every apply: change the configuration there, not this file.\n")


def route_interface(config, route):
    """The link a route goes out of: its interface when given, else the link with a static
    address whose subnet holds the gateway (one at most: validate() refuses overlapping
    subnets); None when there is none (validate() refuses that route). The kernel picks
    the interface by the same rule for `ip route add DEST via GATEWAY` without `dev`, which
    the iproute2 backend relies on; a networkd [Route] must be in one link's file."""
    if route.interface:
        return route.interface
    gateway = ipaddress.ip_address(route.gateway)
    for link in config.links:
        if link.role == UNUSED:
            continue
        for address in link.addresses:
            network = ipaddress.ip_interface(address).network
            if network.version == gateway.version and gateway in network:
                return link.name
    return None


def file_path(name, suffix):
    return f"{NETWORK_DIR}/{FILE_PREFIX}{name}{suffix}"


def where(config, name):
    """The configuration path of a link ("vlans[2]"), or its name when it has none."""
    link = config.link(name)
    if link is None:
        return name
    key = KIND_KEY[link.kind]
    return f"{key}[{getattr(config, key).index(link)}]"


# -- rendering (pure) ------------------------------------------------------------------------

def _typed(value, kind, path, *args):
    """value (a checked model's) as a typed value; NetworkError naming path if it is not -
    a model built past validate() (the renderer's own check, not the operator's)."""
    try:
        return kind(value, *args)
    except values.Refused as refused:
        raise NetworkError(Code.VALUE, path, str(refused)) from None


def _network(config, link, routes):  # noqa: C901 - one key per case, as networkd reads them
    """The .network file of one link (routes: (its path, Route))."""
    member_of = config.bond_of.get(link.name)
    bridge = next((b for b in config.bridges if link.name in b.members), None)
    traffic = link.role not in (MANAGEMENT, UNUSED) and not member_of
    at = where(config, link.name)
    name = _typed(link.name, values.InterfaceName, f"{at}.name")
    keys = []
    if link.role == UNUSED:
        keys.append(("ActivationPolicy", WORDS["down"]))
    keys.append(("RequiredForOnline", WORDS["yes" if link.role == MANAGEMENT else "no"]))
    mtu = link.mtu or (bridge.mtu if bridge else 0)
    if mtu:
        keys.append(("MTUBytes", _typed(mtu, values.Integer, f"{at}.mtu",
                                        model.MTU_MIN, model.MTU_MAX)))
    network = []
    if member_of:
        network.append(("Bond", _typed(member_of, values.InterfaceName, f"{at}.name")))
    elif bridge:
        network.append(("Bridge", _typed(bridge.name, values.InterfaceName, f"{at}.name")))
    else:
        network.append(("DHCP", WORDS["ipv4" if link.dhcp else "no"]))
        network += [("Address", _typed(a, values.IPInterface, f"{at}.addresses[{n}]"))
                    for n, a in enumerate(link.addresses)]
    link_local = link.role == MANAGEMENT or any(":" in a for a in link.addresses) or \
        any(route.network.version == 6 for _, route in routes)
    network.append(("LinkLocalAddressing", WORDS["ipv6" if link_local else "no"]))
    network.append(("IPv6AcceptRA", WORDS["yes" if link.autoconf else "no"]))
    if traffic:
        network.append(("ConfigureWithoutCarrier", WORDS["yes"]))
    network += [("VLAN", _typed(vlan.name, values.InterfaceName, f"{at}.name"))
                for vlan in config.vlans if vlan.parent == link.name]
    sections = [("Match", [("Name", name)]), ("Link", keys), ("Network", network)]
    if bridge:
        # a VLAN-aware bridge's ids, tagged on this port (untagged frames keep the
        # bridge's default VLAN 1)
        path = where(config, bridge.name)
        sections += [("BridgeVLAN", [("VLAN", _typed(vid, values.Integer, f"{path}.vlans[{n}]",
                                                     VLAN_ID_MIN, VLAN_ID_MAX))])
                     for n, vid in enumerate(bridge.vlans)]
    for path, route in routes:
        keys = [("Destination", _typed(str(route.network), values.IPNetwork,
                                       f"{path}.destination"))]
        if route.gateway:
            keys.append(("Gateway", _typed(route.gateway, values.IPAddress,
                                           f"{path}.gateway")))
        if route.metric:
            keys.append(("Metric", _typed(route.metric, values.Integer, f"{path}.metric", 0,
                                          model.METRIC_MAX)))
        sections.append(("Route", keys))
    return systemd.unit(HEADER, sections)


def _netdev(config, link):
    """The .netdev file of a bond, a VLAN or a bridge: only what a live link cannot change
    (see the module's docstring: a changed file means the link is created anew)."""
    at = where(config, link.name)
    sections = [("NetDev", [("Name", _typed(link.name, values.InterfaceName, f"{at}.name")),
                            ("Kind", WORDS[link.kind])])]
    if link.kind == "bridge":
        # Transparent: spanning tree only when asked; no IGMP/MLD snooping - the bridge
        # floods multicast as a wire would instead of deciding from the hosts' reports.
        sections.append(("Bridge", [
            ("STP", WORDS["yes" if link.stp is True else "no"]),
            ("MulticastSnooping", WORDS["no"]),
            ("VLANFiltering", WORDS["yes" if link.vlans else "no"])]))
    elif link.kind == "vlan":
        sections.append(("VLAN", [("Id", _typed(link.id, values.Integer, f"{at}.id",
                                                VLAN_ID_MIN, VLAN_ID_MAX))]))
    else:
        keys = [("Mode", _typed(link.mode, values.Choice, f"{at}.mode", model.BOND_MODES))]
        if link.mode == LACP:
            keys.append(("TransmitHashPolicy", _typed(link.hash_policy, values.Choice,
                                                      f"{at}.hash_policy",
                                                      model.HASH_POLICIES)))
        keys.append(("MIIMonitorSec", WORDS[MII_MONITOR]))
        if link.mode == LACP:
            keys.append(("LACPTransmitRate", WORDS["fast"]))
        sections.append(("Bond", keys))
    return systemd.unit(HEADER, sections)


def _servers(section, key, servers):
    """A drop-in that replaces the daemon's server list ("KEY=" alone empties it: the
    configuration is the whole list) and empties its compiled-in fallback list: a
    firewall talks to no resolver or time server the operator did not name (systemd's
    fallbacks are public servers of Cloudflare, Google and others)."""
    return systemd.unit(HEADER, [(section, [(key, servers), (f"Fallback{key}", None)])])


def render_links(config):
    """{path: text} of networkd's files: a .network per link, a .netdev per bond and
    VLAN."""
    routes = {}
    for index, route in enumerate(config.routes):
        routes.setdefault(route_interface(config, route), []).append((f"routes[{index}]",
                                                                      route))
    files = {file_path(link.name, NETWORK): _network(config, link, routes.get(link.name, []))
             for link in config.links}
    for link in config.bonds + config.vlans + config.bridges:
        files[file_path(link.name, NETDEV)] = _netdev(config, link)
    return files


def render_system(config):
    """{path: text} of the resolver's and time daemon's drop-ins, /etc/hostname and
    /etc/timezone."""
    system = config.system
    dns = [_typed(server, values.IPAddress, f"system.dns[{n}]")
           for n, server in enumerate(system.dns)]
    ntp = []
    for n, server in enumerate(system.ntp):
        try:
            ntp.append(values.host(server))
        except values.Refused as refused:
            raise NetworkError(Code.VALUE, f"system.ntp[{n}]", str(refused)) from None
    hostname = _typed(system.hostname, values.HostName, "system.hostname")
    timezone = _typed(system.timezone, values.TimeZone, "system.timezone", None)
    return {RESOLVED_DROPIN: _servers("Resolve", "DNS", dns),
            TIMESYNCD_DROPIN: _servers("Time", "NTP", ntp),
            HOSTNAME_FILE: systemd.line(hostname, HOSTNAME_FILE),
            TIMEZONE_FILE: systemd.line(timezone, TIMEZONE_FILE)}


def netdev_identities(files):
    """{netdev name: (its .netdev text, its parent)} of a rendering, from the files alone
    (the parent is the link whose .network says VLAN=name): what apply() compares between
    the previous rendering and the new one."""
    parents = {}
    for path, text in files.items():
        if path.endswith(NETWORK):
            owner = link_of(path)
            for line in text.splitlines():
                if line.startswith("VLAN="):
                    parents[line[len("VLAN="):]] = owner
    return {link_of(path): (text, parents.get(link_of(path), ""))
            for path, text in files.items() if path.endswith(NETDEV)}


def link_of(path):
    """The link a 10-tusk-<link>.<suffix> file belongs to."""
    name = os.path.basename(path)[len(FILE_PREFIX):]
    return name.rsplit(".", 1)[0]


def is_tusk_file(name):
    return name.startswith(FILE_PREFIX) and name.endswith((NETWORK, NETDEV))


# -- the backend -------------------------------------------------------------------------------

class NetworkdBackend:
    def __init__(self, runner=None):
        """runner: an tusklib.commands.Runner (its root prefixes every path; under a
        root only the programs TUSK_COMMANDS names run), or a root directory ("" = /)."""
        self.runner = runner if isinstance(runner, Runner) else Runner(runner or "")
        self._target = None
        self.frr = frr.SystemFrr(self.runner)

    def describe(self):
        return "systemd-networkd"

    @property
    def target(self):
        """The running system, for facts.py."""
        if self._target is None:
            self._target = Target()
        return self._target

    def ports(self):
        """The machine's Ethernet ports: facts.py's on the system; under a root tree (the
        tests' fake appliance) the ports its /sys/class/net shows, by tusk-net's detection."""
        if self.runner.root:
            return {nic.name: facts.Port(nic.name, nic.mac, nic.link, driver=nic.driver)
                    for nic in detect_interfaces(self.runner.path(SYSFS_NET))}
        return facts.ports(self.target)

    def render(self, config):
        return {**render_links(config), **render_system(config)}

    def path(self, path):
        return self.runner.path(path)

    # -- apply ---------------------------------------------------------------------------

    def apply(self, config):
        """Makes the machine match config; returns what it changed. NetworkError(APPLY)
        naming the link (its configuration path) or the file when a step fails: the
        applier then applies the previous configuration the same way."""
        lines = []
        routing = frr.render(config)
        if routing:     # FRR's parser first: nothing changes when it refuses the file
            self.frr.prepare()
            frr.check(routing, self.frr.run, self.frr.directory)
        links = render_links(config)
        previous = self._previous()
        wanted, made = netdev_identities(links), netdev_identities(previous)
        doomed = sorted(name for name, identity in made.items() if wanted.get(name) != identity)
        # A configured bond or VLAN that exists but was not made from Tusk's files: a
        # leftover, or the built-in bonding driver's own bond0 on a kernel started without
        # bonding.max_bonds=0 (the image's boot entries pass it). networkd would keep it
        # as it is, mode and all: it goes, and networkd makes it as configured.
        doomed += sorted(name for name in wanted if name not in made and self._exists(name))
        # deleted before the files change: if a deletion fails, they still say what is Tusk's
        for name in doomed:
            if self._exists(name):
                self._command(where(config, name), name, "ip", "link", "delete", "dev", name)
                why = "changed" if name in made else "not made from Tusk's files"
                lines.append(f"deleted {name}: "
                             f"{why if config.link(name) else 'no longer configured'}")
        changed = self._write(links, lines)
        for path in sorted(set(previous) - set(links)):
            self._remove(path, lines)
            changed.add(link_of(path))
        missing = [n for n in wanted if not self._exists(n)]   # deleted, or never created
        changed |= self._dependants(config, set(doomed) | set(missing))
        self._networkd(config, changed - set(doomed), lines)
        system = render_system(config)
        for path in self._write(system, lines, by_path=True):
            if path in SERVICES:
                self._restart(SERVICES[path], lines)
        self._hostname(config.system.hostname, lines)
        self._timezone(config.system.timezone, lines)
        self._bpdu(config, lines)
        self.frr.apply(routing, lines)
        return lines or ["nothing to change: the machine is as configured"]

    def _previous(self):
        """{path: text} of Tusk's files in networkd's directory now."""
        directory = self.path(NETWORK_DIR)
        try:
            names = sorted(n for n in os.listdir(directory) if is_tusk_file(n))
        except FileNotFoundError:
            return {}
        except OSError as exc:
            raise NetworkError(Code.APPLY, NETWORK_DIR, f"cannot list: {exc.strerror}") \
                from None
        return {f"{NETWORK_DIR}/{name}": self._read(f"{NETWORK_DIR}/{name}") for name in names}

    def _read(self, path):
        try:
            with open(self.path(path), encoding="utf-8") as handle:
                return handle.read()
        except FileNotFoundError:
            return None
        except (OSError, UnicodeDecodeError) as exc:
            raise NetworkError(Code.APPLY, path, "cannot read: "
                               f"{getattr(exc, 'strerror', None) or exc}") from None

    def _write(self, files, lines, by_path=False):
        """Writes the files that differ; the links (or paths) whose file changed."""
        changed = set()
        for path, text in files.items():
            if self._read(path) == text:
                continue
            try:
                os.makedirs(os.path.dirname(self.path(path)), exist_ok=True)
                write_atomically(self.path(path), text, 0o644)
            except OSError as exc:
                raise NetworkError(Code.APPLY, path, f"cannot write: {exc.strerror}") \
                    from None
            lines.append(f"wrote {path}")
            changed.add(path if by_path else link_of(path))
        return changed

    def _remove(self, path, lines):
        try:
            os.unlink(self.path(path))
        except FileNotFoundError:
            return
        except OSError as exc:
            raise NetworkError(Code.APPLY, path, f"cannot remove: {exc.strerror}") from None
        lines.append(f"removed {path}")

    def _exists(self, name):
        return os.path.lexists(self.path(f"{SYSFS_NET}/{name}"))

    @staticmethod
    def _dependants(config, names):
        """The links to reconfigure so that networkd creates these netdevs (anew): a
        VLAN's parent, a bond's members."""
        found = set()
        for name in names:
            link = config.link(name)
            if link is not None and link.kind == "vlan":
                found.add(link.parent)
            elif link is not None:
                found.update(link.members)
        return found

    def _command(self, path, name, program, *args):
        """Runs a program of the runner's table; on failure NetworkError at path (a link's
        configuration path), naming name (the link or the service) and the output."""
        step = " ".join((program,) + args)
        try:
            result = self.runner.run(program, *args)
        except CommandError as exc:
            raise NetworkError(Code.APPLY, path, f"{name}: {exc}") from None
        if result.returncode != 0:
            raise NetworkError(Code.APPLY, path, f"{name}: `{step}` failed (exit "
                               f"{result.returncode}): "
                               f"{(result.stderr or result.stdout).strip()}")

    def _active(self, unit, lines):
        """Whether the unit runs; None (with a line saying why) when systemctl cannot be
        asked (a --root tree whose TUSK_COMMANDS does not name it)."""
        try:
            return self.runner.run("systemctl", "is-active", "--quiet", unit).returncode == 0
        except CommandError as exc:
            lines.append(f"{unit} not asked: {exc}")
            return None

    def _networkd(self, config, changed, lines):
        if not changed:
            return
        running = self._active(NETWORKD, lines)
        if running is False:
            lines.append("systemd-networkd is not running: it reads these files when it "
                         "starts")
        if not running:
            return
        self._command("", "systemd-networkd", "networkctl", "reload")
        present = sorted(name for name in changed if self._exists(name))
        for name in present:
            self._command(where(config, name), name, "networkctl", "reconfigure", name)
        lines.append(f"systemd-networkd reloaded; reconfigured: {' '.join(present) or '-'}")

    def _restart(self, unit, lines):
        """Restarted when it runs: it reads its drop-ins when it starts."""
        if self._active(unit, lines):
            self._command("system", unit, "systemctl", "try-restart", unit)
            lines.append(f"restarted {unit}")

    def _bpdu(self, config, lines):
        """table bridge tusk_bpdu as config wants it (bpdu.py), on this system only (never
        under a --root tree, whose programs are a recording): loaded before networkd
        makes a bridge at boot (tusk-net runs first), replaced on every apply."""
        if not self.runner.root:
            lines += bpdu.load(self.target, config)

    def _hostname(self, hostname, lines):
        """/etc/hostname is rendered; the kernel's name is set here (on this system only:
        never under a --root tree)."""
        if self.runner.root or socket.gethostname() == hostname:
            return
        try:
            socket.sethostname(hostname)
        except OSError as exc:
            raise NetworkError(Code.APPLY, "system.hostname",
                               f"cannot set the host name: {exc.strerror}") from None
        lines.append(f"host name: {hostname}")

    def _timezone(self, zone, lines):
        """/etc/localtime -> ../usr/share/zoneinfo/<zone>, replaced in one rename."""
        target = os.path.relpath(f"{checks.ZONEINFO}/{zone}", os.path.dirname(LOCALTIME))
        path = self.path(LOCALTIME)
        try:
            if os.path.islink(path) and os.readlink(path) == target:
                return
            temporary = f"{path}.tusk-new"
            if os.path.lexists(temporary):
                os.unlink(temporary)
            os.symlink(target, temporary)
            os.replace(temporary, path)
        except OSError as exc:
            raise NetworkError(Code.APPLY, "system.timezone",
                               f"cannot link {LOCALTIME}: {exc.strerror}") from None
        lines.append(f"time zone: {zone}")
