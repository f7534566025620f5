"""Bridged zones of VLANs in the policy (issue 39: zones on the VLANs of a VLAN-aware
bridge's ports): what a zone's `vlans` may say, each refusal naming the field. Plain
Python; the rendering is golden case 32, the traffic tests/vm/test_bridge_vlan.py."""
import pytest

from policy.core.errors import PolicyError
from policy.core.normalise import load_policy


def zones(*items):
    return {"version": 1, "zones": list(items)}


def refused(document):
    with pytest.raises(PolicyError) as error:
        load_policy(document)
    return [(p.path, p.message) for p in error.value.problems]


def test_zones_of_vlans_share_ports_one_vlan_each():
    policy = load_policy(zones(
        {"name": "science", "interfaces": ["eth1", "eth2"], "bridged": True, "vlans": [10]},
        {"name": "office", "interfaces": ["eth1", "eth2"], "bridged": True,
         "vlans": [20, 4094, 1]}))
    assert [(z.name, z.vlans) for z in policy.zones] == [("science", (10,)),
                                                        ("office", (20, 4094, 1))]


BAD = [
    ("on a routed zone", [{"name": "a", "interfaces": ["eth1.10"], "vlans": [10]}],
     "zones[0].vlans", "only a bridged zone names VLANs"),
    ("empty", [{"name": "a", "interfaces": ["eth1"], "bridged": True, "vlans": []}],
     "zones[0].vlans", "must name at least one VLAN id"),
    ("not a list", [{"name": "a", "interfaces": ["eth1"], "bridged": True, "vlans": 10}],
     "zones[0].vlans", "must be a list"),
    ("zero", [{"name": "a", "interfaces": ["eth1"], "bridged": True, "vlans": [0]}],
     "zones[0].vlans[0]", "0 is below 1"),
    ("4095", [{"name": "a", "interfaces": ["eth1"], "bridged": True, "vlans": [10, 4095]}],
     "zones[0].vlans[1]", "4095 is above 4094"),
    ("text", [{"name": "a", "interfaces": ["eth1"], "bridged": True, "vlans": ["10x"]}],
     "zones[0].vlans[0]", "must be a whole number"),
    ("twice", [{"name": "a", "interfaces": ["eth1"], "bridged": True, "vlans": [10, 10]}],
     "zones[0].vlans[1]", "VLAN 10 is listed twice"),
    ("a VLAN of a port in two zones",
     [{"name": "a", "interfaces": ["eth1"], "bridged": True, "vlans": [10, 20]},
      {"name": "b", "interfaces": ["eth1"], "bridged": True, "vlans": [30, 20]}],
     "zones[1].interfaces[0]", "eth1 VLAN 20 already belongs to zone 'a'"),
    ("a whole port after its VLANs",
     [{"name": "a", "interfaces": ["eth1"], "bridged": True, "vlans": [10]},
      {"name": "b", "interfaces": ["eth1"], "bridged": True}],
     "zones[1].interfaces[0]", "eth1 already belongs to zone 'a' for VLANs 10"),
    ("VLANs of a whole port",
     [{"name": "a", "interfaces": ["eth1"], "bridged": True},
      {"name": "b", "interfaces": ["eth1"], "bridged": True, "vlans": [10]}],
     "zones[1].interfaces[0]", "eth1 already belongs to zone 'a'"),
]


@pytest.mark.parametrize("items,path,message", [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_vlans_are_refused_naming_the_field(items, path, message):
    problems = refused(zones(*items))
    assert any(p == path and message in m for p, m in problems), problems


def test_a_class_between_zones_of_vlans_is_bridged_and_keeps_the_bridge_rules():
    problems = refused({**zones(
        {"name": "a", "interfaces": ["eth1"], "bridged": True, "vlans": [10]},
        {"name": "b", "interfaces": ["eth2"], "bridged": True, "vlans": [10]}),
        "classes": [{"name": "c", "from": "a", "to": "b", "action": "reject"}]})
    assert [p for p, _ in problems] == ["classes[0].action"], problems
