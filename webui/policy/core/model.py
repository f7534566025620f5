"""The normalised policy: immutable values produced by normalise.load_policy().

Nothing here validates; normalise.py is the only place that decides what is
allowed. Render and apply take these objects as given.
"""
from dataclasses import dataclass, field
from functools import cached_property

from . import choices
from .constants import (
    CONFIRM_TIMEOUT_DEFAULT,
    FASTPATH_AFTER_DEFAULT,
    LOG_DEFAULT_DENY_DEFAULT,
    LOG_RATE_DEFAULT,
)


@dataclass(frozen=True)
class Interval:
    """A closed range of integers: an address range of one family, or a port range."""

    low: int
    high: int


@dataclass(frozen=True)
class Zone:
    """A named group of interfaces, such as inside, outside or dmz. bridged: the
    interfaces are ports of a transparent bridge, whose frames the policy filters in
    table bridge tusk_bridge (classes between bridged zones) rather than in table inet
    tusk (the routed ones). vlans: a bridged zone's VLAN ids - then the zone is those
    VLANs' frames on its ports (on a VLAN-aware bridge), not every frame of them."""

    name: str
    interfaces: tuple
    comment: str = ""
    bridged: bool = False
    vlans: tuple = ()


@dataclass(frozen=True)
class AddressSet:
    """Hosts, prefixes and ranges, as the operator wrote them (canonical text)
    plus their merged intervals per family."""

    name: str
    entries: tuple
    ipv4: tuple = ()
    ipv6: tuple = ()
    comment: str = ""

    @property
    def families(self):
        return frozenset(f for f, iv in (("ipv4", self.ipv4), ("ipv6", self.ipv6)) if iv)


@dataclass(frozen=True)
class Service:
    """A protocol and, for port protocols, destination ports (empty: every port)."""

    name: str
    protocol: str
    ports: tuple = ()
    comment: str = ""


@dataclass(frozen=True)
class Mss:
    mode: str = choices.MSS_NONE
    value: int | None = None


@dataclass(frozen=True)
class TcpOptions:
    window_scale: str = choices.OPTION_KEEP
    sack_permitted: str = choices.OPTION_KEEP
    timestamps: str = choices.OPTION_KEEP

    def stripped(self):
        """nft names of the options to strip, in a fixed order."""
        return tuple(nft for key, nft in choices.TCP_OPTIONS.items()
                     if getattr(self, key) == choices.OPTION_STRIP)


@dataclass(frozen=True)
class TrafficClass:
    """An ordered match (zones, address sets, services) with a verdict and TCP actions.
    None for from_zone/to_zone and empty tuples for the lists mean 'any'."""

    name: str
    action: str
    from_zone: str | None = None
    to_zone: str | None = None
    source: tuple = ()
    destination: tuple = ()
    services: tuple = ()
    mss: Mss = field(default_factory=Mss)
    tcp_options: TcpOptions = field(default_factory=TcpOptions)
    seqrand: str = choices.SEQRAND_NONE
    fastpath: str = choices.FASTPATH_NEVER     # the mode in effect (normalise.py)
    fastpath_after: int = FASTPATH_AFTER_DEFAULT
    hardware: bool = False                     # the NIC may carry its fast-path flows
    notrack: bool = False
    log: bool = False
    comment: str = ""

    @property
    def always_fast(self):
        return self.fastpath == choices.FASTPATH_ALWAYS

    @property
    def auto_fast(self):
        return self.fastpath == choices.FASTPATH_AUTO

    @property
    def in_hardware(self):
        """Whether its fast-path connections go to the hardware flowtable."""
        return self.hardware and self.fastpath != choices.FASTPATH_NEVER

    def tcp_profile(self):
        """What this class does to SYN and SYN/ACK segments, or None if nothing."""
        if self.mss.mode == choices.MSS_NONE and not self.tcp_options.stripped():
            return None
        return (self.mss, self.tcp_options.stripped())

    def match_key(self):
        """Everything the class matches on; two classes with the same key overlap fully."""
        return (self.from_zone, self.to_zone, frozenset(self.source),
                frozenset(self.destination), frozenset(self.services))


@dataclass(frozen=True)
class SourceNat:
    """Source NAT of traffic leaving through a zone (nat.source[i]): the egress
    interface's own address (masquerade) or an address or range of one family, and
    optionally a source port range for TCP and UDP. source empty: any address."""

    name: str
    to_zone: str
    translate: str = choices.TRANSLATE_MASQUERADE
    source: tuple = ()
    address: str = ""            # canonical text: an address or a range a-b
    address_family: str | None = None
    ports: Interval | None = None
    comment: str = ""


@dataclass(frozen=True)
class PortForward:
    """Destination NAT of traffic arriving through a zone (nat.forwards[i]). address ""
    means any address of the box's own; to_ports None keeps the ports, one port sends
    every external port to it, a range of the same length as the (single) external
    range maps port by port. class_name names the traffic class that admits the
    translated traffic."""

    name: str
    from_zone: str
    protocol: str
    ports: tuple                 # merged Intervals
    to_address: str
    family: str                  # of to_address (and address)
    class_name: str
    address: str = ""
    to_ports: Interval | None = None
    hairpin: bool = False
    comment: str = ""

    def translated_ports(self):
        """The destination ports the translated traffic has (what its class must admit)."""
        return self.ports if self.to_ports is None else (self.to_ports,)


@dataclass(frozen=True)
class Nat:
    source: tuple = ()
    forwards: tuple = ()


@dataclass(frozen=True)
class Settings:
    confirm_timeout: int = CONFIRM_TIMEOUT_DEFAULT
    log_default_deny: bool = LOG_DEFAULT_DENY_DEFAULT
    log_rate: int = LOG_RATE_DEFAULT


@dataclass(frozen=True)
class Policy:
    """The whole policy; zone, address_set and service map names to objects."""

    settings: Settings = field(default_factory=Settings)
    zones: tuple = ()
    address_sets: tuple = ()
    services: tuple = ()
    classes: tuple = ()
    nat: Nat = field(default_factory=Nat)

    @cached_property
    def zone(self):
        return {z.name: z for z in self.zones}

    @cached_property
    def address_set(self):
        return {a.name: a for a in self.address_sets}

    @cached_property
    def service(self):
        return {s.name: s for s in self.services}

    @cached_property
    def traffic_class(self):
        return {c.name: c for c in self.classes}

    @cached_property
    def bridged_zones(self):
        return frozenset(z.name for z in self.zones if z.bridged)

    def is_bridged(self, cls):
        """Whether a class filters bridged traffic: it names a bridged zone (normalise.py
        refuses a class between a bridged and a routed zone). A class of no zone is a
        routed one."""
        return bool({cls.from_zone, cls.to_zone} & self.bridged_zones)

    def logs(self):
        """Whether any rule logs (then the ruleset has the shared limit object)."""
        return self.settings.log_default_deny or any(c.log for c in self.classes)
