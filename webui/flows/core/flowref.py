"""A connection as the Flows page's actions name it, and the arguments of the flows jobs:
one check, which the web form and the agent both run (the agent on every job row, which
it treats as an attacker's). Every problem names its field.

A flow is named by what the kernel finds it by - its original tuple and zone - and its
conntrack id, which the agent compares with the entry it finds: a connection that ended
and whose tuple was taken by a new one is not acted on.
"""
import ipaddress
from dataclasses import dataclass
from enum import IntEnum

from tusklib.names import CT_MARK_CLASS_MASK, CT_MARK_CLASS_SHIFT
from tusklib.problems import Problem, Problems
from tusklib.values import InterfaceName, Refused

from . import ctnetlink as nl

FIELDS = ("id", "family", "proto", "src", "dst", "sport", "dport", "zone")
# the actions' protocols: those with ports that a capture filter (libpcap) can name
PROTOCOLS = {6: "tcp", 17: "udp", 132: "sctp"}
CAPTURE_SECONDS = (1, 600, 10)       # lowest, highest, default


class Code(IntEnum):
    """What is wrong with a flow or a flows job. No CLI takes them: the numbers only
    keep these codes apart from the other domains' (tusklib.problems)."""

    ARGUMENTS = 70    # not a table, an argument missing or unknown
    FLOW = 71         # a field of the flow missing, of the wrong type or out of range
    RANGE = 72        # the capture's length


class FlowError(Problems):
    codes = Code


@dataclass(frozen=True)
class FlowRef:
    id: int
    family: int
    proto: int
    src: str
    dst: str
    sport: int
    dport: int
    zone: int = 0

    @property
    def orig(self):
        return nl.Tuple(self.src, self.dst, self.proto, self.sport, self.dport)

    def as_dict(self):
        return {name: getattr(self, name) for name in FIELDS}

    def __str__(self):
        protocol = PROTOCOLS.get(self.proto, str(self.proto))
        src, dst = (f"[{a}]" if self.family == 6 else a for a in (self.src, self.dst))
        return f"{protocol} {src}:{self.sport} -> {dst}:{self.dport} (id {self.id})"


def _whole(value, low, high):
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high


def flow_ref(data, path="flow"):  # noqa: C901 - one check per field, each naming it
    """FlowRef from plain data ({field: value}, values of their own types: integers as
    int, addresses as text), or FlowError naming every bad field (path.field)."""
    problems = []

    def fail(name, message):
        problems.append(Problem(Code.FLOW, f"{path}.{name}" if name else path, message))

    if not isinstance(data, dict):
        raise FlowError(Code.ARGUMENTS, path, "must be a table of " + ", ".join(FIELDS))
    for name in data:
        if name not in FIELDS:
            fail(str(name)[:40], "unknown field (known: " + ", ".join(FIELDS) + ")")
    for name in ("id", "family", "proto", "src", "dst", "sport", "dport"):
        if name not in data:
            fail(name, "missing")
    if problems:
        raise FlowError(problems)
    ident, family, proto = data["id"], data["family"], data["proto"]
    if not _whole(ident, 0, 0xFFFFFFFF):
        fail("id", "must be a conntrack id, a whole number from 0 to 4294967295")
    if family not in (4, 6) or isinstance(family, bool):
        fail("family", "must be 4 or 6")
    if not _whole(proto, 0, 255) or proto not in PROTOCOLS:
        fail("proto", "must be the number of a protocol with ports: " + ", ".join(
            f"{number} ({name})" for number, name in sorted(PROTOCOLS.items())))
    addresses = {}
    for name in ("src", "dst"):
        value = data[name]
        try:
            if not isinstance(value, str) or len(value) > 45:
                raise ValueError
            address = ipaddress.ip_address(value)
        except ValueError:
            fail(name, "must be an IPv4 or IPv6 address")
            continue
        if family in (4, 6) and address.version != family:
            fail(name, f"{address} is not an IPv{family} address")
        addresses[name] = str(address)
    for name in ("sport", "dport"):
        if not _whole(data[name], 0, 65535):
            fail(name, "must be a port, a whole number from 0 to 65535")
    zone = data.get("zone", 0)
    if not _whole(zone, 0, 65535):
        fail("zone", "must be a conntrack zone, a whole number from 0 to 65535")
    if problems:
        raise FlowError(problems)
    return FlowRef(ident, family, proto, addresses["src"], addresses["dst"], data["sport"],
                   data["dport"], zone)


def _arguments(args, allowed):
    if not isinstance(args, dict):
        raise FlowError(Code.ARGUMENTS, "", "the job's arguments must be a table")
    unknown = [str(name)[:40] for name in args if name not in allowed]
    if unknown:
        raise FlowError([Problem(Code.ARGUMENTS, name, "unknown argument (known: "
                                 + ", ".join(allowed) + ")") for name in unknown])
    if "flow" not in args:
        raise FlowError(Code.ARGUMENTS, "flow", "missing")


def drop_args(args):
    """The flows.drop job's arguments: {"flow": FlowRef}."""
    _arguments(args, ("flow",))
    return {"flow": flow_ref(args["flow"])}


def capture_seconds(value):
    """The length of a flow's capture, or FlowError naming `seconds`."""
    low, high, _ = CAPTURE_SECONDS
    if not _whole(value, low, high):
        raise FlowError(Code.RANGE, "seconds", f"must be a whole number from {low} to {high}")
    return value


def capture_args(args):
    """The flows.capture job's arguments: {"flow": FlowRef, "seconds": int, "analyze":
    bool} (analyze: the health report of the capture once it is done)."""
    _arguments(args, ("flow", "seconds", "analyze"))
    problems, checked = [], {}
    for name, check in (("flow", flow_ref), ("seconds", capture_seconds)):
        try:
            checked[name] = check(args.get(name, CAPTURE_SECONDS[2]) if name == "seconds"
                                  else args[name])
        except FlowError as error:
            problems.extend(error.problems)
    analyze = args.get("analyze", False)
    if not isinstance(analyze, bool):
        problems.append(Problem(Code.ARGUMENTS, "analyze", "must be true or false"))
    if problems:
        raise FlowError(problems)
    return {**checked, "analyze": analyze}


def capture_filter(entry):
    """The BPF filter of one connection on both sides of the firewall, from the
    kernel's entry (never from a job's row): the original tuple, which the ingress side
    sees, and the reply tuple reversed, which the egress side sees after any
    translation - each in both directions."""
    o, r = entry.orig, entry.reply
    clauses = []
    for src, sport, dst, dport in ((o.src, o.sport, o.dst, o.dport),
                                   (r.dst, r.dport, r.src, r.sport)):
        for x, xp, y, yp in ((src, sport, dst, dport), (dst, dport, src, sport)):
            clause = (f"({PROTOCOLS[entry.proto]} and src host {x} and src port {xp} "
                      f"and dst host {y} and dst port {yp})")
            if clause not in clauses:
                clauses.append(clause)
    return " or ".join(clauses)


def bridged_ports(document, mark):
    """The ports a bridged connection crosses, as InterfaceNames: the interfaces of the
    bridged zones its class names (a side the class leaves open: every bridged zone's),
    its class found by the ct mark's ordinal in the policy loaded now (a parsed policy
    document, from root's store). () for a routed connection, one of no class or of a
    class the document does not have.

    A route cannot place a bridged connection: neither the bridge nor its ports has an
    address, so `ip route get` of either end names the management port's route (or
    none), where the connection never passes."""
    ordinal = (mark & CT_MARK_CLASS_MASK) >> CT_MARK_CLASS_SHIFT
    classes = document.get("classes") if isinstance(document, dict) else None
    if not ordinal or not isinstance(classes, list) or ordinal > len(classes) \
            or not isinstance(classes[ordinal - 1], dict):
        return ()
    zones = {zone.get("name"): zone for zone in document.get("zones") or []
             if isinstance(zone, dict)}
    bridged = sorted(name for name, zone in zones.items()
                     if isinstance(name, str) and zone.get("bridged") is True)
    sides = [classes[ordinal - 1].get(side) for side in ("from", "to")]
    if not set(sides) & set(bridged):
        return ()
    found = {}
    for side in sides:
        for name in [side] if side in bridged else bridged:
            interfaces = zones[name].get("interfaces")
            for interface in interfaces if isinstance(interfaces, list) else []:
                try:
                    found.setdefault(str(InterfaceName(interface)), None)
                except Refused:
                    continue
    return tuple(InterfaceName(name) for name in found)
