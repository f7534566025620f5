"""The rule between the HA pair and the network (box/verify.py): the sync link and every
segment must be a link the network carries traffic on, checked from both sides - the
pair's paths for HA's apply, the network's paths for a network change."""
import dataclasses

import pytest

from box import verify
from box.snapshot import CONFIRMED, PENDING
from ha.core.config import Code as HaCode
from ha.core.config import from_document as ha_from_document
from network.core.errors import Code as NetworkCode
from network.core.normalise import parse

NETWORK = """version = 2
[[interfaces]]
name = "eth0"
role = "management"
addresses = ["192.0.2.1/24"]
[[interfaces]]
name = "eth1"
role = "traffic"
[[interfaces]]
name = "eth2"
role = "unused"
[[interfaces]]
name = "eth3"
role = "traffic"
[[interfaces]]
name = "eth4"
role = "traffic"
[[bonds]]
name = "bond0"
members = ["eth3", "eth4"]
[[vlans]]
name = "eth1.100"
parent = "eth1"
id = 100
"""


def pair(sync="eth1.100", *segments):
    return ha_from_document({
        "ha": {"enabled": True, "role": "primary", "vrid": 7, "advert_ms": 100,
               "preempt": False, "sync_interface": sync, "sync_address": "10.9.9.1/30",
               "peer_address": "10.9.9.2"},
        "virtual": [{"interface": name, "addresses": [f"198.51.{index}.1/24"]}
                    for index, name in enumerate(segments or ("eth1",))]})


@pytest.fixture
def network():
    return parse(NETWORK, "network.toml")


def test_a_pair_on_traffic_links_has_no_problem(network):
    assert verify.ha_problems(pair("eth1.100", "eth1", "bond0"), [(CONFIRMED, network)]) == []
    assert verify.pair_link_problems(network, [(CONFIRMED, pair("eth1.100", "bond0"))]) == []


@pytest.mark.parametrize(("sync", "segment", "path", "reason"), [
    ("eth0", "eth1", "ha.sync_interface", "eth0 (the pair's sync link) is the management port"),
    ("eth2", "eth1", "ha.sync_interface", "eth2 (the pair's sync link) has the role unused"),
    ("eth1.100", "eth3", "virtual[0].interface",
     "eth3 (the segment of virtual[0]) is a member of the bond bond0: use the bond"),
    ("eth9", "eth1", "ha.sync_interface",
     "eth9 (the pair's sync link) is no interface of the network configuration"),
])
def test_the_pair_names_the_link_the_network_does_not_carry(network, sync, segment, path,
                                                             reason):
    problems = verify.ha_problems(pair(sync, segment), [(CONFIRMED, network)])
    assert [(p.code, p.path) for p in problems] == [(HaCode.NETWORK, path)]
    assert problems[0].message.startswith(reason), problems[0].message


def test_a_pending_network_change_is_named_and_a_place_once(network):
    problems = verify.ha_problems(pair("eth2"), [(CONFIRMED, network), (PENDING, network)])
    assert len(problems) == 1
    assert not problems[0].message.endswith("awaits confirmation)")
    pending = verify.ha_problems(pair("eth2"), [(PENDING, network)])
    assert pending[0].message.endswith("(in the network change that awaits confirmation)")


def test_no_network_configuration_no_rule():
    assert verify.ha_problems(pair("eth9", "eth8"), []) == []


def test_a_network_change_that_drops_a_pairs_link_is_named_at_that_link(network):
    # a pair whose sync link is eth2 (unused here) and whose segment is the VLAN this
    # change deletes
    changed = parse(NETWORK.replace('[[vlans]]\nname = "eth1.100"\nparent = "eth1"\nid = 100\n',
                                    ""), "network.toml")
    problems = verify.pair_link_problems(changed, [(CONFIRMED, pair("eth2", "eth1.100"))])
    assert [(p.code, p.path) for p in problems] == [(NetworkCode.HA, "interfaces[2].role"),
                                                    (NetworkCode.HA, "")]
    assert "this box's HA pair uses it: eth2 (the pair's sync link) has the role unused" in \
        problems[0].message
    assert "eth1.100 (the segment of virtual[0]) is no interface" in problems[1].message
    assert problems[1].message.endswith("change the pair first (High availability)")


ROUTED = NETWORK.replace('name = "eth1"\nrole = "traffic"',
                         'name = "eth1"\nrole = "traffic"\naddresses = ["10.1.0.1/24"]') + """
[routing]
standby = STANDBY
[routing.bgp]
asn = 65001
[[routing.bgp.neighbours]]
address = "10.1.0.2"
remote_as = 65010
"""


def role(name):
    return dataclasses.replace(pair(), role=name)


@pytest.mark.parametrize(("ha_role", "standby", "wrong"), [
    ("primary", "false", False), ("secondary", "true", False),
    ("primary", "true", True), ("secondary", "false", True)])
def test_routing_is_standby_on_the_secondary_and_only_there(ha_role, standby, wrong):
    """Issue 39: the pair's secondary announces with a longer AS path and a higher OSPF
    cost, so that its neighbours do not send it traffic while the primary runs - held
    from both sides; no rule while the role itself changes (draft and confirmed differ)."""
    network = parse(ROUTED.replace("STANDBY", standby), "network.toml")
    found = verify.pair_routing_problems(network, [(CONFIRMED, role(ha_role))])
    assert [(p.code, p.path) for p in found] == \
        ([(NetworkCode.HA, "routing.standby")] if wrong else [])
    found = verify.ha_routing_problems(role(ha_role), [(PENDING, network)])
    assert [(p.code, p.path) for p in found] == ([(HaCode.NETWORK, "ha.role")] if wrong else [])
    if wrong:
        assert "awaits confirmation" in found[0].message
    changing = [(CONFIRMED, role("primary")), (PENDING, role("secondary"))]
    assert verify.pair_routing_problems(network, changing) == []
    assert verify.pair_routing_problems(parse(NETWORK, "n.toml"), [(CONFIRMED, role(
        "secondary"))]) == []       # no routing: nothing to hold


def cluster(sync="eth1.100"):
    return ha_from_document({"ha": {"enabled": True, "mode": "cluster",
                                    "sync_interface": sync, "sync_address": "10.9.9.1/24"}})


@pytest.mark.parametrize(("routing", "wrong_at"), [
    ("false", None), ("true", "routing.standby"), (None, "routing")])
def test_a_clusters_box_routes_dynamically_and_never_standby(routing, wrong_at):
    """Issue 39 (docs/SCALE.md): the routers spread connections over a cluster's boxes and
    drop a failed one only by what each box announces - a box without BGP or OSPF would
    get nothing (or keep getting traffic when it fails), a standby one would be a spare.
    Held from both sides: the network's change is refused at routing, HA's at ha.mode."""
    network = parse(NETWORK if routing is None else ROUTED.replace("STANDBY", routing),
                    "network.toml")
    found = verify.pair_routing_problems(network, [(CONFIRMED, cluster())])
    assert [(p.code, p.path) for p in found] == \
        ([(NetworkCode.HA, wrong_at)] if wrong_at else [])
    found = verify.ha_routing_problems(cluster(), [(PENDING, network)])
    assert [(p.code, p.path) for p in found] == \
        ([(HaCode.NETWORK, "ha.mode")] if wrong_at else [])
    if wrong_at:
        assert "awaits confirmation" in found[0].message
        assert ("BGP" if wrong_at == "routing" else "spare") in found[0].message
    # the cluster's sync link is held like the pair's: a traffic link, not the management
    assert verify.ha_problems(cluster(), [(CONFIRMED, network)]) == []
    assert [p.path for p in verify.ha_problems(cluster("eth0"), [(CONFIRMED, network)])] == \
        ["ha.sync_interface"]


BRIDGED = NETWORK + """[[interfaces]]
name = "eth5"
role = "traffic"
[[interfaces]]
name = "eth6"
role = "traffic"
[[bridges]]
name = "br0"
members = ["eth5", "eth6"]
"""


@pytest.mark.parametrize("ha", [pair, cluster], ids=["pair", "cluster"])
def test_a_box_that_bridges_is_in_no_pair_nor_cluster(network, ha):
    """Issue 39: two boxes bridging the same segments make a loop, and Tusk has no HA of
    bridges (one box holding its bridge closed) - refused from both sides: HA's at
    ha.enabled, the network's at the first bridge; a disabled pair holds nothing."""
    bridged = parse(BRIDGED, "network.toml")
    [problem] = verify.ha_problems(ha(), [(PENDING, bridged)])
    assert (problem.path, problem.code) == ("ha.enabled", HaCode.NETWORK)
    assert "br0, so every frame would cross twice - a loop" in problem.message
    assert "awaits confirmation" in problem.message
    [problem] = verify.pair_link_problems(bridged, [(CONFIRMED, ha())])
    assert (problem.path, problem.code) == ("bridges[0]", NetworkCode.HA)
    assert "turn HA off first" in problem.message
    off = dataclasses.replace(ha(), enabled=False)
    assert verify.ha_problems(off, [(CONFIRMED, bridged)]) == []
    assert verify.pair_link_problems(bridged, [(CONFIRMED, off)]) == []
    assert verify.ha_problems(ha(), [(CONFIRMED, network)]) == []
