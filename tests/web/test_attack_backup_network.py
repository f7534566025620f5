"""A backup's network section attacked by someone who controls the web process (issue
18): pending restores written straight into the database as role tusk, past the upload's
check, and forged port mappings posted past the form's selects. The restore checks the
row again and refuses; nothing changes. And the line that matters: a network draft
written straight into the database (a restored configuration, unmapped or invalid) and
queued for the agent's network.apply is checked again by the agent, which refuses it;
nothing changes on the machine."""
import copy
import hashlib
import json

import pytest
from test_attack_network import agent_config, machine, revisions, store  # noqa: F401
from test_backup import problems
from test_backup_network import NETWORK, box, saved, snapshot  # noqa: F401
from tuskweb import errors_of, wait

from backup import collect as collected
from backup.models import PendingRestore
from jobs import queue
from network.models import Draft as NetworkDraft


def plant(user, document):
    """A pending restore as the web process would keep one, written straight."""
    text = json.dumps(document)
    return PendingRestore.objects.create(user=user, name="planted.json", text=text,
                                         sha256=hashlib.sha256(text.encode()).hexdigest())


def duplicate_vlan(network):
    network["draft"]["vlans"].append({"name": "eth2.101", "parent": "eth2", "id": 100})


def vlans_as_text(network):
    network["draft"]["vlans"] = "eth2.100; ip link del eth1"


def port_as_path(network):
    network["draft"]["interfaces"][1]["name"] = "../../etc/eth2"


def confirmed_not_a_document(network):
    network["confirmed"] = {"revision": 1, "document": "[[interfaces]]\nname = 'eth1'\n"}


MALFORMED = [
    (duplicate_vlan, "network.draft.vlans[1].id: VLAN 100 is already on eth2"),
    (vlans_as_text, "network.draft.vlans: must be an array of tables"),
    (port_as_path, "network.draft.interfaces[1].name: '../../etc/eth2' contains '/'"),
    (confirmed_not_a_document, "network.confirmed.document: expected an object, got a string"),
]


@pytest.mark.parametrize("change,message", MALFORMED, ids=[m[0].__name__ for m in MALFORMED])
def test_a_planted_pending_restore_with_a_malformed_network_is_refused(
        saved, admin_client, admin_user, change, message):  # noqa: F811 (the fixture)
    change(saved["network"])
    pending = plant(admin_user, saved)
    url = f"/backup/restore/{pending.pk}/"
    before = snapshot()
    page = admin_client.get(url)
    assert page.status_code == 400 and 'id="confirm"' not in page.content.decode()
    assert any(p.startswith(message) for p in problems(page)), problems(page)
    response = admin_client.post(url, {"token": collected.state_token(), "source": "draft"})
    assert response.status_code == 400
    assert any(p.startswith(message) for p in problems(response)), problems(response)
    assert snapshot() == before


FORGED_MAPPINGS = [
    ("no mapping at all", {}, "port-enp7s0",
     "choose the port of this box that takes enp7s0&#x27;s configuration"),
    ("a port outside the box", {"enp7s0": "eth7"}, "port-enp7s0",
     "eth7: this box has no such port (it has: eth1, eth2, eth3, eth4)"),
    ("a command as the port", {"enp7s0": "eth1; ip link del eth2"}, "port-enp7s0",
     "eth1; ip link del eth2: this box has no such port"),
    ("the management port twice", {"enp7s0": "eth1", "enp8s0": "eth1"}, "port-enp8s0",
     "eth1 is already chosen for enp7s0: a port takes one"),
]


@pytest.mark.parametrize("what,mapping,field,message", FORGED_MAPPINGS,
                         ids=[f[0] for f in FORGED_MAPPINGS])
def test_a_planted_restore_of_other_ports_with_a_forged_mapping_is_refused(
        saved, admin_client, admin_user, what, mapping, field, message):  # noqa: F811
    """The row's network names ports this box lacks (enp7s0, enp8s0 for eth1, eth2): only
    a mapping onto this box's ports, each once, gets it restored."""
    network = saved["network"]
    network["draft"] = json.loads(json.dumps(network["draft"]).replace(
        '"eth1', '"enp7s0').replace('"eth2', '"enp8s0'))
    pending = plant(admin_user, saved)
    url = f"/backup/restore/{pending.pk}/"
    page = admin_client.get(url)
    assert page.status_code == 200 and 'id="port-mismatch"' in page.content.decode()
    before = snapshot()
    response = admin_client.post(url, {"token": page.context["changes"]["token"],
                                       "source": "draft",
                                       **{f"port-{k}": v for k, v in mapping.items()}})
    assert response.status_code == 400
    assert any(m.startswith(message) for m in errors_of(response).get(field, [])), \
        errors_of(response)
    assert snapshot() == before


UNFIT = [
    ("the backup's ports, unmapped", lambda d: json.loads(json.dumps(d).replace(
        '"eth1', '"enp7s0').replace('"eth2', '"enp8s0')),
     "interfaces[0].name: 'enp7s0': this machine has no such Ethernet port"),
    ("a VLAN id twice", lambda d: {**d, "vlans": d["vlans"] + [
        {**d["vlans"][0], "name": "eth2.101"}]}, "vlans[1].id: VLAN 100 is already on eth2"),
]


@pytest.mark.parametrize("what,change,message", UNFIT, ids=[u[0] for u in UNFIT])
def test_a_restored_network_written_straight_is_refused_by_the_agent(store, what, change,  # noqa: F811
                                                                      message):
    """The network draft a restore would have refused, written straight as the web's role,
    then queued as Review and apply queues it: the agent's own check refuses it."""
    document = change(copy.deepcopy(NETWORK))
    document["interfaces"] = document["interfaces"][:2]   # this machine has two ports
    document["bonds"] = []
    NetworkDraft.objects.update_or_create(pk=1, defaults={"document": document})
    before = machine()
    job = wait(queue.enqueue("network.apply", {
        "document": NetworkDraft.objects.get(pk=1).document, "timeout": 120,
        "token_hash": ""}), 60)
    assert job.state == "failed", job.result
    assert message in job.error, job.error
    assert machine() == before
    assert revisions(store) == []
