"""Stage 1 of 3: normalise and validate.

The only stage that raises a policy error. It turns a YAML document (or the
same structure from the web UI) into the immutable model, reporting every
problem with its code and the path of the offending field, e.g.
``classes[3].mss.value: 70000 is above 65535``.
"""
import dataclasses
import re

from tusklib.names import IFNAME_PATTERN, MAX_CLASSES, VLAN_ID_MAX, VLAN_ID_MIN

from . import choices
from .checkvalues import ValueChecks
from .constants import (
    CONFIRM_TIMEOUT_DEFAULT,
    CONFIRM_TIMEOUT_MAX,
    CONFIRM_TIMEOUT_MIN,
    FASTPATH_AFTER_DEFAULT,
    FASTPATH_AFTER_MAX,
    LOG_DEFAULT_DENY_DEFAULT,
    LOG_RATE_DEFAULT,
    LOG_RATE_MAX,
    LOG_RATE_MIN,
    MSS_MAX,
    MSS_MIN,
    POLICY_VERSION,
    PORT_PROTOCOLS,
    PORTLESS_PROTOCOLS,
)
from .errors import Code, PolicyError, quoted
from .intervals import OutOfRange, merge, parse_address, parse_port
from .model import (
    AddressSet,
    Mss,
    Policy,
    Service,
    Settings,
    TcpOptions,
    TrafficClass,
    Zone,
)
from .nat import NatChecker
from .yamlread import parse_yaml

_IFNAME = re.compile(IFNAME_PATTERN)

def load_policy_text(text):
    return load_policy(parse_yaml(text))


def load_policy_file(path):
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except OSError as exc:
        raise PolicyError(Code.IO, "", f"cannot read {path}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise PolicyError(Code.SYNTAX, "", f"{path} is not UTF-8 text") from None
    return load_policy_text(text)


def load_policy(document):
    """Plain data (from YAML or the web UI) -> Policy, or PolicyError with every problem."""
    checker = _Checker()
    policy = checker.policy(document)
    if checker.problems:
        raise PolicyError(checker.problems)
    return policy


class _Checker(ValueChecks):
    """Walks the document once, collecting problems instead of stopping at the first
    (the checks of one value: checkvalues.py)."""

    def policy(self, document):
        if document is None:
            document = {}
        doc = self.mapping(document, "", optional=(
            "version", "settings", "zones", "address_sets", "services", "classes", "nat"))
        if doc is None:
            return None
        version = doc.get("version", POLICY_VERSION)
        if type(version) is not int or version != POLICY_VERSION:
            self.fail(Code.SCHEMA, "version", f"{quoted(version)} is not supported (this Tusk "
                      f"reads version {POLICY_VERSION})")
        settings = self.settings(doc.get("settings"))
        zones = self.zones(self.sequence(doc.get("zones"), "zones"))
        address_sets = self.address_sets(self.sequence(doc.get("address_sets"), "address_sets"))
        services = self.services(self.sequence(doc.get("services"), "services"))
        policy = Policy(settings=settings, zones=tuple(zones),
                        address_sets=tuple(address_sets), services=tuple(services))
        classes = self.classes(self.sequence(doc.get("classes"), "classes"), policy)
        policy = Policy(settings=settings, zones=policy.zones, address_sets=policy.address_sets,
                        services=policy.services, classes=tuple(classes))
        nat = NatChecker(self, policy).nat(doc.get("nat"))
        return Policy(settings=settings, zones=policy.zones, address_sets=policy.address_sets,
                      services=policy.services, classes=policy.classes, nat=nat)

    def settings(self, value):
        if value is None:
            return Settings()
        doc = self.mapping(value, "settings", optional=(
            "confirm_timeout", "log_default_deny", "log_rate"))
        if doc is None:
            return Settings()
        timeout = doc.get("confirm_timeout", CONFIRM_TIMEOUT_DEFAULT)
        timeout = self.integer(timeout, "settings.confirm_timeout",
                               CONFIRM_TIMEOUT_MIN, CONFIRM_TIMEOUT_MAX)
        log_default_deny = (LOG_DEFAULT_DENY_DEFAULT if doc.get("log_default_deny") is None
                            else self.boolean(doc["log_default_deny"],
                                              "settings.log_default_deny"))
        log_rate = self.integer(doc.get("log_rate", LOG_RATE_DEFAULT), "settings.log_rate",
                                LOG_RATE_MIN, LOG_RATE_MAX)
        return Settings(confirm_timeout=timeout or CONFIRM_TIMEOUT_DEFAULT,
                        log_default_deny=log_default_deny,
                        log_rate=log_rate or LOG_RATE_DEFAULT)

    def zones(self, items):
        zones = []
        owner = {}       # interface -> {VLAN id or None (every frame): zone}
        names = self.unique_names(items, "zones", {})
        for index, (item, name) in enumerate(zip(items, names)):
            here = f"zones[{index}]"
            doc = self.mapping(item, here, required=("name", "interfaces"),
                               optional=("comment", "bridged", "vlans"))
            if doc is None or name is None:
                continue
            bridged = self.boolean(doc.get("bridged"), f"{here}.bridged")
            vlans = self.zone_vlans(doc.get("vlans"), f"{here}.vlans", bridged)
            interfaces = []
            raw = self.sequence(doc["interfaces"], f"{here}.interfaces")
            if not raw:
                self.fail(Code.SCHEMA, f"{here}.interfaces", "must name at least one interface")
            for position, ifname in enumerate(raw):
                where = f"{here}.interfaces[{position}]"
                if (not isinstance(ifname, str) or not _IFNAME.fullmatch(ifname)
                        or ifname in (".", "..")):
                    self.fail(Code.SCHEMA, where, f"{quoted(ifname)} is not a valid interface name "
                              "(1-15 characters: letters, digits, . _ - @ +)")
                elif taken := self.taken(owner.get(ifname, {}), vlans):
                    self.fail(Code.DUPLICATE, where, f"{ifname}{taken}")
                else:
                    for vid in vlans or (None,):
                        owner.setdefault(ifname, {})[vid] = f"zone {name!r}"
                    interfaces.append(ifname)
            zones.append(Zone(name=name, interfaces=tuple(interfaces),
                              comment=self.comment(doc.get("comment"), f"{here}.comment"),
                              bridged=bridged, vlans=vlans))
        return zones

    @staticmethod
    def taken(owned, vlans):
        """What of an interface's frames another zone already has, as the end of a
        problem's sentence ("" if none): a zone of every frame shares its interface with
        no other; zones of VLANs share it, each VLAN with one zone."""
        if not owned:
            return ""
        if None in owned:
            return f" already belongs to {owned[None]}"
        if not vlans:
            return (f" already belongs to {', '.join(sorted(set(owned.values())))} for VLANs "
                    f"{', '.join(map(str, sorted(owned)))}: name VLANs, or leave the "
                    "interface to those zones")
        for vid in vlans:
            if vid in owned:
                return f" VLAN {vid} already belongs to {owned[vid]}"
        return ""

    def zone_vlans(self, value, path, bridged):
        """A bridged zone's VLAN ids (1-4094, each once), () when left out."""
        if value is None:
            return ()
        items = self.sequence(value, path)
        if not bridged:
            self.fail(Code.SCHEMA, path, "only a bridged zone names VLANs (a bridge's frames "
                      "of those VLANs); a routed VLAN is a link of its own, such as eth3.10: "
                      "name it in interfaces")
            return ()
        if not items and isinstance(value, list):
            self.fail(Code.SCHEMA, path, "must name at least one VLAN id; leave it out for "
                      "every frame of the interfaces")
        found = []
        for position, vid in enumerate(items):
            number = self.integer(vid, f"{path}[{position}]", VLAN_ID_MIN, VLAN_ID_MAX)
            if number is not None and number in found:
                self.fail(Code.DUPLICATE, f"{path}[{position}]", f"VLAN {number} is listed twice")
            elif number is not None:
                found.append(number)
        return tuple(found)

    def address_sets(self, items):
        result = []
        names = self.unique_names(items, "address_sets", {})
        for index, (item, name) in enumerate(zip(items, names)):
            here = f"address_sets[{index}]"
            doc = self.mapping(item, here, required=("name",), optional=("entries", "comment"))
            if doc is None or name is None:
                continue
            entries, by_family, seen = [], {"ipv4": [], "ipv6": []}, {}
            for position, entry in enumerate(self.sequence(doc.get("entries"), f"{here}.entries")):
                where = f"{here}.entries[{position}]"
                try:
                    family, interval, canonical = parse_address(entry)
                except ValueError as exc:
                    self.fail(Code.ADDRESS, where, str(exc))
                    continue
                if canonical in seen:
                    self.fail(Code.DUPLICATE, where,
                              f"{canonical} is already listed at {seen[canonical]}")
                    continue
                seen[canonical] = f"{here}.entries[{position}]"
                entries.append(canonical)
                by_family[family].append(interval)
            result.append(AddressSet(
                name=name, entries=tuple(entries), ipv4=merge(by_family["ipv4"]),
                ipv6=merge(by_family["ipv6"]),
                comment=self.comment(doc.get("comment"), f"{here}.comment")))
        return result

    def services(self, items):
        result = []
        names = self.unique_names(items, "services", {})
        for index, (item, name) in enumerate(zip(items, names)):
            here = f"services[{index}]"
            doc = self.mapping(item, here, required=("name", "protocol"),
                               optional=("ports", "comment"))
            if doc is None or name is None:
                continue
            protocol = self.choice(doc["protocol"], f"{here}.protocol",
                                   PORT_PROTOCOLS + PORTLESS_PROTOCOLS, None)
            if protocol is None:
                continue
            ports = []
            raw_ports = self.sequence(doc.get("ports"), f"{here}.ports")
            if raw_ports and protocol in PORTLESS_PROTOCOLS:
                self.fail(Code.CONTRADICTION, f"{here}.ports", f"{protocol} has no ports")
                continue
            for position, value in enumerate(raw_ports):
                try:
                    ports.append(parse_port(value))
                except OutOfRange as exc:
                    self.fail(Code.RANGE, f"{here}.ports[{position}]", str(exc))
                except ValueError as exc:
                    self.fail(Code.SCHEMA, f"{here}.ports[{position}]", str(exc))
            result.append(Service(name=name, protocol=protocol, ports=merge(ports),
                                  comment=self.comment(doc.get("comment"), f"{here}.comment")))
        return result

    def classes(self, items, policy):
        result = []
        first_with_match = {}
        if len(items) > MAX_CLASSES:
            self.fail(Code.RANGE, "classes", f"{len(items)} classes; at most {MAX_CLASSES} "
                      "(a connection's mark carries the number of the class that accepted "
                      "it in 15 bits)")
        names = self.unique_names(items, "classes", {})
        for index, (item, name) in enumerate(zip(items, names)):
            here = f"classes[{index}]"
            doc = self.mapping(item, here, required=("name", "action"), optional=(
                "comment", "from", "to", "source", "destination", "services", "mss",
                "tcp_options", "seqrand", "fastpath", "fastpath_after", "hardware", "notrack",
                "log"))
            if doc is None or name is None:
                continue
            before = len(self.problems)
            cls = TrafficClass(
                name=name,
                action=self.choice(doc["action"], f"{here}.action", choices.VERDICTS,
                                   choices.VERDICTS[0]),
                from_zone=self.reference(doc.get("from"), f"{here}.from", policy.zone, "zone"),
                to_zone=self.reference(doc.get("to"), f"{here}.to", policy.zone, "zone"),
                source=self.references(doc.get("source"), f"{here}.source",
                                       policy.address_set, "address set"),
                destination=self.references(doc.get("destination"), f"{here}.destination",
                                            policy.address_set, "address set"),
                services=self.references(doc.get("services"), f"{here}.services",
                                         policy.service, "service"),
                mss=self.mss(doc.get("mss"), f"{here}.mss"),
                tcp_options=self.tcp_options(doc.get("tcp_options"), f"{here}.tcp_options"),
                seqrand=self.choice(doc.get("seqrand"), f"{here}.seqrand",
                                    choices.SEQRAND_MODES, choices.SEQRAND_NONE),
                fastpath=self.fastpath(doc.get("fastpath"), f"{here}.fastpath"),
                fastpath_after=self.size(doc.get("fastpath_after"), f"{here}.fastpath_after",
                                         FASTPATH_AFTER_DEFAULT, FASTPATH_AFTER_MAX),
                hardware=self.boolean(doc.get("hardware"), f"{here}.hardware"),
                notrack=self.boolean(doc.get("notrack"), f"{here}.notrack"),
                log=self.boolean(doc.get("log"), f"{here}.log"),
                comment=self.comment(doc.get("comment"), f"{here}.comment"),
            )
            if len(self.problems) == before:
                self.class_semantics(cls, index, policy, first_with_match)
                if policy.is_bridged(cls):
                    self.bridged_semantics(cls, doc, here, policy)
                cls = dataclasses.replace(cls, fastpath=fastpath_in_effect(cls, policy))
                if "fastpath_after" in doc and not cls.auto_fast:
                    self.fail(Code.CONTRADICTION, f"{here}.fastpath_after", "only a class "
                              "whose fast path is auto promotes after a number of bytes "
                              f"(this one's is {cls.fastpath})")
                if cls.hardware:
                    self.hardware_semantics(cls, here)
            elif cls.fastpath is None:
                cls = dataclasses.replace(cls, fastpath=choices.FASTPATH_NEVER)
            result.append(cls)
        return result

    def bridged_semantics(self, cls, doc, here, policy):
        """A class on a bridge filters frames between bridge ports: no routing, so
        nothing that needs a route, an address of the box or the flowtable (which takes
        routed flows only)."""
        zones = {cls.from_zone, cls.to_zone} - {None}
        routed = sorted(zones - policy.bridged_zones)
        if routed:
            self.fail(Code.CONTRADICTION, f"{here}.{'to' if cls.to_zone in routed else 'from'}",
                      f"zone {routed[0]} is routed and zone "
                      f"{sorted(zones & policy.bridged_zones)[0]} bridged: bridged traffic "
                      "never reaches a routed link (the bridge has no address); make a class "
                      "for each")
        reasons = {
            "action": cls.action == "reject" and "reject answers for the box, which a "
            "transparent bridge does not do: the kernel's bridge family can reject only "
            "before the bridge chose the port; use drop",
            "notrack": cls.notrack and "a bridged zone's classes need connection "
            "tracking (the bridge's own conntrack)",
            "fastpath": doc.get("fastpath") not in (None, False, choices.FASTPATH_NEVER) and
            "the flowtable fast path takes routed flows only: bridged traffic stays on the "
            "bridge's path",
            "hardware": cls.hardware and "hardware offload is the flowtable's, which takes "
            "routed flows only",
            "mss": cls.mss.mode == choices.MSS_PMTU and "pmtu clamps to the route's MTU, "
            "and bridged traffic has no route: clamp to a fixed value",
        }
        for field, reason in reasons.items():
            if reason:
                self.fail(Code.CONTRADICTION, f"{here}.{field}", reason)

    def hardware_semantics(self, cls, here):
        """hardware: true needs a fast path in effect, and connections a NIC can carry
        as they are: no NIC rewrites sequence numbers and SACK blocks."""
        if cls.fastpath == choices.FASTPATH_NEVER:
            self.fail(Code.CONTRADICTION, f"{here}.hardware", "hardware carries fast-path "
                      "connections, and this class's fast path is never")
        if cls.seqrand != choices.SEQRAND_NONE:
            self.fail(Code.CONTRADICTION, f"{here}.hardware", "no NIC rewrites the sequence "
                      "numbers and SACK blocks seqrand shifts: a seqrand class's fast path "
                      "stays in software")

    def fastpath(self, value, path):
        """The mode written (true and false: always and never, as policies before auto
        said it), or None when the class leaves it to the default."""
        if value is None:
            return None
        if isinstance(value, bool):
            return choices.FASTPATH_ALWAYS if value else choices.FASTPATH_NEVER
        return self.choice(value, path, choices.FASTPATH_MODES, choices.FASTPATH_NEVER)

    def mss(self, value, path):
        if value is None:
            return Mss()
        doc = self.mapping(value, path, required=("mode",), optional=("value",))
        if doc is None:
            return Mss()
        mode = self.choice(doc["mode"], f"{path}.mode", choices.MSS_MODES, choices.MSS_NONE)
        if mode == choices.MSS_FIXED:
            if "value" not in doc:
                self.fail(Code.SCHEMA, f"{path}.value", "is required when mode is fixed")
                return Mss()
            return Mss(mode, self.integer(doc["value"], f"{path}.value", MSS_MIN, MSS_MAX))
        if "value" in doc:
            self.fail(Code.CONTRADICTION, f"{path}.value", f"only a fixed clamp takes a value "
                      f"(mode is {mode})")
        return Mss(mode)

    def tcp_options(self, value, path):
        if value is None:
            return TcpOptions()
        doc = self.mapping(value, path, optional=tuple(choices.TCP_OPTIONS))
        if doc is None:
            return TcpOptions()
        return TcpOptions(**{key: self.choice(doc.get(key), f"{path}.{key}",
                                              choices.OPTION_ACTIONS, choices.OPTION_KEEP)
                             for key in choices.TCP_OPTIONS})

    def class_semantics(self, cls, index, policy, first_with_match):
        """Checks that need the whole class: contradictions, dead matches, shadowing."""
        here = f"classes[{index}]"
        modifies = [field for field, active in (
            ("mss", cls.mss.mode != choices.MSS_NONE),
            ("tcp_options", bool(cls.tcp_options.stripped())),
            ("seqrand", cls.seqrand != choices.SEQRAND_NONE),
            ("fastpath", cls.fastpath in (choices.FASTPATH_ALWAYS, choices.FASTPATH_AUTO)))
            if active]
        if cls.action != "accept":
            for field in modifies:
                self.fail(Code.CONTRADICTION, f"{here}.{field}",
                          f"only accepted traffic can be modified; the action is {cls.action}")
        if cls.notrack:
            for field in ("seqrand", "fastpath"):
                if field in modifies:
                    self.fail(Code.CONTRADICTION, f"{here}.{field}",
                              "needs connection tracking, which notrack turns off")
        if "fastpath" in modifies and not policy.zones:
            self.fail(Code.CONTRADICTION, f"{here}.fastpath", "the fast path is a flowtable over "
                      "zone interfaces, and the policy has no zones")
        tcp_fields = [f for f in modifies if f in ("mss", "tcp_options", "seqrand")]
        if cls.fastpath == choices.FASTPATH_AUTO:
            tcp_fields.append("fastpath")       # auto promotes TCP connections only
        if not _matches_tcp(cls, policy):
            for field in tcp_fields:
                self.fail(Code.CONTRADICTION, f"{here}.{field}",
                          f"the class matches no TCP traffic (services: {', '.join(cls.services)})")
        families = None
        for side in ("source", "destination"):
            names = getattr(cls, side)
            if not names:
                continue
            side_families = frozenset().union(*(policy.address_set[n].families for n in names))
            if not side_families:
                self.fail(Code.CONTRADICTION, f"{here}.{side}",
                          f"{', '.join(names)} {'is' if len(names) == 1 else 'are'} empty, "
                          "so the class can never match")
                return
            families = side_families if families is None else families & side_families
        if families is not None and not families:
            self.fail(Code.CONTRADICTION, f"{here}.destination", "the source has only "
                      f"{_family_names(cls.source, policy)} addresses and the destination only "
                      f"{_family_names(cls.destination, policy)}: no packet can match both")
            return
        key = cls.match_key()
        if key in first_with_match:
            earlier, name = first_with_match[key]
            self.fail(Code.CONTRADICTION, here, f"never matches: classes[{earlier}] {name!r} "
                      "matches the same traffic first")
        else:
            first_with_match[key] = (index, cls.name)


def fastpath_in_effect(cls, policy):
    """The mode written, or the default: auto for a class that accepts TCP connections it
    tracks between routed zones, never for any other (bridged_semantics refuses a
    fast path written for a bridged class)."""
    if cls.fastpath is not None:
        return cls.fastpath
    return (choices.FASTPATH_AUTO if cls.action == "accept" and not cls.notrack
            and policy.zones and not policy.is_bridged(cls) and _matches_tcp(cls, policy)
            else choices.FASTPATH_NEVER)


def _matches_tcp(cls, policy):
    """Whether a class's services (none: any traffic) take in TCP."""
    return not cls.services or any(policy.service[s].protocol == "tcp" for s in cls.services)


def _family_names(names, policy):
    families = frozenset().union(*(policy.address_set[n].families for n in names))
    return "/".join(sorted(f.replace("ipv", "IPv") for f in families))
