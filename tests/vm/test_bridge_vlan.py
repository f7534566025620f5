"""Tusk's policy on a VLAN-aware bridge, on Tusk's kernel (issue 39), judged from what
guest/scenarios/bridge_vlan.py saw: zones of whole ports take every VLAN's traffic as
the untagged (ARP and neighbour discovery pass inside the tag), and zones of VLANs tell
one VLAN from another on the same ports. A scenario of the second session's boot
(conftest.py BESIDE)."""
import pytest
from saved import load


@pytest.fixture(scope="module")
def vlans(beside_scenario):
    """The folder of guest/scenarios/bridge_vlan.py: a VLAN-aware bridge, VLANs 10 and 20
    tagged on both ports, the ends on VLAN sub-interfaces and untagged."""
    return beside_scenario("bridge-vlan")


def counted(folder, phase):
    return {c["counter"]["name"]: c["counter"]["packets"]
            for c in load(folder, f"{phase}-nft-counters.json")["nftables"] if "counter" in c}


def test_zones_of_whole_ports_filter_every_vlan_of_a_vlan_aware_bridge(vlans):
    """Zones naming the ports: each VLAN's traffic as the untagged - its hosts find each
    other (ARP and neighbour discovery inside the tag, which `ether type` missed), the
    classes take it, the default deny keeps the closed port - both families."""
    results = load(vlans, "results.json")["ports"]
    assert results["untagged"] == {"ping": True, "ping6": None, "open": True, "open6": None,
                                   "closed": False}, results
    for way in ("vlan10", "vlan20"):
        assert results[way] == {"ping": True, "ping6": True, "open": True, "open6": True,
                                "closed": False}, (way, results)
    counters = counted(vlans, "ports")
    assert counters["class_web"] >= 5 and counters["class_diagnostics"] >= 5, counters


def test_zones_of_vlans_tell_one_vlan_from_another_on_the_same_ports(vlans):
    """Zones of VLANs on the same two ports: VLAN 10 reaches the web port and not ping,
    VLAN 20 the reverse; untagged frames (the default VLAN) are in no zone."""
    results = load(vlans, "results.json")["by-vlan"]
    assert results["vlan10"] == {"ping": False, "ping6": False, "open": True, "open6": True,
                                 "closed": False}, results
    assert results["vlan20"] == {"ping": True, "ping6": True, "open": False, "open6": False,
                                 "closed": False}, results
    assert results["untagged"] == {"ping": False, "ping6": None, "open": False,
                                   "open6": None, "closed": False}, results
    counters = counted(vlans, "by-vlan")
    assert counters["class_web10"] >= 2 and counters["class_ping20"] >= 2, counters
    ruleset = (vlans / "by-vlan-ruleset.txt").read_text()
    assert "iifname . oifname . vlan id vmap" in ruleset, ruleset
