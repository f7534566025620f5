"""Where the policy's NAT meets the box's network (issue 19,
network.core.validate.nat_problems, which the draft, import, Review and apply and the
agent run with zone_problems): a forward's server must be on a traffic network or behind
a static route (not the default one), not the box itself, and reached through the zone
its class sends to; a masquerade needs an address of each family it translates on its
zone's links. Each problem carries the policy's path. Plain Python."""
import pytest

from network.core.normalise import from_document
from network.core.validate import nat_problems
from policy.core.nat import network_facts, taken_first
from policy.core.normalise import load_policy_text

NETWORK = {
    "version": 2,
    "interfaces": [
        {"name": "eth0", "role": "management", "addresses": ["192.168.1.2/24"]},
        {"name": "eth1", "addresses": ["10.1.0.1/24", "fd00:1::1/64"]},
        {"name": "eth2", "addresses": ["203.0.113.2/24"]},
        {"name": "eth3"},
        {"name": "eth4", "role": "unused"},
    ],
    "vlans": [{"name": "eth3.30", "parent": "eth3", "id": 30, "addresses": ["10.3.0.1/24"]}],
    "routes": [
        {"destination": "default", "gateway": "203.0.113.1"},
        {"destination": "10.50.0.0/16", "gateway": "10.1.0.254"},
        {"destination": "10.60.0.0/16", "gateway": "192.168.1.254"},
    ],
}
ZONES = [("inside", ["eth1"]), ("outside", ["eth2"]), ("dmz", ["eth3.30"])]


def problems(forwards=(), masquerades=(), zones=ZONES):
    return nat_problems(from_document(NETWORK), zones, list(forwards), list(masquerades))


@pytest.mark.parametrize("address, zone", [
    ("10.3.0.5", "dmz"),          # a VLAN's subnet
    ("10.1.0.77", "inside"),      # a port's subnet
    ("fd00:1::5", "inside"),      # IPv6
    ("10.50.3.4", "inside"),      # behind a static route whose gateway is on eth1
    ("10.3.0.5", None),           # a class to any zone
])
def test_a_server_on_a_traffic_network_is_fine(address, zone):
    assert problems(forwards=[(address, "web-in", zone)]) == []


@pytest.mark.parametrize("address, fragment", [
    ("10.9.0.5", "10.9.0.5 is in none of the box's traffic networks and behind no static "
                 "route (the networks: 10.1.0.0/24, 10.3.0.0/24, 10.50.0.0/16, "
                 "203.0.113.0/24); add its network or a route on Network, or correct the "
                 "address"),
    ("198.51.100.7", "198.51.100.7 is in none of the box's traffic networks"),  # default route
    ("10.60.0.5", "10.60.0.5 is in none"),         # a route via the management port
    ("192.168.1.20", "192.168.1.20 is in none"),   # the management network
    ("fd00:9::5", "(the networks: fd00:1::/64)"),
    ("10.3.0.1", "10.3.0.1 is the box's own address (on eth3.30): a forward passes traffic "
                 "on to a server behind the firewall"),
    ("192.168.1.2", "is the box's own address (on eth0)"),
])
def test_a_server_off_the_traffic_networks_is_refused(address, fragment):
    found = problems(forwards=[("10.3.0.5", "ok", "dmz"), (address, "web-in", None)])
    assert [path for path, _ in found] == ["nat.forwards[1].to_address"], found
    assert fragment in found[0][1], found


def test_the_class_must_send_to_the_zone_the_server_is_reached_by():
    found = problems(forwards=[("10.3.0.5", "web-in", "inside"),
                               ("10.50.0.9", "far", "dmz")],
                     zones=ZONES[:2])
    assert found == [
        ("nat.forwards[0].class", "class 'web-in' admits traffic to zone inside only, and "
         "10.3.0.5 is reached through eth3.30, which is in no zone: the class never sees "
         "this forward"),
        ("nat.forwards[1].class", "class 'far' admits traffic to zone dmz only, and "
         "10.50.0.9 is reached through eth1, which is in zone inside: the class never sees "
         "this forward"),
    ]


def test_the_most_specific_network_decides_the_link():
    network = dict(NETWORK, routes=[{"destination": "10.3.0.128/25", "gateway": "10.1.0.254"}])
    found = nat_problems(from_document(network), ZONES, [("10.3.0.200", "web-in", "dmz")], [])
    assert found and "reached through eth1, which is in zone inside" in found[0][1]


@pytest.mark.parametrize("zone, families, fragment", [
    ("dmz", {6}, "zone dmz's links (eth3.30) have no IPv6 address"),
    ("dmz", {4, 6}, "have no IPv6 address"),
    ("empty", set(), "SNAT on a zone without addresses: zone empty's links (eth3) have no "
                     "IPv4 or IPv6 address to masquerade with"),
])
def test_masquerade_on_a_zone_without_addresses_is_refused(zone, families, fragment):
    zones = ZONES + [("empty", ["eth3"])]
    found = problems(masquerades=[("inside", {4, 6}), None, (zone, families)], zones=zones)
    assert [path for path, _ in found] == ["nat.source[2].to"], found
    assert fragment in found[0][1], found


def test_masquerade_ignores_link_local_addresses():
    network = dict(NETWORK, vlans=[{"name": "eth3.30", "parent": "eth3", "id": 30,
                                    "addresses": ["10.3.0.1/24", "fe80::1/64"]}])
    found = nat_problems(from_document(network), ZONES, [], [("dmz", {6})])
    assert [path for path, _ in found] == ["nat.source[0].to"]


def test_the_policy_gives_the_network_check_its_facts():
    policy = load_policy_text("""\
zones:
  - {name: inside, interfaces: [eth1]}
  - {name: outside, interfaces: [eth2]}
  - {name: dmz, interfaces: [eth3.30]}
address_sets:
  - {name: srv, entries: [10.9.0.5]}
  - {name: v6, entries: ["fd00:1::/64"]}
classes:
  - {name: web-in, to: dmz, destination: [srv], action: accept}
nat:
  source:
    - {name: v6-out, to: dmz, source: [v6], translate: masquerade}
    - {name: fixed, to: outside, translate: address, address: 203.0.113.9}
  forwards:
    - {name: web, from: outside, protocol: tcp, ports: [443], to_address: 10.9.0.5,
       class: web-in}
""")
    found = nat_problems(from_document(NETWORK), ZONES, *network_facts(policy))
    assert [path for path, _ in found] == ["nat.forwards[0].to_address", "nat.source[0].to"]


# A catch-all rejects the rest from outside to dmz before class to-server, which admits
# the server in any zone: where the network puts the server decides.
CATCH_ALL = """\
zones:
  - {name: inside, interfaces: [eth1]}
  - {name: outside, interfaces: [eth2]}
  - {name: dmz, interfaces: [eth3.30]}
address_sets:
  - {name: servers, entries: [10.3.0.5, 10.1.0.5]}
services:
  - {name: https, protocol: tcp, ports: [443]}
classes:
  - {name: outside-rest, from: outside, to: dmz, action: reject}
  - {name: to-server, from: outside, destination: [servers], services: [https],
     action: accept}
nat:
  forwards:
    - {name: dmz-web, from: outside, protocol: tcp, ports: [443], to_address: 10.3.0.5,
       class: to-server}
    - {name: inside-web, from: outside, address: 203.0.113.9, protocol: tcp, ports: [443],
       to_address: 10.1.0.5, class: to-server}
"""


def test_the_first_class_in_the_servers_zone_must_be_the_forwards_own():
    policy = load_policy_text(CATCH_ALL)
    found = nat_problems(from_document(NETWORK), ZONES, *network_facts(policy),
                         taken_first(policy))
    assert found == [("nat.forwards[0].class", (
        "10.3.0.5 is reached through eth3.30, which is in zone dmz: classes[0] "
        "'outside-rest' comes first and matches all of this forward's traffic that class "
        "'to-server' matches, and rejects it"))]


def test_a_server_in_no_zone_is_seen_by_classes_to_any_zone_only():
    """A class to any zone that takes the traffic first the engine refuses itself."""
    policy = load_policy_text(CATCH_ALL.replace("[eth3.30]", "[eth9]"))
    zones = [(zone.name, list(zone.interfaces)) for zone in policy.zones]
    found = nat_problems(from_document(NETWORK), zones, *network_facts(policy),
                         taken_first(policy))
    assert found == []
