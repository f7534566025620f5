"""The lab's network backend (network/core/iproute2.py) against real links, addresses and
routes in a fw namespace, with real traffic through it. Its own lab, so that other
modules' labs are untouched:

    client  eth0 10.10.1.2/24                   ---  fw veth-c
    admin   eth0 192.168.77.2/24                ---  fw mgmt (the management port)
    fw veth-s  ---  switch (a bridge)  ---  server  eth0 10.10.2.2/24
                                       ---  router  eth0 10.20.0.2/24, lo 10.30.0.1/24

fw's own addresses and routes come only from the backend. The router's network
10.30.0.0/24 is reached through a second address on veth-s (10.20.0.1/24) and a static
route. The backend runs alone here (no applier, no commit-confirm).
"""
import os
import subprocess

import pytest
from pcaps import EchoServer, tcp_exchange
from tuskcli import run_tusk

from lab.namespaces import Topology, remove
from network.core import facts, normalise
from network.core.errors import Code, NetworkError
from network.core.iproute2 import IprouteBackend
from tusklib.target import Target

PREFIX = f"nwa{os.getpid() % 100000}"
ECHO, CLOSED = 5301, 5302       # the class allows ECHO; nothing allows CLOSED

A = """
[[interfaces]]
name = "mgmt"
role = "management"
addresses = ["192.168.77.1/24"]

[[interfaces]]
name = "veth-c"
addresses = ["10.10.1.1/24", "fd00:10:1::1/64"]

[[interfaces]]
name = "veth-s"
addresses = ["10.10.2.1/24"]
"""
# A, and a second address on veth-s towards the router, a static route through it, a
# smaller MTU and an IPv6 address and route on veth-s
B = A.replace('addresses = ["10.10.2.1/24"]',
              'addresses = ["10.10.2.1/24", "10.20.0.1/24", "fd00:10:2::1/64"]\nmtu = 1400') + """
[[routes]]
destination = "10.30.0.0/24"
gateway = "10.20.0.2"

[[routes]]
destination = "fd00:30::/64"
gateway = "fd00:10:2::2"
metric = 50
"""
POLICY = f"""\
version: 1
zones:
  - {{name: inside, interfaces: [veth-c]}}
  - {{name: outside, interfaces: [veth-s]}}
services:
  - {{name: echo, protocol: tcp, ports: [{ECHO}]}}
classes:
  - {{name: echo, from: inside, to: outside, services: [echo], action: accept}}
"""


class NetLab(Topology):
    def __init__(self, prefix):
        super().__init__()
        names = ("client", "admin", "fw", "switch", "server", "router")
        for name in names:
            setattr(self, name, f"{prefix}-{name}")
        self.names = [getattr(self, name) for name in names]

    def up(self):
        for name in self.names:
            self.namespace(name)
        self.wire(self.client, "eth0", self.fw, "veth-c")
        self.wire(self.admin, "eth0", self.fw, "mgmt")
        self.ns(self.switch, "ip", "link", "add", "name", "br0", "type", "bridge")
        for side, other in (("fw", self.fw), ("srv", self.server), ("rtr", self.router)):
            # the fw's end is named by the backend's configuration: veth-s
            self.wire(self.switch, f"p-{side}", other, "veth-s" if side == "fw" else "eth0")
            self.ns(self.switch, "ip", "link", "set", "dev", f"p-{side}", "master", "br0",
                    "up")
        self.ns(self.switch, "ip", "link", "set", "dev", "br0", "up")
        self.address(self.client, "eth0", "10.10.1.2/24", "fd00:10:1::2/64")
        self.route(self.client, "default", "10.10.1.1")
        self.address(self.admin, "eth0", "192.168.77.2/24")
        self.address(self.server, "eth0", "10.10.2.2/24", "fd00:10:2::2/64")
        self.route(self.server, "default", "10.10.2.1")
        self.address(self.router, "eth0", "10.20.0.2/24")
        self.ns(self.router, "ip", "addr", "add", "10.30.0.1/24", "dev", "lo")
        self.route(self.router, "default", "10.20.0.1")
        self.forward(self.fw)
        return self

    def down(self):
        remove(*self.names)
        self.added.clear()


@pytest.fixture(scope="module")
def net():
    lab = NetLab(PREFIX)
    lab.down()   # what an earlier run under this prefix left behind
    yield lab.up()
    lab.down()


@pytest.fixture
def backend(net, tmp_path):
    """The backend on fw, which starts every test with A applied (whatever the test before
    left: applying is declarative)."""
    backend = IprouteBackend(Target(net.fw), str(tmp_path / "system"))
    backend.apply(normalise.parse(A))
    yield backend
    net.ns(net.fw, "nft", "delete", "table", "inet", "tusk", check=False)


def state(backend):
    """What apply manages, comparable: links (without counters and carrier), the
    addresses and the routes of table main."""
    live = facts.snapshot(backend.target)
    links = {(link.name, link.kind, link.up, link.mtu, link.master, link.alias, link.parent,
              link.vlan_id) for link in live.links}
    return links, set(live.addresses), set(live.routes)


def ping(net, ns, address):
    return net.ns(ns, "ping", "-c", "1", "-W", "2", address, check=False).returncode == 0


def test_the_ports_facts_are_read_inside_the_namespace(backend):
    ports = backend.ports()
    assert sorted(ports) == ["mgmt", "veth-c", "veth-s"]   # not lo; the host's are not here
    port = ports["veth-s"]
    assert (port.link, port.driver, port.mtu, port.min_mtu, port.max_mtu, port.pci) == \
        ("up", "veth", 1500, 68, 65535, "")
    # veth reports 10 Gbit/s full duplex once it has a carrier
    assert (port.speed, port.duplex) == (10000, "full")
    assert backend.describe() == f"iproute2 in namespace {backend.target.netns}"


def test_a_class_carries_traffic_over_the_links_the_backend_set_up(net, backend, tmp_path):
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    state_dir = tmp_path / "policy-state"
    run_tusk("apply", policy, "--timeout", 600, netns=net.fw, state_dir=state_dir, check=True)
    run_tusk("confirm", netns=net.fw, state_dir=state_dir, check=True)
    server = EchoServer(net.server, (ECHO, CLOSED))
    try:
        payload = os.urandom(200_000)
        outcome = tcp_exchange(net.client, "10.10.2.2", ECHO, payload=payload)
        assert (outcome.result, outcome.reply == payload) == ("ok", True), outcome.result
        # the class, not an open forward path, lets it through
        assert tcp_exchange(net.client, "10.10.2.2", CLOSED, timeout=2).result == "timeout"
    finally:
        server.close()


def test_a_second_address_and_a_static_route_reach_the_network_behind_the_router(
        net, backend):
    assert not ping(net, net.fw, "10.30.0.1"), "A has no route to 10.30.0.0/24"
    lines = backend.apply(normalise.parse(B))
    assert "ip -4 addr add 10.20.0.1/24 dev veth-s" in lines
    assert "ip -4 route replace 10.30.0.0/24 via 10.20.0.2 dev veth-s metric 0 proto static" \
        in lines
    assert ping(net, net.fw, "10.30.0.1")
    listener = EchoServer(net.router, (ECHO,))
    try:
        outcome = tcp_exchange(net.fw, "10.30.0.1", ECHO, payload=b"behind the router")
        assert (outcome.result, outcome.reply) == ("ok", b"behind the router")
    finally:
        listener.close()
    routes = {(r.destination, r.gateway, r.interface, r.metric, r.protocol)
              for r in facts.routes(backend.target)}
    assert ("10.30.0.0/24", "10.20.0.2", "veth-s", 0, "static") in routes
    assert ("fd00:30::/64", "fd00:10:2::2", "veth-s", 50, "static") in routes


def test_applying_b_then_a_gives_back_exactly_a(net, backend):
    before = state(backend)
    backend.apply(normalise.parse(B))
    changed = state(backend)
    assert changed != before
    assert ("veth-s", "veth", True, 1400, "", "", "", 0) in changed[0]
    backend.apply(normalise.parse(A))
    assert state(backend) == before
    assert not ping(net, net.fw, "10.30.0.1")


def test_applying_the_same_configuration_twice_changes_nothing(backend):
    config = normalise.parse(B)
    assert backend.apply(config)
    assert backend.plan(config, facts.snapshot(backend.target)) == []
    assert backend.apply(config) == []


def test_links_address_and_routes_tusk_does_not_manage_are_left_alone(net, backend):
    """A link the configuration does not list, with its address, and a routing daemon's
    route on a managed port survive applies that change everything around them."""
    net.ns(net.fw, "ip", "link", "add", "name", "other0", "type", "bridge")
    net.ns(net.fw, "ip", "addr", "add", "10.99.0.1/24", "dev", "other0")
    net.ns(net.fw, "ip", "route", "add", "10.98.0.0/24", "via", "10.10.2.2", "proto", "zebra")
    try:
        backend.apply(normalise.parse(B))
        backend.apply(normalise.parse(A))
        assert facts.snapshot(backend.target).link("other0") is not None
        assert facts.Address("other0", "10.99.0.1/24") in facts.addresses(backend.target)
        assert ("10.98.0.0/24", "zebra") in {(r.destination, r.protocol)
                                             for r in facts.routes(backend.target)}
    finally:
        net.ns(net.fw, "ip", "link", "del", "dev", "other0", check=False)
        net.ns(net.fw, "ip", "route", "del", "10.98.0.0/24", check=False)


def kernel_has(kind, net):
    """Whether the kernel makes a link of that kind (in the switch namespace)."""
    argv = ["ip", "link", "add", "name", "probe0", "link", "br0", "type", kind]
    if kind == "vlan":
        argv += ["id", "2"]
    made = net.ns(net.switch, *argv, check=False).returncode == 0
    net.ns(net.switch, "ip", "link", "del", "dev", "probe0", check=False)
    return made


def test_a_vlan_the_kernel_cannot_make_fails_naming_it_and_a_is_restored(net, backend):
    """This host's kernel has no 802.1Q (nor bonding): the VLAN step fails after the MTU
    and the address steps before it changed fw; the message names the VLAN and the
    kernel option, and applying A again (what the applier does) restores A exactly.
    Traffic over a real VLAN and bond is the VM tier's (Tusk's kernel)."""
    assert not kernel_has("vlan", net), "this kernel has 802.1Q: test a VLAN's traffic here"
    before = state(backend)
    config = normalise.parse(B + """
[[vlans]]
name = "veth-s.30"
parent = "veth-s"
id = 30
addresses = ["10.10.30.1/24"]
""")
    with pytest.raises(NetworkError) as error:
        backend.apply(config)
    [problem] = error.value.problems
    assert (problem.code, problem.path) == (Code.APPLY, "vlans[0]")
    assert problem.message.startswith("`ip link add link veth-s name veth-s.30 mtu 1400 type "
                                      f"vlan id 30` failed on namespace {net.fw}:")
    assert problem.message.endswith("(this kernel has no 802.1Q VLAN support "
                                    "(CONFIG_VLAN_8021Q))")
    assert ("veth-s", "veth", True, 1400, "", "", "", 0) in state(backend)[0], \
        "the steps before the VLAN's ran"
    backend.apply(normalise.parse(A))
    assert state(backend) == before


def test_a_port_the_namespace_lacks_changes_nothing(net, backend):
    before = state(backend)
    with pytest.raises(NetworkError) as error:
        backend.apply(normalise.parse(B + '\n[[interfaces]]\nname = "eth7"\n'))
    assert error.value.problems[0].path == "interfaces[3].name"
    assert state(backend) == before
    assert subprocess.run(["ip", "netns", "exec", net.fw, "ip", "link", "show", "eth7"],
                          capture_output=True).returncode != 0


def test_dropping_a_primary_address_keeps_the_other_of_its_subnet(net, backend):
    """The kernel deletes an IPv4 primary address's secondaries with it unless they are
    promoted: 10.10.2.5 must stay when 10.10.2.1 (added first: the primary) goes."""
    two = A.replace('["10.10.2.1/24"]', '["10.10.2.1/24", "10.10.2.5/24"]')
    backend.apply(normalise.parse(two))
    backend.apply(normalise.parse(A.replace('["10.10.2.1/24"]', '["10.10.2.5/24"]')))
    assert [a.address for a in facts.addresses(backend.target)
            if a.interface == "veth-s" and a.scope == "global"] == ["10.10.2.5/24"]
    assert ping(net, net.server, "10.10.2.5")
