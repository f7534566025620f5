"""The network model: what the operator configures, immutable, already validated.

    NetworkConfig
      system      host name, DNS resolvers, NTP servers, time zone
      interfaces  the Ethernet ports: role (management, traffic, unused), addresses, MTU
      bonds       802.3ad (LACP) or active-backup bonds of traffic ports
      vlans       802.1Q sub-interfaces of a traffic port or a bond
      bridges     transparent bridges: traffic links that forward at layer 2 through the
                  policy, with no address of their own (docs/NETWORK.md, bridge mode)
      routes      static IPv4/IPv6 routes (destination, gateway, metric, interface)
      routing     dynamic routing with FRR: BGP neighbours, OSPFv2/v3 on chosen links,
                  BFD for both (docs/NETWORK.md, routing)

The same structure is the file (/etc/tusk/network.toml: [system], [[interfaces]],
[[bonds]], [[vlans]], [[bridges]], [[routes]], [routing]), the web UI's draft (a JSON
document) and what a backup carries; normalise.py turns any of them into this model, or
reports every problem.
"""
import ipaddress
from dataclasses import dataclass, field

VERSION = 2

MANAGEMENT, TRAFFIC, UNUSED = "management", "traffic", "unused"
ROLES = (MANAGEMENT, TRAFFIC, UNUSED)
LACP, ACTIVE_BACKUP = "802.3ad", "active-backup"
BOND_MODES = (LACP, ACTIVE_BACKUP)
HASH_POLICIES = ("layer2", "layer2+3", "layer3+4")
DEFAULT_HASH_POLICY = "layer3+4"
DEFAULT_ROUTE = "default"
DEFAULT_MTU = 1500       # what a link has when the configuration leaves its MTU alone
MTU_MIN, MTU_MAX = 68, 65535
IPV6_MTU_MIN = 1280
BPDU_FORWARD, BPDU_DROP = "forward", "drop"
BPDU_CHOICES = (BPDU_FORWARD, BPDU_DROP)
BRIDGE_MEMBERS_MIN = 2
BRIDGE_VLANS_MAX = 256   # VLAN ids one bridge carries (each is a kernel VLAN entry per port)
METRIC_MAX = 2**32 - 1
HOSTNAME_DEFAULT = "tusk"
TIMEZONE_DEFAULT = "UTC"
SERVERS_MAX = 8          # DNS and NTP servers each
ADDRESSES_MAX = 64       # addresses on one interface
DESCRIPTION_MAX = 200
ASN_MIN, ASN_MAX = 1, 2**32 - 1
BFD_INTERVAL_DEFAULT, BFD_MULTIPLIER_DEFAULT = 300, 3   # ms; down after 3 missed: 900 ms
BFD_INTERVAL_MIN, BFD_INTERVAL_MAX = 10, 60000          # FRR's bounds
BFD_MULTIPLIER_MIN, BFD_MULTIPLIER_MAX = 2, 255
OSPF_COST_MAX = 65535
OSPF_AREA_DEFAULT = "0.0.0.0"
STANDBY_PREPEND = 3                  # the standby's AS path: its AS this many times more
STANDBY_COST = 65535                 # the standby's OSPF cost on every link
NEIGHBOURS_MAX = 64
ANNOUNCED_MAX = 256      # prefixes announced, and prefixes accepted from one neighbour
COMMUNITIES_MAX = 16
MD5_KEY_MAX = 80         # TCP_MD5SIG_MAXKEYLEN


@dataclass(frozen=True)
class System:
    hostname: str = HOSTNAME_DEFAULT
    dns: tuple = ()          # IP addresses
    ntp: tuple = ()          # host names or IP addresses
    timezone: str = TIMEZONE_DEFAULT


@dataclass(frozen=True)
class Port:
    """A physical Ethernet interface."""
    name: str
    role: str = TRAFFIC
    description: str = ""
    addresses: tuple = ()    # "192.0.2.1/24", "2001:db8::1/64"
    dhcp: bool = False       # DHCPv4 (the management port only)
    autoconf: bool = False   # IPv6 router advertisements / SLAAC (the management port only)
    mtu: int = 0             # 0: left as the driver sets it

    kind = "port"


@dataclass(frozen=True)
class Bond:
    name: str
    mode: str = LACP
    hash_policy: str = DEFAULT_HASH_POLICY    # how 802.3ad spreads flows over the members
    members: tuple = ()
    description: str = ""
    addresses: tuple = ()
    mtu: int = 0

    kind = "bond"
    role = TRAFFIC
    dhcp = autoconf = False


@dataclass(frozen=True)
class Vlan:
    name: str
    parent: str
    id: int
    description: str = ""
    addresses: tuple = ()
    mtu: int = 0

    kind = "vlan"
    role = TRAFFIC
    dhcp = autoconf = False


@dataclass(frozen=True)
class Bridge:
    """A transparent bridge: its members (traffic ports, bonds or VLANs) forward frames
    to each other at layer 2, filtered by the policy between them; neither the bridge nor
    its members has an address (the box is managed on its management port).

    stp: the bridge takes part in spanning tree (802.1D) - it then holds a new port
    blocked while it listens and learns (twice the forward delay, 30 s), and consumes
    the switches' BPDUs. Without it (the default) the bridge is a wire to spanning tree:
    bpdu "forward" passes the switches' BPDUs through, so they see a loop made through
    the box and block it themselves; "drop" keeps each side's spanning tree to itself.
    vlans: with ids, the bridge is VLAN-aware and carries exactly those VLANs tagged on
    every member (and untagged frames); without, it forwards every frame as it comes,
    tags and all."""
    name: str
    members: tuple = ()
    stp: bool = False
    bpdu: str = BPDU_FORWARD
    vlans: tuple = ()
    description: str = ""
    mtu: int = 0

    kind = "bridge"
    role = TRAFFIC
    dhcp = autoconf = False
    addresses = ()


@dataclass(frozen=True)
class Route:
    destination: str                 # "default" or a prefix: "10.20.0.0/16"
    gateway: str = ""                # "" only with an interface (a directly connected route)
    metric: int = 0
    interface: str = ""              # "" = the interface whose subnet holds the gateway

    @property
    def network(self):
        """The destination as an ip_network; "default" is 0.0.0.0/0 or ::/0 by the
        gateway's family."""
        if self.destination == DEFAULT_ROUTE:
            six = ":" in self.gateway
            return ipaddress.ip_network("::/0" if six else "0.0.0.0/0")
        return ipaddress.ip_network(self.destination)


@dataclass(frozen=True)
class Neighbour:
    """A BGP neighbour on a subnet of one of the box's routed links (single hop).

    accept: the prefixes taken from it, each with every more specific one (none: nothing
    is taken - a session that only hears the box's announcements); what the box
    announces to it is routing.bgp.prefixes, with routing.bgp.communities set, and with
    blackhole the hosts the box blocks and announces (BLACKHOLE, RFC 7999, and
    NO_EXPORT): an upstream that drops their traffic before it reaches the box."""
    address: str
    remote_as: int
    description: str = ""    # Tusk's own note: never written into FRR's file
    password: str = field(default="", repr=False)   # TCP MD5 (RFC 2385); "" none
    bfd: bool = True
    accept: tuple = ()
    blackhole: bool = False  # is sent the box's RFC 7999 black-hole routes (its blocks)


@dataclass(frozen=True)
class Bgp:
    asn: int = 0             # the box's AS; 0: no BGP
    prefixes: tuple = ()     # announced to every neighbour of their family
    communities: tuple = ()  # set on every announcement
    neighbours: tuple = ()
    blackholes: tuple = ()   # hosts (/32, /128) always announced as black-holes (RFC 7999)


@dataclass(frozen=True)
class OspfLink:
    """OSPF on one routed link: v2 over its IPv4 addresses, v3 over IPv6 (where it has
    addresses of that family). passive: its subnets are announced, no adjacency formed.
    point_to_point: the link joins two routers only (no designated router: adjacent as
    soon as both hear each other, instead of after a wait of the dead interval, 40 s)."""
    interface: str
    area: str = OSPF_AREA_DEFAULT     # dotted, as FRR prints it
    cost: int = 0                     # 0: FRR's, from the link's speed
    passive: bool = False
    point_to_point: bool = False
    bfd: bool = True


@dataclass(frozen=True)
class Routing:
    router_id: str = ""      # IPv4 dotted; "": FRR takes the highest IPv4 address
    bfd_interval: int = BFD_INTERVAL_DEFAULT      # ms, sent and expected
    bfd_multiplier: int = BFD_MULTIPLIER_DEFAULT  # missed packets before a session is down
    bgp: Bgp = field(default_factory=Bgp)
    ospf: tuple = ()         # OspfLink
    # this box is the HA pair's secondary: it announces with a longer AS path
    # (STANDBY_PREPEND times its AS) and OSPF cost STANDBY_COST, so that its neighbours
    # send traffic to the primary while both run (box/verify.py holds it to the role)
    standby: bool = False

    @property
    def enabled(self):
        """Whether FRR runs at all."""
        return bool(self.bgp.asn or self.ospf)


@dataclass(frozen=True)
class NetworkConfig:
    system: System = field(default_factory=System)
    interfaces: tuple = ()
    bonds: tuple = ()
    vlans: tuple = ()
    bridges: tuple = ()
    routes: tuple = ()
    routing: Routing = field(default_factory=Routing)

    @property
    def management(self):
        """The management port, or None."""
        return next((p for p in self.interfaces if p.role == MANAGEMENT), None)

    @property
    def links(self):
        """Every configured link: ports, then bonds, then VLANs, then bridges."""
        return self.interfaces + self.bonds + self.vlans + self.bridges

    def link(self, name):
        return next((link for link in self.links if link.name == name), None)

    @property
    def bond_of(self):
        """{member port: its bond}."""
        return {member: bond.name for bond in self.bonds for member in bond.members}

    @property
    def bridge_of(self):
        """{bridge member: its bridge}."""
        return {member: bridge.name for bridge in self.bridges for member in bridge.members}

    @property
    def traffic_links(self):
        """The names of the links that carry routed traffic: traffic ports, bonds and
        VLANs, outside bonds and bridges (the links addresses, routes, NAT and the HA
        pair may use)."""
        held = {**self.bond_of, **self.bridge_of}
        return [link.name for link in self.links
                if link.role == TRAFFIC and link.kind != "bridge" and link.name not in held]

    @property
    def bridge_ports(self):
        """The names of the bridges' members, in order: the ports of bridged zones."""
        return [member for bridge in self.bridges for member in bridge.members]

    @property
    def zone_links(self):
        """The links a policy zone may name: the routed traffic links and the bridge
        ports (a zone is one or the other: network.core.validate.zone_problems)."""
        return self.traffic_links + [p for p in self.bridge_ports
                                     if p not in self.traffic_links]

    def effective_mtu(self, name):
        """The MTU a link will have: its own, else its bond's or bridge's for a member,
        else its parent's for a VLAN (the kernel's default for a new VLAN), else
        DEFAULT_MTU (a bridge without one: its first member's, as the kernel takes it)."""
        link = self.link(name)
        if link is None:
            return DEFAULT_MTU
        if link.mtu:
            return link.mtu
        bond = self.bond_of.get(name)
        if bond:
            return self.effective_mtu(bond)
        bridge = self.bridge_of.get(name)
        if bridge and self.link(bridge).mtu:
            return self.link(bridge).mtu
        if link.kind == "bridge":
            mtus = [self.effective_mtu(m) for m in link.members if self.link(m)]
            return min(mtus) if mtus else DEFAULT_MTU
        if link.kind == "vlan":
            return self.effective_mtu(link.parent)
        return DEFAULT_MTU

    def addresses_of(self, role):
        """The static addresses (ip_interface) of the links with that role."""
        return [ipaddress.ip_interface(a) for link in self.links if link.role == role
                for a in link.addresses]
