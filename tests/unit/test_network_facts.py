"""The live facts' parsers (network/core/facts.py) on output recorded from iproute2 6.1 in a
namespace of veths, with a bridge; the PCI port, the VLAN and the bond are in ip's JSON
shape by hand (this host has no PCI NIC in a namespace, nor 802.1Q and bonding)."""
import json

import pytest

from network.core import facts
from network.core.errors import Code, NetworkError

LINKS = [
    {"ifindex": 1, "ifname": "lo", "flags": ["LOOPBACK", "UP", "LOWER_UP"], "mtu": 65536,
     "operstate": "UNKNOWN", "link_type": "loopback", "address": "00:00:00:00:00:00",
     "min_mtu": 0, "max_mtu": 0},
    # a veth whose peer is in another namespace: link_netnsid, no "link"
    {"ifindex": 3, "link_index": 3, "ifname": "veth-c",
     "flags": ["BROADCAST", "MULTICAST", "UP", "LOWER_UP"], "mtu": 9000, "operstate": "UP",
     "link_type": "ether", "address": "ea:95:40:06:f2:a2", "link_netnsid": 0,
     "min_mtu": 68, "max_mtu": 65535, "linkinfo": {"info_kind": "veth"}},
    {"ifindex": 4, "link_index": 4, "ifname": "veth-x", "flags": ["BROADCAST", "MULTICAST"],
     "mtu": 1500, "operstate": "DOWN", "link_type": "ether", "address": "d6:05:d9:73:d2:fd",
     "link_netnsid": 0, "min_mtu": 68, "max_mtu": 65535, "linkinfo": {"info_kind": "veth"}},
    {"ifindex": 5, "ifname": "br0", "flags": ["BROADCAST", "MULTICAST", "UP", "LOWER_UP"],
     "mtu": 1400, "operstate": "UNKNOWN", "link_type": "ether", "ifalias": "tusk",
     "address": "8a:cb:25:a8:aa:3c", "min_mtu": 68, "max_mtu": 65535,
     "linkinfo": {"info_kind": "bridge", "info_data": {"stp_state": 0}}},
    {"ifindex": 6, "ifname": "enp1s0", "flags": ["BROADCAST", "MULTICAST", "SLAVE", "UP"],
     "mtu": 1500, "operstate": "DOWN", "link_type": "ether", "address": "52:54:00:12:34:56",
     "master": "bond0", "min_mtu": 68, "max_mtu": 9710, "parentbus": "pci",
     "parentdev": "0000:01:00.0",
     "linkinfo": {"info_slave_kind": "bond", "info_slave_data": {"state": "ACTIVE"}}},
    {"ifindex": 7, "ifname": "bond0", "ifalias": "tusk",
     "flags": ["BROADCAST", "MULTICAST", "MASTER", "UP"], "mtu": 1500, "link_type": "ether",
     "address": "52:54:00:12:34:56",
     "linkinfo": {"info_kind": "bond", "info_data": {"mode": "802.3ad", "miimon": 100,
                                                     "xmit_hash_policy": "layer3+4"}}},
    {"ifindex": 8, "link": "bond0", "ifname": "bond0.40", "ifalias": "tusk",
     "flags": ["BROADCAST", "MULTICAST", "UP", "LOWER_UP"], "mtu": 1500, "link_type": "ether",
     "address": "52:54:00:12:34:56",
     "linkinfo": {"info_kind": "vlan", "info_data": {"protocol": "802.1Q", "id": 40,
                                                     "flags": ["REORDER_HDR"]}}},
]

ADDRESSES = [
    {"ifindex": 3, "ifname": "veth-c", "addr_info": [
        {"family": "inet", "local": "10.10.1.1", "prefixlen": 24, "scope": "global",
         "label": "veth-c", "valid_life_time": 4294967295, "preferred_life_time": 4294967295},
        {"family": "inet6", "local": "fd00:10:1::1", "prefixlen": 64, "scope": "global",
         "nodad": True, "valid_life_time": 4294967295, "preferred_life_time": 4294967295},
        {"family": "inet6", "local": "2001:db8::5054:ff:fe12:3456", "prefixlen": 64,
         "scope": "global", "dynamic": True, "mngtmpaddr": True, "valid_life_time": 86400,
         "preferred_life_time": 14400},
        {"family": "inet6", "local": "fe80::e895:40ff:fe06:f2a2", "prefixlen": 64,
         "scope": "link", "valid_life_time": 4294967295, "preferred_life_time": 4294967295}]},
    {"ifindex": 4, "ifname": "veth-x", "addr_info": []},
]

ROUTES = [
    {"dst": "10.10.1.0/24", "dev": "veth-c", "protocol": "kernel", "scope": "link",
     "prefsrc": "10.10.1.1", "flags": []},
    {"dst": "10.30.0.0/24", "gateway": "10.10.1.2", "dev": "veth-c", "protocol": "static",
     "flags": []},
    # a host route: ip prints it without /32
    {"dst": "10.10.9.7", "dev": "veth-c", "protocol": "static", "scope": "link", "metric": 5,
     "flags": []},
    {"type": "unreachable", "dst": "10.99.0.0/16", "protocol": "boot", "flags": []},
    {"dst": "10.50.0.0/16", "protocol": "static", "flags": [],
     "nexthops": [{"gateway": "10.10.1.2", "dev": "veth-c", "weight": 1, "flags": []},
                  {"gateway": "10.10.1.3", "dev": "veth-c", "weight": 1, "flags": []}]},
]
ROUTES6 = [
    {"dst": "fd00:10:1::/64", "dev": "veth-c", "protocol": "kernel", "metric": 256,
     "flags": [], "pref": "medium"},
    {"dst": "default", "gateway": "fd00:10:1::2", "dev": "veth-c", "protocol": "static",
     "metric": 1024, "flags": [], "pref": "medium"},
]


def test_links_carry_kind_state_and_relations():
    links = {link.name: link for link in facts.parse_links(json.dumps(LINKS))}
    assert links["veth-c"] == facts.Link(
        name="veth-c", kind="veth", up=True, carrier=True, mtu=9000,
        mac="ea:95:40:06:f2:a2", link_type="ether", min_mtu=68, max_mtu=65535)
    assert not links["veth-x"].up and not links["veth-x"].carrier
    assert links["enp1s0"].master == "bond0" and links["enp1s0"].kind == ""
    assert links["enp1s0"].pci == "0000:01:00.0"
    assert (links["bond0"].kind, links["bond0"].bond_mode, links["bond0"].hash_policy,
            links["bond0"].alias) == ("bond", "802.3ad", "layer3+4", "tusk")
    assert (links["bond0.40"].kind, links["bond0.40"].parent, links["bond0.40"].vlan_id) == \
        ("vlan", "bond0", 40)
    # a veth's "link" is its peer, not a parent
    assert links["veth-c"].parent == "" and links["bond0"].parent == ""
    # limits of 0 (the loopback's) mean the driver sets none
    assert (links["lo"].min_mtu, links["lo"].max_mtu) == (None, None)


def test_ports_are_hardware_and_veth_only_with_sysfs_facts():
    links = facts.parse_links(json.dumps(LINKS))
    sysfs = facts.parse_sysfs("veth-c\t10000\tfull\t\nveth-x\t\t\t\n"
                              "enp1s0\t-1\tunknown\tvirtio_net\n")
    ports = facts.make_ports(links, sysfs)
    assert sorted(ports) == ["enp1s0", "veth-c", "veth-x"]
    assert ports["veth-c"] == facts.Port(
        name="veth-c", mac="ea:95:40:06:f2:a2", link="up", speed=10000, duplex="full",
        driver="veth", mtu=9000, min_mtu=68, max_mtu=65535, pci="")
    # no link: the kernel reports -1 / unknown (or EINVAL, an empty field): None, not 0
    assert (ports["veth-x"].speed, ports["veth-x"].duplex, ports["veth-x"].link) == \
        (None, None, "down")
    assert (ports["enp1s0"].speed, ports["enp1s0"].duplex, ports["enp1s0"].driver,
            ports["enp1s0"].pci, ports["enp1s0"].max_mtu) == \
        (None, None, "virtio_net", "0000:01:00.0", 9710)


def test_addresses_of_every_family_and_scope():
    found = facts.parse_addresses(json.dumps(ADDRESSES))
    assert found == [
        facts.Address("veth-c", "10.10.1.1/24"),
        facts.Address("veth-c", "fd00:10:1::1/64"),
        facts.Address("veth-c", "2001:db8::5054:ff:fe12:3456/64", dynamic=True),
        facts.Address("veth-c", "fe80::e895:40ff:fe06:f2a2/64", scope="link"),
    ]


def test_routes_of_both_families_unicast_through_one_interface():
    live = facts.parse_live(json.dumps(LINKS), json.dumps(ADDRESSES), json.dumps(ROUTES),
                            json.dumps(ROUTES6))
    assert live.routes == (
        facts.Route("10.10.1.0/24", "", "veth-c", 0, "kernel", 4),
        facts.Route("10.30.0.0/24", "10.10.1.2", "veth-c", 0, "static", 4),
        facts.Route("10.10.9.7/32", "", "veth-c", 5, "static", 4),
        facts.Route("fd00:10:1::/64", "", "veth-c", 256, "kernel", 6),
        facts.Route("default", "fd00:10:1::2", "veth-c", 1024, "static", 6),
    )
    assert str(live.routes[-1].network) == "::/0"
    assert live.link("bond0.40").vlan_id == 40 and live.link("eth9") is None


def test_output_that_is_not_json_is_an_error_naming_the_command():
    with pytest.raises(NetworkError) as error:
        facts.parse_links("Error: something\n")
    assert error.value.problems[0].code == Code.APPLY
    assert "cannot read ip link's output" in error.value.problems[0].message
