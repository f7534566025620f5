"""The transparent bridge mode's links, made by the lab's network backend
(network/core/iproute2.py) in a fw namespace, with real frames across them. Its own lab:

    client  eth0 10.10.50.2/24 fd00:50::2/64  ---  fw veth-c  [br0]  fw veth-s  ---
    server  eth0 10.10.50.3/24 fd00:50::3/64
    admin   eth0 192.168.78.2/24  ---  fw mgmt 192.168.78.1/24 (the management port)

Client and server share their subnet: whatever crosses fw crosses its bridge, which has
no address. The filtering between the ports is the policy's, and needs the bridge's
conntrack, which this host's kernel lacks (the VM tier's); here no ruleset is loaded, so
the bridge forwards all it carries - what these tests look at are the links, STP and
snooping as configured, and the way back to routed ports. The host's kernel has no
802.1Q either: a VLAN-aware bridge's plan is golden-tested
(golden/network_iproute2/07_vlan_aware_bridge), its frames cross in the VM tier.
"""
import os
import socket
import time

import pytest
from pcaps import ns_socket

from flows.core import hook
from lab.namespaces import Topology, remove
from network.core import facts, normalise
from network.core.iproute2 import IprouteBackend
from tusklib.target import Target

PREFIX = f"nwb{os.getpid() % 100000}"

MANAGEMENT = """
[[interfaces]]
name = "mgmt"
role = "management"
addresses = ["192.168.78.1/24"]
"""
ROUTED = MANAGEMENT + """
[[interfaces]]
name = "veth-c"
addresses = ["10.10.60.1/24"]

[[interfaces]]
name = "veth-s"
addresses = ["10.10.61.1/24"]
"""
BRIDGED = MANAGEMENT + """
[[interfaces]]
name = "veth-c"

[[interfaces]]
name = "veth-s"

[[bridges]]
name = "br0"
members = ["veth-c", "veth-s"]
"""
WITH_STP = BRIDGED + "stp = true\nmtu = 9000\n"
DROPPING_BPDUS = BRIDGED + 'bpdu = "drop"\n'
ETH_P_ALL = 0x0003
# A switch's configuration BPDU (802.1D), to the Bridge Group Address: 802.3 length,
# LLC (DSAP/SSAP 0x42, UI), then protocol 0, version 0, type 0 and its 31 bytes
STP_GROUP = bytes.fromhex("0180c2000000")
BPDU = (STP_GROUP + bytes.fromhex("020000000001") + (38).to_bytes(2, "big")
        + bytes.fromhex("424203") + bytes(4) + bytes.fromhex("8000020000000001") + bytes(4)
        + bytes.fromhex("8000020000000001") + bytes.fromhex("8001") + bytes(8))


class BridgeLab(Topology):
    def __init__(self, prefix):
        super().__init__()
        for name in ("client", "admin", "fw", "server"):
            setattr(self, name, f"{prefix}-{name}")
        self.names = [self.client, self.admin, self.fw, self.server]

    def up(self):
        for name in self.names:
            self.namespace(name)
        self.wire(self.client, "eth0", self.fw, "veth-c")
        self.wire(self.server, "eth0", self.fw, "veth-s")
        self.wire(self.admin, "eth0", self.fw, "mgmt")
        self.address(self.admin, "eth0", "192.168.78.2/24")
        for ns, host in ((self.client, 2), (self.server, 3)):
            self.ns(ns, "ip", "link", "set", "eth0", "mtu", "9000")
            self.address(ns, "eth0", f"10.10.50.{host}/24", f"fd00:50::{host}/64")
        return self

    def down(self):
        remove(*self.names)
        self.added.clear()


@pytest.fixture(scope="module")
def net():
    lab = BridgeLab(PREFIX)
    lab.down()
    yield lab.up()
    lab.down()


@pytest.fixture
def backend(net, tmp_path):
    """The backend on fw, starting every test from the routed configuration."""
    backend = IprouteBackend(Target(net.fw), str(tmp_path / "system"))
    backend.apply(normalise.parse(ROUTED))
    return backend


def ping(net, address):
    """One echo from the client. The neighbour caches are flushed first: a failed
    resolution before the topology changed keeps the next ping's from going out."""
    for ns in (net.client, net.server):
        net.ns(ns, "ip", "neigh", "flush", "all")
    return net.ns(net.client, "ping", "-c", "1", "-W", "2", address,
                  check=False).returncode == 0


def links(backend):
    return {link.name: link for link in facts.snapshot(backend.target).links}


def sysfs(net, path):
    return net.ns(net.fw, "cat", f"/sys/class/net/{path}").stdout.strip()


def test_a_bridge_of_two_ports_forwards_between_them_with_no_address(net, backend):
    assert not ping(net, "10.10.50.3"), "routed ports do not bridge"
    backend.apply(normalise.parse(BRIDGED))
    live = links(backend)
    assert (live["br0"].kind, live["br0"].alias, live["br0"].up) == ("bridge", "tusk", True)
    assert (live["veth-c"].master, live["veth-s"].master) == ("br0", "br0")
    assert ping(net, "10.10.50.3") and ping(net, "fd00:50::3")
    addresses = facts.addresses(backend.target)
    assert not [a for a in addresses if a.interface in ("br0", "veth-c", "veth-s")
                and a.scope == "global"], addresses
    # a wire to spanning tree and to multicast: no STP, no snooping
    assert (sysfs(net, "br0/bridge/stp_state"), sysfs(net, "br0/bridge/multicast_snooping")) \
        == ("0", "0")


def test_applying_a_bridge_twice_plans_nothing(backend):
    config = normalise.parse(WITH_STP)
    assert backend.apply(config)
    assert backend.plan(config, facts.snapshot(backend.target)) == []


def test_stp_and_the_mtu_make_the_bridge_anew_and_reach_every_port(net, backend):
    backend.apply(normalise.parse(BRIDGED))
    before = net.ns(net.fw, "cat", "/sys/class/net/br0/ifindex").stdout
    backend.apply(normalise.parse(WITH_STP))
    assert net.ns(net.fw, "cat", "/sys/class/net/br0/ifindex").stdout != before
    assert sysfs(net, "br0/bridge/stp_state") == "1"
    assert {sysfs(net, f"{name}/mtu") for name in ("br0", "veth-c", "veth-s")} == {"9000"}


def bpdu_crosses(net):
    """Whether a BPDU the client's switch sends on its wire comes out on the server's."""
    receiver = ns_socket(net.server, socket.AF_PACKET, socket.SOCK_RAW,
                         socket.htons(ETH_P_ALL))
    sender = ns_socket(net.client, socket.AF_PACKET, socket.SOCK_RAW)
    try:
        receiver.bind(("eth0", 0))
        receiver.settimeout(0.2)
        sender.bind(("eth0", 0))
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            sender.send(BPDU)
            try:
                while True:
                    if receiver.recv(2048).startswith(STP_GROUP):
                        return True
            except TimeoutError:
                continue
        return False
    finally:
        sender.close()
        receiver.close()


def test_bpdus_cross_a_bridge_without_stp_unless_it_drops_them(net, backend):
    """A bridge without spanning tree is a wire to it: the switches see each other's
    BPDUs through the box (and block a loop made through it); bpdu = "drop" keeps them
    apart, in table bridge tusk_bpdu, which goes again with the bridge."""
    backend.apply(normalise.parse(BRIDGED))
    assert bpdu_crosses(net)
    lines = backend.apply(normalise.parse(DROPPING_BPDUS))
    assert "BPDUs dropped on br0" in lines
    assert not bpdu_crosses(net)
    listed = net.ns(net.fw, "nft", "list", "table", "bridge", "tusk_bpdu").stdout
    assert 'iifname { "veth-c", "veth-s" } ether daddr 01:80:c2:00:00:00' in listed
    assert "packets 0 " not in listed, listed
    backend.apply(normalise.parse(ROUTED))
    assert net.ns(net.fw, "nft", "list", "table", "bridge", "tusk_bpdu",
                  check=False).returncode != 0


def test_the_ids_hooks_block_drops_bridged_frames_until_its_time_is_up(net, backend):
    """A block the IDS hook takes (the API's, the Flows page's) reaches a bridge's frames
    too - table bridge tusk_hook beside table inet tusk_hook - and goes when its time to
    live is up."""
    backend.apply(normalise.parse(BRIDGED))
    assert ping(net, "10.10.50.3")
    request = hook.request_of({"action": "block", "prefix": "10.10.50.3/32", "ttl": 3})
    try:
        hook.add(backend.target, request)
        assert not ping(net, "10.10.50.3")
        assert ping(net, "fd00:50::3"), "another match crosses"
        time.sleep(3.5)
        assert ping(net, "10.10.50.3")
    finally:
        for family in ("inet", "bridge"):
            net.ns(net.fw, "nft", "delete", "table", family, "tusk_hook", check=False)


def test_back_to_routed_ports_removes_the_bridge_and_its_membership(net, backend):
    backend.apply(normalise.parse(WITH_STP))
    backend.apply(normalise.parse(ROUTED))
    live = links(backend)
    assert "br0" not in live
    assert (live["veth-c"].master, live["veth-s"].master) == ("", "")
    assert not ping(net, "10.10.50.3")
    assert backend.plan(normalise.parse(ROUTED), facts.snapshot(backend.target)) == []
