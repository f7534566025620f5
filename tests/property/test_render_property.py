"""Any valid policy renders deterministically to a ruleset the real kernel accepts.

The generator builds documents that satisfy every rule in docs/POLICY.md; a
PolicyError on a generated document is therefore a failure too (hardware: true on
auto classes included: their table is Tusk's kernel's, like the flowtable). seqrand and
fastpath: always are left out: this kernel refuses them by design (tested elsewhere);
fastpath: auto, the default, is what most classes get: this kernel has no flowtables,
so what nft -c checks is the ruleset the applier renders here (flowtable=False), and
the one for Tusk's kernel may differ from it only by the flowtable and the promotion
rules.
Classes may log, the log settings vary, and there is NAT: source rules of both kinds
(none where a notrack class could leave by their zone) and port forwards, each with a
class of its own put first (so no earlier class takes its traffic) whose destination is
a set holding just the server.
"""
import ipaddress
import re

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from policy.core.fastpath import (
    FLOWTABLE,
    HW_FLOWTABLE,
    fastpath_addition,
    fastpath_devices,
    ruleset_fastpath_devices,
    with_fastpath_devices,
)
from policy.core.intervals import merge
from policy.core.model import Interval
from policy.core.normalise import load_policy
from policy.core.render import render

# "zz" starts the names of the forwards' own classes and sets: never a generated name
NAMES = st.from_regex(r"[a-z][a-z0-9_-]{0,10}", fullmatch=True).filter(
    lambda name: not name.startswith("zz"))


def ipv4_entry(dense=False):
    """An address, prefix or range; dense: all within 10.0.0.0/20, so entries overlap."""
    host = st.integers(0x0A000000, 0x0A000FFF) if dense else st.integers(0, 2**32 - 1)
    shortest = 20 if dense else 8
    return st.one_of(
        host.map(lambda n: str(ipaddress.IPv4Address(n))),
        st.tuples(host, st.integers(shortest, 32)).map(
            lambda t: str(ipaddress.IPv4Network((t[0] >> (32 - t[1]) << (32 - t[1]), t[1])))),
        st.tuples(host, st.integers(0, 500 if dense else 5000)).map(
            lambda t: f"{ipaddress.IPv4Address(t[0])}-"
                      f"{ipaddress.IPv4Address(min(t[0] + t[1], 2**32 - 1))}"))


def ipv6_entry(dense=False):
    """An address or prefix; dense: all within fd00::/116."""
    base = int(ipaddress.IPv6Address("fd00::"))
    host = st.integers(base, base + 4095) if dense else st.integers(0, 2**128 - 1)
    shortest = 116 if dense else 16
    return st.one_of(
        host.map(lambda n: str(ipaddress.IPv6Address(n))),
        st.tuples(host, st.integers(shortest, 128)).map(
            lambda t: str(ipaddress.IPv6Network((t[0] >> (128 - t[1]) << (128 - t[1]), t[1])))))


PORT = st.integers(1, 65535)
PORT_ITEM = st.one_of(PORT, st.tuples(PORT, st.integers(0, 2000)).map(
    lambda t: f"{t[0]}-{min(t[0] + t[1], 65535)}"))
DENSE_PORT_ITEM = st.one_of(st.integers(1, 100), st.tuples(st.integers(1, 100), st.integers(
    0, 20)).map(lambda t: f"{t[0]}-{t[0] + t[1]}"))


@st.composite
def policies(draw, max_classes=6, dense=False):  # noqa: C901 - a generator draws every part of a policy in turn
    """dense: addresses and ports from narrow ranges, so classes overlap (the dispatch
    compiler's test)."""
    names = draw(st.lists(NAMES, min_size=11 + max_classes, max_size=30 + max_classes,
                          unique=True))
    pool = iter(names)
    zones = [{"name": next(pool), "interfaces": [f"eth{i}", f"vl{i}.{i + 10}"]}
             for i in range(draw(st.integers(1, 3)))]
    address_sets = []
    for _ in range(draw(st.integers(0, 5 if dense else 3))):
        entries = draw(st.lists(st.one_of(ipv4_entry(dense), ipv6_entry(dense)), min_size=1,
                                max_size=8))
        canonical = {}
        for entry in entries:   # the same address written twice is an error: keep one
            canonical.setdefault(str(entry), entry)
        address_sets.append({"name": next(pool), "entries": list(canonical.values())})
    services = []
    for _ in range(draw(st.integers(0, 6 if dense else 4))):
        protocol = draw(st.sampled_from(["tcp", "udp", "sctp", "icmp", "icmpv6", "esp"]))
        service = {"name": next(pool), "protocol": protocol}
        if protocol in ("tcp", "udp", "sctp"):
            service["ports"] = draw(st.lists(DENSE_PORT_ITEM if dense else PORT_ITEM,
                                             max_size=5))
        services.append(service)
    families = {a["name"]: {ipaddress.ip_network(e.split("-")[0], strict=False).version
                            for e in a["entries"]} for a in address_sets}
    classes, seen = [], set()
    for _ in range(draw(st.integers(0, max_classes))):
        try:
            name = next(pool)
        except StopIteration:
            break
        cls = {"name": name, "action": draw(st.sampled_from(["accept", "drop", "reject"]))}
        for key in ("from", "to"):
            if draw(st.booleans()):
                cls[key] = draw(st.sampled_from(zones))["name"]
        if address_sets:
            for key in ("source", "destination"):
                if draw(st.booleans()):
                    cls[key] = draw(st.lists(st.sampled_from([a["name"] for a in address_sets]),
                                             min_size=1, max_size=2, unique=True))
        if services:
            cls["services"] = draw(st.lists(st.sampled_from([s["name"] for s in services]),
                                            max_size=3, unique=True))
        src = set().union(*(families[n] for n in cls.get("source", []))) or {4, 6}
        dst = set().union(*(families[n] for n in cls.get("destination", []))) or {4, 6}
        if not src & dst:
            cls.pop("destination")
        protocols = {s["protocol"] for s in services if s["name"] in cls.get("services", [])}
        if cls["action"] == "accept" and (not protocols or "tcp" in protocols):
            mode = draw(st.sampled_from(["none", "fixed", "pmtu"]))
            if mode != "none":
                cls["mss"] = {"mode": mode}
                if mode == "fixed":
                    cls["mss"]["value"] = draw(st.integers(536, 65535))
            options = {k: draw(st.sampled_from(["keep", "strip"]))
                       for k in ("window_scale", "sack_permitted", "timestamps")}
            if draw(st.booleans()):
                cls["tcp_options"] = options
        cls["notrack"] = draw(st.booleans())
        cls["log"] = draw(st.booleans())
        if cls["action"] == "accept" and not cls["notrack"] and zones and (
                not protocols or "tcp" in protocols):
            mode = draw(st.sampled_from([None, "auto", "never"]))
            if mode:
                cls["fastpath"] = mode
            if mode != "never" and draw(st.booleans()):
                cls["fastpath_after"] = draw(st.one_of(
                    st.integers(0, 10 ** 12), st.sampled_from(["1 MB", "64KiB", "2 GB", "0"])))
            if mode != "never" and draw(st.booleans()):
                cls["hardware"] = True
        key = (cls.get("from"), cls.get("to"), frozenset(cls.get("source", [])),
               frozenset(cls.get("destination", [])), frozenset(cls.get("services", [])))
        if key not in seen:   # an identical earlier match would shadow it: an error
            seen.add(key)
            classes.append(cls)
    nat = {"source": source_rules(draw, zones, address_sets, families, classes),
           "forwards": []}
    forward_classes = []
    for index in range(draw(st.integers(0, 3))):
        forward, server, cls = port_forward(draw, index, zones)
        nat["forwards"].append(forward)
        address_sets.append(server)
        forward_classes.append(cls)
    settings = {"log_default_deny": draw(st.booleans()), "log_rate": draw(st.integers(1, 1000))}
    return {"version": 1, "settings": settings, "zones": zones, "address_sets": address_sets,
            "services": services, "classes": forward_classes + classes, "nat": nat}


def host(draw, family, network):
    """A unicast address of family in network (a prefix no special address is in)."""
    net = ipaddress.ip_network(network)
    return str(net[draw(st.integers(1, net.num_addresses - 2))])


def source_rules(draw, zones, address_sets, families, classes):
    """SNAT rules; none leaving by a zone a notrack class may send to (its packets are
    never translated: an error)."""
    if any(c["notrack"] and "to" not in c for c in classes):
        return []
    untracked = {c["to"] for c in classes if c["notrack"]}
    egress = [z["name"] for z in zones if z["name"] not in untracked]
    rules = []
    for index in range(draw(st.integers(0, 3)) if egress else 0):
        rule = {"name": f"s{index}", "to": draw(st.sampled_from(egress)),
                "translate": draw(st.sampled_from(["masquerade", "address"]))}
        available = {4, 6}
        if address_sets and draw(st.booleans()):
            rule["source"] = draw(st.lists(st.sampled_from([a["name"] for a in address_sets]),
                                           min_size=1, max_size=2, unique=True))
            available = set().union(*(families[n] for n in rule["source"]))
        if rule["translate"] == "address":
            if draw(st.booleans()) and 4 in available or 6 not in available:
                first = ipaddress.ip_address(host(draw, 4, "198.51.100.0/24"))
            else:
                first = ipaddress.ip_address(host(draw, 6, "2001:db8:5::/64"))
            width = draw(st.integers(0, 20))
            rule["address"] = str(first) if not width else f"{first}-{first + width}"
        if draw(st.booleans()):
            rule["ports"] = draw(PORT_ITEM)
        rules.append(rule)
    return rules


def port_forward(draw, index, zones):
    """A forward (ports and a server of their own: forwards never overlap, nor does one's
    class take another's traffic), the set holding its server and the class admitting
    it."""
    six = draw(st.booleans())
    base = 1000 + index * 3000
    width = draw(st.integers(0, 60))
    kind = draw(st.sampled_from(["one", "range", "list"]))
    ports = ([base] if kind == "one" else [f"{base}-{base + width}"] if kind == "range"
             else [base, base + 1, f"{base + 10}-{base + 10 + width}"])
    forward = {"name": f"f{index}", "from": draw(st.sampled_from(zones))["name"],
               "protocol": draw(st.sampled_from(["tcp", "udp", "sctp", "udplite"])),
               "ports": ports,
               "to_address": host(draw, 6, f"2001:db8:7:{index}::/64") if six
               else host(draw, 4, f"10.77.{index}.0/24"),
               "class": f"zz-c{index}"}
    if draw(st.booleans()):
        forward["address"] = host(draw, 6, "2001:db8:9::/64") if six \
            else host(draw, 4, "192.0.2.0/24")
    to_ports = draw(st.sampled_from(["same", "one", "shifted"]))
    if to_ports == "one":
        forward["to_ports"] = draw(PORT)
    elif to_ports == "shifted" and kind == "range":
        start = draw(st.integers(1, 65535 - width))
        forward["to_ports"] = f"{start}-{start + width}"
    hairpin = len(zones) > 1 and draw(st.booleans())
    if hairpin:
        forward["hairpin"] = True
    server = {"name": f"zz-s{index}", "entries": [forward["to_address"]]}
    cls = {"name": f"zz-c{index}", "destination": [server["name"]], "action": "accept"}
    if not hairpin and draw(st.booleans()):
        cls["from"] = forward["from"]
    if forward["protocol"] == "tcp" and draw(st.booleans()):
        cls["mss"] = {"mode": "pmtu"}
        cls["tcp_options"] = {"sack_permitted": "strip"}
    cls["log"] = draw(st.booleans())
    return forward, server, cls


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(document=policies())
def test_valid_policies_render_to_rulesets_nft_accepts(document, nft_check):
    policy = load_policy(document)
    ruleset = render(policy, flowtable=False)
    assert render(load_policy(document), flowtable=False) == ruleset, "not deterministic"
    assert without_fast_path(render(policy)) == ruleset
    promoted = {c.name for c in policy.classes if c.auto_fast and not c.in_hardware}
    full = render(policy)
    assert (f"\tflowtable {FLOWTABLE} {{" in full) == bool(promoted)
    # the hardware classes' flowtable: over their interfaces, "flags offload" kept when
    # the boot step loads it over fewer
    in_hardware = fastpath_devices(policy, hardware=True)
    assert (f"\tflowtable {HW_FLOWTABLE} {{" in full) == bool(in_hardware)
    assert ruleset_fastpath_devices(full, HW_FLOWTABLE) == in_hardware
    assert with_fastpath_devices(full, in_hardware, HW_FLOWTABLE) == full
    if in_hardware:
        fewer = with_fastpath_devices(full, in_hardware[1:], HW_FLOWTABLE)
        assert ruleset_fastpath_devices(fewer, HW_FLOWTABLE) == in_hardware[1:]
        assert fewer.count("\t\tflags offload\n") == 1
        assert fastpath_addition(in_hardware[:1], HW_FLOWTABLE).startswith(
            f"add flowtable inet tusk_offload {HW_FLOWTABLE} {{")
    # what the boot step loads while some of the fast path's devices do not exist yet:
    # the flowtable over the others, and nothing else changed (applier.loadable)
    wanted = fastpath_devices(policy)
    assert ruleset_fastpath_devices(full) == wanted
    assert with_fastpath_devices(full, wanted) == full
    for fewer in (wanted[1:], []):
        loadable = with_fastpath_devices(full, fewer)
        assert ruleset_fastpath_devices(loadable) == fewer
        assert without_fast_path(loadable) == ruleset
    if wanted:
        assert fastpath_addition(wanted[:1]) == (
            f'add flowtable inet tusk {FLOWTABLE} {{\n\thook ingress priority filter\n'
            f'\tdevices = {{ "{wanted[0]}" }}\n\tcounter\n}}\n')
    names = {f"class_{c.name}": (i, c.name) for i, c in enumerate(policy.classes)}
    for line in ruleset.splitlines():
        # a rule that takes a class's packets goes to class_<name> or carries its counted
        # verdict, and names the class it came from (maps: test_dispatch_property.py)
        target = re.search(r'(?:goto |counter name ")(class_[^" ]+)"? .*comment '
                           r'"tusk: classes\[(\d+)\] (\S+)"', line)
        if target:
            assert names[target.group(1)] == (int(target.group(2)), target.group(3)), line
    for index, cls in enumerate(policy.classes):
        logs = f'log group 1 prefix "tusk:{cls.action}:{cls.name}" comment "tusk: classes[{index}] '
        assert (logs in ruleset) == cls.log, f"classes[{index}] log: {cls.log}"
    assert ('prefix "tusk:drop:" comment' in ruleset) == policy.settings.log_default_deny
    assert ("\tlimit log_rate {" in ruleset) == policy.logs()
    for section, chain, items in (("forwards", "nat_prerouting", policy.nat.forwards),
                                  ("source", "nat_postrouting", policy.nat.source)):
        body = ruleset.split(f"\tchain {chain} {{\n")[1].split("\n\t}")[0] if items else ""
        for index, item in enumerate(items):
            assert f'comment "tusk: nat.{section}[{index}] {item.name}"' in body, (section, index)
    result = nft_check(ruleset)
    assert result.returncode == 0, f"nft -c refused:\n{result.stderr}\n{ruleset}"


def without_fast_path(ruleset):
    """The ruleset less its flowtable object, its promotion rules and the hardware fast
    path's table (but for the lines that delete the one before)."""
    ruleset = re.sub(rf"\tflowtable {FLOWTABLE} {{\n(\t\t[^\n]*\n)*\t}}\n", "", ruleset)
    ruleset = re.sub(r"^table inet tusk_offload \{\n(?:[\t][^\n]*\n)*\}\n", "", ruleset,
                     flags=re.MULTILINE)
    return "".join(line for line in ruleset.splitlines(keepends=True)
                   if not line.startswith("\t\tmeta l4proto tcp ct mark and 0xfffe0000 ")
                   or " flow add @" not in line)


@given(st.lists(st.tuples(st.integers(0, 300), st.integers(0, 40)), max_size=30))
def test_merge_covers_the_same_integers_without_overlap_or_adjacency(pairs):
    intervals = [Interval(low, low + width) for low, width in pairs]
    merged = merge(intervals)
    covered = {n for iv in intervals for n in range(iv.low, iv.high + 1)}
    assert {n for iv in merged for n in range(iv.low, iv.high + 1)} == covered
    for first, second in zip(merged, merged[1:]):
        assert first.high + 1 < second.low
    assert all(iv.low <= iv.high for iv in merged)
