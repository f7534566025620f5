"""Policy jobs forged by someone who controls the web process (issue 18): policy.apply and
policy.rollback rows written straight into the database as role tusk, past the draft's
check, naming interfaces the box's network configuration does not have as traffic links.
The real agent checks the zones again against the network's own files (root's, in its
network state directory - never the database's mirror) and refuses naming the field;
nothing is loaded in the namespace and no revision is written. The namespace has the
interfaces (eth1, eth2, and eth5 here): only the network configuration says no."""
import os
import subprocess

import pytest
from test_attack_network import agent_config  # noqa: F401 (a network state dir of its own)
from test_policy_network import CONFIRMED  # eth1 manages the box, eth2 carries traffic
from tuskweb import wait

from jobs import queue


def policy(*outside):
    return ("zones:\n  - {name: inside, interfaces: [eth2]}\n"
            f"  - {{name: outside, interfaces: [{', '.join(outside)}]}}\n"
            "classes:\n  - {name: web, from: inside, to: outside, action: accept}\n")


@pytest.fixture
def box(agent, netns, tmp_path):
    """The agent's namespace with eth5 too (on the machine, not in the network
    configuration); returns how to give the box its confirmed network configuration
    (as tusk-net or the console writes it: root's file)."""
    subprocess.run(["ip", "-n", netns, "link", "add", "eth5", "type", "veth",
                    "peer", "name", "eth6"], check=True)

    def configure():
        (tmp_path / "network").mkdir(exist_ok=True)
        (tmp_path / "network" / "network.toml").write_text(CONFIRMED)
    return configure


def loaded(netns):
    result = subprocess.run(["ip", "netns", "exec", netns, "nft", "list", "table", "inet",
                             "tusk"], capture_output=True, text=True)
    return result.stdout if result.returncode == 0 else None


def revisions(tmp_path):
    path = tmp_path / "policy" / "revisions"
    return sorted(os.listdir(path)) if path.exists() else []


@pytest.mark.parametrize("outside, message", [
    (("eth1",), "zones[1].interfaces[0]: zone outside: eth1 is the management port"),
    (("eth5",), "zones[1].interfaces[0]: zone outside: eth5: the network configuration has "
                "no such interface (its traffic interfaces: eth2, eth2.100)"),
])
def test_a_forged_apply_naming_no_traffic_link_is_refused(box, netns, tmp_path, outside,
                                                           message):
    box()
    job = wait(queue.enqueue("policy.apply", {"policy_text": policy(*outside)}), 60)
    assert job.state == "failed", job.result
    assert message in job.error
    assert job.result["problems"][0]["code"] == "INTERFACE"
    assert loaded(netns) is None
    assert revisions(tmp_path) == [], "refused before the applier made a revision"


def test_a_forged_rollback_to_a_revision_on_the_management_port_is_refused(box, netns,
                                                                           tmp_path):
    """A revision applied before the box had this network configuration (eth1 in a zone),
    rolled back to now that eth1 manages the box: refused, the live policy unchanged."""
    job = wait(queue.enqueue("policy.apply", {"policy_text": policy("eth1")}), 60)
    assert job.state == "succeeded", job.error
    assert wait(queue.enqueue("policy.confirm"), 60).state == "succeeded"
    job = wait(queue.enqueue("policy.apply", {"policy_text": policy("eth5")}), 60)
    assert job.state == "succeeded", job.error
    assert wait(queue.enqueue("policy.confirm"), 60).state == "succeeded"
    before = loaded(netns)
    box()
    job = wait(queue.enqueue("policy.rollback", {"revision": 1}), 60)
    assert job.state == "failed", job.result
    assert "zones[1].interfaces[0]: zone outside: eth1 is the management port" in job.error
    assert loaded(netns) == before and revisions(tmp_path) == ["000001", "000002"]


def test_a_policy_on_traffic_links_is_applied(box, netns):
    """The control: the same check lets a policy whose zones are traffic links through."""
    box()
    job = wait(queue.enqueue("policy.apply", {"policy_text": (
        "zones:\n  - {name: inside, interfaces: [eth2]}\n")}), 60)
    assert job.state == "succeeded", job.error
    assert loaded(netns) is not None
