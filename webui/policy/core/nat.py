"""Stage 1, the nat section: source NAT rules and port forwards, normalised and checked
against the rest of the policy (zones, address sets, the classes that admit forwarded
traffic). Part of normalise: it reports through the same checker, so every problem has
its code and the path of its field (``nat.forwards[2].to_ports``).

What holds a forward open is checked here, so a forward never silently stays closed:
its class must accept, track and match the translated traffic (classes see the
destination after DNAT and the source before SNAT), and no earlier class may take that
traffic first (first_class_taking). Whether a class to one zone takes it depends on the
zone the server is in, which only the box's network configuration tells: that part is
draft.network_problems', with nat_problems' zone of the server, or without a network
configuration cautiously.
"""
import ipaddress
from dataclasses import dataclass

from . import choices
from .constants import PORT_PROTOCOLS, PORT_SHIFT_MAX
from .errors import Code
from .intervals import OutOfRange, merge, parse_address, parse_port, port_text
from .model import Interval, Nat, PortForward, SourceNat, TrafficClass

_FAMILY_NAME = {"ipv4": "IPv4", "ipv6": "IPv6"}
_VERB = {"drop": "drops it", "reject": "rejects it"}


def network_facts(policy):
    """What network.core.validate.nat_problems checks of policy's NAT, as plain data:
    [(to_address, class name, the class's to zone)] of the forwards, and of the source
    rules [(egress zone, {4, 6} its source sets hold)] for a masquerade, None for the
    others."""
    forwards = [(f.to_address, f.class_name, policy.traffic_class[f.class_name].to_zone)
                for f in policy.nat.forwards]
    masquerades = [
        (rule.to_zone, {int(family[-1]) for name in rule.source
                        for family in policy.address_set[name].families})
        if rule.translate == choices.TRANSLATE_MASQUERADE else None
        for rule in policy.nat.source]
    return forwards, masquerades


class NatChecker:
    """Normalises the nat section with the checker of the whole document (normalise's
    _Checker: mapping, sequence, fail, ...) and the policy built so far."""

    def __init__(self, checker, policy):
        self.checker = checker
        self.policy = policy

    def fail(self, code, path, message):
        self.checker.fail(code, path, message)

    def nat(self, value):
        if value is None:
            return Nat()
        doc = self.checker.mapping(value, "nat", optional=("source", "forwards"))
        if doc is None:
            return Nat()
        source = self.source_rules(self.checker.sequence(doc.get("source"), "nat.source"))
        forwards = self.forwards(self.checker.sequence(doc.get("forwards"), "nat.forwards"))
        return Nat(source=tuple(rule for rule, _ in source),
                   forwards=tuple(forward for forward, _ in forwards))

    # -- shared field helpers ------------------------------------------------------------

    def required(self, doc, key, path):
        """doc[key], with "is required" for an explicit null (mapping() checked presence)."""
        value = doc[key]
        if value is None:
            self.fail(Code.SCHEMA, path, "is required")
        return value

    def zone(self, doc, key, path):
        """A routed zone the rule names: NAT rewrites addresses where the box routes; a
        bridged zone's frames pass a bridge that has no address to translate with."""
        value = self.required(doc, key, path)
        zone = self.checker.reference(value, path, self.policy.zone, "zone")
        if zone in self.policy.bridged_zones:
            self.fail(Code.CONTRADICTION, path, f"zone {zone} is bridged: NAT translates "
                      "where the box routes, and a transparent bridge neither routes nor "
                      "has an address to translate with; NAT applies to routed zones")
        return zone

    def single_address(self, value, path, what):
        """One unicast address -> (family, canonical text), or (None, None)."""
        try:
            family, interval, canonical = parse_address(value)
        except ValueError as exc:
            self.fail(Code.ADDRESS, path, str(exc))
            return None, None
        if interval.low != interval.high:
            self.fail(Code.ADDRESS, path, f"{canonical}: {what} is one address, not a range "
                      "or prefix")
            return None, None
        if not self.unicast(family, interval, path):
            return None, None
        return family, canonical

    def unicast(self, family, interval, path):
        for number in {interval.low, interval.high}:
            address = ipaddress.ip_address(number) if family == "ipv4" else \
                ipaddress.IPv6Address(number)
            if address.is_multicast or address.is_unspecified or address.is_loopback:
                self.fail(Code.ADDRESS, path, f"{address} is not a unicast address of a host")
                return False
        return True

    def port(self, value, path):
        """One port or a range a-b (not a list) -> Interval or None."""
        if isinstance(value, list):
            self.fail(Code.SCHEMA, path, "must be one port or one range a-b, not a list")
            return None
        try:
            return parse_port(value)
        except OutOfRange as exc:
            self.fail(Code.RANGE, path, str(exc))
        except ValueError as exc:
            self.fail(Code.SCHEMA, path, str(exc))
        return None

    def set_families(self, names):
        return frozenset().union(*(self.policy.address_set[n].families for n in names))

    # -- nat.source -------------------------------------------------------------------

    def source_rules(self, items):
        result = []
        names = self.checker.unique_names(items, "nat.source", {})
        for index, (item, name) in enumerate(zip(items, names)):
            here = f"nat.source[{index}]"
            doc = self.checker.mapping(item, here, required=("name", "to", "translate"),
                                       optional=("source", "address", "ports", "comment"))
            if doc is None or name is None:
                continue
            before = len(self.checker.problems)
            rule = self.source_rule(doc, here, name)
            if rule is not None:
                result.append((rule, len(self.checker.problems) == before))
        if not any(problem.path.startswith("nat.source") for problem in self.checker.problems):
            self.untracked_egress([rule for rule, _ in result])
        return result

    def source_rule(self, doc, here, name):
        to_zone = self.zone(doc, "to", f"{here}.to")
        translate = self.required(doc, "translate", f"{here}.translate")
        translate = self.checker.choice(translate, f"{here}.translate",
                                        choices.TRANSLATE_MODES, None)
        source = self.checker.references(doc.get("source"), f"{here}.source",
                                         self.policy.address_set, "address set")
        if source and not self.set_families(source):
            self.fail(Code.CONTRADICTION, f"{here}.source",
                      f"{', '.join(source)} {'is' if len(source) == 1 else 'are'} empty, so "
                      "the rule can never match")
        address, family = "", None
        if translate == choices.TRANSLATE_MASQUERADE and "address" in doc:
            self.fail(Code.CONTRADICTION, f"{here}.address", "masquerade takes the address "
                      "of the interface the traffic leaves by; only translate: address "
                      "takes an address")
        elif translate == choices.TRANSLATE_ADDRESS:
            if doc.get("address") is None:
                self.fail(Code.SCHEMA, f"{here}.address", "is required when translate is "
                          "address")
            else:
                family, address = self.pool(doc["address"], f"{here}.address")
                families = self.set_families(source) if source else None
                if family and families and family not in families:
                    self.fail(Code.CONTRADICTION, f"{here}.address", f"{address} is "
                              f"{_FAMILY_NAME[family]}, and the source sets hold only "
                              f"{'/'.join(_FAMILY_NAME[f] for f in sorted(families))} "
                              "addresses: a source NAT keeps the address family")
        ports = None
        if doc.get("ports") is not None:
            ports = self.port(doc["ports"], f"{here}.ports")
        comment = self.checker.comment(doc.get("comment"), f"{here}.comment")
        if to_zone is None or translate is None:
            return None
        return SourceNat(name=name, to_zone=to_zone, translate=translate, source=source,
                         address=address or "", address_family=family, ports=ports,
                         comment=comment)

    def pool(self, value, path):
        """An SNAT address: one address or a range a-b -> (family, canonical) or Nones."""
        try:
            family, interval, canonical = parse_address(value)
        except ValueError as exc:
            self.fail(Code.ADDRESS, path, str(exc))
            return None, None
        if "/" in canonical:
            self.fail(Code.ADDRESS, path, f"{canonical} is a prefix, which holds its network "
                      "(and, for IPv4, broadcast) address: write the usable addresses as a "
                      "range a-b")
            return None, None
        if not self.unicast(family, interval, path):
            return None, None
        return family, canonical

    def untracked_egress(self, rules):
        """A notrack class's packets skip NAT: where one may leave through a zone that
        source NAT translates, they would leave with their inside addresses."""
        for index, rule in enumerate(rules):
            for position, cls in enumerate(self.policy.classes):
                if not cls.notrack or cls.to_zone not in (None, rule.to_zone):
                    continue
                if cls.from_zone == rule.to_zone and cls.to_zone is None:
                    continue
                if not self.sources_meet(rule, cls):
                    continue
                self.fail(Code.CONTRADICTION, f"nat.source[{index}].to",
                          f"classes[{position}] {cls.name!r} is notrack and its traffic can "
                          f"leave through zone {rule.to_zone}: untracked packets are never "
                          "translated, so they would leave with their own source addresses; "
                          "narrow the class's to, or turn off its notrack")
                break

    def sources_meet(self, rule, cls):
        if not rule.source or not cls.source:
            return True
        for family in ("ipv4", "ipv6"):
            if rule.address_family not in (None, family):
                continue
            ours = merge(iv for n in rule.source for iv in getattr(self.policy.address_set[n],
                                                                    family))
            theirs = merge(iv for n in cls.source for iv in getattr(self.policy.address_set[n],
                                                                     family))
            if any(a.low <= b.high and b.low <= a.high for a in ours for b in theirs):
                return True
        return False

    # -- nat.forwards -----------------------------------------------------------------

    def forwards(self, items):
        result = []
        names = self.checker.unique_names(items, "nat.forwards", {})
        for index, (item, name) in enumerate(zip(items, names)):
            here = f"nat.forwards[{index}]"
            doc = self.checker.mapping(
                item, here, required=("name", "from", "protocol", "ports", "to_address",
                                      "class"),
                optional=("address", "to_ports", "hairpin", "comment"))
            if doc is None or name is None:
                continue
            before = len(self.checker.problems)
            forward = self.forward(doc, here, name)
            if forward is not None:
                clean = len(self.checker.problems) == before
                if clean:
                    self.overlaps(forward, index, result)
                    self.forward_class(forward, index)
                result.append((forward, clean))
        return result

    def forward(self, doc, here, name):
        from_zone = self.zone(doc, "from", f"{here}.from")
        protocol = self.required(doc, "protocol", f"{here}.protocol")
        protocol = self.checker.choice(protocol, f"{here}.protocol", PORT_PROTOCOLS, None)
        ports = []
        raw = self.checker.sequence(self.required(doc, "ports", f"{here}.ports"),
                                    f"{here}.ports")
        if doc["ports"] is not None and not raw and isinstance(doc["ports"], list):
            self.fail(Code.SCHEMA, f"{here}.ports", "must name at least one port")
        for position, value in enumerate(raw):
            interval = self.port(value, f"{here}.ports[{position}]")
            if interval is not None:
                ports.append(interval)
        ports = merge(ports)
        family = address = None
        if doc.get("address") is not None:
            family, address = self.single_address(doc["address"], f"{here}.address",
                                                  "the external address")
        to_family, to_address = None, None
        if self.required(doc, "to_address", f"{here}.to_address") is not None:
            to_family, to_address = self.single_address(doc["to_address"],
                                                        f"{here}.to_address", "to_address")
        if family and to_family and family != to_family:
            self.fail(Code.CONTRADICTION, f"{here}.to_address", f"{to_address} is "
                      f"{_FAMILY_NAME[to_family]} and the external address {address} is "
                      f"{_FAMILY_NAME[family]}: a forward stays in one address family")
        to_ports = None
        if doc.get("to_ports") is not None:
            to_ports = self.to_ports(doc["to_ports"], ports, f"{here}.to_ports")
        hairpin = self.checker.boolean(doc.get("hairpin"), f"{here}.hairpin")
        if hairpin and from_zone and len(self.policy.zones) < 2:
            self.fail(Code.CONTRADICTION, f"{here}.hairpin", f"hairpin reflects the forward "
                      f"to hosts of the other zones, and the policy has no zone but "
                      f"{from_zone}")
        class_name = self.checker.reference(self.required(doc, "class", f"{here}.class"),
                                            f"{here}.class", self.policy.traffic_class,
                                            "class")
        comment = self.checker.comment(doc.get("comment"), f"{here}.comment")
        if None in (from_zone, protocol, to_address, class_name) or not ports:
            return None
        return PortForward(name=name, from_zone=from_zone, protocol=protocol,
                           ports=ports, to_address=to_address, family=to_family,
                           class_name=class_name, address=address or "", to_ports=to_ports,
                           hairpin=hairpin, comment=comment)

    def to_ports(self, value, ports, path):
        interval = self.port(value, path)
        if interval is None or not ports:
            return None
        if interval.low == interval.high:
            same = len(ports) == 1 and ports[0] == interval
            return None if same else interval
        width = interval.high - interval.low + 1
        if len(ports) != 1 or ports[0].high - ports[0].low + 1 != width:
            given = ", ".join(port_text(iv) for iv in ports)
            self.fail(Code.CONTRADICTION, path, f"a range maps port by port, so ports must "
                      f"be a single range of the same length ({width} ports); ports are "
                      f"{given}")
            return None
        if width > PORT_SHIFT_MAX:
            self.fail(Code.RANGE, path, f"a range maps port by port, one map element each: "
                      f"{width} ports is above {PORT_SHIFT_MAX}")
            return None
        return None if interval == ports[0] else interval

    def overlaps(self, forward, index, earlier):
        """First match wins in nat_prerouting too: a forward that catches traffic an
        earlier one already takes would never see (all of) it."""
        every_zone = frozenset(self.policy.zone)
        ours = every_zone if forward.hairpin else {forward.from_zone}
        for position, (other, clean) in enumerate(earlier):
            if not clean:
                continue
            theirs = every_zone if other.hairpin else {other.from_zone}
            if not ours & theirs or other.address != forward.address or \
                    other.family != forward.family or other.protocol != forward.protocol:
                continue
            shared = [Interval(max(iv.low, ov.low), min(iv.high, ov.high))
                      for iv in forward.ports for ov in other.ports
                      if iv.low <= ov.high and ov.low <= iv.high]
            if shared:
                where = forward.address or "the box's own addresses"
                self.fail(Code.CONTRADICTION, f"nat.forwards[{index}].ports",
                          f"{forward.protocol} {port_text(shared[0])} to {where} is already "
                          f"forwarded by nat.forwards[{position}] {other.name!r} (zone "
                          f"{other.from_zone}{', hairpin' if other.hairpin else ''}): the "
                          "first forward that matches wins, so this one would never see it")
                return

    # -- the class that admits a forward ---------------------------------------------------

    def forward_class(self, forward, index):
        path = f"nat.forwards[{index}].class"
        cls = self.policy.traffic_class[forward.class_name]
        reason = self.class_problem(forward, cls)
        if reason is None:
            # What takes the traffic wherever the server is: a class to any zone, or to the
            # zone the linked class sends to (the server must be there for it to see the
            # forward). Where the server's zone decides, draft.network_problems checks:
            # with the network configuration's zone, or without one, cautiously.
            taking = first_class_taking(self.policy, forward, cls.to_zone or "")
            reason = taking and taking.reason()
        if reason is not None:
            self.fail(Code.CONTRADICTION, path, reason)

    def class_problem(self, forward, cls):
        """Why cls cannot admit the forward's translated traffic, or None."""
        name = f"class {cls.name!r}"
        if cls.action != "accept":
            return f"{name} {_VERB[cls.action]}: a forward needs a class that accepts"
        if cls.notrack:
            return (f"{name} is notrack: a forward needs connection tracking (which "
                    "translates every later packet and the replies)")
        if cls.from_zone not in (None, forward.from_zone):
            return (f"{name} admits zone {cls.from_zone} only, and this forward's traffic "
                    f"comes from zone {forward.from_zone}")
        if forward.hairpin and cls.from_zone is not None:
            return (f"with hairpin, hosts of every zone reach the server through this "
                    f"forward, and {name} admits zone {cls.from_zone} only: leave its from "
                    "empty (any zone)")
        if cls.source and forward.family not in self.set_families(cls.source):
            return (f"the source of {name} holds no {_FAMILY_NAME[forward.family]} address, "
                    f"and this forward is {_FAMILY_NAME[forward.family]}")
        if cls.destination and not _holds(self.policy, cls.destination, forward):
            return (f"the destination of {name} ({', '.join(cls.destination)}) does not "
                    f"hold {forward.to_address}: classes see the destination after "
                    "translation")
        if cls.services and _served(self.policy, cls.services, forward) != \
                forward.translated_ports():
            ports = ", ".join(port_text(iv) for iv in forward.translated_ports())
            return (f"the services of {name} ({', '.join(cls.services)}) do not admit "
                    f"{forward.protocol} {ports}, where the translated traffic goes")
        return None


@dataclass(frozen=True)
class Taking:
    """An earlier class that takes (some of) a forward's translated traffic before the
    class the forward links sees it: first_class_taking()'s answer."""

    forward: PortForward
    position: int          # of the earlier class: classes[position]
    cls: TrafficClass      # the earlier class
    linked: TrafficClass   # the class the forward links
    ports: tuple           # the ranges of the translated ports it takes (Intervals)
    whole: bool            # all of them
    possibly: bool = False  # only if the server is in cls.to_zone (its zone unknown)

    def reason(self):
        """The message for nat.forwards[i].class."""
        cls, linked, forward = self.cls, self.linked, self.forward
        what = (_VERB.get(cls.action) if cls.action != "accept" else
                "accepts it untracked (notrack)" if cls.notrack else
                f"accepts it itself, so class {linked.name!r} never sees it")
        part = ("all of this forward's traffic" if self.whole else
                f"{forward.protocol} {', '.join(port_text(iv) for iv in self.ports)} of this "
                f"forward's traffic (which goes to {forward.protocol} "
                f"{', '.join(port_text(iv) for iv in forward.translated_ports())})")
        where = f", if {forward.to_address} is in zone {cls.to_zone}," if self.possibly \
            else ""
        text = (f"classes[{self.position}] {cls.name!r} comes first and{where} matches "
                f"{part} that class {linked.name!r} matches, and {what}")
        if self.possibly:
            text += (f": without a network configuration the server's zone is unknown, and "
                     f"class {linked.name!r} admits traffic to any zone; give it the "
                     f"server's zone as its to, or move it before class {cls.name!r}")
        return text


def first_class_taking(policy, forward, to_zone=None):
    """The first class before the one forward links that matches the forward's translated
    traffic - from its ingress zone (the main one: hairpin traffic of other zones may go
    elsewhere) to to_address, its protocol and a range of its translated ports, from the
    sources the linked class admits - as a Taking, or None. First match wins, so with
    None the linked class is the first to match each range. An earlier class that
    matches only part of a range, or only some of those sources, is a narrowing (a
    class for one port of a forwarded range, a blocked host), not counted.

    to_zone: the zone of the link the server is reached by ("" for a link in no zone: then
    only classes to any zone see the traffic). None when it is unknown (no network
    configuration): where the linked class names a zone the server is taken to be there
    (elsewhere that class would never see the forward); where it admits any zone, an
    earlier class to some zone that drops, rejects or untracks is counted as possibly
    taking the traffic (Taking.possibly) - it would, with the server in its zone, and the
    forward would silently stay closed."""
    linked_at, linked = next((i, c) for i, c in enumerate(policy.classes)
                             if c.name == forward.class_name)
    translated = forward.translated_ports()
    for position, other in enumerate(policy.classes[:linked_at]):
        if other.from_zone not in (None, forward.from_zone):
            continue
        possibly = False
        if other.to_zone is not None:
            if to_zone is not None:
                if other.to_zone != to_zone:
                    continue
            elif linked.to_zone is not None:
                if other.to_zone != linked.to_zone:
                    continue
            elif other.action == "accept" and not other.notrack:
                continue   # it would take the traffic, but pass it: the forward works
            else:
                possibly = True
        if other.destination and not _holds(policy, other.destination, forward):
            continue
        if not _covers(policy, other.source, linked.source, forward.family):
            continue
        ports = _served(policy, other.services, forward) if other.services else translated
        if ports:
            return Taking(forward=forward, position=position, cls=other, linked=linked,
                          ports=ports, whole=ports == translated, possibly=possibly)
    return None


def taken_first(policy):
    """network.core.validate.nat_problems' taken_first for policy: (forward index, the
    server's zone) -> the reason another class takes the forward's traffic first with the
    server there, or None."""
    def reason(index, zone):
        taking = first_class_taking(policy, policy.nat.forwards[index], zone)
        return taking.reason() if taking else None
    return reason


def _holds(policy, names, forward):
    """Whether the address sets names hold the forward's to_address."""
    number = int(ipaddress.ip_address(forward.to_address))
    return any(iv.low <= number <= iv.high for n in names
               for iv in getattr(policy.address_set[n], forward.family))


def _covers(policy, outer, inner, family):
    """Whether the address sets outer hold every address of family the sets inner do
    (no sets: every address)."""
    if not outer:
        return True
    if not inner:
        return False
    held = merge(iv for n in outer for iv in getattr(policy.address_set[n], family))
    return all(any(o.low <= iv.low and iv.high <= o.high for o in held)
               for n in inner for iv in getattr(policy.address_set[n], family))


def _served(policy, names, forward):
    """The ranges of the forward's translated ports that the services names admit whole:
    each range against the services' merged ranges, by its ends."""
    matching = [policy.service[n] for n in names
                if policy.service[n].protocol == forward.protocol]
    translated = forward.translated_ports()
    if any(not s.ports for s in matching):
        return translated
    offered = merge(iv for s in matching for iv in s.ports)
    return tuple(t for t in translated
                 if any(o.low <= t.low and t.high <= o.high for o in offered))
