"""The HA pair against the box's network configuration (box/verify.py), from both sides
and at both ends: the HA page's form and the Network pages' drafts refuse with the
problem next to its field, and the real agent refuses forged jobs (rows written as role
tusk, past the forms) by the network's and HA's own files - root's, never the mirrors."""
import html

import pytest
from habox import HA_KEY, ha_document
from test_attack_network import agent_config  # noqa: F401 (a network state dir of its own)
from test_attack_network import document as network_document
from test_policy_network import CONFIRMED  # eth1 manages the box, eth2 (and eth2.100) traffic
from tuskweb import errors_of, wait

from ha.core.config import from_document, to_toml
from ha.forms import segments_text
from ha.models import HaState
from jobs import queue
from jobs.models import Job
from network import draft as network_drafts
from network.core.errors import NetworkError
from network.models import NetworkState


def form_data(document):
    return {**{k: v for k, v in document["ha"].items() if not isinstance(v, bool) or v},
            "virtual": segments_text(document["virtual"]), "timeout": 600, "key": HA_KEY}


def on(sync, segment):
    """ha_document's half of the pair, syncing over sync, its addresses on segment."""
    return {**ha_document(sync_interface=sync),
            "virtual": [{"interface": segment, "addresses": ["198.51.100.1/24"]}]}


def test_the_form_refuses_a_sync_link_on_the_management_port(admin_client, db):
    NetworkState.objects.create(pk=1, confirmed=1, confirmed_text=CONFIRMED)
    response = admin_client.post("/ha/", form_data(on("eth1", "eth2")))
    assert response.status_code == 200
    errors = errors_of(response)
    assert "eth1 (the pair's sync link) is the management port" in \
        html.unescape(errors["sync_interface"][0])
    assert not Job.objects.exists()
    response = admin_client.post("/ha/", form_data(on("eth2.100", "eth2")))
    assert response.status_code == 302, errors_of(response)


def test_a_network_draft_may_not_drop_the_pairs_link(admin_client, db):
    """The mirror says this box's pair syncs over eth2.100: a draft without that VLAN
    is refused where the VLAN was."""
    NetworkState.objects.create(pk=1, confirmed=1, confirmed_text=CONFIRMED)
    HaState.objects.create(pk=1, confirmed=1,
                           confirmed_text=to_toml(from_document(on("eth2.100", "eth2"))))
    document = network_drafts.get().document
    assert [v["name"] for v in document["vlans"]] == ["eth2.100"]
    with pytest.raises(NetworkError) as refused:
        network_drafts.check({**document, "vlans": []})
    assert "this box's HA pair uses it: eth2.100 (the pair's sync link) is no interface" in \
        str(refused.value)


@pytest.fixture
def box(agent, tmp_path):
    """The box's confirmed network configuration, as tusk-net writes it (root's file)."""
    (tmp_path / "network").mkdir(exist_ok=True)
    (tmp_path / "network" / "network.toml").write_text(CONFIRMED)
    return tmp_path


def test_a_forged_ha_apply_on_the_management_port_is_refused(box):
    job = wait(queue.enqueue("ha.apply", {"document": on("eth1", "eth2"), "timeout": 600,
                                          "key": HA_KEY}), 60)
    assert job.state == "failed", job.result
    assert "ha.sync_interface: eth1 (the pair's sync link) is the management port" in job.error
    assert not (box / "ha" / "revisions").exists() or not list((box / "ha" / "revisions")
                                                               .iterdir())


def test_a_forged_network_apply_dropping_the_pairs_link_is_refused(box):
    (box / "ha").mkdir(exist_ok=True)
    (box / "ha" / "ha.toml").write_text(to_toml(from_document(on("eth2", "eth2.100"))))
    job = wait(queue.enqueue("network.apply", {"document": network_document(
        {"name": "eth1", "role": "management", "addresses": ["192.0.2.1/24"]},
        {"name": "eth2", "role": "unused"}), "timeout": 600, "token_hash": ""}), 60)
    assert job.state == "failed", job.result
    assert "interfaces[1].role: this box's HA pair uses it: eth2 (the pair's sync link) " \
           "has the role unused" in job.error
    assert not (box / "network" / "revisions").exists() or \
        not list((box / "network" / "revisions").iterdir())
