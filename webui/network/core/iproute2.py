"""The lab's backend: a configuration put into effect with iproute2 inside a network
namespace (the `make run` lab's fw), where systemd-networkd cannot run.

    backend = IprouteBackend(Target("tusk-fw"), system_dir)
    backend.plan(config, live) -> [argv]   pure: the commands that make live match config
    backend.apply(config)      -> [line]   reads the live state (facts.py), plans, runs

Declarative: the plan starts from whatever the namespace holds, so apply(previous) after
any failed step restores previous, and a second apply plans nothing. Tusk manages the
ports the configuration lists, the bonds and VLANs it lists or created earlier (they carry
the ifalias "tusk"), the global-scope addresses on those links and the routes with
protocol static in table main through them; everything else is left alone. (`ip link
add` ignores an alias: it is set by the next command. Should that one alone fail, the new
link is not known as Tusk's and stays; its name is then refused until it is removed.)
The steps:

    1. stale routes, then stale addresses, go (before the links they are on change:
       a link taken down drops its IPv6 addresses by itself, and a later `del` would fail)
    2. bonds and VLANs that went away or changed (kind, parent, id, mode) are deleted
    3. members leave the bonds they no longer belong to; new bonds are created and their
       members enslaved (down first: the bonding driver takes a member that is down)
    4. MTUs of ports and bonds, then new VLANs (a VLAN may not exceed its parent's MTU),
       then the MTUs of the other VLANs; links up
    5. missing addresses; routes added or replaced with `proto static` (what networkd's
       [Route] sets, so both backends' routes look the same); unused ports down

IPv6 addresses are added with `nodad`: the lab's namespaces are wired only to each other,
so no duplicate can exist, and a tentative address would fail a test's first packets.

The management port's DHCPv4 and IPv6 autoconfiguration are refused here: networkd runs
its DHCP client and router-advertisement handling per link on the appliance, but nothing
equivalent runs per namespace in the lab, whose management address is static. System
settings (host name, DNS, NTP, time zone) are not applied either: the lab's namespace
shares the host's; they are written to system_dir/system.json instead.
"""
import ipaddress
import json
import os

from tusklib.files import write_atomically
from tusklib.names import DEFAULT_VLAN

from . import bpdu, facts, frr, model
from .errors import Code, NetworkError
from .networkd import route_interface

ALIAS = "tusk"          # set on every link this backend creates
MIIMON_MS = "100"       # how often a bond checks its members' carrier
SYSTEM_FILE = "system.json"
UNKNOWN_KIND = {
    "vlan": "this kernel has no 802.1Q VLAN support (CONFIG_VLAN_8021Q)",
    "bond": "this kernel has no bonding driver (CONFIG_BONDING)",
    "bridge": "this kernel has no bridge (CONFIG_BRIDGE)",
}


def _family(address):
    return "-6" if ipaddress.ip_interface(address).version == 6 else "-4"


def _metric(network, metric):
    """The metric the kernel keeps: an IPv6 route added with 0 gets 1024."""
    return facts.IPV6_USER_METRIC if network.version == 6 and metric == 0 else metric


def _destination(network):
    return facts.DEFAULT_ROUTE if network.prefixlen == 0 else str(network)


def _refuse_dynamic(config):
    for index, port in enumerate(config.interfaces):
        for key, what in (("dhcp", "DHCPv4"), ("autoconf", "IPv6 autoconfiguration")):
            if getattr(port, key):
                raise NetworkError(Code.APPLY, f"interfaces[{index}].{key}",
                                   f"{what} needs a client running on the link; the lab "
                                   "applies with iproute2 in a namespace where none runs. "
                                   "Give the lab's management port a static address (the "
                                   "appliance's systemd-networkd does DHCP and autoconf)")


class Plan:
    """The steps, each (path in the configuration, argv), from one live snapshot."""

    def __init__(self, config, live):
        self.config = config
        self.live = live
        self.steps = []
        self.paths = {}   # link name -> its path in the configuration
        for key in ("interfaces", "bonds", "vlans", "bridges"):
            for index, link in enumerate(getattr(config, key)):
                self.paths[link.name] = f"{key}[{index}]"
        self.deleted = set()   # live links this plan deletes
        self.created = set()   # links this plan creates
        self.taken_down = set()

    def add(self, path, *argv):
        self.steps.append((path, list(argv)))

    def current(self, name):
        """The live link, unless this plan deletes it."""
        return None if name in self.deleted else self.live.link(name)

    def build(self):
        _refuse_dynamic(self.config)
        self.check_ports()
        self.check_names()
        self.decide_deletions()
        self.routes_away()
        self.addresses_away()
        for kind in ("vlan", "bridge", "bond"):   # a bond's VLANs and bridge go before it
            for link in self.live.links:
                if link.name in self.deleted and link.kind == kind:
                    self.add(self.paths.get(link.name, ""), "ip", "link", "del", "dev",
                             link.name)
        self.release_members()
        for bond in self.config.bonds:
            self.bond(bond)
        self.mtus(self.config.interfaces + self.config.bonds)
        for vlan in self.config.vlans:
            self.vlan(vlan)
        self.mtus(self.config.vlans)
        for bridge in self.config.bridges:
            self.bridge(bridge)
        self.mtus(self.config.bridges)
        self.ups()
        self.addresses_in()
        self.routes_in()
        for port in self.config.interfaces:
            if port.role == model.UNUSED and self.live.link(port.name).up:
                self.add(self.paths[port.name], "ip", "link", "set", "dev", port.name, "down")
        return self.steps

    # -- what must exist, and what may not be touched -------------------------------------

    def check_ports(self):
        present = {link.name for link in self.live.links if facts.is_port(link)}
        for port in self.config.interfaces:
            if port.name not in present:
                raise NetworkError(Code.INTERFACE, f"{self.paths[port.name]}.name",
                                   f"{port.name!r}: there is no such Ethernet port here (there "
                                   f"are: {', '.join(sorted(present)) or 'none'})")

    def check_names(self):
        for link in self.config.bonds + self.config.vlans + self.config.bridges:
            live = self.live.link(link.name)
            if live is not None and live.alias != ALIAS:
                raise NetworkError(Code.APPLY, f"{self.paths[link.name]}.name",
                                   f"a link named {link.name} ({live.kind or 'a port'}) exists "
                                   "that Tusk did not create; remove it or choose another name")

    def decide_deletions(self):
        """Tusk's bonds and VLANs that went away or changed; a VLAN whose parent goes
        goes with it (the kernel deletes it), and is made again."""
        ours = [link for link in self.live.links
                if link.alias == ALIAS and link.kind in ("bond", "vlan", "bridge")]
        for link in ours:
            if link.kind in ("bond", "bridge") and self.changed(link):
                self.deleted.add(link.name)
        for link in ours:
            if link.kind == "vlan" and (self.changed(link) or link.parent in self.deleted):
                self.deleted.add(link.name)

    def changed(self, live):
        want = self.config.link(live.name)
        if want is None or want.kind != live.kind:
            return True
        if want.kind == "vlan":
            return (want.parent, want.id) != (live.parent, live.vlan_id)
        if want.kind == "bridge":     # made anew, as networkd does with a changed .netdev
            return (want.stp, bool(want.vlans)) != (live.stp, live.vlan_filtering)
        if want.mode == model.LACP and want.hash_policy != live.hash_policy:
            return True
        return want.mode != live.bond_mode

    # -- going away --------------------------------------------------------------------------

    def managed(self):
        return {link.name for link in self.config.links} | {
            link.name for link in self.live.links if link.alias == ALIAS}

    def wanted_routes(self):
        """{(network, metric the kernel keeps): (route, its index, interface)}."""
        wanted = {}
        for index, route in enumerate(self.config.routes):
            network = route.network
            interface = route_interface(self.config, route)
            if interface is None:
                raise NetworkError(Code.APPLY, f"routes[{index}].gateway",
                                   f"{route.gateway} is on none of the configured subnets")
            wanted[(network, _metric(network, route.metric))] = (route, index, interface)
        return wanted

    def routes_away(self):
        wanted, managed = self.wanted_routes(), self.managed()
        for route in self.live.routes:
            if route.protocol != "static" or route.interface not in managed or \
                    (route.network, route.metric) in wanted or route.interface in self.deleted:
                continue
            via = ("via", route.gateway) if route.gateway else ()
            self.add(self.paths.get(route.interface, ""), "ip", f"-{route.family}", "route",
                     "del", route.destination, *via, "dev", route.interface, "metric",
                     str(route.metric), "proto", "static")

    def addresses_away(self):
        for name in self.paths:
            if self.current(name) is None:
                continue
            want = {ipaddress.ip_interface(a) for a in self.config.link(name).addresses}
            have = [ipaddress.ip_interface(a.address) for a in self.live.addresses
                    if a.interface == name and a.scope == "global"]
            stale = [a for a in have if a not in want]
            # Deleting a primary IPv4 address deletes the secondaries of its subnet with it,
            # unless they are promoted (what networkd sets on the links it manages).
            if any(a.version == 4 for a in stale) and \
                    any(a.version == 4 and a in want for a in have):
                self.add(self.paths[name], "sysctl", "-qw",
                         f"net/ipv4/conf/{name}/promote_secondaries=1")
            for address in stale:
                self.add(f"{self.paths[name]}.addresses", "ip", _family(str(address)), "addr",
                         "del", str(address), "dev", name)

    def release_members(self):
        """Links out of the bonds and bridges they no longer belong to; the bonding driver
        takes a port it lets go of (or that goes with its bond) down."""
        master_of = {**self.config.bond_of, **self.config.bridge_of}
        for link in self.config.interfaces + self.config.bonds + self.config.vlans:
            live = self.current(link.name)
            if live is None or not live.master:
                continue
            if live.master in self.deleted:
                self.taken_down.add(link.name)
            elif live.master != master_of.get(link.name):
                self.add(self.paths[link.name], "ip", "link", "set", "dev", link.name,
                         "nomaster")
                self.taken_down.add(link.name)

    # -- coming in ---------------------------------------------------------------------------

    def bond(self, bond):
        path = self.paths[bond.name]
        if self.current(bond.name) is None:
            options = ["mode", bond.mode]
            if bond.mode == model.LACP:
                options += ["xmit_hash_policy", bond.hash_policy, "lacp_rate", "fast"]
            self.add(path, "ip", "link", "add", "name", bond.name, "mtu",
                     str(self.config.effective_mtu(bond.name)), "type", "bond", *options,
                     "miimon", MIIMON_MS)
            self.add(path, "ip", "link", "set", "dev", bond.name, "alias", ALIAS)
            self.created.add(bond.name)
        for index, member in enumerate(bond.members):
            live = self.live.link(member)
            if bond.name in self.created or live.master != bond.name:
                where = f"{path}.members[{index}]"
                if live.up:
                    self.add(where, "ip", "link", "set", "dev", member, "down")
                self.add(where, "ip", "link", "set", "dev", member, "master", bond.name)
                self.taken_down.add(member)

    def vlan(self, vlan):
        if self.current(vlan.name) is not None:
            return
        path = self.paths[vlan.name]
        self.add(path, "ip", "link", "add", "link", vlan.parent, "name", vlan.name, "mtu",
                 str(self.config.effective_mtu(vlan.name)), "type", "vlan", "id", str(vlan.id))
        self.add(path, "ip", "link", "set", "dev", vlan.name, "alias", ALIAS)
        self.created.add(vlan.name)

    def bridge(self, bridge):
        """A transparent bridge: spanning tree as configured, no multicast snooping (the
        networkd backend's [Bridge]), VLAN-aware with vlans; its members enslaved, each
        carrying exactly the bridge's VLANs (and the default one, untagged)."""
        path = self.paths[bridge.name]
        if self.current(bridge.name) is None:
            # vlan_filtering only to turn it on: a kernel without it refuses even a 0
            aware = ("vlan_filtering", "1") if bridge.vlans else ()
            self.add(path, "ip", "link", "add", "name", bridge.name, "mtu",
                     str(self.config.effective_mtu(bridge.name)), "type", "bridge",
                     "stp_state", "1" if bridge.stp is True else "0", "mcast_snooping", "0",
                     *aware)
            self.add(path, "ip", "link", "set", "dev", bridge.name, "alias", ALIAS)
            # as on Tusk's kernel, which has no br_netfilter: bridged frames stay out of
            # family inet's hooks (a host kernel with it would hand them to table inet
            # tusk); -e: a kernel without it has no such keys
            self.add(path, "sysctl", "-qwe", *(f"net.bridge.bridge-nf-call-{t}=0"
                                               for t in ("iptables", "ip6tables", "arptables")))
            self.created.add(bridge.name)
        live_vids = dict(self.live.bridge_vlans)
        for index, member in enumerate(bridge.members):
            where = f"{path}.members[{index}]"
            live = self.current(member)
            joined = bridge.name in self.created or live is None or \
                live.master != bridge.name
            if joined:
                self.add(where, "ip", "link", "set", "dev", member, "master", bridge.name)
            if not bridge.vlans:
                continue
            have = {DEFAULT_VLAN} if joined else set(live_vids.get(member, ()))
            want = set(bridge.vlans) | {DEFAULT_VLAN}
            for vid in sorted(want - have):
                self.add(f"{path}.vlans", "bridge", "vlan", "add", "dev", member, "vid",
                         str(vid))
            for vid in sorted(have - want):
                self.add(f"{path}.vlans", "bridge", "vlan", "del", "dev", member, "vid",
                         str(vid))

    def mtus(self, links):
        members = self.config.bond_of
        for link in links:
            live = self.current(link.name)
            mtu = self.config.effective_mtu(link.name)
            # a member takes its bond's MTU; a new link was made with its own
            if link.name in members or link.name in self.created or live.mtu == mtu:
                continue
            self.add(f"{self.paths[link.name]}.mtu", "ip", "link", "set", "dev", link.name,
                     "mtu", str(mtu))

    def ups(self):
        for link in self.config.links:
            if link.role == model.UNUSED:
                continue
            live = self.current(link.name)
            if live is None or not live.up or link.name in self.taken_down:
                self.add(self.paths[link.name], "ip", "link", "set", "dev", link.name, "up")

    def addresses_in(self):
        for link in self.config.links:
            have = set() if self.current(link.name) is None else {
                ipaddress.ip_interface(a.address) for a in self.live.addresses
                if a.interface == link.name}
            for index, address in enumerate(link.addresses):
                if ipaddress.ip_interface(address) in have:
                    continue
                six = ("nodad",) if _family(address) == "-6" else ()
                self.add(f"{self.paths[link.name]}.addresses[{index}]", "ip", _family(address),
                         "addr", "add", address, "dev", link.name, *six)

    def routes_in(self):
        live = {(r.network, r.metric): r for r in self.live.routes
                if r.interface not in self.deleted and r.interface not in self.created}
        for key, (route, index, interface) in self.wanted_routes().items():
            have = live.get(key)
            if have and (have.protocol, have.gateway, have.interface) == \
                    ("static", route.gateway, interface):
                continue
            network = route.network
            via = ("via", route.gateway) if route.gateway else ()
            self.add(f"routes[{index}]", "ip", f"-{network.version}", "route", "replace",
                     _destination(network), *via, "dev", interface, "metric",
                     str(route.metric), "proto", "static")


def plan(config, live):
    """The commands (argv lists) that make live (a facts.Live) match config, in order."""
    return [argv for _, argv in Plan(config, live).build()]


class IprouteBackend:
    def __init__(self, target, system_dir):
        self.target = target
        self.system_dir = system_dir
        self.frr = frr.LabFrr(target.netns) if target.netns else None

    def describe(self):
        return f"iproute2 in {self.target}"

    def ports(self):
        return facts.ports(self.target)

    plan = staticmethod(plan)

    def apply(self, config):
        """Make the target match config; the commands it ran, then what it wrote. Raises
        NetworkError(APPLY) naming the configuration's path of the step that failed."""
        lines = []
        routing = frr.render(config)
        if routing and self.frr is None:
            raise NetworkError(Code.APPLY, "routing", "the lab runs FRR in a namespace only")
        if routing:     # FRR's parser first: nothing changes when it refuses the file
            self.frr.prepare()
            frr.check(routing, self.frr.run, self.frr.directory)
        for path, argv in Plan(config, facts.snapshot(self.target)).build():
            result = self.target.run(argv)
            if not result.ok:
                why = result.stderr.strip() or f"exit status {result.returncode}"
                kind = argv[argv.index("type") + 1] if "type" in argv else ""
                if "Unknown device type" in why and kind in UNKNOWN_KIND:
                    why = f"{why} ({UNKNOWN_KIND[kind]})"
                raise NetworkError(Code.APPLY, path, f"`{' '.join(argv)}` failed on "
                                   f"{self.target}: {why}")
            lines.append(" ".join(argv))
        lines += bpdu.load(self.target, config)
        if self.frr is not None:
            self.frr.apply(routing, lines)
        return lines + self.write_system(config.system)

    def write_system(self, system):
        """The system settings into system_dir/system.json, if they changed."""
        path = os.path.join(self.system_dir, SYSTEM_FILE)
        text = json.dumps({"hostname": system.hostname, "dns": list(system.dns),
                           "ntp": list(system.ntp), "timezone": system.timezone},
                          indent=2) + "\n"
        try:
            with open(path, encoding="utf-8") as handle:
                if handle.read() == text:
                    return []
        except FileNotFoundError:
            pass
        os.makedirs(self.system_dir, exist_ok=True)
        write_atomically(path, text, mode=0o644)
        return [f"wrote {path}: host name, DNS, NTP and time zone (not applied: the lab's "
                "namespace shares the host's)"]
