"""The appliance's host table follows the management port (box/hosttable.py, wired into
the appliance's NetworkApplier by box/appliers.py): a network change that moves
management to another port loads table inet tusk_host for the new port - the confirm
must arrive over it - and a rollback, a cancel or the watchdog after a SIGKILL of the
applier loads it for the old port again.

tusk-net runs as on the appliance (the networkd backend) on a --root tree with two
ports (tests/appliancetree.py), and nft is real: TUSK_COMMANDS gives tusk-net the nft of
a namespace of this test's own, where the host table is loaded as boot loads it. The
lab's fw needs none of this: its policy filters forwarding only, and its nginx answers
on every address."""
import os
import re
import signal
import subprocess
import sys

import pytest
from appliancetree import Appliance, Nic
from kit import wait_until

from lab.paths import ROOT
from network.core import normalise
from policy.core import render_boot

NAMESPACE = f"tht{os.getpid() % 100000}"
TIMEOUT = 30    # the shortest confirm timeout the applier takes
STATE = "/var/lib/tusk/network"   # tusk-net's default, inside the tree

A = """version = 2
[[interfaces]]
name = "eth0"
role = "management"
addresses = ["192.0.2.1/24"]
[[interfaces]]
name = "eth1"
role = "traffic"
addresses = ["198.51.100.1/24"]
"""
# management moves to eth1, with an address of its own
B = """version = 2
[[interfaces]]
name = "eth0"
role = "traffic"
addresses = ["192.0.2.1/24"]
[[interfaces]]
name = "eth1"
role = "management"
addresses = ["198.51.100.1/24"]
"""


def nft(*args, stdin=None):
    return subprocess.run(["ip", "netns", "exec", NAMESPACE, "nft", *args], input=stdin,
                          capture_output=True, text=True)


def admitted():
    """The port table inet tusk_host admits the dashboard on, None without the table."""
    result = nft("list", "table", "inet", "tusk_host")
    if result.returncode != 0:
        return None
    found = re.findall(r'iifname "([^"]+)" tcp dport \{ 80, 443 \} accept', result.stdout)
    assert len(found) == 1, result.stdout
    return found[0]


@pytest.fixture
def box(tmp_path):
    """A confirmed A on the tree, the host table loaded for eth0 in the namespace."""
    subprocess.run(["ip", "netns", "add", NAMESPACE], check=True)
    try:
        box = Appliance(tmp_path / "root", Nic("eth0"), Nic("eth1", mac="52:54:00:00:00:01"))
        box.table["nft"] = ["ip", "netns", "exec", NAMESPACE, "nft"]
        box.write("/etc/tusk/network.toml", A)
        box.write("/tmp/b.toml", B)
        assert nft("-f", "-", stdin=render_boot.host("eth0")).returncode == 0
        result = box.tusk_net("apply")
        assert result.returncode == 0, result.stderr
        assert "host table" not in result.stdout, "eth0 already: nothing to load"
        assert admitted() == "eth0"
        yield box
        box.tusk_net("cancel")
    finally:
        subprocess.run(["ip", "netns", "del", NAMESPACE], check=False)


def try_b(box):
    result = box.tusk_net("try", box.path("/tmp/b.toml"), "--timeout", str(TIMEOUT))
    assert result.returncode == 0, result.stderr


def test_a_confirmed_move_keeps_the_table_on_the_new_port(box):
    try_b(box)
    assert admitted() == "eth1"
    applied = box.read(f"{STATE}/revisions/000002/applied.txt")
    assert "host table: the dashboard answers on eth1 (was eth0)" in applied
    result = box.tusk_net("confirm")
    assert result.returncode == 0, result.stderr
    assert admitted() == "eth1"
    assert normalise.load(box.path("/etc/tusk/network.toml")) == normalise.parse(B)


HA = """[ha]
enabled = true
role = "primary"
vrid = 9
sync_interface = "eth2"
sync_address = "10.77.0.1/30"
peer_address = "10.77.0.2"
[[virtual]]
interface = "eth0"
addresses = ["192.0.2.254/24"]
"""


def test_an_ha_pairs_rules_follow_the_move_too(box):
    """A pair's VRRP and sync lines, which tusk-boot loaded with the table, stay in it."""
    box.write("/etc/tusk/ha.toml", HA)
    try_b(box)
    assert admitted() == "eth1"
    listed = nft("list", "table", "inet", "tusk_host").stdout
    assert 'iifname "eth0" meta l4proto vrrp accept' in listed, listed
    assert 'iifname "eth2" ip saddr 10.77.0.2 udp dport 3780 accept' in listed, listed


ROUTING = A + """
[routing.bgp]
asn = 65001
[[routing.bgp.neighbours]]
address = "198.51.100.2"
remote_as = 65010
[[routing.bgp.neighbours]]
address = "198.51.100.3"
remote_as = 65020
bfd = false
[[routing.ospf]]
interface = "eth1"
"""


def test_routing_is_admitted_from_its_neighbours_and_taken_back_with_it(box):
    """A change with BGP and OSPF loads the table with BGP from the two neighbours, BFD
    from the one that has it (TTL 255 only), OSPF and its BFD on eth1; the dashboard stays
    on eth0. Cancelled, the table admits none of it again."""
    box.write("/tmp/routing.toml", ROUTING)
    result = box.tusk_net("try", box.path("/tmp/routing.toml"), "--timeout", str(TIMEOUT))
    assert result.returncode == 0, result.stderr
    listed = nft("list", "table", "inet", "tusk_host").stdout
    assert admitted() == "eth0"
    assert "ip saddr { 198.51.100.2, 198.51.100.3 } tcp dport 179 accept" in listed, listed
    assert "ip saddr 198.51.100.2 ip ttl 255 udp dport { 3784, 3785 } accept" in listed, \
        listed
    assert re.search(r'iifname "eth1" meta l4proto (89|ospf|ospfigp) accept', listed), listed
    assert 'iifname "eth1" ip ttl 255 udp dport { 3784, 3785 } accept' in listed, listed
    result = box.tusk_net("cancel")
    assert result.returncode == 0, result.stderr
    listed = nft("list", "table", "inet", "tusk_host").stdout
    assert admitted() == "eth0"
    assert not re.search(r"dport 179|3784|l4proto (89|ospf)", listed), listed


def test_a_cancelled_move_puts_the_table_back_on_the_old_port(box):
    try_b(box)
    assert admitted() == "eth1"
    result = box.tusk_net("cancel")
    assert result.returncode == 0, result.stderr
    assert admitted() == "eth0"


def test_the_watchdog_puts_it_back_after_a_sigkill_of_the_applier(box):
    script = ("import sys, time\n"
              "from box.appliers import NetworkApplier\n"
              "NetworkApplier(sys.argv[1]).apply(open(sys.argv[2]).read(), "
              f"timeout={TIMEOUT})\n"
              "print('applied', flush=True)\n"
              "time.sleep(600)\n")
    applier = subprocess.Popen(
        [sys.executable, "-c", script, box.path(STATE), box.path("/tmp/b.toml")],
        stdout=subprocess.PIPE, text=True,
        env=box.env(PYTHONPATH=str(ROOT / "webui")))
    try:
        assert applier.stdout.readline() == "applied\n"
        assert admitted() == "eth1"
        applier.send_signal(signal.SIGKILL)
        applier.wait(10)
    finally:
        applier.kill()
        applier.stdout.close()
    wait_until(lambda: admitted() == "eth0", TIMEOUT + 15,
               "the host table back on eth0 after the deadline, with the applier killed")


def test_without_a_host_table_none_is_made(box):
    """Before boot loaded it (or with the lockdown table in its place) the table is not
    the network's to create."""
    assert nft("delete", "table", "inet", "tusk_host").returncode == 0
    try_b(box)
    assert admitted() is None
