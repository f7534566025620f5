"""Where the Flows page's capture of a bridged connection listens (flows/core/flowref.py
bridged_ports): the ports of its class's bridged zones, found by the ct mark's class
ordinal in the policy loaded now - a route cannot place it, the bridge having no
address. Plain Python; tests/vm/test_bridge.py checks it on a real bridged connection."""
import pytest
import yaml

from flows.core.flowref import bridged_ports
from tusklib.names import CT_MARK_CLASS_SHIFT

POLICY = yaml.safe_load("""
zones:
  - {name: campus, interfaces: [eth3, eth4], bridged: true}
  - {name: dtn, interfaces: [eth5], bridged: true}
  - {name: lab, interfaces: [eth6], bridged: true}
  - {name: inside, interfaces: [eth1]}
  - {name: outside, interfaces: [eth2]}
classes:
  - {name: routed, from: inside, to: outside, action: accept}
  - {name: bulk, from: campus, to: dtn, action: accept}
  - {name: any-to-dtn, to: dtn, action: accept}
  - {name: no-zone, action: accept}
""")


def mark(ordinal, low_bits=0x3):
    """A ct mark carrying a class ordinal over other bits (the TCP profile's)."""
    return ordinal << CT_MARK_CLASS_SHIFT | low_bits


def names(ports):
    return [str(port) for port in ports]


def test_a_bridged_class_names_the_ports_of_both_its_zones():
    assert names(bridged_ports(POLICY, mark(2))) == ["eth3", "eth4", "eth5"]


def test_an_open_side_stands_for_every_bridged_zone():
    assert names(bridged_ports(POLICY, mark(3))) == ["eth3", "eth4", "eth5", "eth6"]


@pytest.mark.parametrize("ordinal", [1, 4, 0, 5, 4095], ids=[
    "routed-class", "class-of-no-zone", "no-class", "past-the-classes", "largest-ordinal"])
def test_routed_or_unknown_connections_are_left_to_the_routes(ordinal):
    assert bridged_ports(POLICY, mark(ordinal)) == ()


@pytest.mark.parametrize("document", [
    {}, None, {"classes": "x"}, {"classes": [None, "x"]},
    {"classes": [{"from": "a", "to": "b"}], "zones": [{"name": "a", "bridged": "yes"}]},
], ids=["empty", "none", "classes-not-a-list", "class-not-a-mapping", "bridged-not-true"])
def test_a_document_not_shaped_as_a_policy_places_nothing(document):
    assert bridged_ports(document, mark(1)) == ()


def test_a_name_linux_would_refuse_is_left_out():
    document = {"zones": [{"name": "a", "bridged": True, "interfaces": ["eth1", "../x", 7]},
                          {"name": "b", "bridged": True, "interfaces": ["eth2"]}],
                "classes": [{"from": "a", "to": "b"}]}
    assert names(bridged_ports(document, mark(1))) == ["eth1", "eth2"]
