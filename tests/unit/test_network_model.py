"""The network model's bad inputs (issue 18): each is refused with the exact path of the
field and the reason, every problem at once; and the file of release 1 (the golden cases'
legacy network.toml files) read and written back in the new format with the same
meaning."""
import copy
from pathlib import Path

import pytest

from network.core import model
from network.core.errors import Code, NetworkError
from network.core.normalise import from_document, parse, to_document, to_toml
from network.core.validate import mtu_warnings, validate, zone_problems

BASE = {
    "version": 2,
    "system": {"hostname": "fw1", "dns": ["192.0.2.53"], "ntp": ["0.pool.ntp.org"],
               "timezone": "Europe/Zurich"},
    "interfaces": [
        {"name": "eth0", "role": "management", "addresses": ["192.168.1.2/24"]},
        {"name": "eth1", "addresses": ["10.1.0.1/24"]},
        {"name": "eth2"},
        {"name": "eth3"},
    ],
}


def document(**sections):
    """BASE with some sections replaced or added; interfaces given as {index: changes}
    are merged into BASE's entries."""
    doc = copy.deepcopy(BASE)
    for key, value in sections.items():
        if key == "interfaces" and isinstance(value, dict):
            for index, changes in value.items():
                doc["interfaces"][index].update(changes)
        else:
            doc[key] = value
    return doc


def problems(doc, **kwargs):
    with pytest.raises(NetworkError) as caught:
        from_document(doc, **kwargs)
    return caught.value.problems


def refused(doc, path, fragment, code=Code.VALUE, **kwargs):
    """doc is refused with a problem at exactly path whose reason holds fragment."""
    found = problems(doc, **kwargs)
    matches = [p for p in found if p.path == path and fragment in p.message]
    assert matches, f"no problem at {path!r} with {fragment!r}; got: {[str(p) for p in found]}"
    assert matches[0].code == code


def test_the_base_document_is_good():
    config = from_document(BASE)
    assert config.management.name == "eth0"
    assert config.traffic_links == ["eth1", "eth2", "eth3"]


@pytest.mark.parametrize("doc, path, fragment", [
    pytest.param(document(interfaces={2: {"addresses": ["10.1.0.5/16"]}}),
                 "interfaces[2].addresses[0]",
                 "10.1.0.5/16 overlaps 10.1.0.1/24 of eth1 (interfaces[1].addresses[0]): a "
                 "subnet belongs to one interface", id="overlapping-subnets"),
    pytest.param(document(routes=[{"destination": "10.20.0.0/16", "gateway": "172.16.0.1"}]),
                 "routes[0].gateway", "172.16.0.1 is not reachable: it is in no configured "
                 "subnet", id="gateway-unreachable"),
    pytest.param(document(routes=[{"destination": "10.20.0.0/16", "gateway": "10.1.0.254",
                                   "interface": "eth0"}]),
                 "routes[0].gateway", "10.1.0.254 is not reachable: it is in none of eth0's "
                 "subnets", id="gateway-not-on-its-interface"),
    pytest.param(document(vlans=[{"name": "eth1.100", "parent": "eth1", "id": 100},
                                 {"name": "v100", "parent": "eth1", "id": 100}]),
                 "vlans[1].id", "VLAN 100 is already on eth1 (vlans[0], eth1.100)",
                 id="duplicate-vlan-id"),
    pytest.param(document(vlans=[{"name": "eth1.100", "parent": "eth1", "id": 100,
                                  "mtu": 9000}]),
                 "vlans[0].mtu", "9000 exceeds the MTU of its parent eth1 (1500)",
                 id="vlan-mtu-above-parent"),
    pytest.param(document(bonds=[{"name": "bond0", "members": ["eth0", "eth2"]}]),
                 "bonds[0].members[0]", "eth0 is the management port: it cannot be in a bond",
                 id="management-in-bond"),
    pytest.param(document(interfaces={0: {"addresses": []}}),
                 "interfaces[0].addresses", "no management address left",
                 id="no-management-address"),
    pytest.param(document(interfaces={0: {"role": "traffic"}}),
                 "interfaces", "no interface has the role management", id="no-management"),
    pytest.param(document(vlans=[{"name": "eth0.5", "parent": "eth0", "id": 5}]),
                 "vlans[0].parent", "eth0 is the management port. VLANs are not allowed on "
                 "it", id="vlan-on-management"),
    pytest.param(document(interfaces={2: {"role": "unused", "addresses": ["10.2.0.1/24"]}}),
                 "interfaces[2].addresses", "an unused port has no addresses",
                 id="unused-with-addresses"),
    pytest.param(document(interfaces={2: {"addresses": ["10.2.0.1/24"]}},
                          bonds=[{"name": "bond0", "members": ["eth2", "eth3"]}]),
                 "bonds[0].members[0]", "eth2 has addresses of its own; a member has none",
                 id="member-with-addresses"),
    pytest.param(document(routes=[{"destination": "10.20.0.0/16", "gateway": "10.1.0.254"},
                                  {"destination": "10.20.0.0/16", "gateway": "10.1.0.253"}]),
                 "routes[1].destination", "10.20.0.0/16 with metric 0 is already routes[0]",
                 id="duplicate-route"),
    pytest.param(document(routes=[{"destination": "10.20.0.1/16", "gateway": "10.1.0.254"}]),
                 "routes[0].destination", "has host bits set: the network is 10.20.0.0/16",
                 id="host-bits"),
    pytest.param(document(routes=[{"destination": "default", "gateway": "fe80::1"}]),
                 "routes[0].interface", "the gateway fe80::1 is link-local: name the "
                 "interface", id="link-local-gateway-without-interface"),
    pytest.param(document(interfaces={1: {"dhcp": True}}),
                 "interfaces[1].dhcp", "DHCPv4 is for the management port only",
                 id="dhcp-on-traffic"),
    pytest.param(document(system={"hostname": "-fw-"}),
                 "system.hostname", "'-fw-' in '-fw-': each dot-separated part",
                 id="bad-hostname"),
    pytest.param(document(system={"timezone": "Mars/Olympus_Mons"}),
                 "system.timezone", "is not in the time zone database", id="bad-timezone"),
    pytest.param(document(system={"timezone": "../etc/passwd"}),
                 "system.timezone", "is not a time zone name", id="timezone-path"),
    pytest.param(document(system={"dns": ["192.0.2.53", "resolver.example"]}),
                 "system.dns[1]", "'resolver.example' is not an IP address", id="bad-dns"),
    pytest.param(document(system={"dns": ["192.0.2.53", "192.0.2.53"]}),
                 "system.dns[1]", "192.0.2.53 is listed twice", id="dns-twice"),
    pytest.param(document(system={"ntp": ["ntp_1.example"]}),
                 "system.ntp[0]", "is neither an IP address nor a host name", id="bad-ntp"),
    pytest.param(document(system={"ntp": ["224.0.0.1"]}),
                 "system.ntp[0]", "224.0.0.1 is a multicast address", id="multicast-ntp"),
])
def test_bad_value_is_refused_naming_the_field(doc, path, fragment):
    refused(doc, path, fragment)


@pytest.mark.parametrize("doc, path, fragment", [
    pytest.param(document(interfaces={1: {"colour": "blue"}}), "interfaces[1].colour",
                 "unknown key (known: name, role", id="unknown-key"),
    pytest.param(document(interfaces={1: {"mtu": "9000"}}), "interfaces[1].mtu",
                 "expected an integer, got a string", id="wrong-type"),
    pytest.param(document(interfaces={1: {"dhcp": 1}}), "interfaces[1].dhcp",
                 "expected true or false, got an integer", id="int-for-bool"),
    pytest.param(document(vlans=[{"name": "eth1.7", "parent": "eth1"}]), "vlans[0].id",
                 "missing (required)", id="missing-key"),
    pytest.param(document(interfaces={1: {"addresses": ["10.1.0.1/24", 5]}}),
                 "interfaces[1].addresses", "expected a list of strings, got an integer",
                 id="list-item-type"),
    pytest.param(document(firewall={}), "firewall", "unknown section", id="unknown-section"),
    pytest.param(document(routes={"destination": "default"}), "routes",
                 "must be an array of tables", id="table-for-array"),
])
def test_schema_error_is_refused_naming_the_key(doc, path, fragment):
    refused(doc, path, fragment, code=Code.SCHEMA)


def test_a_file_names_its_path_and_every_problem_at_once():
    text = to_toml(from_document(BASE)).replace('hostname = "fw1"', 'hostname = "fw_1"') \
        .replace('"10.1.0.1/24"', '"10.1.0.1"')
    with pytest.raises(NetworkError) as caught:
        parse(text, "/etc/tusk/network.toml")
    assert [p.path for p in caught.value.problems] == [
        "/etc/tusk/network.toml: system.hostname",
        "/etc/tusk/network.toml: interfaces[1].addresses[0]"]
    assert "has no prefix length; write it with one, e.g. 10.1.0.1/24" in \
        caught.value.problems[1].message


def test_a_zone_naming_a_removed_vlan_is_refused_naming_the_zone():
    with_vlan = document(vlans=[{"name": "eth1.100", "parent": "eth1", "id": 100}])
    assert from_document(with_vlan, zones={"inside": ["eth1.100"]}).link("eth1.100")
    refused(document(), "", "the policy's zone inside uses the interface eth1.100, which "
            "this configuration does not have", code=Code.POLICY,
            zones={"inside": ["eth1.100"]})
    config = from_document(document())
    assert [(p.code, p.path) for p in validate(config, zones={"inside": ["eth1.100"]})] == \
        [(Code.POLICY, "")]


def test_a_zone_on_a_port_made_unused_or_a_bond_member_is_refused():
    refused(document(interfaces={2: {"role": "unused"}}), "interfaces[2].role",
            "the policy's zone outside uses eth2, which has the role unused",
            code=Code.POLICY, zones={"outside": ["eth2"]})
    refused(document(bonds=[{"name": "bond0", "members": ["eth2", "eth3"]}]),
            "interfaces[2].role", "the policy's zone outside uses eth2, which is a bond member",
            code=Code.POLICY, zones={"outside": ["eth2"]})


def test_a_port_the_machine_lacks_is_refused():
    refused(document(), "interfaces[3].name", "'eth3': this machine has no such Ethernet "
            "port (it has: eth0, eth1, eth2)", code=Code.INTERFACE,
            present={"eth0": {}, "eth1": {}, "eth2": {}})


LEGACY = Path(__file__).resolve().parents[1] / "golden" / "network"


def test_the_release_1_file_is_read_and_written_back_in_the_new_format():
    config = parse((LEGACY / "02_legacy_static" / "network.toml").read_text())
    assert config.interfaces == (
        model.Port("eno1", model.MANAGEMENT, addresses=("192.168.1.2/24",)),
        model.Port("enp3s0", addresses=("10.1.0.1/24",)))
    assert config.routes == (model.Route("default", "192.168.1.1", interface="eno1"),)
    assert config.system.dns == ("192.168.1.53", "2001:db8::53")
    text = to_toml(config)
    assert "version = 2" in text and "[[interfaces]]" in text
    assert "[management]" not in text and "[[traffic]]" not in text
    assert parse(text) == config


def test_the_release_1_dhcp_file_keeps_dhcp_and_a_traffic_port_without_address():
    config = parse((LEGACY / "01_legacy_dhcp" / "network.toml").read_text())
    assert config.interfaces == (model.Port("enp0s2", model.MANAGEMENT, dhcp=True),
                                 model.Port("enp0s3", addresses=("10.1.0.1/24",)),
                                 model.Port("enp0s4"))
    assert config.routes == () and config.system.dns == ()
    assert parse(to_toml(config)) == config


def test_to_toml_round_trips_everything():
    doc = document(
        interfaces={0: {"dhcp": True, "autoconf": True, "description": 'office "LAN" ü'},
                    1: {"mtu": 9000, "addresses": ["10.1.0.1/24", "2001:db8:1::1/64"]}},
        bonds=[{"name": "bond0", "mode": "active-backup", "members": ["eth2", "eth3"],
                "addresses": ["10.2.0.1/24"], "mtu": 1500, "description": "uplink"}],
        vlans=[{"name": "eth1.100", "parent": "eth1", "id": 100, "mtu": 9000,
                "addresses": ["10.100.0.1/24"]}],
        routes=[{"destination": "default", "gateway": "10.2.0.254", "metric": 10},
                {"destination": "2001:db8:20::/48", "gateway": "fe80::1",
                 "interface": "eth1"},
                {"destination": "172.16.0.0/24", "interface": "eth1.100"}])
    config = from_document(doc)
    text = to_toml(config)
    assert parse(text) == config
    assert to_toml(parse(text)) == text
    assert to_document(parse(text)) == to_document(config)


# -- where the policy meets the network, from the policy's side ---------------------------

NETWORK = document(interfaces={2: {"role": "unused"}, 3: {"mtu": 9000}},
                   bonds=[{"name": "bond0", "members": ["eth1"], "mtu": 9000}],
                   vlans=[{"name": "eth3.100", "parent": "eth3", "id": 100, "mtu": 1500}])
NETWORK["interfaces"][1]["addresses"] = []
NETWORK["interfaces"].append({"name": "eth4"})


@pytest.mark.parametrize("interface, fragment", [
    ("eth9", "zone outside: eth9: the network configuration has no such interface (its "
             "traffic interfaces: bond0, eth3, eth3.100, eth4); add it on Network → "
             "Interfaces"),
    ("eth0", "zone outside: eth0 is the management port: a zone's interfaces carry "
             "forwarded traffic"),
    ("eth2", "zone outside: eth2 has the role unused (its link stays down): give it the "
             "role traffic on Network → Interfaces"),
    ("eth1", "zone outside: eth1 is a member of the bond bond0, which carries its traffic: "
             "name bond0 instead (Network → Bonds)"),
])
def test_a_zone_interface_that_is_no_traffic_link_is_named_by_its_policy_path(
        interface, fragment):
    config = from_document(NETWORK)
    zones = [("inside", ["eth3.100", "bond0"]), ("outside", ["eth4", interface])]
    found = zone_problems(config, zones)
    assert [path for path, _ in found] == ["zones[1].interfaces[1]"]
    assert found[0][1].startswith(fragment), found[0][1]


def test_vlans_bonds_and_traffic_ports_are_zone_interfaces():
    config = from_document(NETWORK)
    assert zone_problems(config, [("a", ["eth3", "eth3.100"]), ("b", ["bond0", "eth4"])]) == []


def test_the_mtu_warning_knows_vlans_and_bonds():
    """eth3 (9000) carries eth3.100 (1500); bond0 has 9000: a class between the VLAN and
    the bond is warned about, one between the bond and eth3 is not (same MTU), a clamped
    one never."""
    config = from_document(NETWORK)
    paths = [("backup", ["eth3.100"], ["bond0"], False), ("bulk", ["bond0"], ["eth3"], False),
             ("clamped", ["eth3.100"], ["bond0"], True)]
    assert mtu_warnings(config, paths) == [
        "class backup: eth3.100 (MTU 1500) -> bond0 (MTU 9000): segments sized for bond0 "
        "must be cut down to eth3.100's by path MTU discovery; set the class's MSS clamp "
        "to pmtu, or the same MTU on both"]
