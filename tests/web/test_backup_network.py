"""Backup and restore of the network configuration (issue 18): a backup carries the
network draft and the confirmed configuration; restoring it replaces the Network pages'
draft in the restore's one transaction and never applies it. Onto other hardware the
preview shows the backup's ports against this box's (the agent's facts of the test's
namespace, whose veth ports are renamed to be another machine) and the operator maps
each port; the mapping renames it everywhere: VLAN parents and the VLANs named after
them, bond members, routes, and the restored policy's zones. Bad mappings and bad
network sections are refused naming the field, and nothing changes."""
import copy
import dataclasses
import html
import re
import subprocess

import pytest
from test_backup import _set, download, problems, refused_naming, upload
from tuskweb import errors_of

from accounts.models import AuditEntry
from backup import collect as collected
from backup.models import PendingRestore
from jobs.models import Job, PeriodicState
from network import agent_jobs
from network import draft as network_drafts
from network.core import routing
from network.core.model import Routing
from network.core.normalise import from_document, to_toml
from network.models import Draft as NetworkDraft
from network.models import NetworkState
from policy import draft as drafts
from tusklib.target import Target

# the box the backup is made on: eth1 management; VLAN 100 on eth2; eth3 and eth4 a bond
NETWORK = {
    "version": 2,
    "system": {"hostname": "fw1", "dns": ["192.0.2.53"], "ntp": [], "timezone": "UTC"},
    "interfaces": [
        {"name": "eth1", "role": "management", "description": "mgmt",
         "addresses": ["192.0.2.1/24"], "dhcp": False, "autoconf": False, "mtu": 0},
        {"name": "eth2", "role": "traffic", "description": "", "addresses": ["198.51.100.1/24"],
         "dhcp": False, "autoconf": False, "mtu": 0},
        {"name": "eth3", "role": "traffic", "description": "", "addresses": [],
         "dhcp": False, "autoconf": False, "mtu": 0},
        {"name": "eth4", "role": "traffic", "description": "", "addresses": [],
         "dhcp": False, "autoconf": False, "mtu": 0}],
    "bonds": [{"name": "bond0", "mode": "802.3ad", "hash_policy": "layer3+4",
               "members": ["eth3", "eth4"], "description": "", "addresses": ["10.5.0.1/24"],
               "mtu": 0}],
    "vlans": [{"name": "eth2.100", "parent": "eth2", "id": 100, "description": "",
               "addresses": ["10.1.100.1/24"], "mtu": 0}],
    "bridges": [],
    "routes": [{"destination": "10.20.0.0/16", "gateway": "10.1.100.254", "metric": 0,
                "interface": "eth2.100"},
               {"destination": "10.30.0.0/16", "gateway": "198.51.100.254", "metric": 0,
                "interface": "eth2"}],
}
POLICY = """zones:
  - {name: inside, interfaces: [eth2.100]}
  - {name: outside, interfaces: [bond0, eth2]}
classes:
  - {name: web, from: inside, to: outside, action: accept}
"""
# the other box: its ports have other names (a long one: the VLAN following it is too long)
OTHER = {"eth1": "enp1s0", "eth2": "enp2s0", "eth3": "enp3s0", "eth4": "enp4s0"}
MAPPING = {"eth1": "enp1s0", "eth2": "enp2s0", "eth3": "enp4s0", "eth4": "enp3s0"}
OTHER_BOX = [*OTHER.values(), "enp5s0", "enp6s0"]
LONG = "enp0s20f0u1u2x"   # 14 characters; "enp0s20f0u1u2x.100" has 18


def set_links(netns, names):
    """The namespace's ports are exactly names (veth pairs), as another machine's."""
    target = Target(netns)
    for line in target.run(["ip", "-br", "link"]).stdout.splitlines():
        name = line.split()[0].split("@")[0]
        if name != "lo":   # (a veth's peer has gone with it)
            subprocess.run(["ip", "-n", netns, "link", "del", name], capture_output=True)
    for first, second in zip(names[::2], names[1::2]):
        target.run(["ip", "link", "add", first, "type", "veth", "peer", "name", second])


def report_facts(settings):
    """The agent's facts of the namespace, recorded as its periodic task records them."""
    PeriodicState.objects.update_or_create(name=network_drafts.FACTS, defaults={
        "result": agent_jobs.live_facts(settings.TUSK)})
    return sorted(network_drafts.present())


@pytest.fixture
def box(netns, settings, db):
    """The namespace as the box the backup is made on: eth1 to eth4."""
    settings.TUSK = dataclasses.replace(settings.TUSK, netns=netns)
    set_links(netns, ["eth1", "eth2", "eth3", "eth4"])
    assert report_facts(settings) == ["eth1", "eth2", "eth3", "eth4"]
    return netns


@pytest.fixture
def saved(box, admin_client, admin_user):
    """A backup of the box above: its network draft and its policy."""
    NetworkDraft.objects.create(pk=1, document=NETWORK)
    assert network_drafts.check(NETWORK)   # the draft the Network pages would keep
    drafts.import_text(POLICY, admin_user)
    return download(admin_client)


def become_other_box(netns, settings, names=OTHER_BOX):
    """The same namespace, now with the other machine's ports."""
    set_links(netns, list(names))
    return report_facts(settings)


def snapshot():
    """Everything a refused restore must leave as it was, the network draft included."""
    draft = NetworkDraft.objects.filter(pk=1).first()
    return (collected.contents(), drafts.get_meta().version, draft and draft.version,
            Job.objects.count(), AuditEntry.objects.exclude(action="backup download").count(),
            PendingRestore.objects.count())


def preview(client, document):
    response = upload(client, document)
    assert response.status_code == 302, problems(response)
    url = response["Location"]
    page = client.get(url)
    assert page.status_code == 200
    return url, page


def confirm(client, url, page, **fields):
    return client.post(url, {"token": page.context["changes"]["token"], "source": "draft",
                             **fields})


def port_fields(mapping):
    return {f"port-{old}": new for old, new in mapping.items()}


# -- what a backup holds ----------------------------------------------------------------

def test_a_backup_holds_the_network_draft_and_the_confirmed_configuration(saved, admin_client):
    assert saved["version"] == 2
    assert saved["network"] == {"draft": NETWORK, "confirmed": None}
    confirmed = copy.deepcopy(NETWORK)
    confirmed["vlans"] = []
    confirmed["routes"] = confirmed["routes"][1:]
    NetworkState.objects.create(pk=1, confirmed=3,
                                confirmed_text=to_toml(from_document(confirmed)))
    # the confirmed configuration as the model writes it: every key, routing's too
    confirmed["routing"] = routing.to_document(Routing())
    assert download(admin_client)["network"] == {
        "draft": NETWORK, "confirmed": {"revision": 3, "document": confirmed}}


def test_a_box_without_a_network_configuration_backs_up_none(admin_client):
    saved = download(admin_client)
    assert saved["network"] is None
    assert not NetworkDraft.objects.exists()   # not made up for the backup


# -- the round trip on the same box -------------------------------------------------------

def test_restored_onto_the_same_box_without_a_mapping(saved, admin_client, admin_user):
    changed = copy.deepcopy(NETWORK)
    changed["vlans"] = []
    changed["routes"] = changed["routes"][1:]
    NetworkDraft.objects.filter(pk=1).update(document=changed, version=7)
    url, page = preview(admin_client, saved)
    shown = page.content.decode()
    assert 'id="ports-match"' in shown and 'id="port-mismatch"' not in shown
    assert "The network draft (version 7) is replaced." in shown
    assert "not applied" in shown
    assert not [name for name in page.context["form"].fields if name.startswith("port-")]
    response = confirm(admin_client, url, page)
    assert response.status_code == 302 and response["Location"] == "/backup/"
    draft = NetworkDraft.objects.get(pk=1)
    assert (draft.document, draft.version) == (NETWORK, 8)
    assert not Job.objects.filter(kind__startswith="network.").exists()   # never applied here
    entry = AuditEntry.objects.get(action="backup restore")
    assert entry.detail["network"] == {"source": "draft", "renamed": {}, "ports": {},
                                       "changed": True, "draft_version": 8,
                                       "policy_waits": False}
    message = admin_client.get("/backup/").content.decode()
    assert ('is not applied: a network change can cut you off from this page, so it goes '
            'through <a href="/network/apply/">Network → Review and apply</a>') in message


def test_the_confirmed_network_follows_the_policys_choice(saved, admin_client, admin_user):
    confirmed = copy.deepcopy(NETWORK)
    confirmed["routes"] = []
    saved["network"]["confirmed"] = {"revision": 2, "document": confirmed}
    url, page = preview(admin_client, saved)
    assert "the network&#x27;s confirmed configuration" in page.content.decode()
    response = confirm(admin_client, url, page, source="confirmed")
    assert response.status_code == 302, errors_of(response)
    assert NetworkDraft.objects.get(pk=1).document == confirmed
    assert AuditEntry.objects.get(action="backup restore").detail["network"]["source"] == \
        "confirmed"


# -- onto other hardware --------------------------------------------------------------------

def test_onto_other_ports_the_mapping_renames_them_everywhere(saved, admin_client, netns,
                                                              settings):
    assert become_other_box(netns, settings) == ["enp1s0", "enp2s0", "enp3s0", "enp4s0",
                                                 "enp5s0", "enp6s0"]
    url, page = preview(admin_client, saved)
    shown = page.content.decode()
    assert 'id="port-mismatch"' in shown
    assert "This box has other ports (enp1s0, enp2s0, enp3s0, enp4s0, enp5s0, enp6s0)" in shown
    for name, role in (("eth1", "management"), ("eth2", "traffic"), ("eth3", "traffic")):
        assert re.search(rf'<tr id="port-{name}"><td>{name}</td><td>{role}</td><td><span '
                         r'class="bad">no</span>', shown)
        assert f'name="port-{name}"' in shown
    response = confirm(admin_client, url, page, **port_fields(MAPPING))
    assert response.status_code == 302, errors_of(response)

    document = NetworkDraft.objects.get(pk=1).document
    assert [p["name"] for p in document["interfaces"]] == ["enp1s0", "enp2s0", "enp4s0",
                                                           "enp3s0"]
    assert document["vlans"][0]["name"] == "enp2s0.100"
    assert document["vlans"][0]["parent"] == "enp2s0"
    assert document["bonds"][0]["members"] == ["enp4s0", "enp3s0"]
    assert [r["interface"] for r in document["routes"]] == ["enp2s0.100", "enp2s0"]
    zones = drafts.get().document["zones"]
    assert [z["interfaces"] for z in zones] == [["enp2s0.100"], ["bond0", "enp2s0"]]
    # the draft holds together on this box with the restored policy, as the pages check it
    network_drafts.check(document)
    detail = AuditEntry.objects.get(action="backup restore").detail["network"]
    assert detail["ports"] == MAPPING and detail["renamed"]["eth2.100"] == "enp2s0.100"
    review = admin_client.get("/network/apply/")
    assert review.status_code == 200 and not review.context["problems"]
    shown = html.unescape(review.content.decode())
    assert '<span class="add">+name = "enp2s0.100"</span>' in shown
    assert '<span class="add">+members = ["enp4s0", "enp3s0"]</span>' in shown


def test_onto_a_box_running_another_network_the_policy_waits_for_the_restored_one(
        saved, admin_client, netns, settings):
    """The new box runs its first network (management only): the restored policy is
    checked against the network restored with it, not refused for naming its links, and
    is not applied before that network is (the agent would refuse it)."""
    become_other_box(netns, settings)
    NetworkState.objects.create(pk=1, confirmed=1, confirmed_text=(
        'version = 2\n[[interfaces]]\nname = "enp1s0"\nrole = "management"\n'
        'addresses = ["192.0.2.1/24"]\n'))
    url, page = preview(admin_client, saved)
    response = confirm(admin_client, url, page, apply="on", **port_fields(MAPPING))
    assert response.status_code == 302, errors_of(response)
    zones = drafts.get().document["zones"]
    assert [z["interfaces"] for z in zones] == [["enp2s0.100"], ["bond0", "enp2s0"]]
    assert not Job.objects.filter(kind="policy.apply").exists()
    shown = html.unescape(admin_client.get(response["Location"]).content.decode())
    assert "The policy is not applied yet: its zones name links that only the restored " \
           "network has. Apply the network first, then the policy." in shown


def test_a_swap_of_two_ports_renames_both(saved, admin_client, netns, settings):
    """eth3 and eth4 change places: renamed at once, not one after the other."""
    become_other_box(netns, settings, ["eth1", "eth2", "eth3", "eth9"])
    url, page = preview(admin_client, saved)
    response = confirm(admin_client, url, page, **port_fields(
        {"eth1": "eth1", "eth2": "eth2", "eth3": "eth9", "eth4": "eth3"}))
    assert response.status_code == 302, errors_of(response)
    document = NetworkDraft.objects.get(pk=1).document
    assert [p["name"] for p in document["interfaces"]] == ["eth1", "eth2", "eth9", "eth3"]
    assert document["bonds"][0]["members"] == ["eth9", "eth3"]
    assert document["vlans"][0]["name"] == "eth2.100"


BAD_MAPPINGS = [
    ("an unknown port", {**MAPPING, "eth2": "eth7"}, "port-eth2",
     f"eth7: this box has no such port (it has: {LONG}, enp1s0, enp2s0, enp3s0, enp4s0, "
     "enp5s0)"),
    ("one port twice", {**MAPPING, "eth4": "enp4s0"}, "port-eth4",
     "enp4s0 is already chosen for eth3: a port takes one"),
    ("a port left out", {k: v for k, v in MAPPING.items() if k != "eth3"}, "port-eth3",
     "choose the port of this box that takes eth3&#x27;s configuration"),
    ("a port chosen as nothing", {**MAPPING, "eth1": ""}, "port-eth1",
     "choose the port of this box that takes eth1&#x27;s configuration"),
    ("a VLAN name too long", {**MAPPING, "eth2": LONG}, "port-eth2",
     f"the VLAN eth2.100 would be renamed {LONG}.100: &#x27;{LONG}.100&#x27; is 18 "
     "characters long; Linux allows at most 15"),
]


@pytest.mark.parametrize("what,mapping,field,message", BAD_MAPPINGS,
                         ids=[b[0] for b in BAD_MAPPINGS])
def test_a_bad_mapping_names_the_field_and_changes_nothing(saved, admin_client, netns,
                                                           settings, what, mapping, field,
                                                           message):
    become_other_box(netns, settings, [*OTHER.values(), "enp5s0", LONG])
    url, page = preview(admin_client, saved)
    before = snapshot()
    response = confirm(admin_client, url, page, **port_fields(mapping))
    assert response.status_code == 400
    assert message in errors_of(response).get(field, []), errors_of(response)
    assert snapshot() == before and PendingRestore.objects.exists()


def test_a_box_with_fewer_ports_restores_the_rest_and_keeps_its_network(saved, admin_client,
                                                                        netns, settings):
    """Four ports in the backup, two on this box: no mapping can take them all. Leaving
    this box's network as it is restores the rest; no port field is then asked for."""
    become_other_box(netns, settings, ["enp1s0", "enp2s0"])
    url, page = preview(admin_client, saved)
    assert "keep_network" in page.context["form"].fields
    network_before = NetworkDraft.objects.get(pk=1)
    response = confirm(admin_client, url, page)
    assert response.status_code == 400 and "port-eth3" in errors_of(response)
    response = confirm(admin_client, url, page, keep_network="on")
    assert response.status_code == 302, errors_of(response)
    network_after = NetworkDraft.objects.get(pk=1)
    assert (network_after.version, network_after.document) == \
        (network_before.version, network_before.document)
    assert [z["interfaces"] for z in drafts.get().document["zones"]] == \
        [["eth2.100"], ["bond0", "eth2"]]                       # the backup's, not renamed
    entry = AuditEntry.objects.get(action="backup restore")
    assert entry.detail["network"] is None and entry.detail["network_kept"] is True
    assert "The network was left as it is, as you chose." in \
        html.unescape(admin_client.get(response["Location"]).content.decode())


def test_a_network_that_does_not_fit_this_box_is_refused_naming_it(saved, admin_client,
                                                                   netns, settings):
    """The ports' names match, but an MTU the backup's box allowed is beyond this box's
    driver: the restore checks the network against this box's ports as a save does."""
    saved["network"]["draft"]["interfaces"][1]["mtu"] = 9001   # veth allows up to 65535
    network_drafts.check(saved["network"]["draft"])
    facts = network_drafts.facts()
    facts["ports"]["eth2"]["max_mtu"] = 9000   # as a NIC whose driver stops at 9000
    PeriodicState.objects.filter(name=network_drafts.FACTS).update(result=facts)
    url, page = preview(admin_client, saved)
    before = snapshot()
    response = confirm(admin_client, url, page)
    assert response.status_code == 400
    assert "network.draft.interfaces[1].mtu: 9001 is outside what eth2&#x27;s driver allows " \
           "(68..9000)" in errors_of(response)[""], errors_of(response)
    assert snapshot() == before


def test_without_the_agents_facts_the_network_is_restored_unmapped(saved, admin_client):
    PeriodicState.objects.filter(name=network_drafts.FACTS).delete()
    NetworkDraft.objects.all().delete()
    url, page = preview(admin_client, saved)
    assert 'id="ports-unknown"' in page.content.decode()
    assert confirm(admin_client, url, page).status_code == 302
    assert NetworkDraft.objects.get(pk=1).document == NETWORK


# -- old and bad backups ----------------------------------------------------------------------

def test_an_old_backup_without_a_network_leaves_the_network_draft_alone(saved, admin_client):
    old = {key: value for key, value in saved.items() if key != "network"}
    old["version"] = 1
    changed = copy.deepcopy(NETWORK)
    changed["routes"] = []
    NetworkDraft.objects.filter(pk=1).update(document=changed, version=5)
    url, page = preview(admin_client, old)
    assert 'id="no-network"' in page.content.decode()
    response = confirm(admin_client, url, page)
    assert response.status_code == 302
    draft = NetworkDraft.objects.get(pk=1)
    assert (draft.document, draft.version) == (changed, 5)
    assert AuditEntry.objects.get(action="backup restore").detail["network"] is None
    assert "The backup has no network configuration: the network is as it was." in \
        admin_client.get("/backup/").content.decode()


def _add_vlan(**vlan):
    return lambda document: document["network"]["draft"]["vlans"].append(
        {"name": "eth2.101", "parent": "eth2", "id": 100, **vlan})


BAD_SECTIONS = [
    (_add_vlan(), "network.draft.vlans[1].id: VLAN 100 is already on eth2 (vlans[0], "
     "eth2.100)"),
    (_add_vlan(id="100"), "network.draft.vlans[1].id: expected an integer, got a string"),
    (_set(["network", "draft", "vlans"], "eth2.100"), "network.draft.vlans: must be an "
     "array of tables"),
    (_set(["network", "draft", "interfaces", 0, "name"], "eth1/../x"),
     "network.draft.interfaces[0].name: 'eth1/../x' contains '/'"),
    (_set(["network", "draft", "interfaces", 0, "role"], "traffic"),
     "network.draft.interfaces: no interface has the role management"),
    (_set(["network", "draft", "shell"], "reboot"), "network.draft.shell: unknown section"),
    (_set(["network", "draft"], []), "network.draft: expected an object, got a list"),
    (_set(["network", "draft", "system", "hostname"], "a" * (2 << 20)),
     "network.draft: 2049 KiB; a network configuration is at most 1024 KiB"),
    (_set(["network", "confirmed"], {"revision": "3", "document": {}}),
     "network.confirmed.revision: expected a revision number or null, got a string"),
    (_set(["network", "confirmed"], {"revision": None, "document": {"interfaces": []}}),
     "network.confirmed.document: no interface has the role management"),
    (_set(["network", "confirmed"], {"document": NETWORK}),
     "network.confirmed.revision: missing"),
    (_set(["network", "draft"], KeyError), "network.draft: missing"),
    (_set(["network"], "eth1"), "network: expected an object, got a string"),
]


@pytest.mark.parametrize("change,expected", BAD_SECTIONS, ids=[
    e.split(":")[0] + f"-{i}" for i, (_, e) in enumerate(BAD_SECTIONS)])
def test_a_bad_network_section_is_refused_naming_the_field(saved, admin_client, change,
                                                           expected):
    change(saved)
    refused_naming(admin_client, saved, expected, snapshot)


def test_a_version_1_backup_may_not_carry_a_network(saved, admin_client):
    saved["version"] = 1
    found = problems(upload(admin_client, saved))
    assert found == ["network: unknown key (known: format, version, created, tusk_version, "
                     "hostname, policy, tuning, users)"]


def test_a_network_draft_edited_after_the_preview_makes_it_stale(saved, admin_client):
    url, page = preview(admin_client, saved)
    NetworkDraft.objects.filter(pk=1).update(version=9)
    before = snapshot()
    response = confirm(admin_client, url, page)
    assert response.status_code == 400 and 'id="stale"' in response.content.decode()
    assert snapshot() == before
