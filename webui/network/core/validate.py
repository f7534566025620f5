"""Every problem of a configuration whose keys are right: bad values, and values that
cannot hold together. One function, used by the file's reader, the web UI's draft (on
every save), the agent (again, before it applies anything) and the console menu.

    validate(config, present=None, zones=None) -> [Problem]

present: {interface name: facts} of the machine's Ethernet ports (facts may carry
min_mtu/max_mtu); with it, a port the machine lacks, and an MTU outside a port's limits,
are problems. zones: {zone name: [interface names]} of the policy the box runs; with it,
an interface a zone names that is not a traffic link here is a problem naming the zone
(so a VLAN a zone uses cannot be deleted or renamed, nor its port made unused).
"""
import ipaddress

from tusklib import checks
from tusklib.names import VLAN_ID_MAX, VLAN_ID_MIN
from tusklib.paths import path_mtu_warnings

from . import model, routing
from .errors import Code, Problem
from .model import MANAGEMENT, ROLES, UNUSED

KIND_KEY = {"port": "interfaces", "bond": "bonds", "vlan": "vlans", "bridge": "bridges"}


class Checker:
    def __init__(self, config, present, zones):
        self.config = config
        self.present = present
        self.zones = zones
        self.problems = []
        self.where = {}       # link name -> its path ("vlans[2]"), the first one wins

    def fail(self, path, message, code=Code.VALUE):
        self.problems.append(Problem(code, path, message))

    def run(self):
        config = self.config
        self.system(config.system)
        for key in ("interfaces", "bonds", "vlans", "bridges"):
            for index, link in enumerate(getattr(config, key)):
                self.link(link, f"{key}[{index}]")
        self.management()
        for index, bond in enumerate(config.bonds):
            self.bond(bond, f"bonds[{index}]")
        for index, vlan in enumerate(config.vlans):
            self.vlan(vlan, f"vlans[{index}]")
        for index, bridge in enumerate(config.bridges):
            self.bridge(bridge, f"bridges[{index}]")
        self.subnets()
        for index, route in enumerate(config.routes):
            self.route(route, f"routes[{index}]")
        self.duplicate_routes()
        self.problems += routing.problems(config, self.routed())
        if self.zones is not None:
            self.zone_interfaces()
        return self.problems

    # -- system ------------------------------------------------------------------------

    def system(self, system):
        reason = checks.hostname_problem(system.hostname)
        if reason:
            self.fail("system.hostname", reason)
        for key, check in (("dns", lambda v: checks.ip_problem(v, "an IP address")),
                           ("ntp", checks.server_problem)):
            values = getattr(system, key)
            if len(values) > model.SERVERS_MAX:
                self.fail(f"system.{key}", f"{len(values)} servers; at most "
                          f"{model.SERVERS_MAX}")
            for index, value in enumerate(values):
                reason = check(value)
                if reason is None and value in values[:index]:
                    reason = f"{value} is listed twice"
                if reason:
                    self.fail(f"system.{key}[{index}]", reason)
        reason = checks.timezone_problem(system.timezone)
        if reason:
            self.fail("system.timezone", reason)

    # -- every link ----------------------------------------------------------------------

    def link(self, link, path):
        reason = checks.interface_problem(link.name)
        if reason is None and link.name in self.where:
            reason = f"{link.name!r} is already configured as {self.where[link.name]}"
        if reason:
            self.fail(f"{path}.name", reason)
        self.where.setdefault(link.name, path)
        if link.kind == "port":
            if link.role not in ROLES:
                self.fail(f"{path}.role", f"{link.role!r}: one of {', '.join(ROLES)}")
            if self.present is not None and link.name not in self.present:
                self.fail(f"{path}.name", f"{link.name!r}: this machine has no such "
                          f"Ethernet port (it has: {', '.join(sorted(self.present)) or 'none'})",
                          Code.INTERFACE)
            for key in ("dhcp", "autoconf"):
                if getattr(link, key) and link.role != MANAGEMENT:
                    what = "DHCPv4" if key == "dhcp" else "IPv6 autoconfiguration"
                    self.fail(f"{path}.{key}", f"{what} is for the management port only: "
                              "a traffic interface's address must not change under the "
                              "policy and routes that rely on it; give it static addresses")
            if link.role == UNUSED and link.addresses:
                self.fail(f"{path}.addresses", "an unused port has no addresses (its link "
                          "stays down); make it a traffic port, or remove them")
        if len(link.addresses) > model.ADDRESSES_MAX:
            self.fail(f"{path}.addresses", f"{len(link.addresses)} addresses; at most "
                      f"{model.ADDRESSES_MAX} on one interface")
        for index, address in enumerate(link.addresses):
            reason = checks.address_problem(address)
            if reason is None and address in link.addresses[:index]:
                reason = f"{address} is listed twice"
            if reason:
                self.fail(f"{path}.addresses[{index}]", reason)
        if len(link.description) > model.DESCRIPTION_MAX:
            self.fail(f"{path}.description", f"{len(link.description)} characters; at most "
                      f"{model.DESCRIPTION_MAX}")
        if any(ord(c) < 32 for c in link.description):
            self.fail(f"{path}.description", "must be one line without control characters")
        self.mtu(link, path)

    def mtu(self, link, path):
        if link.mtu == 0:
            return
        if not model.MTU_MIN <= link.mtu <= model.MTU_MAX:
            self.fail(f"{path}.mtu", f"{link.mtu} is outside {model.MTU_MIN}..{model.MTU_MAX}"
                      " (0 leaves the MTU as the driver sets it)")
            return
        six = [a for a in link.addresses if ":" in a]
        if six and link.mtu < model.IPV6_MTU_MIN:
            self.fail(f"{path}.mtu", f"{link.mtu} is below IPv6's minimum of "
                      f"{model.IPV6_MTU_MIN}, and the interface has IPv6 address {six[0]}")
        facts = self.present.get(link.name) if isinstance(self.present, dict) and \
            link.kind == "port" else None
        low, high = _limits(facts)
        if low is not None and not low <= link.mtu <= high:
            self.fail(f"{path}.mtu", f"{link.mtu} is outside what {link.name}'s driver "
                      f"allows ({low}..{high})")

    # -- the management port --------------------------------------------------------------

    def management(self):
        ports = [(i, p) for i, p in enumerate(self.config.interfaces) if p.role == MANAGEMENT]
        if not ports:
            path = "interfaces" if self.config.interfaces else ""
            self.fail(path, "no interface has the role management: the dashboard and SSH "
                      "would answer nowhere (only the console)")
            return
        for index, _ in ports[1:]:
            self.fail(f"interfaces[{index}].role", f"{ports[0][1].name} is already the "
                      "management port; there is one")
        index, port = ports[0]
        if not (port.addresses or port.dhcp or port.autoconf):
            self.fail(f"interfaces[{index}].addresses", "no management address left: give "
                      "the management port an address, or turn on DHCP")

    # -- bonds -----------------------------------------------------------------------------

    def bond(self, bond, path):
        if bond.mode not in model.BOND_MODES:
            self.fail(f"{path}.mode", f"{bond.mode!r}: one of {', '.join(model.BOND_MODES)}")
        if bond.hash_policy not in model.HASH_POLICIES:
            self.fail(f"{path}.hash_policy", f"{bond.hash_policy!r}: one of "
                      f"{', '.join(model.HASH_POLICIES)}")
        if not bond.members:
            self.fail(f"{path}.members", "a bond needs at least one member port")
        ports = {p.name: (i, p) for i, p in enumerate(self.config.interfaces)}
        vlan_parents = {v.parent for v in self.config.vlans}
        for index, member in enumerate(bond.members):
            where = f"{path}.members[{index}]"
            if member in bond.members[:index]:
                self.fail(where, f"{member} is listed twice")
                continue
            if member not in ports:
                self.fail(where, f"{member!r} is not a configured Ethernet port (bond members "
                          "are ports listed under interfaces)")
                continue
            _, port = ports[member]
            earlier = self.config.bonds[:self.config.bonds.index(bond)]
            other = next((b.name for b in earlier if member in b.members), None)
            if port.role == MANAGEMENT:
                self.fail(where, f"{member} is the management port: it cannot be in a bond "
                          "(the dashboard must not depend on a bond's negotiation)")
            elif port.role == UNUSED:
                self.fail(where, f"{member} has the role unused; a member carries the "
                          "bond's traffic: give it the role traffic")
            elif other:
                self.fail(where, f"{member} is already a member of {other}")
            elif port.addresses:
                self.fail(where, f"{member} has addresses of its own; a member has none: "
                          "give the addresses to the bond")
            elif member in vlan_parents:
                self.fail(where, f"{member} carries VLANs; put them on the bond instead")

    # -- VLANs -----------------------------------------------------------------------------

    def vlan(self, vlan, path):
        if not VLAN_ID_MIN <= vlan.id <= VLAN_ID_MAX:
            self.fail(f"{path}.id", f"{vlan.id} is outside {VLAN_ID_MIN}.."
                      f"{VLAN_ID_MAX}")
        twin = next((i for i, v in enumerate(self.config.vlans)
                     if v.parent == vlan.parent and v.id == vlan.id), None)
        if twin is not None and self.config.vlans[twin] is not vlan:
            self.fail(f"{path}.id", f"VLAN {vlan.id} is already on {vlan.parent} "
                      f"(vlans[{twin}], {self.config.vlans[twin].name})")
        parent = self.config.link(vlan.parent)
        if parent is None:
            self.fail(f"{path}.parent", f"{vlan.parent!r} is not a configured port or bond")
            return
        if parent.kind == "vlan":
            self.fail(f"{path}.parent", f"{vlan.parent} is itself a VLAN; stacked (QinQ) "
                      "VLANs are not supported")
            return
        if parent.role == MANAGEMENT:
            self.fail(f"{path}.parent", f"{vlan.parent} is the management port. VLANs are "
                      "not allowed on it: tagged traffic on that wire would put forwarded "
                      "networks onto the port the dashboard answers on, one switch mistake "
                      "away from it; use a traffic port")
        elif parent.role == UNUSED:
            self.fail(f"{path}.parent", f"{vlan.parent} has the role unused (its link stays "
                      "down); make it a traffic port")
        elif vlan.parent in self.config.bond_of:
            self.fail(f"{path}.parent", f"{vlan.parent} is a member of "
                      f"{self.config.bond_of[vlan.parent]}; put the VLAN on the bond")
        elif parent.kind == "bridge":
            self.fail(f"{path}.parent", f"{vlan.parent} is a transparent bridge, which "
                      "carries VLANs itself: list the VLAN's id under its vlans (tagged on "
                      "every port), or make the VLAN on a port and bridge it")
        mtu, parent_mtu = self.config.effective_mtu(vlan.name), \
            self.config.effective_mtu(vlan.parent)
        if mtu > parent_mtu:
            self.fail(f"{path}.mtu", f"{mtu} exceeds the MTU of its parent {vlan.parent} "
                      f"({parent_mtu}); the kernel refuses a VLAN larger than its parent")

    # -- bridges -------------------------------------------------------------------------------

    def bridge(self, bridge, path):  # noqa: C901 - one check per member case, each naming it
        if bridge.bpdu not in model.BPDU_CHOICES:
            self.fail(f"{path}.bpdu", f"{bridge.bpdu!r}: one of {', '.join(model.BPDU_CHOICES)}")
        elif bridge.stp and bridge.bpdu == model.BPDU_DROP:
            self.fail(f"{path}.bpdu", "with stp on, the bridge takes part in spanning tree "
                      "and consumes the switches' BPDUs itself: bpdu drop is for a bridge "
                      "without stp")
        if len(bridge.members) < model.BRIDGE_MEMBERS_MIN:
            self.fail(f"{path}.members", f"a bridge joins at least {model.BRIDGE_MEMBERS_MIN} "
                      "links (the two sides it filters between)")
        self.bridge_vlans(bridge, path)
        earlier = self.config.bridges[:self.config.bridges.index(bridge)]
        parents = {v.parent for v in self.config.vlans}
        for index, member in enumerate(bridge.members):
            where = f"{path}.members[{index}]"
            link = self.config.link(member)
            other = next((b.name for b in earlier if member in b.members), None)
            if member in bridge.members[:index]:
                self.fail(where, f"{member} is listed twice")
            elif link is None or link.kind == "bridge":
                self.fail(where, f"{member!r} is not a configured port, bond or VLAN (bridge "
                          "members are links listed under interfaces, bonds or vlans)")
            elif link.role == MANAGEMENT:
                self.fail(where, f"{member} is the management port: it cannot be bridged "
                          "(the box is managed there, apart from the traffic it filters)")
            elif link.role == UNUSED:
                self.fail(where, f"{member} has the role unused (its link stays down): give "
                          "it the role traffic")
            elif member in self.config.bond_of:
                self.fail(where, f"{member} is a member of the bond "
                          f"{self.config.bond_of[member]}: bridge the bond")
            elif other:
                self.fail(where, f"{member} is already a member of the bridge {other}")
            elif link.addresses:
                self.fail(where, f"{member} has addresses: a bridge port has none - the "
                          "bridge is transparent, and the box is managed on the management "
                          "port; remove them")
            elif member in parents:
                self.fail(where, f"{member} carries VLANs: bridge the VLAN links instead, "
                          "or list their ids under the bridge's vlans")
            elif link.mtu and bridge.mtu and link.mtu != bridge.mtu:
                self.fail(where, f"{member} has MTU {link.mtu} and the bridge {bridge.mtu}: "
                          "a bridge's ports take its MTU; remove the port's own")

    def bridge_vlans(self, bridge, path):
        if len(bridge.vlans) > model.BRIDGE_VLANS_MAX:
            self.fail(f"{path}.vlans", f"{len(bridge.vlans)} VLANs; at most "
                      f"{model.BRIDGE_VLANS_MAX} on one bridge")
        for index, vid in enumerate(bridge.vlans):
            if not VLAN_ID_MIN <= vid <= VLAN_ID_MAX:
                self.fail(f"{path}.vlans[{index}]", f"{vid} is outside {VLAN_ID_MIN}.."
                          f"{VLAN_ID_MAX}")
            elif vid in bridge.vlans[:index]:
                self.fail(f"{path}.vlans[{index}]", f"VLAN {vid} is listed twice")

    # -- addresses across interfaces ---------------------------------------------------------

    def subnets(self):
        seen = []   # (path, link name, ip_interface)
        for key in ("interfaces", "bonds", "vlans"):
            for index, link in enumerate(getattr(self.config, key)):
                for number, address in enumerate(link.addresses):
                    if checks.address_problem(address):
                        continue
                    iface = ipaddress.ip_interface(address)
                    if iface.version == 6 and iface.ip.is_link_local:
                        continue   # fe80::/64 is on every IPv6 link by design
                    path = f"{key}[{index}].addresses[{number}]"
                    for other_path, other_link, other in seen:
                        if other_link == link.name or other.version != iface.version:
                            continue
                        if iface.network.overlaps(other.network):
                            self.fail(path, f"{iface} overlaps {other} of {other_link} "
                                      f"({other_path}): a subnet belongs to one interface")
                            break
                        if iface.ip == other.ip:
                            self.fail(path, f"{iface.ip} is also {other_link}'s address "
                                      f"({other_path})")
                            break
                    seen.append((path, link.name, iface))

    def routed(self):
        """{routed traffic link: its valid static addresses (ip_interface)}."""
        return {name: [ipaddress.ip_interface(a) for a in self.config.link(name).addresses
                       if not checks.address_problem(a)]
                for name in self.config.traffic_links}

    # -- routes ---------------------------------------------------------------------------

    def route(self, route, path):  # noqa: C901 - one check per field, each naming it
        reason = checks.destination_problem(route.destination)
        if reason:
            self.fail(f"{path}.destination", reason)
        if route.metric < 0 or route.metric > model.METRIC_MAX:
            self.fail(f"{path}.metric", f"{route.metric} is outside 0..{model.METRIC_MAX}")
        link = None
        if route.interface:
            link = self.config.link(route.interface)
            if link is None:
                self.fail(f"{path}.interface", f"{route.interface!r} is not a configured "
                          "interface")
                return
            if link.role == UNUSED or route.interface in self.config.bond_of or \
                    link.kind == "bridge" or route.interface in self.config.bridge_of:
                what = ("unused" if link.role == UNUSED else "a bond member"
                        if route.interface in self.config.bond_of else "a transparent "
                        "bridge" if link.kind == "bridge" else "a bridge port")
                self.fail(f"{path}.interface", f"{route.interface} carries no addresses "
                          f"({what})")
                return
        if not route.gateway:
            if not route.interface:
                self.fail(f"{path}.gateway", "give a gateway, or an interface for a network "
                          "that is directly on that interface's link")
            return
        reason = checks.ip_problem(route.gateway, "an IP address")
        if reason:
            self.fail(f"{path}.gateway", reason)
            return
        gateway = ipaddress.ip_address(route.gateway)
        if route.destination != model.DEFAULT_ROUTE and not reason and \
                checks.destination_problem(route.destination) is None and \
                ipaddress.ip_network(route.destination).version != gateway.version:
            self.fail(f"{path}.gateway", f"{route.gateway} is IPv{gateway.version} but the "
                      f"destination {route.destination} is "
                      f"IPv{ipaddress.ip_network(route.destination).version}")
            return
        if gateway.version == 6 and gateway.is_link_local:
            if not route.interface:
                self.fail(f"{path}.interface", f"the gateway {route.gateway} is link-local: "
                          "name the interface it is reached on")
            return
        candidates = [link] if link else [lnk for lnk in self.config.links
                                          if lnk.role != UNUSED]
        for candidate in candidates:
            if candidate.dhcp and gateway.version == 4 or candidate.autoconf and \
                    gateway.version == 6:
                if link:   # a subnet DHCP or router advertisements give: known only live
                    return
            for address in candidate.addresses:
                if checks.address_problem(address):
                    continue
                iface = ipaddress.ip_interface(address)
                if iface.version == gateway.version and gateway in iface.network:
                    net = iface.network
                    if gateway == iface.ip:
                        self.fail(f"{path}.gateway", f"{route.gateway} is {candidate.name}'s "
                                  "own address")
                    elif net.prefixlen < (31 if net.version == 4 else 127) and (
                            gateway == net.network_address or
                            net.version == 4 and gateway == net.broadcast_address):
                        kind = "network" if gateway == net.network_address else "broadcast"
                        self.fail(f"{path}.gateway", f"{route.gateway} is the {kind} address "
                                  f"of {net}")
                    return
        where = f"none of {route.interface}'s subnets" if link else "no configured subnet"
        self.fail(f"{path}.gateway", f"{route.gateway} is not reachable: it is in {where} "
                  "(a gateway must be on a directly connected network)")

    def duplicate_routes(self):
        seen = {}
        for index, route in enumerate(self.config.routes):
            if checks.destination_problem(route.destination) or \
                    (route.gateway and checks.ip_problem(route.gateway)):
                continue
            key = (route.network, route.metric)
            if key in seen:
                self.fail(f"routes[{index}].destination", f"{route.network} with metric "
                          f"{route.metric} is already routes[{seen[key]}]: give one of them "
                          "another metric")
            seen.setdefault(key, index)

    # -- where the network meets the policy ---------------------------------------------------

    def zone_interfaces(self):
        allowed = set(self.config.zone_links)
        for zone, names in sorted(self.zones.items()):
            for name in names:
                if name in allowed:
                    continue
                link = self.config.link(name)
                if link is None:
                    self.fail("", f"the policy's zone {zone} uses the interface {name}, "
                              "which this configuration does not have; change the zone "
                              "first (Policy), then remove or rename the interface",
                              Code.POLICY)
                    continue
                key = KIND_KEY[link.kind]
                index = getattr(self.config, key).index(link)
                what = ("is a bond member" if name in self.config.bond_of
                        else "is a bridge (a zone names its ports)" if link.kind == "bridge"
                        else f"has the role {link.role}")
                self.fail(f"{key}[{index}].role" if link.kind == "port" else f"{key}[{index}]",
                          f"the policy's zone {zone} uses {name}, which {what}: a zone's "
                          "interfaces carry traffic; change the zone first", Code.POLICY)
            mixed = _mixed_zone(self.config, names)
            if mixed:
                self.fail("", f"the policy's zone {zone}: {mixed}; change the zone first "
                          "(Policy)", Code.POLICY)


def _mixed_zone(config, names):
    """Why a zone's interfaces cannot be one zone - bridge ports with routed links, or
    the ports of two bridges - or None. A bridge's traffic never meets a routed link's
    (the bridge has no address), so such a zone's classes could never match as meant."""
    bridge_of = config.bridge_of
    bridges = sorted({bridge_of[n] for n in names if n in bridge_of})
    routed = [n for n in names if n not in bridge_of and n in set(config.traffic_links)]
    if len(bridges) > 1:
        return (f"it has ports of the bridges {' and '.join(bridges)}; a zone is on one "
                "bridge (frames never cross from one bridge to another)")
    if bridges and routed:
        return (f"it has ports of the bridge {bridges[0]} and the routed "
                f"{'link' if len(routed) == 1 else 'links'} {', '.join(routed)}; bridged "
                "traffic never reaches a routed link: make a zone of each")
    return None


def _limits(facts):
    if not facts:
        return None, None
    low = getattr(facts, "min_mtu", None) if not isinstance(facts, dict) \
        else facts.get("min_mtu")
    high = getattr(facts, "max_mtu", None) if not isinstance(facts, dict) \
        else facts.get("max_mtu")
    if not low or not high:
        return None, None
    return low, high


def validate(config, present=None, zones=None):
    """Every problem of config (Problem); empty when it is good."""
    return Checker(config, present, zones).run()


def zone_problems(config, zones, bridged=frozenset()):
    """Where the policy meets the network, from the policy's side (zone_interfaces is the
    network's): every interface a policy's zone names must be a traffic link of config -
    a traffic port outside a bond, a bond or a VLAN - or a port of a transparent bridge,
    and a zone is routed or on one bridge, not both: bridged (a zone in the set bridged,
    the policy's bridged: true) exactly when its interfaces are bridge ports. zones:
    [(zone name, [interface names])] in the policy's order. Returns [(path, message)]
    with the policy's paths (zones[1].interfaces[0]); the policy's side turns them into
    its own errors.

    Errors, not warnings, for the management port and an unused port or bond member too:
    a zone on the management port forwards networks onto the port the dashboard answers
    on (why VLANs are refused there), an unused port's link is down and a member's
    traffic is its bond's; and the network's own check refuses every save of a
    configuration whose such link a zone uses - a warning here would leave the Network
    pages unable to save anything. The policy names interfaces exactly (an nft set of
    type ifname: no wildcards), so each name is looked up as it is."""
    traffic = set(config.zone_links)
    known = ", ".join(sorted(traffic)) or "none"
    problems = []
    for zone_index, (zone, names) in enumerate(zones):
        for index, name in enumerate(names):
            if name in traffic:
                continue
            link = config.link(name)
            if link is None:
                reason = (f"{name}: the network configuration has no such interface (its "
                          f"traffic interfaces: {known}); add it on Network → Interfaces "
                          "(or VLANs, Bonds, Bridges) first, or name one of those")
            elif name in config.bond_of:
                bond = config.bond_of[name]
                reason = (f"{name} is a member of the bond {bond}, which carries its traffic: "
                          f"name {bond} instead (Network → Bonds)")
            elif link.kind == "bridge":
                reason = (f"{name} is a transparent bridge: a bridged zone names the "
                          f"bridge's ports ({', '.join(link.members) or 'none yet'}), the "
                          "sides it filters between")
            elif link.role == MANAGEMENT:
                reason = (f"{name} is the management port: a zone's interfaces carry "
                          "forwarded traffic, which must stay off the port the dashboard "
                          "answers on; name a traffic interface, or give the port another "
                          "role on Network → Interfaces")
            else:
                reason = (f"{name} has the role {link.role} (its link stays down): give it "
                          "the role traffic on Network → Interfaces, or name another")
            problems.append((f"zones[{zone_index}].interfaces[{index}]",
                             f"zone {zone}: {reason}"))
        mixed = _mixed_zone(config, names)
        if mixed:
            problems.append((f"zones[{zone_index}].interfaces", f"zone {zone}: {mixed}"))
            continue
        ports = [n for n in names if n in config.bridge_of]
        routed = [n for n in names if n in traffic and n not in config.bridge_of]
        if zone in bridged and routed:
            what = "is a routed link" if len(routed) == 1 else "are routed links"
            problems.append((f"zones[{zone_index}].bridged", f"zone {zone} is bridged, and "
                             f"{', '.join(routed)} {what}: a bridged zone names "
                             "a bridge's ports (Network → Bridges); turn bridged off for a "
                             "routed zone"))
        elif zone not in bridged and ports:
            bridge = config.bridge_of[ports[0]]
            problems.append((f"zones[{zone_index}].bridged", f"zone {zone} names "
                             f"{', '.join(ports)}, {'a port' if len(ports) == 1 else 'ports'} "
                             f"of the bridge {bridge}: set bridged: true, so that its "
                             "classes filter the bridge's frames (a routed zone's never "
                             "see them)"))
    return problems


def nat_problems(config, zones, forwards, masquerades, taken_first=None):  # noqa: C901 - one rule per NAT case
    """Where the policy's NAT meets the network, from the policy's side (zone_problems'
    neighbour; the policy's own paths). zones: [(zone, [interface names])];
    forwards: [(to_address, class name, the class's to zone or None)] in the order of
    nat.forwards; masquerades: [(egress zone, {4, 6} the rule needs - empty: any family)
    or None (a rule that is not masquerade)] in the order of nat.source;
    taken_first(forward index, the server's zone - "" for a link in no zone): why another
    class takes the forward's traffic before its own does with the server there, or None
    (the policy's first-match rule: policy.core.nat.first_class_taking).

    A forward's server must be on a traffic network of the box - a prefix of a traffic
    link's address, or behind a static route other than the default one (with it every
    address would be "routed") - and not the box itself; where a class names the zone it
    sends to, the link the server is reached by must be in that zone, or the class never
    sees the forward; and with the server in that link's zone, no earlier class may take
    the forward's traffic first (a catch-all such as "inside to outside: reject" before a
    forward's class to any zone closes the forward to a server in zone outside only). A
    masquerade needs an address of each family it translates on the zone's links.
    Returns [(path, message)]."""
    zone_of = {name: zone for zone, names in zones for name in names}
    interfaces = dict(zones)
    traffic = set(config.traffic_links)
    networks, own = [], {}
    for link in config.links:
        for address in link.addresses:
            if checks.address_problem(address):
                continue
            iface = ipaddress.ip_interface(address)
            own[iface.ip] = link.name
            if link.name in traffic and not (iface.version == 6 and iface.ip.is_link_local):
                networks.append((iface.network, link.name))
    for route in config.routes:
        if route.destination == model.DEFAULT_ROUTE or \
                checks.destination_problem(route.destination):
            continue
        name = route.interface or next((link for net, link in networks if route.gateway and
                                        not checks.ip_problem(route.gateway) and
                                        ipaddress.ip_address(route.gateway) in net), None)
        if name in traffic:
            networks.append((route.network, name))
    problems = []
    for index, (to_address, class_name, class_zone) in enumerate(forwards):
        address = ipaddress.ip_address(to_address)
        if address in own:
            problems.append((f"nat.forwards[{index}].to_address", f"{address} is the box's "
                             f"own address (on {own[address]}): a forward passes traffic on "
                             "to a server behind the firewall"))
            continue
        found = [(net.prefixlen, link) for net, link in networks
                 if net.version == address.version and address in net]
        if not found:
            known = ", ".join(sorted({str(net) for net, _ in networks
                                      if net.version == address.version})) or "none"
            problems.append((f"nat.forwards[{index}].to_address", f"{address} is in none of "
                             f"the box's traffic networks and behind no static route (the "
                             f"networks: {known}); add its network or a route on Network, "
                             "or correct the address"))
            continue
        link = max(found)[1]
        where = f"zone {zone_of[link]}" if link in zone_of else "no zone"
        if class_zone is not None and link not in interfaces.get(class_zone, ()):
            problems.append((f"nat.forwards[{index}].class", f"class {class_name!r} admits "
                             f"traffic to zone {class_zone} only, and {address} is reached "
                             f"through {link}, which is in {where}: the class never sees "
                             "this forward"))
            continue
        reason = taken_first(index, zone_of.get(link, "")) if taken_first else None
        if reason:
            problems.append((f"nat.forwards[{index}].class", f"{address} is reached through "
                             f"{link}, which is in {where}: {reason}"))
    for index, rule in enumerate(masquerades):
        if rule is None:
            continue
        zone, families = rule
        have = {iface.version for name in interfaces.get(zone, ())
                for iface in _addresses(config.link(name))
                if not (iface.version == 6 and iface.ip.is_link_local)}
        missing = sorted(set(families) - have) if families else ([] if have else [4, 6])
        if missing:
            what = " or ".join(f"IPv{v}" for v in missing)
            problems.append((f"nat.source[{index}].to", f"SNAT on a zone without addresses: "
                             f"zone {zone}'s links ({', '.join(interfaces.get(zone, ()))}) "
                             f"have no {what} address to masquerade with; give them one on "
                             "Network, or translate to an address"))
    return problems


def _addresses(link):
    if link is None:
        return []
    return [ipaddress.ip_interface(a) for a in link.addresses if not checks.address_problem(a)]


def mtu_warnings(config, paths):
    """Where the network meets the policy's paths: a class between two interfaces of
    different MTU - VLANs and bonds included, each with the MTU it will have - whose MSS
    is not clamped relies on path MTU discovery. paths: box.paths.policy_paths'
    [(class, from interfaces, to interfaces, clamped)]. Warnings, not problems: PMTUD
    may work; the operator decides."""
    names = {link.name for link in config.links}
    return path_mtu_warnings(paths, lambda name: config.effective_mtu(name)
                             if name in names else None)


