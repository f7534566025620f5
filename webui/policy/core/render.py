"""Stage 2 of 3: render. Pure and deterministic: the same policy gives the same bytes.

The skeleton lives in ruleset.nft.in (skeleton() fills in the table names of
tusklib/names.py, for render_boot.py's tables too); this module emits the rule lines.
Names follow one grammar - zone_<zone>, addr_<set>_v4|_v6, svc_<service>,
class_<class> (for classes whose actions take more than one rule or that a map goes
to), classes_<from>.<to> (a zone pair's dispatch), its splits' maps
classes_<from>.<to>[.<n>].<tcp|udp|sctp|udplite|protocols> and their buckets' chains
<map>.<first ports or protocols>, address maps <chain>[.<n>].<v4|v6>.<ports|protocols>,
tcp_profile_<n>, counter class_<class>, limit log_rate, nat_prerouting and
nat_postrouting (render_nat.py) - and every rule carries a comment naming the policy
object it came from, so `nft list ruleset` explains itself.

Address sets and port lists of more than one element become named interval sets
(lookup cost independent of their size); a single element is written inline,
because the kernel finds named sets by walking a list, which makes thousands of
tiny sets cost seconds per apply.
"""
from importlib import resources

from tusklib.names import (
    BRIDGE_FAMILY,
    BRIDGE_TABLE,
    CT_MARK_CLASS_MASK,
    CT_MARK_CLASS_SHIFT,
    CT_MARK_FASTPATH_BIT,
    CT_MARK_PROFILE_MASK,
    FAMILY,
    HOST_TABLE,
    LOCKDOWN_TABLE,
    TABLE,
)

from . import choices
from .constants import LOG_BURST_FACTOR, LOG_GROUP, LOG_LIMIT, LOG_PREFIX
from .dispatch import Match, compile_plan
from .fastpath import FLOWTABLE, fastpath_devices, flowtable_block, offload_table
from .intervals import address_text, literal, merge, port_text
from .model import Policy
from .render_dispatch import DispatchRenderer
from .render_nat import NatRenderer
from .render_text import (
    FAMILIES,
    L4PROTO,
    class_comment,
    named_set,
    nft_comment,
    zone_keys,
)

_TABLES = {"@table@": TABLE, "@host_table@": HOST_TABLE, "@lockdown_table@": LOCKDOWN_TABLE}


def skeleton(name):
    """The template `name` next to this module, its table markers replaced by the names in
    constants.py. Done before any rule line goes in: an interface may be called @table@."""
    text = resources.files(__package__).joinpath(name).read_text(encoding="utf-8")
    for marker, table in _TABLES.items():
        text = text.replace(marker, f"{FAMILY} {table}")
    return text.replace("@bridge_table@", f"{BRIDGE_FAMILY} {BRIDGE_TABLE}")


_SKELETON = skeleton("ruleset.nft.in")
_BRIDGE_SKELETON = skeleton("bridge.nft.in")
# What crosses a bridge besides the classes' traffic: its hosts find each other (ARP,
# IPv6 neighbour and router discovery - untracked by conntrack), and spanning tree's
# BPDUs pass as a wire passes them (the network's bridge setting bpdu may drop them in
# its own table). By `meta protocol`, the frame's protocol inside any VLAN tag: the
# kernel takes a tag out of the frame before the bridge's hooks, and nft reads `ether
# type` (which nft itself depends `icmpv6 type` on) as the tag's 0x8100 - a VLAN's
# ARP and neighbour discovery were dropped (tests/vm/test_bridge_vlan.py).
BRIDGE_PASSAGE = [
    'meta protocol arp accept comment "tusk: ARP between the hosts of a bridge"',
    "meta protocol ip6 meta l4proto ipv6-icmp icmpv6 type { nd-router-solicit, "
    "nd-router-advert, nd-neighbor-solicit, nd-neighbor-advert, nd-redirect } accept "
    'comment "tusk: IPv6 neighbour discovery"',
    'ether daddr 01:80:c2:00:00:00 accept comment "tusk: spanning tree\'s BPDUs"',
]


def render(policy, flowtable=True, **limits):
    """Policy -> the complete nft script that replaces table inet tusk (and the hardware
    fast path's table inet tusk_offload, fastpath.py), then table bridge tusk_bridge (the
    classes of bridged zones). flowtable: whether the target's kernel has flowtables;
    without, fastpath: auto classes stay on the slow path (always classes are refused
    before: capabilities.py). limits as compile_plan takes them (the tests force each way
    of dispatch with them)."""
    return (_Renderer(policy, flowtable).text(**limits)
            + _Renderer(policy, flowtable=False, bridged=True).bridge_text(**limits))


def render_bridge_closed():
    """table bridge tusk_bridge of a policy with no bridged zone: nothing crosses."""
    return _Renderer(Policy(), flowtable=False, bridged=True).bridge_text()


def dispatch_plan(policy, **limits):
    """The class dispatch plan the forward chain is rendered from (dispatch.py); limits
    as compile_plan takes them (the tests force maps or rules with them)."""
    return _Renderer(policy).compile(**limits)


def class_mark(index, cls, profile_number=0):
    """The ct mark an accepting, tracked class writes: its TCP profile, the fast-path bit
    (fastpath: always, in software) and its ordinal (index + 1), all 32 bits at once
    (constants.py: the layout). An auto class's connections are promoted by their
    ordinal, and so are a hardware class's (fastpath.py)."""
    mark = profile_number | ((index + 1) << CT_MARK_CLASS_SHIFT)
    return mark | CT_MARK_FASTPATH_BIT if cls.always_fast and not cls.in_hardware else mark


def log_rule(verdict, class_name=""):
    """The rule that logs (a class's or the default deny's) packets through the shared
    limit: a rule of its own, so the limit never decides the verdict."""
    prefix = LOG_PREFIX.format(verdict=verdict, cls=class_name)
    return f'limit name "{LOG_LIMIT}" log group {LOG_GROUP} prefix "{prefix}"'


class _Renderer(DispatchRenderer):
    def __init__(self, policy, flowtable=True, bridged=False):
        """bridged: render table bridge tusk_bridge - the bridged zones and their classes
        - rather than table inet tusk (the routed ones). A class keeps its index in the
        whole policy either way: its ct mark's ordinal names it to the Flows page."""
        self.policy = policy
        self.bridged = bridged
        self.zones = tuple(z for z in policy.zones if z.bridged == bridged)
        self.here = frozenset(i for i, c in enumerate(policy.classes)
                              if policy.is_bridged(c) == bridged)
        self.auto = flowtable       # whether auto classes get the fast path
        self.bodies = {}            # class index -> its body's rules, made once
        self.profiles = {}          # tcp profile -> number, in order of first use
        self.profile_users = {}     # tcp profile -> names of the classes that use it
        for cls in policy.classes:
            profile = cls.tcp_profile()
            if profile is not None:
                self.profiles.setdefault(profile, len(self.profiles) + 1)
                self.profile_users.setdefault(profile, []).append(cls.name)

    def text(self, **limits):
        objects = []
        nat = NatRenderer(self)
        self.plan = self.compile(**limits)
        self.chain_list, self.bucket_names = None, {}    # of this plan, made once
        for block in (self.helpers(), self.flowtable(), self.limits(), self.counters(),
                      self.sets(), self.maps(), self.profile_chains(), self.class_chains(),
                      self.deny_chain(), self.dispatch_chains(), self.raw_chain(),
                      nat.prerouting(), nat.postrouting()):
            objects.extend(block)
        return (_SKELETON.replace("@objects@\n", "".join(f"{line}\n" for line in objects))
                .replace("@forward@\n", "".join(f"\t\t{line}\n" for line in self.forward()))
                + "".join(f"{line}\n" for line in offload_table(self.policy, self.auto)))

    def bridge_text(self, **limits):
        """table bridge tusk_bridge: with no bridged zone, a forward chain that drops every
        frame (without conntrack: it loads on any kernel with the bridge family); with
        some, the bridge's passage, then what table inet tusk's forward chain does for
        the bridged zones' classes."""
        objects, forward = [], []
        if self.zones:
            self.plan = self.compile(**limits)
            self.chain_list, self.bucket_names = None, {}
            for block in (self.helpers(), self.limits(), self.counters(), self.sets(),
                          self.maps(), self.profile_chains(), self.class_chains(),
                          self.deny_chain(), self.dispatch_chains()):
                objects.extend(block)
            forward = BRIDGE_PASSAGE + self.forward()
        else:
            forward = ['counter comment "tusk: no bridged zone - nothing crosses a bridge"']
        return (_BRIDGE_SKELETON
                .replace("@objects@\n", "".join(f"{line}\n" for line in objects))
                .replace("@forward@\n", "".join(f"\t\t{line}\n" for line in forward)))

    # -- objects -----------------------------------------------------------------------

    def classes(self):
        """(index, class) of this table's classes, in the policy's order."""
        return [(i, c) for i, c in enumerate(self.policy.classes) if i in self.here]

    def helpers(self):
        modes = sorted({c.seqrand for _, c in self.classes()} - {choices.SEQRAND_NONE})
        lines = []
        for mode in modes:
            helper = choices.SEQRAND_HELPER_TYPES[mode]
            lines += [f"\tct helper {helper} {{",
                      f'\t\ttype "{helper}" protocol tcp',
                      "\t\tl3proto inet",
                      "\t}"]
        return lines

    def flowtable(self):
        """The fast path over the interfaces of the zones its classes connect."""
        devices = fastpath_devices(self.policy, self.auto)
        if not devices:
            return []
        return [f"\t{line}" for line in flowtable_block(f"flowtable {FLOWTABLE}", devices)]

    def limits(self):
        if not self.policy.logs():
            return []
        rate = self.policy.settings.log_rate
        return [f"\tlimit {LOG_LIMIT} {{",
                f"\t\trate {rate}/second burst {rate * LOG_BURST_FACTOR} packets",
                "\t}"]

    def counters(self):
        names = ["invalid", "default_deny"] + [f"class_{c.name}" for _, c in self.classes()]
        return [f"\tcounter {name} {{\n\t}}" for name in names]

    def sets(self):
        lines = []
        for zone in self.zones:
            if zone.vlans:      # a bridged zone of VLANs: its ports' frames of those VLANs
                lines += [f"\tset zone_{zone.name} {{", "\t\ttypeof iifname . vlan id",
                          f"\t\telements = {{ {', '.join(zone_keys(zone))} }}", "\t}"]
            else:
                lines += named_set(f"zone_{zone.name}", "ifname",
                                   [f'"{i}"' for i in zone.interfaces], interval=False)
        # the bridge's table holds the sets its classes use; table inet tusk all of them
        # (NAT names some too)
        used = {n for _, c in self.classes() for n in c.source + c.destination + c.services}
        for aset in self.policy.address_sets:
            if self.bridged and aset.name not in used:
                continue
            for family in ("ipv4", "ipv6"):
                intervals = getattr(aset, family)
                if len(intervals) > 1:
                    lines += named_set(f"addr_{aset.name}_{FAMILIES[family][1]}", f"{family}_addr",
                                  [address_text(family, iv) for iv in intervals])
        for service in self.policy.services:
            if self.bridged and service.name not in used:
                continue
            if len(service.ports) > 1:
                lines += named_set(f"svc_{service.name}", "inet_service",
                              [port_text(iv) for iv in service.ports])
        return lines

    def profile_chains(self):
        lines = []
        used = {cls.tcp_profile() for _, cls in self.classes()}
        for (mss, stripped), number in self.profiles.items():
            if (mss, stripped) not in used:
                continue
            users = ", ".join(self.profile_users[(mss, stripped)])
            comment = nft_comment(f"tusk: tcp profile {number} of {users}")
            lines.append(f"\tchain tcp_profile_{number} {{")
            if mss.mode == choices.MSS_FIXED:
                lines.append(f"\t\ttcp option maxseg size set {mss.value} {comment}")
            elif mss.mode == choices.MSS_PMTU:
                lines.append(f"\t\ttcp option maxseg size set rt mtu {comment}")
            for option in stripped:
                lines.append(f"\t\treset tcp option {option} {comment}")
            lines.append("\t}")
        return lines

    def class_body(self, index, cls):
        """The rules of a class after its match: the log rule, the TCP profile on SYN,
        then the counted verdict carrying the helper and ct mark statements."""
        if index not in self.bodies:
            self.bodies[index] = self._class_body(index, cls)
        return self.bodies[index]

    def _class_body(self, index, cls):
        rules, statements, number = [], [], 0
        if cls.log:
            rules.append(log_rule(cls.action, cls.name))
        profile = cls.tcp_profile()
        if profile is not None:
            number = self.profiles[profile]
            rules.append(f"tcp flags syn / syn,rst jump tcp_profile_{number}")
        if cls.seqrand != choices.SEQRAND_NONE:
            statements.append(f'ct helper set "{choices.SEQRAND_HELPER_TYPES[cls.seqrand]}"')
        if cls.action == "accept" and not cls.notrack:
            statements.append(f"ct mark set 0x{class_mark(index, cls, number):08x}")
        counter = " ".join(statements + [f'counter name "class_{cls.name}"'])
        if cls.action == "reject":
            rules += [f"meta l4proto tcp {counter} reject with tcp reset", f"{counter} reject"]
        else:
            rules.append(f"{counter} {cls.action}")
        return rules

    def dispatch(self, index, cls):
        """What a rule does once the class matched: the whole body inline when it is one
        rule (no chain, no jump, fewer rules to load), else a goto to class_<name>."""
        body = self.class_body(index, cls)
        return body[0] if len(body) == 1 else f"goto class_{cls.name}"

    def class_chains(self):
        """A chain per class whose body is more than one rule or that a verdict map
        sends packets to."""
        mapped = set()
        for _, segments, _, _ in self.dispatch_chain_list():
            for segment in segments:
                mapped.update(index for vmap in segment.maps for _, index in vmap.elements)
                mapped.update(bucket.direct for split in segment.splits
                              for _, bucket in split.buckets if bucket.direct is not None)
        lines = []
        for index, cls in self.classes():
            body = self.class_body(index, cls)
            if len(body) == 1 and index not in mapped:
                continue
            comment = nft_comment(class_comment(index, cls))
            lines.append(f"\tchain class_{cls.name} {{")
            lines += [f"\t\t{rule} {comment}" for rule in body]
            lines.append("\t}")
        return lines

    def deny_chain(self):
        lines = ["\tchain default_deny {"]
        if self.policy.settings.log_default_deny:
            lines.append(f'\t\t{log_rule("drop")} comment "tusk: settings.log_default_deny"')
        lines += ['\t\tcounter name "default_deny" drop comment "tusk: default deny between '
                  'zones"', "\t}"]
        return lines

    def raw_chain(self):
        """notrack decisions, in class order so an earlier tracked class still wins."""
        last = max((i for i, c in self.classes() if c.notrack), default=None)
        if last is None:
            return []
        lines = ["\tchain raw_prerouting {",
                 "\t\ttype filter hook prerouting priority raw; policy accept;",
                 '\t\tfib daddr type local return comment "tusk: traffic to the firewall '
                 'itself stays tracked"']
        lines += [f"\t\t{rule}" for rule in NatRenderer(self).tracked()]
        for index, cls in self.classes():
            if index > last:
                break
            comment = nft_comment(class_comment(index, cls))
            # both directions: replies of an earlier tracked class must stay tracked too
            action = "notrack" if cls.notrack else "return"
            for reverse in (False, True):
                for match in self.matches(cls, reverse=reverse, prerouting=True):
                    lines.append(f"\t\t{match}{action} {comment}")
        lines.append("\t}")
        return lines

    # -- the forward chain -------------------------------------------------------------

    def forward(self):
        lines = []
        if not self.bridged and fastpath_devices(self.policy, auto=False):
            bit = f"0x{CT_MARK_FASTPATH_BIT:08x}"
            lines.append(f"meta l4proto {{ tcp, udp }} ct mark and {bit} == {bit} "
                         f'flow add @{FLOWTABLE} comment "tusk: fast path of fastpath classes"')
        lines += self.promotions()
        used = {cls.tcp_profile() for _, cls in self.classes()} - {None}
        if used:
            # The reply SYN/ACK gets the TCP profile of the class that accepted the SYN.
            # In this chain rather than a mangle-priority one: a second base chain would
            # cost every forwarded packet another hook traversal.
            vmap = ", ".join(f"{n} : jump tcp_profile_{n}" for profile, n in
                             self.profiles.items() if profile in used)
            lines.append(f"tcp flags syn / syn,rst ct direction reply "
                         f"ct mark and 0x{CT_MARK_PROFILE_MASK:08x} vmap {{ {vmap} }} "
                         f'comment "tusk: reply SYN/ACK of classes with a tcp profile"')
        lines += ['ct state established,related accept comment "tusk: established and related"',
                  'ct state invalid counter name "invalid" drop comment "tusk: invalid"']
        return lines + self.zone_dispatch()

    def promotions(self):
        """fastpath: auto - a class's TCP connections go to the flowtable once they carried
        fastpath_after bytes (conntrack's accounting, both directions): one rule per
        threshold, the classes that share it found by the ordinal in the ct mark. The
        flowtable takes a connection once both directions were seen; until then, and for
        every connection that stays small, these rules cost a compare or two. A promoted
        connection gets the mark's fast-path bit too, as the always classes' have it from
        the start: the Flows page and flow export (its observation domain) read from the
        mark, at any time and in the connection's last event, that it took the fast
        path."""
        if not self.auto:
            return []
        after = {}
        for index, cls in enumerate(self.policy.classes):
            if cls.auto_fast and not cls.in_hardware:
                after.setdefault(cls.fastpath_after, []).append((index, cls))
        lines = []
        for threshold, classes in sorted(after.items()):
            marks = [f"0x{(index + 1) << CT_MARK_CLASS_SHIFT:08x}" for index, _ in classes]
            match = f"== {marks[0]}" if len(marks) == 1 else f"{{ {', '.join(marks)} }}"
            names = ", ".join(cls.name for _, cls in classes)
            what = (f"classes[{classes[0][0]}] {names}" if len(classes) == 1 else
                    names if len(names) <= 60 else f"{len(classes)} classes")
            comment = nft_comment(f"tusk: elephants of {what} to the fast path after "
                               f"{threshold} bytes")
            lines.append(f"meta l4proto tcp ct mark and 0x{CT_MARK_CLASS_MASK:08x} {match} "
                         f"ct bytes > {threshold} ct mark set ct mark or "
                         f"0x{CT_MARK_FASTPATH_BIT:08x} flow add @{FLOWTABLE} {comment}")
        return lines

    def compile(self, **limits):
        return compile_plan([z.name for z in self.zones], self.forward_matches(),
                            **limits)

    def forward_matches(self):
        """Every class's matches in the forward chain, in class order: one per address
        family x protocol needed, and for notrack classes the replies too."""
        result = []
        for index, cls in self.classes():
            for reverse in (False, True) if cls.notrack else (False,):
                src_zone, dst_zone = ((cls.to_zone, cls.from_zone) if reverse
                                      else (cls.from_zone, cls.to_zone))
                src, dst = ((cls.destination, cls.source) if reverse
                            else (cls.source, cls.destination))
                port_field = "sport" if reverse else "dport"
                for family in self.families(cls):
                    addresses = ""
                    for direction, names in (("saddr", src), ("daddr", dst)):
                        if names:
                            addresses += self.address_match(family, direction, names)
                    for protocol, ports, service in self.services(cls, port_field):
                        result.append(Match(
                            index=index, src_zone=src_zone, dst_zone=dst_zone, family=family,
                            saddr=self.intervals(family, src), daddr=self.intervals(family, dst),
                            protocol=protocol, ports=ports, reverse=reverse,
                            text=addresses + service, addresses=addresses))
        return result

    def intervals(self, family, names):
        if family is None or not names:
            return None
        return merge(iv for n in names for iv in getattr(self.policy.address_set[n], family))

    def matches(self, cls, reverse, prerouting):
        """The match prefixes of one class, one per address family x protocol needed.
        reverse swaps the sides (replies of untracked classes); prerouting has no
        output interface yet, so the destination zone comes from a fib lookup."""
        src_zone, dst_zone = ((cls.to_zone, cls.from_zone) if reverse
                              else (cls.from_zone, cls.to_zone))
        src, dst = (cls.destination, cls.source) if reverse else (cls.source, cls.destination)
        zone = ""
        if src_zone:
            zone += f"iifname @zone_{src_zone} "
        if dst_zone:
            if prerouting:
                names = ", ".join(f'"{i}"' for i in self.policy.zone[dst_zone].interfaces)
                zone += f"fib daddr oifname {{ {names} }} "
            else:
                zone += f"oifname @zone_{dst_zone} "
        prefixes = []
        for family in self.families(cls):
            addresses = ""
            for direction, names in (("saddr", src), ("daddr", dst)):
                if names:
                    addresses += self.address_match(family, direction, names)
            prefixes.append(zone + addresses)
        port_field = "sport" if reverse else "dport"
        return [prefix + service for prefix in prefixes
                for service in self.service_matches(cls, port_field)]

    def families(self, cls):
        families = {"ipv4", "ipv6"}
        constrained = False
        for names in (cls.source, cls.destination):
            if names:
                constrained = True
                families &= set().union(*(self.policy.address_set[n].families for n in names))
        return sorted(families) if constrained else [None]

    def address_match(self, family, direction, names):
        if family is None:
            return ""
        keyword, suffix = FAMILIES[family]
        present = [n for n in names if getattr(self.policy.address_set[n], family)]
        if len(present) == 1 and len(getattr(self.policy.address_set[present[0]], family)) > 1:
            return f"{keyword} {direction} @addr_{present[0]}_{suffix} "
        merged = merge(iv for n in present for iv in getattr(self.policy.address_set[n], family))
        return f"{keyword} {direction} {literal([address_text(family, iv) for iv in merged])} "

    def service_matches(self, cls, port_field):
        return [text for _, _, text in self.services(cls, port_field)]

    def services(self, cls, port_field):
        """(protocol, merged port Intervals or None, the match's text) per protocol of the
        class's services; one (None, None, "") for a class of any service."""
        if not cls.services:
            return [(None, None, "")]
        by_protocol = {}
        for name in cls.services:
            service = self.policy.service[name]
            by_protocol.setdefault(service.protocol, []).append(service)
        result = []
        for protocol in sorted(by_protocol):
            services = by_protocol[protocol]
            if any(not s.ports for s in services):
                result.append((protocol, None,
                               f"meta l4proto {L4PROTO.get(protocol, protocol)} "))
                continue
            merged = merge(iv for s in services for iv in s.ports)
            if len(services) == 1 and len(services[0].ports) > 1:
                text = f"{protocol} {port_field} @svc_{services[0].name} "
            else:
                text = f"{protocol} {port_field} {literal([port_text(iv) for iv in merged])} "
            result.append((protocol, merged, text))
        return result
