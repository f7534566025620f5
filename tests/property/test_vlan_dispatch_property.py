"""The bridge table's zone dispatch with zones of VLANs (policy/core/render_dispatch.py):
for random layouts - bridge ports in zones of whole ports, in zones of VLANs (several
zones on one port, a VLAN each) or in none - every frame (in-port, out-port, VLAN) is
sent, by the vmaps as rendered and read back in order, to the chain of the zone pair the
policy means: a (port, VLAN) is its VLAN zone's, else its port's whole zone's, else in
no zone. Plain text: the host's kernel cannot load a bridge table with conntrack;
tests/vm/test_bridge_vlan.py sends real VLAN frames through one."""
import re

from hypothesis import given, settings
from hypothesis import strategies as st

from policy.core.dispatch import OTHER
from policy.core.normalise import load_policy
from policy.core.render import render

PORTS = ("eth1", "eth2", "eth3", "eth4")
VIDS = (1, 10, 20, 30)
VMAP = re.compile(r"^\t\t(iifname \. oifname \. vlan id|iifname \. vlan id|oifname \. vlan id|"
                  r"iifname \. oifname|iifname|oifname) vmap \{ (.*) \} comment", re.M)


@st.composite
def layouts(draw):
    """{zone: (ports, vids)} with each (port, VLAN) in one zone at most."""
    zones, taken_whole, taken_vid = {}, set(), set()
    for index in range(draw(st.integers(1, 5))):
        ports = draw(st.lists(st.sampled_from(PORTS), min_size=1, max_size=2, unique=True))
        vids = tuple(draw(st.lists(st.sampled_from(VIDS), max_size=2, unique=True)))
        if any(p in taken_whole for p in ports):
            continue
        if not vids and any(p in {q for q, _ in taken_vid} for p in ports):
            continue
        if vids and any((p, v) in taken_vid for p in ports for v in vids):
            continue
        zones[f"z{index}"] = (ports, vids)
        taken_whole |= set(ports) if not vids else set()
        taken_vid |= {(p, v) for p in ports for v in vids}
    return zones


def zone_of(zones, port, vid):
    for name, (ports, vids) in zones.items():
        if port in ports and vid in vids:
            return name
    for name, (ports, vids) in zones.items():
        if port in ports and not vids:
            return name
    return OTHER


def parse(text):
    """[(key fields, {key tuple: chain})] of the forward chain's vmaps, in order."""
    forward = text[text.index("table bridge tusk_bridge"):]
    found = []
    for key, body in VMAP.findall(forward):
        elements = {}
        for element in body.split(", "):
            left, chain = element.split(" : goto ")
            elements[tuple(int(p) if p.strip().isdigit() else p.strip().strip('"')
                           for p in left.split(" . "))] = chain
        found.append((key.split(" . "), elements))
    return found


def dispatched(vmaps, port_in, port_out, vid):
    frame = {"iifname": port_in, "oifname": port_out, "vlan id": vid}
    for fields, elements in vmaps:
        key = tuple(frame[field] for field in fields)
        if key in elements:
            return elements[key]
    return None


@settings(max_examples=150, deadline=None)
@given(layouts())
def test_every_frame_goes_to_its_zone_pairs_chain(zones):
    document = {"version": 1, "zones": [
        {"name": name, "interfaces": list(ports), "bridged": True,
         **({"vlans": list(vids)} if vids else {})} for name, (ports, vids) in zones.items()],
        "services": [{"name": "s", "protocol": "tcp", "ports": [1]}],
        "classes": [{"name": f"c{a}{b}", "from": a, "to": b, "services": ["s"],
                     "action": "accept"} for a in zones for b in zones]}
    text = render(load_policy(document))
    vmaps = parse(text)
    chains = {}      # zone pair -> the chain its class lives in
    for a in zones:
        for b in zones:
            chain = re.search(rf"chain (classes_\S+) {{\n[^}}]*?class_c{a}{b}\b", text)
            chains[(a, b)] = chain.group(1) if chain else None
    for port_in in PORTS:
        for port_out in PORTS:
            for vid in VIDS:
                pair = (zone_of(zones, port_in, vid), zone_of(zones, port_out, vid))
                got = dispatched(vmaps, port_in, port_out, vid)
                if OTHER in pair:
                    assert got in (None, "default_deny"), (pair, port_in, port_out, vid, got)
                else:
                    assert got == chains[pair], (pair, port_in, port_out, vid, got)
