"""Dynamic routing (issue 39): the network configuration's [routing] put into effect by the
lab's backend (FRR's daemons in fw's namespace, network/core/frr.py) against a real peer -
FRR in a router namespace - with real sessions, routes and packets:

    client eth0 10.10.1.2/24  ---  fw veth-c 10.10.1.1/24 fd00:10:1::1/64   (AS 65001)
    fw veth-s 10.20.0.1/24 fd00:20::1/64  ---  router eth0 10.20.0.2/24 fd00:20::2/64
    router (AS 65010): lo 10.30.0.1/24 fd00:30::1/64 and 10.40.0.1/24 by BGP,
                       stub 10.50.0.1/24 fd00:50::1/64 by OSPF v2/v3

fw announces 10.10.1.0/24 and fd00:10:1::/64 with community 65001:100 and accepts
10.30.0.0/16 and fd00:30::/48 (with their more specifics) - not 10.40.0.0/24. Its IPv4
neighbour takes black-hole routes (RFC 7999): 203.0.113.1/32 always, and the hosts the
IDS hook blocks with announce for as long as the block lasts (box/blackhole.py).
"""
import json
import os
import shutil
import time

import pytest
from property.daemon_parsers import frr_commands

from box import blackhole
from flows.core import hook
from lab.namespaces import Topology, remove
from network.core import frr, normalise
from network.core.applier import NetworkApplier
from network.core.errors import Code, NetworkError
from network.core.iproute2 import IprouteBackend
from tusklib.target import Target
from tusklib.values import IPNetwork

PREFIX = f"rtg{os.getpid() % 100000}"
PASSWORD = "md5-k3y.for:65010"
FW = f"""
[[interfaces]]
name = "mgmt"
role = "management"
addresses = ["192.168.78.1/24"]

[[interfaces]]
name = "veth-c"
addresses = ["10.10.1.1/24", "fd00:10:1::1/64"]

[[interfaces]]
name = "veth-s"
addresses = ["10.20.0.1/24", "fd00:20::1/64"]

[routing]
router_id = "10.20.0.1"
bfd_interval = 100

[routing.bgp]
asn = 65001
prefixes = ["10.10.1.0/24", "fd00:10:1::/64"]
communities = ["65001:100"]

blackholes = ["203.0.113.1/32"]

[[routing.bgp.neighbours]]
address = "10.20.0.2"
remote_as = 65010
password = "{PASSWORD}"
accept = ["10.30.0.0/16"]
blackhole = true

[[routing.bgp.neighbours]]
address = "fd00:20::2"
remote_as = 65010
accept = ["fd00:30::/48"]

[[routing.ospf]]
interface = "veth-s"
point_to_point = true
"""
ROUTER = f"""\
frr defaults traditional
interface eth0
 ip ospf area 0.0.0.0
 ip ospf bfd
 ip ospf network point-to-point
 ipv6 ospf6 area 0.0.0.0
 ipv6 ospf6 bfd
 ipv6 ospf6 network point-to-point
exit
interface stub
 ip ospf area 0.0.0.0
 ip ospf passive
 ipv6 ospf6 area 0.0.0.0
 ipv6 ospf6 passive
exit
router ospf
 ospf router-id 10.20.0.2
exit
router ospf6
 ospf6 router-id 10.20.0.2
exit
router bgp 65010
 bgp router-id 10.20.0.2
 no bgp ebgp-requires-policy
 no bgp default ipv4-unicast
 neighbor 10.20.0.1 remote-as 65001
 neighbor 10.20.0.1 password {PASSWORD}
 neighbor 10.20.0.1 bfd
 neighbor fd00:20::1 remote-as 65001
 neighbor fd00:20::1 bfd
 address-family ipv4 unicast
  network 10.30.0.0/24
  network 10.40.0.0/24
  neighbor 10.20.0.1 activate
 exit-address-family
 address-family ipv6 unicast
  network fd00:30::/64
  neighbor fd00:20::1 activate
 exit-address-family
exit
bfd
 peer 10.20.0.1
  transmit-interval 100
  receive-interval 100
 exit
 peer fd00:20::1
  transmit-interval 100
  receive-interval 100
 exit
exit
"""
WITHOUT_ROUTING = FW[:FW.index("[routing]")]
SESSION_SECONDS = 60     # connect-retry is 120 s: a first attempt must not be missed


class RoutingLab(Topology):
    def __init__(self, prefix):
        super().__init__()
        for name in ("client", "admin", "fw", "router"):
            setattr(self, name, f"{prefix}-{name}")
        self.names = [self.client, self.admin, self.fw, self.router]

    def up(self):
        for name in self.names:
            self.namespace(name)
        self.wire(self.client, "eth0", self.fw, "veth-c")
        self.wire(self.admin, "eth0", self.fw, "mgmt")
        self.wire(self.router, "eth0", self.fw, "veth-s")
        self.address(self.client, "eth0", "10.10.1.2/24", "fd00:10:1::2/64")
        self.route(self.client, "default", "10.10.1.1")
        self.route(self.client, "default", "fd00:10:1::1")
        self.address(self.admin, "eth0", "192.168.78.2/24")
        self.address(self.router, "eth0", "10.20.0.2/24", "fd00:20::2/64")
        for address in ("10.30.0.1/24", "10.40.0.1/24"):
            self.ns(self.router, "ip", "addr", "add", address, "dev", "lo")
        self.ns(self.router, "ip", "-6", "addr", "add", "fd00:30::1/64", "dev", "lo")
        # a stub network (the host kernel may lack dummy): a veth pair of its own
        self.ns(self.router, "ip", "link", "add", "stub", "type", "veth", "peer", "name",
                "stub-end")
        self.ns(self.router, "ip", "link", "set", "stub-end", "up")
        self.address(self.router, "stub", "10.50.0.1/24", "fd00:50::1/64")
        self.forward(self.fw)
        self.forward(self.router)
        return self

    def down(self):
        remove(*self.names)     # FRR's daemons with them
        self.added.clear()
        for name in self.names:
            shutil.rmtree(os.path.join(frr.LAB_DIR, name), ignore_errors=True)


def vtysh(daemons, command):
    result = daemons.run("vtysh", "-c", command)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout) if command.endswith("json") else result.stdout


def wait_for(what, predicate, seconds=SESSION_SECONDS, step=0.2):
    deadline = time.monotonic() + seconds
    while True:
        value = predicate()
        if value:
            return value
        assert time.monotonic() < deadline, f"{what}: not within {seconds} s"
        time.sleep(step)


def established(daemons):
    """{neighbour address: BGP state}."""
    return {address: peer["bgpState"]
            for address, peer in vtysh(daemons, "show bgp neighbors json").items()}


def ready(daemons):
    """Both sessions established, and BFD up on both (BFD takes a session down only once
    it was up)."""
    return set(established(daemons).values()) == {"Established"} and \
        {p["status"] for p in vtysh(daemons, "show bfd peers json")} == {"up"}


def silence(lab, ns, interface):
    """Everything to and from ns over interface dropped, the link itself staying up: a
    peer gone silent (table inet silence; delete it to speak again)."""
    lab.ns(ns, "nft", "-f", "-", input=(
        "table inet silence { chain inbound { type filter hook input priority 0; "
        f"iifname {interface} drop; }}; chain outbound {{ type filter hook output priority "
        f"0; oifname {interface} drop; }}; }}"))


def kernel_routes(lab, ns, family="-4"):
    """{destination: protocol} of table main."""
    routes = json.loads(lab.ns(ns, "ip", "-j", family, "route", "show").stdout)
    return {route["dst"]: route.get("protocol") for route in routes}


@pytest.fixture(scope="module")
def routed(tmp_path_factory):
    lab = RoutingLab(PREFIX)
    lab.down()
    work = tmp_path_factory.mktemp("routing")
    try:
        lab.up()
        peer = frr.LabFrr(lab.router)
        peer.apply(ROUTER, [])
        backend = IprouteBackend(Target(lab.fw), str(work / "fw"))
        lines = backend.apply(normalise.parse(FW))
        wait_for("both BGP sessions established",
                 lambda: ready(backend.frr))
        yield lab, backend, peer, lines
    finally:
        lab.down()


def test_sessions_come_up_with_the_password_and_bfd(routed):
    lab, backend, peer, lines = routed
    assert established(backend.frr) == {"10.20.0.2": "Established",
                                        "fd00:20::2": "Established"}
    bfd = {p["peer"]: p["status"] for p in vtysh(backend.frr, "show bfd peers json")}
    assert bfd == {"10.20.0.2": "up", "fd00:20::2": "up"}
    # the password is in FRR's file and nowhere in what the apply reports
    assert not any(PASSWORD in line for line in lines), lines
    assert any("FRR reloaded" in line for line in lines), lines


def test_the_filters_take_what_is_accepted_and_nothing_else(routed):
    lab, backend, peer, _ = routed
    wait_for("10.30.0.0/24 in fw's table",
             lambda: kernel_routes(lab, lab.fw).get("10.30.0.0/24") == "bgp")
    assert "10.40.0.0/24" not in kernel_routes(lab, lab.fw)   # announced, not accepted
    wait_for("fd00:30::/64 in fw's table",
             lambda: kernel_routes(lab, lab.fw, "-6").get("fd00:30::/64") == "bgp")
    # the peer holds fw's announcements with the community
    route = wait_for("10.10.1.0/24 at the peer", lambda: vtysh(
        peer, "show bgp ipv4 unicast 10.10.1.0/24 json").get("paths"))
    assert route[0]["community"]["string"] == "65001:100"
    assert route[0]["aspath"]["string"] == "65001"
    # and traffic follows: the client reaches the BGP-learned network through fw
    assert lab.ns(lab.client, "ping", "-c", "1", "-W", "2", "10.30.0.1",
                  check=False).returncode == 0


def test_ospf_v2_and_v3_form_adjacencies_and_learn_the_stub(routed):
    lab, backend, _, _ = routed
    wait_for("10.50.0.0/24 by OSPF",
             lambda: kernel_routes(lab, lab.fw).get("10.50.0.0/24") == "ospf")
    wait_for("fd00:50::/64 by OSPFv3",
             lambda: kernel_routes(lab, lab.fw, "-6").get("fd00:50::/64") == "ospf")
    neighbours = vtysh(backend.frr, "show ip ospf neighbor json")["neighbors"]
    assert [n["state"] if "state" in n else n for n in neighbours["10.20.0.2"]][0] \
        .startswith("Full")


def test_a_peer_without_the_key_gets_no_session(routed):
    """TCP MD5: with the peer's FRR stopped, a program at the neighbour's address but
    without the key cannot even connect to fw's BGP port (the kernel drops its SYNs);
    over IPv6, whose session has no password, the same program connects."""
    lab, backend, peer, _ = routed
    connect = ("import socket, sys; s = socket.socket(socket.AF_INET6 if ':' in sys.argv[1] "
               "else socket.AF_INET); s.settimeout(3); s.connect((sys.argv[1], 179)); "
               "print('connected')")
    peer.stop([])
    try:
        keyless = lab.ns(lab.router, "python3", "-c", connect, "10.20.0.1", check=False)
        assert "connected" not in keyless.stdout, keyless
        assert "timed out" in keyless.stderr, keyless.stderr
        open_v6 = lab.ns(lab.router, "python3", "-c", connect, "fd00:20::1", check=False)
        assert "connected" in open_v6.stdout, open_v6
    finally:
        peer.apply(ROUTER, [])
    wait_for("sessions back with the peer that has the key",
             lambda: ready(backend.frr))


def test_bfd_takes_a_silent_peer_down_within_a_second(routed):
    """The peer's link stays up but carries nothing (dropped by nftables in the router):
    BFD (100 ms x 3) tears the BGP session down; BGP's own hold timer (180 s) would not."""
    lab, backend, _, _ = routed
    wait_for("sessions up", lambda: ready(backend.frr))
    silence(lab, lab.router, "eth0")
    began = time.monotonic()
    try:
        wait_for("the IPv4 session down", lambda: established(
            backend.frr)["10.20.0.2"] != "Established", seconds=5, step=0.02)
        took = time.monotonic() - began
        assert took < 1.0, f"down after {took:.2f} s"
        wait_for("the route withdrawn", lambda: "10.30.0.0/24" not in kernel_routes(
            lab, lab.fw), seconds=2, step=0.05)
    finally:
        lab.ns(lab.router, "nft", "delete", "table", "inet", "silence")
    wait_for("sessions back", lambda: ready(backend.frr))


def printed(text):
    """frr_commands(text) as FRR prints them: without values that are its defaults."""
    return [c for c in frr_commands(text)
            if c[-1][0] not in frr.FRR_DEFAULTS or c[-1][1:] != (frr.FRR_DEFAULTS[c[-1][0]],)]


# FW changed in every part a reload must add, change or take away
CHANGED = FW.replace('communities = ["65001:100"]', 'communities = ["65001:200", "no-export"]') \
    .replace('accept = ["10.30.0.0/16"]', 'accept = ["10.30.0.0/24", "10.31.0.0/16"]') \
    .replace('bfd_interval = 100', 'bfd_interval = 150\nbfd_multiplier = 5') \
    .replace('prefixes = ["10.10.1.0/24", "fd00:10:1::/64"]', 'prefixes = ["10.10.1.0/24"]') \
    .replace(f'password = "{PASSWORD}"', 'password = "other"') \
    .replace('point_to_point = true', 'cost = 20\npassive = true')


def test_the_daemons_hold_exactly_the_file_through_every_reload(routed):
    """What FRR's daemons run (`show running-config`) is the rendered file, command for
    command, after the first load and after reloads that change every part and back:
    frr-reload.py takes away what the new file no longer says."""
    _, backend, _, _ = routed
    try:
        for text in (FW, CHANGED, FW):
            config = normalise.parse(text)
            backend.frr.apply(frr.render(config), [])
            running = vtysh(backend.frr, "show running-config")
            assert frr_commands(running) == printed(frr.render(config)), running
    finally:
        backend.apply(normalise.parse(FW))
    wait_for("sessions back", lambda: ready(backend.frr))


def test_a_configuration_frrs_parser_refuses_changes_nothing(routed, monkeypatch):
    lab, backend, _, _ = routed
    before = vtysh(backend.frr, "show running-config")
    monkeypatch.setattr(frr, "render", lambda config: "router bgp 65001\n neighbour x\n")
    with pytest.raises(NetworkError) as refused:
        backend.apply(normalise.parse(FW.replace("10.20.0.1/24\"", "10.20.0.1/24\", "
                                                 "\"10.21.0.1/24\"")))
    assert "vtysh -C" in str(refused.value.problems[0])
    assert "10.21.0.1/24" not in lab.ns(lab.fw, "ip", "addr").stdout
    assert vtysh(backend.frr, "show running-config") == before


def test_a_new_session_that_is_not_up_cannot_be_confirmed_and_rolls_back(routed, tmp_path):
    """Commit-confirm with routing: the confirmed FW, then FW with a third neighbour no
    router answers for. Its confirm is refused, naming that neighbour only (the two
    sessions FW already had are not held against it); the roll back takes it out of
    FRR again."""
    lab, backend, _, _ = routed
    applier = NetworkApplier(str(tmp_path / "state"), netns=lab.fw)
    applier.apply(FW, timeout=120)
    wait_for("sessions up under the applier", lambda: ready(backend.frr))
    applier.confirm()
    silent = FW + '\n[[routing.bgp.neighbours]]\naddress = "10.20.0.9"\nremote_as = 65099\n'
    applier.apply(silent, timeout=120)
    assert "10.20.0.9" in established(backend.frr)
    with pytest.raises(NetworkError) as refused:
        applier.confirm()
    assert [(p.code, p.path) for p in refused.value.problems] == \
        [(Code.CONFIRM, "routing.bgp.neighbours[2]")]
    assert "not Established" in refused.value.problems[0].message
    applier.cancel()
    assert "10.20.0.9" not in established(backend.frr)
    assert applier.status()["pending"] is None
    wait_for("sessions as confirmed", lambda: ready(backend.frr))


def test_without_routing_frr_stops(routed):
    lab, backend, peer, _ = routed
    lines = backend.apply(normalise.parse(WITHOUT_ROUTING))
    assert any("stopped FRR" in line for line in lines), lines
    assert not any(backend.frr.pid(d) for d in frr.DAEMONS)
    assert "10.30.0.0/24" not in kernel_routes(lab, lab.fw)
    backend.apply(normalise.parse(FW))
    wait_for("sessions back", lambda: ready(backend.frr))


def peer_route(peer, prefix):
    """The peer's BGP paths to prefix (none: [])."""
    family = "ipv6" if ":" in prefix else "ipv4"
    return vtysh(peer, f"show bgp {family} unicast {prefix} json").get("paths") or []


def test_black_holes_reach_the_neighbour_that_takes_them_for_as_long_as_the_block(routed):
    """The admin's list's host is announced with BLACKHOLE and NO_EXPORT; a block of the
    IDS hook with announce adds its host for its time, survives a network apply, and
    goes with the block (expire(), the agent's flows.blackholes task); an IPv6 host is
    not sent to the IPv6 neighbour, which does not take black-holes; a non-host prefix
    is refused."""
    lab, backend, peer, _ = routed
    path = wait_for("the admin's black-hole at the peer",
                    lambda: peer_route(peer, "203.0.113.1/32"))
    assert set(path[0]["community"]["string"].split()) == {"blackhole", "no-export"}
    target, run = Target(lab.fw), backend.frr.run
    block = hook.request_of({"action": "block", "prefix": "203.0.113.66/32", "ttl": 4,
                             "announce": True})
    hook.add(target, block)
    blackhole.announce(run, block.prefix)
    six = IPNetwork("fd00:66::1/128")
    blackhole.announce(run, six)
    try:
        wait_for("the block at the peer", lambda: peer_route(peer, "203.0.113.66/32"))
        assert "10.40.0.0/24" not in kernel_routes(lab, lab.fw)
        backend.apply(normalise.parse(FW))           # a network apply keeps both
        assert {IPNetwork("203.0.113.66/32"), six} <= blackhole.announced(run)
        time.sleep(2)
        assert not peer_route(peer, "fd00:66::1/128")   # that session takes none
        with pytest.raises(blackhole.BlackholeError):
            blackhole.announce(run, IPNetwork("203.0.113.0/24"))
        config = normalise.parse(FW)
        listing = lambda: target.run(["nft", "-j", "list", "table", "inet",  # noqa: E731
                                      "tusk_hook"]).stdout
        assert blackhole.expire(run, listing(), config) == [six]   # no block holds it
        wait_for("the block's end", lambda: not hook.entries(listing()) or all(
            e["key"] != "203.0.113.66" for e in hook.entries(listing())), seconds=10)
        assert blackhole.expire(run, listing(), config) == [block.prefix]
        wait_for("withdrawn at the peer", lambda: not peer_route(peer, "203.0.113.66/32"),
                 seconds=10)
        assert peer_route(peer, "203.0.113.1/32")       # the admin's list stays
    finally:
        for prefix in (block.prefix, six):
            if prefix in blackhole.announced(run):
                blackhole.withdraw(run, prefix)


# -- the HA pair with dynamic routing ---------------------------------------------------------

def pair_box(number, standby):
    """fw<number>'s network: its own inside, 10.20.0.<number>/24 towards the router (one
    segment for both boxes), BGP to the router announcing the inside, BFD on."""
    return f"""
[[interfaces]]
name = "mgmt"
role = "management"
addresses = ["192.168.79.{number}/24"]

[[interfaces]]
name = "veth-c"
addresses = ["10.10.1.1/24"]

[[interfaces]]
name = "veth-s"
addresses = ["10.20.0.{number}/24"]

[routing]
router_id = "10.20.0.{number}"
bfd_interval = 100
standby = {"true" if standby else "false"}

[routing.bgp]
asn = 65001
prefixes = ["10.10.1.0/24"]

[[routing.bgp.neighbours]]
address = "10.20.0.2"
remote_as = 65010
"""


PAIR_ROUTER = """\
frr defaults traditional
router bgp 65010
 bgp router-id 10.20.0.2
 no bgp ebgp-requires-policy
 neighbor 10.20.0.1 remote-as 65001
 neighbor 10.20.0.1 bfd
 neighbor 10.20.0.3 remote-as 65001
 neighbor 10.20.0.3 bfd
exit
bfd
 peer 10.20.0.1
  transmit-interval 100
  receive-interval 100
 exit
 peer 10.20.0.3
  transmit-interval 100
  receive-interval 100
 exit
exit
"""


def best_next_hop(peer):
    """The router's best path to the pair's inside: the next hop it sends traffic to."""
    for path in vtysh(peer, "show bgp ipv4 unicast 10.10.1.0/24 json").get("paths") or []:
        if path.get("bestpath", {}).get("overall"):
            return path["nexthops"][0]["ip"]
    return None


def test_the_standby_box_does_not_attract_traffic_until_the_primary_is_gone(tmp_path):
    """Two boxes of an HA pair, both announcing the same inside to one router: the
    router sends traffic to the primary (fw3; the secondary's AS path is three ASes
    longer) - although every tie-breaker favours the secondary (fw1: its path is the
    older, its router id the lower) - and when the primary goes silent BFD hands the
    traffic to the secondary in under a second."""
    prefix = f"{PREFIX[:6]}h"
    lab = Topology()
    names = {name: f"{prefix}-{name}" for name in ("fw1", "fw3", "rt", "sw", "m1", "m3",
                                                   "c1", "c3")}
    try:
        for name in names.values():
            lab.namespace(name)
        lab.ns(names["sw"], "ip", "link", "add", "br0", "type", "bridge")
        for box, number in (("fw1", 1), ("fw3", 3)):
            lab.wire(names["sw"], f"p-{box}", names[box], "veth-s")
            lab.wire(names[f"c{number}"], "eth0", names[box], "veth-c")
            lab.wire(names[f"m{number}"], "eth0", names[box], "mgmt")
            # the inside's far end up: the box routes (and so announces) it only then
            lab.address(names[f"c{number}"], "eth0", "10.10.1.2/24")
        lab.wire(names["sw"], "p-rt", names["rt"], "eth0")
        for port in ("p-fw1", "p-fw3", "p-rt"):
            lab.ns(names["sw"], "ip", "link", "set", port, "master", "br0", "up")
        lab.ns(names["sw"], "ip", "link", "set", "br0", "up")
        lab.address(names["rt"], "eth0", "10.20.0.2/24")
        router = frr.LabFrr(names["rt"])
        router.apply(PAIR_ROUTER, [])
        boxes = {}
        for box, number in (("fw1", 1), ("fw3", 3)):   # the secondary's path first
            boxes[box] = IprouteBackend(Target(names[box]), str(tmp_path / box))
            boxes[box].apply(normalise.parse(pair_box(number, standby=box == "fw1")))
            wait_for(f"{box}'s path at the router", lambda n=number: f"10.20.0.{n}" in {
                p["nexthops"][0]["ip"] for p in vtysh(
                    router, "show bgp ipv4 unicast 10.10.1.0/24 json").get("paths") or []})
        wait_for("both sessions and BFD up", lambda: all(ready_one(b.frr)
                                                         for b in boxes.values()))
        assert best_next_hop(router) == "10.20.0.3"
        silence(lab, names["fw3"], "veth-s")
        began = time.monotonic()
        wait_for("the secondary carries the traffic",
                 lambda: best_next_hop(router) == "10.20.0.1", seconds=5, step=0.02)
        took = time.monotonic() - began
        assert took < 1.0, f"handed over after {took:.2f} s"
    finally:
        remove(*names.values())
        for name in names.values():
            shutil.rmtree(os.path.join(frr.LAB_DIR, name), ignore_errors=True)


def ready_one(daemons):
    sessions = established(daemons)
    return sessions and set(sessions.values()) == {"Established"} and \
        {p["status"] for p in vtysh(daemons, "show bfd peers json")} == {"up"}
