"""The policy checked against the box's network configuration (issue 18): a zone naming an
interface the network does not have as a traffic link - one it lacks, the management
port, an unused port, a bond member - is refused naming the policy field, on every save
of the draft, on import and on Review and apply; with no network configuration (a
machine tusk-net does not manage) nothing changes. The network configuration is what the
agent mirrors (NetworkState, and a pending network revision), written here as it would."""
import pytest
from tuskweb import errors_of

from jobs.models import Job
from network.models import NetworkState
from network.models import Revision as NetworkRevision
from policy import draft as drafts

CONFIRMED = """version = 2
[[interfaces]]
name = "eth1"
role = "management"
addresses = ["192.0.2.1/24"]
[[interfaces]]
name = "eth2"
role = "traffic"
[[interfaces]]
name = "eth3"
role = "unused"
[[vlans]]
name = "eth2.100"
parent = "eth2"
id = 100
"""
# the change awaiting confirmation makes eth2 unused (its VLAN goes)
PENDING = """version = 2
[[interfaces]]
name = "eth1"
role = "management"
addresses = ["192.0.2.1/24"]
[[interfaces]]
name = "eth2"
role = "unused"
"""


@pytest.fixture
def network(db):
    return NetworkState.objects.create(pk=1, confirmed=1, confirmed_text=CONFIRMED)


def zone(client, interfaces, name="inside"):
    return client.post("/policy/zones/new/", {"version": drafts.get().version,
                                              "name": name, "interfaces": interfaces})


def snapshot():
    draft = drafts.get()
    return draft.version, draft.document


@pytest.mark.parametrize("interfaces, message", [
    ("eth1", "interfaces[0]: zone inside: eth1 is the management port: a zone&#x27;s "
             "interfaces carry forwarded traffic"),
    ("eth2.100 eth3", "interfaces[1]: zone inside: eth3 has the role unused (its link stays "
                      "down): give it the role traffic on Network → Interfaces"),
    ("eth9", "interfaces[0]: zone inside: eth9: the network configuration has no such "
             "interface (its traffic interfaces: eth2, eth2.100); add it on Network → "
             "Interfaces (or VLANs, Bonds, Bridges) first"),
])
def test_a_zone_on_no_traffic_link_is_refused_naming_the_field(admin_client, network,
                                                                interfaces, message):
    before = snapshot()
    response = zone(admin_client, interfaces)
    assert response.status_code == 400
    assert any(m.startswith(message) for m in errors_of(response)["interfaces"]), \
        errors_of(response)
    assert snapshot() == before


def test_a_zone_on_a_traffic_port_or_vlan_is_saved(admin_client, network):
    response = zone(admin_client, "eth2, eth2.100")
    assert response.status_code == 302, errors_of(response)
    assert drafts.get().document["zones"] == [{"name": "inside",
                                               "interfaces": ["eth2", "eth2.100"]}]


def test_without_a_network_configuration_any_interface_is_saved(admin_client, db):
    """The tests' namespaces and a machine tusk-net does not manage have no network.toml."""
    assert zone(admin_client, "eth1").status_code == 302
    NetworkState.objects.create(pk=1, confirmed_text="")
    assert zone(admin_client, "eth9", name="outside").status_code == 302


def test_the_pending_network_change_counts_too(admin_client, network):
    NetworkRevision.objects.create(number=2, created="2025-01-01T00:00:00Z", action="apply",
                                   outcome="pending", text=PENDING)
    network.pending = 2
    network.save()
    response = zone(admin_client, "eth2")
    assert response.status_code == 400
    (message,) = errors_of(response)["interfaces"]
    assert message.startswith("interfaces[0]: zone inside: eth2 has the role unused") and \
        message.endswith("(in the network change that awaits confirmation)"), message


def test_an_import_is_refused_naming_each_zone_interface(admin_client, network):
    before = snapshot()
    text = ("version: 1\nzones:\n  - {name: inside, interfaces: [eth2]}\n"
            "  - {name: outside, interfaces: [eth2.200, eth1]}\n")
    response = admin_client.post("/policy/import/", {"text": text})
    assert response.status_code == 400
    page = response.content.decode()
    assert "<code>zones[1].interfaces[0]</code>: zone outside: eth2.200: the network " \
        "configuration has no such interface" in page
    assert "<code>zones[1].interfaces[1]</code>: zone outside: eth1 is the management " \
        "port" in page
    assert snapshot() == before


def test_review_and_apply_refuses_a_draft_the_network_changed_under(admin_client, db):
    """The draft was saved before the box had a network configuration that makes eth1 the
    management port: Review and apply names the zone and queues nothing."""
    assert zone(admin_client, "eth1").status_code == 302
    NetworkState.objects.create(pk=1, confirmed=1, confirmed_text=CONFIRMED)
    page = admin_client.get("/policy/apply/").content.decode()
    assert 'id="problems"' in page
    assert "zones[0].interfaces[0]: zone inside: eth1 is the management port" in page
    response = admin_client.post("/policy/apply/", {"version": drafts.get().version,
                                                    "timeout": 120})
    assert response.status_code == 400
    assert "cannot be applied as it stands" in response.content.decode()
    assert not Job.objects.filter(kind="policy.apply").exists()
