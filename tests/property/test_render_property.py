"""Any valid policy renders deterministically to a ruleset the real kernel accepts.

The generator builds documents that satisfy every rule in docs/POLICY.md; a
PolicyError on a generated document is therefore a failure too. seqrand and
fastpath are left out: this kernel refuses them by design (tested elsewhere).
"""
import ipaddress
import re

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from policy.core.intervals import merge
from policy.core.model import Interval
from policy.core.normalise import load_policy
from policy.core.render import render

NAMES = st.from_regex(r"[a-z][a-z0-9_-]{0,10}", fullmatch=True)


def ipv4_entry():
    host = st.integers(0, 2**32 - 1)
    return st.one_of(
        host.map(lambda n: str(ipaddress.IPv4Address(n))),
        st.tuples(host, st.integers(8, 32)).map(
            lambda t: str(ipaddress.IPv4Network((t[0] >> (32 - t[1]) << (32 - t[1]), t[1])))),
        st.tuples(host, st.integers(0, 5000)).map(
            lambda t: f"{ipaddress.IPv4Address(t[0])}-"
                      f"{ipaddress.IPv4Address(min(t[0] + t[1], 2**32 - 1))}"))


def ipv6_entry():
    host = st.integers(0, 2**128 - 1)
    return st.one_of(
        host.map(lambda n: str(ipaddress.IPv6Address(n))),
        st.tuples(host, st.integers(16, 128)).map(
            lambda t: str(ipaddress.IPv6Network((t[0] >> (128 - t[1]) << (128 - t[1]), t[1])))))


PORT = st.integers(1, 65535)
PORT_ITEM = st.one_of(PORT, st.tuples(PORT, st.integers(0, 2000)).map(
    lambda t: f"{t[0]}-{min(t[0] + t[1], 65535)}"))


@st.composite
def policies(draw):
    names = draw(st.lists(NAMES, min_size=11, max_size=30, unique=True))
    pool = iter(names)
    zones = [{"name": next(pool), "interfaces": [f"eth{i}", f"vl{i}.{i + 10}"]}
             for i in range(draw(st.integers(1, 3)))]
    address_sets = []
    for _ in range(draw(st.integers(0, 3))):
        entries = draw(st.lists(st.one_of(ipv4_entry(), ipv6_entry()), min_size=1, max_size=8))
        canonical = {}
        for entry in entries:   # the same address written twice is an error: keep one
            canonical.setdefault(str(entry), entry)
        address_sets.append({"name": next(pool), "entries": list(canonical.values())})
    services = []
    for _ in range(draw(st.integers(0, 4))):
        protocol = draw(st.sampled_from(["tcp", "udp", "sctp", "icmp", "icmpv6", "esp"]))
        service = {"name": next(pool), "protocol": protocol}
        if protocol in ("tcp", "udp", "sctp"):
            service["ports"] = draw(st.lists(PORT_ITEM, max_size=5))
        services.append(service)
    families = {a["name"]: {ipaddress.ip_network(e.split("-")[0], strict=False).version
                            for e in a["entries"]} for a in address_sets}
    classes, seen = [], set()
    for _ in range(draw(st.integers(0, 6))):
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
        key = (cls.get("from"), cls.get("to"), frozenset(cls.get("source", [])),
               frozenset(cls.get("destination", [])), frozenset(cls.get("services", [])))
        if key not in seen:   # an identical earlier match would shadow it: an error
            seen.add(key)
            classes.append(cls)
    return {"version": 1, "zones": zones, "address_sets": address_sets,
            "services": services, "classes": classes}


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(document=policies())
def test_valid_policies_render_to_rulesets_nft_accepts(document, nft_check):
    policy = load_policy(document)
    ruleset = render(policy)
    assert render(load_policy(document)) == ruleset, "render is not deterministic"
    names = {f"class_{c.name}": (i, c.name) for i, c in enumerate(policy.classes)}
    forward = ruleset[ruleset.index("\tchain forward {"):]
    dispatched = set()
    for line in forward.splitlines():
        # a dispatch rule jumps to class_<name> or carries the class's counted verdict
        target = re.search(r'(?:jump |counter name ")(class_[^" ]+)"? .*comment '
                           r'"tusk: classes\[(\d+)\] (\S+)"', line)
        if target:
            assert names[target.group(1)] == (int(target.group(2)), target.group(3)), line
            dispatched.add(target.group(1))
    assert dispatched == set(names), "every class needs at least one dispatch rule"
    result = nft_check(ruleset)
    assert result.returncode == 0, f"nft -c refused:\n{result.stderr}\n{ruleset}"


@given(st.lists(st.tuples(st.integers(0, 300), st.integers(0, 40)), max_size=30))
def test_merge_covers_the_same_integers_without_overlap_or_adjacency(pairs):
    intervals = [Interval(low, low + width) for low, width in pairs]
    merged = merge(intervals)
    covered = {n for iv in intervals for n in range(iv.low, iv.high + 1)}
    assert {n for iv in merged for n in range(iv.low, iv.high + 1)} == covered
    for first, second in zip(merged, merged[1:]):
        assert first.high + 1 < second.low
    assert all(iv.low <= iv.high for iv in merged)
