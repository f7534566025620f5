"""The Network pages' bridges (issue 39's transparent bridge mode) and the policy's
bridged zones that meet them: saved only when the whole network holds together, each
problem next to its field, and the policy's side told which zones are bridged. The web
tier's namespace has two ports (eth1 the management port, eth2): its bridge joins two
VLANs of eth2, a bridge a real box would make of two ports."""
import pytest
from test_network_pages import VLAN, add, configured, machine, snapshot, version  # noqa: F401
from tuskweb import errors_of

from box import verify
from network import draft as drafts
from network.core.normalise import from_document
from policy import draft as policy_drafts
from policy.core.errors import PolicyError
from policy.core.normalise import load_policy

BRIDGE = {"name": "br0", "members": ["eth2.100", "eth2.200"], "bpdu": "forward",
          "vlans": "", "description": "in front of the transfer nodes", "mtu": "0"}


@pytest.fixture
def bridgeable(configured):  # noqa: F811 - the fixture of test_network_pages
    """eth2 without addresses, carrying VLANs 100 and 200 without addresses."""
    client = configured
    response = client.post("/network/vlans/0/", {**VLAN, "addresses": "",
                                                  "version": version()})
    assert response.status_code == 302, errors_of(response)
    response = add(client, "vlans", **{**VLAN, "name": "eth2.200", "id": "200",
                                       "addresses": ""})
    assert response.status_code == 302, errors_of(response)
    response = client.post("/network/interfaces/edit/?port=eth2", {
        "version": version(), "role": "traffic", "description": "", "addresses": "",
        "mtu": "0"})
    assert response.status_code == 302, errors_of(response)
    return client


def test_a_bridge_through_the_form_is_in_the_draft_and_on_its_page(bridgeable):
    response = add(bridgeable, "bridges", **{**BRIDGE, "stp": "on"})
    assert response.status_code == 302, errors_of(response)
    assert drafts.get().document["bridges"] == [{
        "name": "br0", "members": ["eth2.100", "eth2.200"], "stp": True, "bpdu": "forward",
        "vlans": [], "description": "in front of the transfer nodes", "mtu": 0}]
    page = bridgeable.get("/network/bridges/").content.decode()
    assert 'id="bridge-note"' in page and "eth2.100, eth2.200" in page and "on" in page
    assert bridgeable.get("/network/bridges/0/").status_code == 200
    assert "(in br0)" not in bridgeable.get("/network/").content.decode()  # VLANs, no port
    # renaming the bridge's member renames it in the bridge
    response = bridgeable.post("/network/vlans/1/", {**VLAN, "name": "eth2.v200", "id": "200",
                                                     "addresses": "", "version": version()})
    assert response.status_code == 302, errors_of(response)
    assert drafts.get().document["bridges"][0]["members"] == ["eth2.100", "eth2.v200"]


BAD = [
    ("one member", {"members": ["eth2.100"]}, "members", "a bridge joins at least 2 links"),
    ("a member with an address", {"members": ["eth2.100", "eth1"]}, "members",
     "eth1 is the management port: it cannot be bridged"),
    ("bpdu drop with stp", {"stp": "on", "bpdu": "drop"}, "bpdu",
     "bpdu drop is for a bridge without stp"),
    ("a VLAN id that is no number", {"vlans": "100 x"}, "vlans", "is not a VLAN id (a number"),
    ("a VLAN id out of range", {"vlans": "100 5000"}, "vlans", "vlans[1]: 5000 is outside"),
]


@pytest.mark.parametrize("what,fields,field,message", BAD, ids=[b[0] for b in BAD])
def test_bad_bridge_input_names_the_field_and_saves_nothing(bridgeable, what, fields, field,
                                                           message):
    before = snapshot()
    response = add(bridgeable, "bridges", **{**BRIDGE, **fields})
    assert response.status_code == 400
    errors = errors_of(response)
    assert any(message in m for m in errors.get(field, [])), errors
    assert snapshot() == before


def test_a_vlan_on_the_bridge_and_an_address_on_its_member_are_refused(bridgeable):
    assert add(bridgeable, "bridges", **BRIDGE).status_code == 302
    before = snapshot()
    response = add(bridgeable, "vlans", **{**VLAN, "name": "br0.7", "parent": "br0",
                                           "id": "7", "addresses": ""})
    # the form offers ports and bonds as parents: a bridge is not even a choice
    assert response.status_code == 400 and "parent" in errors_of(response)
    response = bridgeable.post("/network/vlans/0/", {**VLAN, "version": version()})
    assert response.status_code == 400
    assert "eth2.100 has addresses: a bridge port has none" in \
        " ".join(errors_of(response)[""]), errors_of(response)
    assert snapshot() == before


def test_the_policy_must_say_which_zones_are_bridged(bridgeable):
    """A zone on a bridge's ports is bridged: true, a bridged zone names a bridge's ports
    - checked where the policy meets the network (box/verify.py), from both drafts."""
    assert add(bridgeable, "bridges", **BRIDGE).status_code == 302
    config = from_document(drafts.get().document)
    network = [("draft", config)]

    def problems(zones):
        policy = load_policy({"version": 1, "zones": zones})
        return [(p.path, p.message) for p in verify.network_problems(policy, network)]

    assert problems([{"name": "inside", "interfaces": ["eth2.100"], "bridged": True},
                     {"name": "outside", "interfaces": ["eth2.200"], "bridged": True}]) == []
    [(path, message)] = problems([{"name": "inside", "interfaces": ["eth2.100"]}])
    assert path == "zones[0].bridged" and "set bridged: true" in message
    [(path, message)] = problems([{"name": "inside", "interfaces": ["eth2.100", "eth1"],
                                   "bridged": True}])
    assert path == "zones[0].interfaces[1]" and "management port" in message


def test_a_bridged_zone_from_the_policy_form_and_what_its_classes_may_not_do(bridgeable):
    assert add(bridgeable, "bridges", **BRIDGE).status_code == 302
    response = bridgeable.post("/policy/zones/new/", {
        "version": policy_drafts.get().version, "name": "campus", "interfaces": "eth2.100",
        "bridged": "on", "comment": ""})
    assert response.status_code == 302, errors_of(response)
    assert policy_drafts.get().document["zones"][-1] == {
        "name": "campus", "interfaces": ["eth2.100"], "bridged": True}
    with pytest.raises(PolicyError) as refused:
        load_policy({"version": 1, "zones": [
            {"name": "campus", "interfaces": ["eth2.100"], "bridged": True},
            {"name": "dtn", "interfaces": ["eth2.200"], "bridged": True}],
            "classes": [{"name": "copy", "from": "campus", "to": "dtn", "action": "reject",
                         "mss": {"mode": "pmtu"}, "fastpath": "always"}]})
    paths = {p.path for p in refused.value.problems}
    assert {"classes[0].action", "classes[0].fastpath"} <= paths


def test_a_bridge_waits_for_the_policys_zones_to_follow(bridgeable):
    """From the network's side: making a routed zone's interfaces a bridge's ports, or
    removing the bridge a bridged zone names, is refused at the bridge until the zone
    follows - checked against the policy draft and the live revision."""
    policy_drafts.save_item("zones", None, {"name": "campus", "interfaces": ["eth2.100"]},
                            policy_drafts.get().version, None)
    before = snapshot()
    response = add(bridgeable, "bridges", **BRIDGE)
    assert response.status_code == 400
    said = " ".join(errors_of(response)[""]).replace("&#x27;", "'")
    assert "the policy's zone campus names eth2.100, a port of the bridge br0: set " \
        "bridged: true" in said and "change the zone first (Policy)" in said, said
    assert snapshot() == before
    index = len(policy_drafts.get().document["zones"]) - 1
    policy_drafts.save_item("zones", index, {"name": "campus", "interfaces": ["eth2.100"],
                                             "bridged": True}, policy_drafts.get().version,
                            None)
    assert add(bridgeable, "bridges", **BRIDGE).status_code == 302
    response = bridgeable.post("/network/bridges/0/delete/", {"version": version()},
                               follow=True)
    assert "zone campus is bridged, and eth2.100 is a routed link" in \
        response.content.decode().replace("&#x27;", "'")
    assert drafts.get().document["bridges"] != []


def test_zones_of_vlans_need_a_vlan_aware_bridge_that_carries_them(bridgeable):
    """A bridged zone's VLANs (box/verify.py zone_vlan_problems), from the policy's side
    at the zone's VLANs and from the network's at the bridge's: the bridge must be
    VLAN-aware and carry each (or VLAN 1, its untagged frames)."""
    assert add(bridgeable, "bridges", **BRIDGE).status_code == 302

    def problems(vids):
        policy = load_policy({"version": 1, "zones": [
            {"name": "science", "interfaces": ["eth2.100", "eth2.200"], "bridged": True,
             "vlans": vids}]})
        network = [("draft", from_document(drafts.get().document))]
        return [(p.path, p.message) for p in verify.network_problems(policy, network)]

    [(path, message)] = problems([10])
    assert path == "zones[0].vlans" and "br0 is not VLAN-aware" in message, message
    response = bridgeable.post("/network/bridges/0/", {**BRIDGE, "vlans": "10 20",
                                                       "version": version()})
    assert response.status_code == 302, errors_of(response)
    assert problems([10, 20, 1]) == []
    [(path, message)] = problems([10, 30])
    assert path == "zones[0].vlans[1]" and "does not carry VLAN 30" in message, message
    # through the zone form, then the network may not take the zone's VLAN away
    response = bridgeable.post("/policy/zones/new/", {
        "version": policy_drafts.get().version, "name": "science",
        "interfaces": "eth2.100 eth2.200", "bridged": "on", "vlans": "10, 20", "comment": ""})
    assert response.status_code == 302, errors_of(response)
    assert policy_drafts.get().document["zones"][-1]["vlans"] == [10, 20]
    assert "eth2.100, eth2.200 (VLAN 10, 20)" in bridgeable.get("/policy/zones/").content.decode()
    before = snapshot()
    response = bridgeable.post("/network/bridges/0/", {**BRIDGE, "vlans": "10",
                                                       "version": version()})
    assert response.status_code == 400
    said = " ".join(m for ms in errors_of(response).values() for m in ms)
    assert "does not carry VLAN 20" in said and "change the zone first" in said, said
    assert snapshot() == before
    # a bad VLAN id in the zone form: named at its field, nothing saved
    draft = policy_drafts.get().version
    response = bridgeable.post("/policy/zones/new/", {
        "version": draft, "name": "office", "interfaces": "eth2.100", "bridged": "on",
        "vlans": "20 x", "comment": ""})
    assert response.status_code == 400
    assert any("must be a whole number" in m for m in errors_of(response)["vlans"]), \
        errors_of(response)
    assert policy_drafts.get().version == draft
