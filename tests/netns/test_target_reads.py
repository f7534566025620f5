"""What the agent's periodic samples read through tusklib.target.Target - the dashboard's
/proc files, the network facts' /sys entries, the policy's counters - is the target's own
view: a namespace's /proc/sys/net and /sys, not the host's. On the host the files are read
by the agent itself, with no process started (they are read every few seconds; under the
tests' emulator each started process costs a tenth of a second)."""
import os
import subprocess

import pytest

from network.core import facts
from tusklib import target as target_module
from tusklib.target import Target

TTL = "/proc/sys/net/ipv4/ip_default_ttl"


@pytest.fixture(scope="module")
def netns():
    """A namespace of this test's own: a TTL the host does not have, a veth pair."""
    name = f"tusk-reads-{os.getpid()}"
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        for argv in (["sysctl", "-qw", "net.ipv4.ip_default_ttl=77"],
                     ["ip", "link", "add", "rd0", "type", "veth", "peer", "name", "rd1"],
                     ["ip", "link", "set", "rd0", "mtu", "1400", "up"],
                     ["ip", "link", "set", "rd1", "up"]):
            subprocess.run(["ip", "netns", "exec", name, *argv], check=True)
        yield name
    finally:
        subprocess.run(["ip", "netns", "del", name], check=False)


def test_a_namespaces_files_and_links_are_its_own(netns):
    inside, host = Target(netns), Target(None)
    paths = [TTL, "/sys/class/net/rd0/mtu", "/sys/class/net/rd0/nothing-here"]
    found = inside.read_files(paths)
    assert found[TTL].strip() == "77"
    assert found["/sys/class/net/rd0/mtu"].strip() == "1400"
    assert found["/sys/class/net/rd0/nothing-here"] is None
    on_host = host.read_files(paths)
    assert on_host[TTL].strip() != "77"
    assert on_host["/sys/class/net/rd0/mtu"] is None
    assert inside.read_links(["/sys/class/net/rd0/subsystem", "/sys/class/net/rd0/device"]) \
        == {"/sys/class/net/rd0/subsystem": "net", "/sys/class/net/rd0/device": None}
    assert host.read_links(["/sys/class/net/lo/subsystem"]) == \
        {"/sys/class/net/lo/subsystem": "net"}


def test_the_host_is_read_without_starting_a_process(monkeypatch):
    def refused(*args, **kwargs):
        raise AssertionError(f"a process was started: {args}")
    monkeypatch.setattr(target_module.subprocess, "run", refused)
    host = Target(None)
    assert host.read_files(["/proc/sys/net/ipv4/ip_forward"])["/proc/sys/net/ipv4/ip_forward"]
    assert host.read_links(["/sys/class/net/lo/subsystem"])["/sys/class/net/lo/subsystem"] \
        == "net"


def test_a_namespaces_ports_come_with_their_speed_and_kind(netns):
    """A veth that is up reports 10 Gbit/s full duplex through ethtool's sysfs files (a
    port that is down reads EINVAL there), and has no device (so no driver): its kind
    names it."""
    inside = Target(netns)
    ports = facts.ports(inside, facts.snapshot(inside).links)
    assert {name: (port.speed, port.duplex, port.driver, port.mtu)
            for name, port in ports.items()} == {"rd0": (10000, "full", "veth", 1400),
                                                 "rd1": (10000, "full", "veth", 1500)}


def test_the_policys_counters_are_its_two_tables_only(netns):
    """One nft for every table's counters: inet tusk's and bridge tusk_bridge's summed by
    name, another table's counter of the same name left out; none at all (None) while
    there is no table inet tusk."""
    ruleset = """table inet tusk {
	counter hits { packets 3 bytes 300 }
	counter invalid { packets 1 bytes 40 }
}
table bridge tusk_bridge {
	counter invalid { packets 2 bytes 80 }
}
table inet other {
	counter hits { packets 1000 bytes 100000 }
}
"""
    assert Target(netns).counters() is None          # no policy table yet
    subprocess.run(["ip", "netns", "exec", netns, "nft", "-f", "-"], input=ruleset,
                   text=True, check=True)
    assert Target(netns).counters() == {"hits": (3, 300), "invalid": (3, 120)}
