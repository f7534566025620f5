"""The class dispatch compiler (policy/core/dispatch.py) keeps first-match: for random
policies - overlapping address sets and port ranges, classes of any zone, IPv4 and
IPv6, ICMP and other protocols, notrack classes and their replies, port forwards'
classes - and random packets, the plan the forward chain is rendered from sends each
packet to the same class as a straightforward reference evaluator that reads the
policy class by class (or to none: the default deny). The plan is checked as rendered
(splits on the port or protocol only where a run is long enough, their buckets rules
or maps), with every run and bucket forced into maps, with runs compiled straight
into address maps (no split), and with the limits forced down to the rule-by-rule
fallback. tests/netns/
test_dispatch_traffic.py sends real packets through the rendered ruleset."""
import ipaddress

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_render_property import policies

from policy.core.dispatch import OTHER, PORT_PROTOCOL_NUMBERS, PROTOCOL_NUMBERS
from policy.core.normalise import load_policy
from policy.core.render import dispatch_plan

OTHER_INTERFACE = "unzoned0"
FAMILY_BITS = {"ipv4": 32, "ipv6": 128}


# -- the reference: the policy read class by class ----------------------------------------

def reference(policy, packet):
    """The index of the first class that takes the packet, None for the default deny."""
    for index, cls in enumerate(policy.classes):
        if takes(policy, cls, packet, reverse=False) \
                or (cls.notrack and takes(policy, cls, packet, reverse=True)):
            return index
    return None


def takes(policy, cls, packet, reverse):
    """Whether the class matches the packet (reverse: as its reply - a notrack class)."""
    zone_of = {i: z.name for z in policy.zones for i in z.interfaces}
    src_zone, dst_zone = (cls.to_zone, cls.from_zone) if reverse else (cls.from_zone,
                                                                       cls.to_zone)
    if src_zone is not None and zone_of.get(packet["iif"]) != src_zone:
        return False
    if dst_zone is not None and zone_of.get(packet["oif"]) != dst_zone:
        return False
    src, dst = (cls.destination, cls.source) if reverse else (cls.source, cls.destination)
    for names, address in ((src, packet["saddr"]), (dst, packet["daddr"])):
        if names and not any(iv.low <= address <= iv.high for n in names
                             for iv in getattr(policy.address_set[n], packet["family"])):
            return False
    if not cls.services:
        return True
    port = packet["sport"] if reverse else packet["dport"]
    for name in cls.services:
        service = policy.service[name]
        if PROTOCOL_NUMBERS[service.protocol] != packet["protocol"]:
            continue
        if not service.ports or any(iv.low <= port <= iv.high for iv in service.ports):
            return True
    return False


# -- the plan, as nftables evaluates what render() makes of it ----------------------------

def planned(policy, plan, packet):
    zone_of = {i: z.name for z in policy.zones for i in z.interfaces}
    chain = plan.chain(zone_of.get(packet["iif"], OTHER), zone_of.get(packet["oif"], OTHER))
    if chain is None:
        return None                                   # goto default_deny
    return segments_take(chain.segments, packet)


def segments_take(segments, packet):
    """The class a chain's segments send the packet to, None when it goes on."""
    for segment in segments:
        if not segment.maps and not segment.splits:
            for match in segment.matches:
                if rule_takes(match, packet):
                    return match.index
            continue
        for split in segment.splits:
            if split.protocol is None:
                if packet["protocol"] in PORT_PROTOCOL_NUMBERS:
                    continue                          # meta l4proto vmap: no element
                key = packet["protocol"]
            elif packet["protocol"] != split.protocol:
                continue                              # meta l4proto tcp th dport vmap
            else:
                key = packet["dport"]
            hits = [b for iv, b in split.buckets if iv.low <= key <= iv.high]
            assert len(hits) <= 1, f"overlapping intervals in a split: {hits}"
            if hits and hits[0].direct is not None:
                return hits[0].direct                 # goto class_<name>
            if hits:
                taken = segments_take(hits[0].segments, packet)     # jump bucket
                if taken is not None:
                    return taken
        for vmap in segment.maps:
            if vmap.family not in (None, packet["family"]):
                continue                              # ip saddr: IPv4 packets only
            # only the fields the map's key has (an address no element narrows is left
            # out); th dport of a packet of another protocol reads other bytes: the key
            # is still looked up (nothing of a port protocol may match it)
            fields = [d for d, name in enumerate(("saddr", "daddr")) if name in
                      vmap.addresses()] + [2] + ([3] if vmap.ports else [])
            key = (packet["saddr"], packet["daddr"], packet["protocol"], packet["dport"])
            hits = [index for box, index in vmap.elements
                    if all(box[d].low <= key[d] <= box[d].high for d in fields)]
            assert len(hits) <= 1, f"overlapping elements in a map: {hits}"
            if hits:
                return hits[0]
    return None


def rule_takes(match, packet):
    if match.family not in (None, packet["family"]):
        return False
    for intervals, address in ((match.saddr, packet["saddr"]), (match.daddr, packet["daddr"])):
        if intervals is not None and not any(iv.low <= address <= iv.high for iv in intervals):
            return False
    if match.protocol is not None and PROTOCOL_NUMBERS[match.protocol] != packet["protocol"]:
        return False
    port = packet["sport"] if match.reverse else packet["dport"]
    return match.ports is None or any(iv.low <= port <= iv.high for iv in match.ports)


# -- packets near the policy's edges ------------------------------------------------------

def edges(policy, family):
    """Addresses at, just inside and just outside every interval of the family."""
    top = 2 ** FAMILY_BITS[family] - 1
    values = {0, top}
    for aset in policy.address_sets:
        for iv in getattr(aset, family):
            values.update({iv.low, iv.high, max(iv.low - 1, 0), min(iv.high + 1, top),
                           (iv.low + iv.high) // 2})
    return sorted(values)


def port_edges(policy):
    values = {0, 1, 65535}
    for service in policy.services:
        for iv in service.ports:
            values.update({iv.low, iv.high, max(iv.low - 1, 0), min(iv.high + 1, 65535)})
    return sorted(values)


@st.composite
def packets(draw, policy):
    interfaces = [i for z in policy.zones for i in z.interfaces] + [OTHER_INTERFACE]
    family = draw(st.sampled_from(["ipv4", "ipv6"]))
    addresses = st.one_of(st.sampled_from(edges(policy, family)),
                          st.integers(0, 2 ** FAMILY_BITS[family] - 1))
    ports = st.one_of(st.sampled_from(port_edges(policy)), st.integers(0, 65535))
    return {"iif": draw(st.sampled_from(interfaces)), "oif": draw(st.sampled_from(interfaces)),
            "family": family, "saddr": draw(addresses), "daddr": draw(addresses),
            "protocol": draw(st.one_of(st.sampled_from(sorted(PROTOCOL_NUMBERS.values())),
                                       st.integers(0, 255))),
            "sport": draw(ports), "dport": draw(ports)}


LIMITS = {"as rendered": {}, "all maps": {"linear_max": 0},
          "address maps": {"linear_max": 0, "split": False},
          "fallback": {"linear_max": 0, "elements_max": 3}}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(document=policies(max_classes=24, dense=True), data=st.data())
def test_the_plan_takes_every_packet_to_the_reference_class(document, data):
    policy = load_policy(document)
    plans = {name: dispatch_plan(policy, **limits) for name, limits in LIMITS.items()}
    for _ in range(60):
        packet = data.draw(packets(policy))
        expected = reference(policy, packet)
        for name, plan in plans.items():
            got = planned(policy, plan, packet)
            assert got == expected, (name, describe(packet), expected, got)


def describe(packet):
    make = ipaddress.IPv4Address if packet["family"] == "ipv4" else ipaddress.IPv6Address
    return {**packet, "saddr": str(make(packet["saddr"])), "daddr": str(make(packet["daddr"]))}


def test_a_port_protocol_packet_never_meets_the_map_without_ports():
    """The two kinds of map never hold the same protocol (their order does not matter)."""
    from policy.core.dispatch import _NO_PORT_PROTOCOLS
    assert not any(iv.low <= p <= iv.high for p in PORT_PROTOCOL_NUMBERS
                   for iv in _NO_PORT_PROTOCOLS)
    covered = {p for iv in _NO_PORT_PROTOCOLS for p in range(iv.low, iv.high + 1)}
    assert covered | set(PORT_PROTOCOL_NUMBERS) == set(range(256))
