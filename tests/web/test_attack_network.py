"""Network jobs forged by someone who controls the web process (issue 18): job rows written
straight into the database as role tusk, past the forms. The real agent checks every
argument again - the document with the same core the forms use, against the machine's
ports and the policy store's zones - and refuses with a clear message; nothing in the
namespace changes, no revision is written, a pending change stays pending."""
import hashlib
import os

import pytest
from kit import wait_until
from tuskweb import AGENT_NETNS, wait

from jobs import queue
from network.core.applier import token_sha256
from tusklib.target import Target

MGMT = {"name": "eth1", "role": "management", "addresses": ["192.0.2.1/24"]}


def document(*interfaces, **extra):
    return {"interfaces": list(interfaces) or [MGMT, {"name": "eth2", "role": "traffic"}],
            **extra}


@pytest.fixture
def agent_config(agent_config, tmp_path):
    """The web tier's agent, with a network state directory of the test's own."""
    with open(agent_config, "a", encoding="utf-8") as handle:
        handle.write(f'network_state_dir = "{tmp_path / "network"}"\n')
    return agent_config


@pytest.fixture
def store(agent, tmp_path):
    return tmp_path / "network"


def machine():
    """What an apply would change: links, addresses and routes of the namespace, once
    no IPv6 address is tentative any more: the kernel adds an address's local route only
    when its duplicate address detection ends, which would otherwise show up as a
    change between two readings."""
    target = Target(AGENT_NETNS)
    wait_until(lambda: not target.run(["ip", "-6", "addr", "show", "tentative"]).stdout.strip(),
               10, "IPv6 addresses out of duplicate address detection")
    return tuple(target.run(["ip", *argv]).stdout for argv in (
        ["-br", "link"], ["-br", "addr"], ["route", "show", "table", "all"]))


def revisions(store):
    path = store / "revisions"
    return sorted(os.listdir(path)) if path.exists() else []


def refused(args, kind="network.apply"):
    job = wait(queue.enqueue(kind, args), 60)
    assert job.state == "failed", job.result
    return job


BAD_APPLY = [
    ("a VLAN id the form refuses", {"document": document(vlans=[
        {"name": "eth2.5000", "parent": "eth2", "id": 5000}])}, "vlans[0].id: 5000 is outside"),
    ("overlapping subnets", {"document": document(
        MGMT, {"name": "eth2", "role": "traffic", "addresses": ["192.0.2.9/24"]})},
     "interfaces[1].addresses[0]: 192.0.2.9/24 overlaps 192.0.2.1/24 of eth1"),
    ("the management port in a bond", {"document": document(bonds=[
        {"name": "bond0", "members": ["eth1"]}])}, "eth1 is the management port"),
    ("a port the machine lacks", {"document": document(
        MGMT, {"name": "eth9", "role": "traffic"})}, "this machine has no such Ethernet port"),
    ("no management address", {"document": document(
        {"name": "eth1", "role": "management"})}, "no management address left"),
    # issue 34: an IPv6 scope carrying a section of systemd-resolved's own, and NTP's
    ("a DNS server carrying a resolved section", {"document": document(system={
        "dns": ["2001:db8::53%\n[Resolve]\nDNSStubListenerExtra=0.0.0.0"]})},
     "system.dns[0]: '2001:db8::53%\\n[Resolve]\\nDNSStubListenerExtra=0.0.0.0' has a zone"),
    ("an NTP server carrying a timesyncd key", {"document": document(system={
        "ntp": ["ntp.example.net\nRootDistanceMaxSec=1"]})}, "system.ntp[0]: "),
    ("a host name carrying a newline", {"document": document(system={"hostname": "tusk\n"})},
     "system.hostname: "),
    # issue 39's bridges: a member that is no link, a name carrying nft's and networkd's
    # syntax, VLAN ids that are not numbers, a BPDU choice of another word
    ("a bridge of a port the machine lacks", {"document": document(bridges=[
        {"name": "br0", "members": ["eth2", "eth9"]}])}, "bridges[0].members[1]: 'eth9'"),
    ("a bridge named with a rule in it", {"document": document(bridges=[
        {"name": 'br0" } accept #', "members": ["eth2", "eth2"]}])}, "bridges[0].name: "),
    ("a bridge's VLANs as strings", {"document": document(bridges=[
        {"name": "br0", "members": ["eth2"], "vlans": ["100\n[Bridge]"]}])},
     "bridges[0].vlans: expected a list of integers"),
    ("a bridge's BPDUs neither forwarded nor dropped", {"document": document(bridges=[
        {"name": "br0", "members": ["eth2"], "bpdu": "accept"}])},
     "bridges[0].bpdu: 'accept': one of forward, drop"),
    # issue 39's routing: a password carrying FRR commands (vtysh has no quoting), a
    # neighbour that is a line of its own, an AS as text, the shown password's stand-in
    ("a BGP password carrying a command", {"document": document(
        MGMT, {"name": "eth2", "role": "traffic", "addresses": ["10.1.0.1/24"]},
        routing={"bgp": {"asn": 65001, "neighbours": [{
            "address": "10.1.0.2", "remote_as": 65002,
            "password": "x\n neighbor 10.1.0.2 shutdown"}]}})},
     "routing.bgp.neighbours[0].password: has a character other than"),
    ("a neighbour address carrying a line", {"document": document(
        MGMT, {"name": "eth2", "role": "traffic", "addresses": ["10.1.0.1/24"]},
        routing={"bgp": {"asn": 65001, "neighbours": [{
            "address": "10.1.0.2\nrouter ospf", "remote_as": 65002}]}})},
     "routing.bgp.neighbours[0].address: "),
    ("an AS number as text", {"document": document(
        routing={"bgp": {"asn": "65001\nline vty"}})},
     "routing.bgp.asn: expected an integer"),
    ("a password that only stands for one", {"document": document(
        MGMT, {"name": "eth2", "role": "traffic", "addresses": ["10.1.0.1/24"]},
        routing={"bgp": {"asn": 65001, "neighbours": [{
            "address": "10.1.0.2", "remote_as": 65002, "password": "(hidden)"}]}})},
     "routing.bgp.neighbours[0].password: (hidden) stands for"),
    ("OSPF on an interface with a command in its name", {"document": document(
        routing={"ospf": [{"interface": "eth2\n ip ospf passive"}]})},
     "routing.ospf[0].interface: "),
    ("the document as text", {"document": "[[interfaces]]\nname = 'eth1'\n"},
     "document: must be a table"),
    ("a list of interfaces as a string", {"document": {"interfaces": "eth1"}},
     "interfaces: must be an array of tables"),
    ("an address as a number", {"document": document(
        {**MGMT, "addresses": [3221225985]})}, "expected a list of strings"),
    ("an unknown key in the document", {"document": document(path="/etc/shadow")},
     "path: unknown section"),
    ("an unknown argument", {"document": document(), "state_dir": "/etc"},
     "state_dir: unknown argument"),
    ("the timeout as a string", {"document": document(), "timeout": "120"},
     "confirm_timeout: '120' is not a whole number"),
    ("a timeout too short to matter", {"document": document(), "timeout": 1},
     "confirm_timeout: 1 s is outside"),
    ("a token hash that is not one", {"document": document(), "token_hash": "../../x"},
     "token_hash: must be empty or a SHA-256"),
    ("the arguments as a list", ["document"], "the job's arguments must be a table"),
]


@pytest.mark.parametrize("what,args,message", BAD_APPLY, ids=[b[0] for b in BAD_APPLY])
def test_a_forged_apply_is_refused_and_changes_nothing(store, what, args, message):
    before = machine()
    job = refused(args)
    assert message in job.error, job.error
    assert machine() == before
    assert revisions(store) == []


def test_a_ten_mib_document_is_refused_unread(store):
    before = machine()
    job = refused({"document": document(system={"hostname": "a" * (10 << 20)})})
    assert job.error == "document: 10240 KiB; at most 1024 KiB", job.error
    assert machine() == before and revisions(store) == []


def test_a_zone_of_the_confirmed_policy_keeps_its_interface(agent, store):
    """The zones come from the policy's own store, not from any row: a forged apply that
    makes the zone's port unused is refused naming the zone."""
    from policy.core.applier import Applier
    applier = Applier(agent.config.parent / "policy", AGENT_NETNS)
    applier.apply("zones:\n  - {name: outside, interfaces: [eth2]}\n", user="test")
    applier.confirm(user="test")
    before = machine()
    job = refused({"document": document(MGMT, {"name": "eth2", "role": "unused"})})
    assert "the policy's zone outside uses eth2, which has the role unused" in job.error
    assert machine() == before and revisions(store) == []


@pytest.fixture
def moved(store):
    """A confirmed configuration (eth1 192.0.2.1), then a pending one that moves the
    management address to 192.0.2.2; yields the pending change's token."""
    first = "f" * 43
    job = wait(queue.enqueue("network.apply", {"document": document(), "timeout": 120,
                                               "token_hash": token_sha256(first)}), 60)
    assert job.state == "succeeded", job.error
    job = wait(queue.enqueue("network.confirm", {"arrived_at": "192.0.2.1", "token": first}))
    assert job.state == "succeeded", job.error
    token = "t" * 43
    job = wait(queue.enqueue("network.apply", {
        "document": document({**MGMT, "addresses": ["192.0.2.2/24"]},
                             {"name": "eth2", "role": "traffic"}),
        "timeout": 120, "token_hash": hashlib.sha256(token.encode()).hexdigest()}), 60)
    assert job.state == "succeeded", job.error
    assert job.result["confirm_over"] == ["192.0.2.2"]
    return token


def pending(store):
    return (store / "pending.json").exists()


@pytest.mark.parametrize("what,args,message", [
    ("a wrong token", {"arrived_at": "192.0.2.2", "token": "w" * 43},
     "this confirmation link is not the one of the pending change"),
    ("the old address", {"arrived_at": "192.0.2.1", "token": "t" * 43},
     "confirm it from the new address (192.0.2.2), not over 192.0.2.1"),
    ("no arrival address", {"arrived_at": None, "token": "t" * 43},
     "a confirm from the web UI must say which address it arrived over"),
    ("an arrival that is not an address", {"arrived_at": "192.0.2.2; rm -rf /",
                                           "token": "t" * 43}, "arrived_at: must be an IP"),
    ("an arrival as a number", {"arrived_at": 3221225986}, "arrived_at: must be an IP"),
    ("a token as a list", {"arrived_at": "192.0.2.2", "token": ["t" * 43]},
     "token: must be the one-time link's token"),
    ("an unknown argument", {"arrived_at": "192.0.2.2", "user": "root"},
     "user: unknown argument"),
])
def test_a_forged_confirm_is_refused_and_the_change_stays_pending(store, moved, what, args,
                                                                  message):
    before = machine()
    job = refused(args, "network.confirm")
    assert message in job.error, job.error
    assert pending(store) and machine() == before
    assert "192.0.2.2/24" in before[1]
    # the real one still confirms: the refusals above were about their arguments
    job = wait(queue.enqueue("network.confirm", {"arrived_at": "192.0.2.2", "token": moved}))
    assert job.state == "succeeded", job.error
    assert not pending(store)


def test_a_forged_cancel_with_arguments_rolls_nothing_back(store, moved):
    before = machine()
    job = refused({"revision": 1}, "network.cancel")
    assert "revision: unknown argument" in job.error
    assert pending(store) and machine() == before
    job = wait(queue.enqueue("network.cancel", {}))
    assert job.state == "succeeded", job.error
    assert "192.0.2.1/24" in machine()[1] and "192.0.2.2/24" not in machine()[1]
