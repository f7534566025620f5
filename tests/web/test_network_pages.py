"""The Network pages (issue 18): every save validated whole by the network core against
the machine's ports and the policy's zones; bad input gets its problem next to the field
and leaves the draft exactly as it was. The machine is the web tier's namespace (eth1 and
eth2, a veth pair), its facts read by the agent's own reader (agent_jobs.live_facts)."""
import copy
import dataclasses
import re

import pytest
from tuskweb import AGENT_NETNS, errors_of, wait

from accounts.models import AuditEntry
from jobs.models import Job, PeriodicState
from network import agent_jobs
from network import draft as drafts
from network.core.normalise import to_toml
from network.models import ConfirmToken, Draft, NetworkState
from policy import draft as policy_drafts


def version():
    return drafts.get().version


def snapshot():
    draft = Draft.objects.get(pk=1)
    return draft.version, draft.document


@pytest.fixture
def machine(netns, settings, db):
    """The agent's facts of the namespace, recorded as its periodic task records them."""
    settings.TUSK = dataclasses.replace(settings.TUSK, netns=netns)
    PeriodicState.objects.update_or_create(name=drafts.FACTS, defaults={
        "result": agent_jobs.live_facts(settings.TUSK)})
    return netns


PORT = {"role": "traffic", "description": "", "addresses": "", "mtu": "0"}


def edit_port(client, name, **fields):
    return client.post(f"/network/interfaces/edit/?port={name}",
                       {"version": version(), **PORT, **fields})


def add(client, section, **fields):
    return client.post(f"/network/{section}/new/", {"version": version(), **fields})


VLAN = {"name": "eth2.100", "parent": "eth2", "id": "100", "description": "",
        "addresses": "10.1.100.1/24", "mtu": "0"}
ROUTE = {"destination": "10.20.0.0/16", "gateway": "10.1.100.254", "metric": "0",
         "interface": ""}


@pytest.fixture
def configured(admin_client, machine):
    """eth1 the management port (192.0.2.1/24), eth2 a traffic port with VLAN 100."""
    response = edit_port(admin_client, "eth1", role="management",
                         addresses="192.0.2.1/24", description="mgmt")
    assert response.status_code == 302, errors_of(response)
    response = edit_port(admin_client, "eth2", addresses="198.51.100.1/24 2001:db8:2::1/64")
    assert response.status_code == 302, errors_of(response)
    response = add(admin_client, "vlans", **VLAN)
    assert response.status_code == 302, errors_of(response)
    return admin_client


def test_the_interfaces_page_shows_each_port_with_its_live_facts(admin_client, machine):
    page = admin_client.get("/network/").content.decode()
    live = PeriodicState.last_result(drafts.FACTS)["ports"]
    assert set(live) == {"eth1", "eth2"}
    for name in ("eth1", "eth2"):
        row = re.search(rf'<tr id="port-{name}">(.*?)</tr>', page, re.S).group(1)
        assert live[name]["mac"] in row and "veth" in row
        assert f"({live[name]['min_mtu']}–{live[name]['max_mtu']})" in row
    # the first draft: the first port on DHCP as management, the rest left unused
    assert [(p["name"], p["role"], p["dhcp"]) for p in drafts.get().document["interfaces"]] \
        == [("eth1", "management", True), ("eth2", "unused", False)]


def test_no_draft_is_kept_before_the_agent_reports_the_machine(admin_client, netns, settings):
    """Before the agent's first report there is nothing to start a draft from: the pages
    show an empty one without keeping it (kept, it would stay without ports, invalid -
    and so would every backup of it); once the ports are known the draft starts from
    them, and a save keeps it."""
    for path in ("/network/", "/network/apply/", "/network/vlans/"):
        assert admin_client.get(path).status_code == 200
    assert not Draft.objects.exists()
    settings.TUSK = dataclasses.replace(settings.TUSK, netns=netns)
    PeriodicState.objects.update_or_create(name=drafts.FACTS, defaults={
        "result": agent_jobs.live_facts(settings.TUSK)})
    response = edit_port(admin_client, "eth2")
    assert response.status_code == 302, errors_of(response)
    document = Draft.objects.get(pk=1).document
    assert [(p["name"], p["role"]) for p in document["interfaces"]] == [
        ("eth1", "management"), ("eth2", "traffic")]


def test_every_page_renders(configured):
    for url in ("/network/", "/network/vlans/", "/network/bonds/", "/network/routes/",
                "/network/system/", "/network/apply/", "/network/status/",
                "/network/history/", "/network/vlans/new/", "/network/vlans/0/",
                "/network/interfaces/edit/?port=eth1"):
        response = configured.get(url)
        assert response.status_code == 200, url


def test_a_vlan_an_address_and_a_route_through_the_forms(configured):
    client = configured
    response = add(client, "routes", **ROUTE)
    assert response.status_code == 302, errors_of(response)
    document = drafts.get().document
    assert document["vlans"] == [{"name": "eth2.100", "parent": "eth2", "id": 100,
                                  "description": "", "addresses": ["10.1.100.1/24"],
                                  "mtu": 0}]
    assert document["interfaces"][1]["addresses"] == ["198.51.100.1/24", "2001:db8:2::1/64"]
    assert document["routes"] == [{"destination": "10.20.0.0/16", "gateway": "10.1.100.254",
                                   "metric": 0, "interface": ""}]
    assert "eth2.100" in client.get("/network/vlans/").content.decode()
    routes = client.get("/network/routes/").content.decode()
    assert "10.20.0.0/16" in routes and 'id="live-routes"' in routes


def test_the_routes_page_shows_the_kernels_table(admin_client, machine, settings):
    from tusklib.target import Target
    target = Target(machine)
    target.run(["ip", "link", "set", "eth1", "up"])
    target.run(["ip", "link", "set", "eth2", "up"])
    target.run(["ip", "addr", "add", "10.77.0.1/24", "dev", "eth1"])
    target.run(["ip", "addr", "add", "2001:db8:77::1/64", "dev", "eth1"])
    PeriodicState.objects.filter(name=drafts.FACTS).update(
        result=agent_jobs.live_facts(settings.TUSK))
    page = admin_client.get("/network/routes/").content.decode()
    table = page[page.index('id="live-routes"'):]
    assert "10.77.0.0/24" in table and "2001:db8:77::/64" in table
    assert "IPv4" in table and "IPv6" in table


BAD = [
    # (what, url or section, fields, field, message)
    ("overlapping subnets", "vlans", {**VLAN, "name": "eth2.200", "id": "200",
                                      "addresses": "198.51.100.9/24"},
     "addresses", "addresses[0]: 198.51.100.9/24 overlaps 198.51.100.1/24 of eth2"),
    ("duplicate VLAN id", "vlans", {**VLAN, "name": "eth2.101", "addresses": ""},
     "id", "VLAN 100 is already on eth2"),
    ("VLAN id out of range", "vlans", {**VLAN, "name": "eth2.5000", "id": "5000",
                                       "addresses": ""}, "id", "5000 is outside 1..4094"),
    ("VLAN MTU over its parent's", "vlans", {**VLAN, "name": "eth2.300", "id": "300",
                                             "addresses": "", "mtu": "9000"},
     "mtu", "9000 exceeds the MTU of its parent eth2 (1500)"),
    ("VLAN on the management port", "vlans", {**VLAN, "name": "eth1.7", "parent": "eth1",
                                              "id": "7", "addresses": ""},
     "parent", "eth1 is the management port. VLANs are not allowed on it"),
    ("management port in a bond", "bonds", {"name": "bond0", "mode": "802.3ad",
                                            "hash_policy": "layer3+4", "members": ["eth1"],
                                            "description": "", "addresses": "", "mtu": "0"},
     "members", "members[0]: eth1 is the management port: it cannot be in a bond"),
    ("gateway on no connected subnet", "routes", {**ROUTE, "gateway": "10.9.9.9"},
     "gateway", "10.9.9.9 is not reachable"),
    ("bad route destination", "routes", {**ROUTE, "destination": "10.20.0.0/33"},
     "destination", "10.20.0.0/33"),
]


@pytest.mark.parametrize("what,section,fields,field,message", BAD, ids=[b[0] for b in BAD])
def test_bad_input_names_the_field_and_saves_nothing(configured, what, section, fields, field,
                                                    message):
    before = snapshot()
    response = add(configured, section, **fields)
    assert response.status_code == 400
    errors = errors_of(response)
    assert any(message in m for m in errors.get(field, [])), errors
    assert snapshot() == before


BAD_PORT = [
    ("no management address left", "eth1", {"role": "management", "addresses": ""},
     "addresses", "no management address left"),
    ("a bad address", "eth2", {"addresses": "10.0.0.300/24"}, "addresses", "addresses[0]: "),
    ("DHCP on a traffic port", "eth2", {"dhcp": "on"}, "dhcp",
     "DHCPv4 is for the management port only"),
    ("an MTU above the port's limit", "eth2", {"mtu": "70000"}, "mtu", "70000 is outside"),
    ("a second management port", "eth2", {"role": "management"}, "role",
     "eth1 is already the management port"),
]


@pytest.mark.parametrize("what,port,fields,field,message", BAD_PORT,
                         ids=[b[0] for b in BAD_PORT])
def test_bad_port_input_names_the_field_and_saves_nothing(configured, what, port, fields,
                                                         field, message):
    before = snapshot()
    response = edit_port(configured, port, **fields)
    assert response.status_code == 400
    errors = errors_of(response)
    assert any(message in m for m in errors.get(field, [])), errors
    assert snapshot() == before


@pytest.mark.parametrize("fields,field,message", [
    ({"hostname": "bad_host!"}, "hostname", ""),
    ({"dns": "192.0.2.53 not-an-ip"}, "dns", "dns[1]: "),
    ({"timezone": "Mars/Olympus"}, "timezone", "Mars/Olympus"),
])
def test_bad_system_settings_name_the_field(configured, fields, field, message):
    before = snapshot()
    response = configured.post("/network/system/", {
        "version": version(), "hostname": "fw1", "dns": "", "ntp": "", "timezone": "UTC",
        **fields})
    assert response.status_code == 400
    errors = errors_of(response)
    assert errors.get(field) and any(message in m for m in errors[field]), errors
    assert snapshot() == before


def test_system_settings_are_saved(configured):
    response = configured.post("/network/system/", {
        "version": version(), "hostname": "fw1", "dns": "192.0.2.53 2001:db8::53",
        "ntp": "0.pool.ntp.org", "timezone": "Europe/Zurich"})
    assert response.status_code == 302, errors_of(response)
    assert drafts.get().document["system"] == {
        "hostname": "fw1", "dns": ["192.0.2.53", "2001:db8::53"], "ntp": ["0.pool.ntp.org"],
        "timezone": "Europe/Zurich"}


def test_a_stale_form_is_refused(configured):
    before = snapshot()
    response = configured.post("/network/vlans/new/", {**VLAN, "name": "eth2.9", "id": "9",
                                                       "addresses": "",
                                                       "version": version() - 1})
    assert response.status_code == 400
    assert "changed by someone else" in " ".join(errors_of(response)[""])
    assert snapshot() == before


def test_deleting_a_vlan_a_zone_uses_is_refused_naming_the_zone(configured):
    policy_drafts.save_item("zones", None, {"name": "tagged", "interfaces": ["eth2.100"]},
                            policy_drafts.get().version, None)
    before = snapshot()
    response = configured.post("/network/vlans/0/delete/", {"version": version()},
                               follow=True)
    assert "the policy&#x27;s zone tagged uses the interface eth2.100" in \
        response.content.decode()
    assert snapshot() == before
    # a rename is refused the same way; without the zone the delete goes through
    response = configured.post("/network/vlans/0/", {**VLAN, "name": "eth2.v100",
                                                     "version": version()})
    assert response.status_code == 400 and "zone tagged" in " ".join(errors_of(response)[""])
    policy_drafts.delete_item("zones", 0, policy_drafts.get().version, None)
    response = configured.post("/network/vlans/0/delete/", {"version": version()})
    assert response.status_code == 302 and drafts.get().document["vlans"] == []


def test_renaming_a_bond_renames_it_in_vlans_and_routes(configured):
    edit_port(configured, "eth2")   # no addresses: a member has none
    configured.post("/network/vlans/0/delete/", {"version": version()})
    bond = {"name": "bond0", "mode": "802.3ad", "hash_policy": "layer3+4", "members": ["eth2"],
            "description": "", "addresses": "10.5.0.1/24", "mtu": "0"}
    assert add(configured, "bonds", **bond).status_code == 302
    assert add(configured, "vlans", **{**VLAN, "parent": "bond0"}).status_code == 302
    assert add(configured, "routes", **{**ROUTE, "interface": "bond0",
                                        "gateway": "10.5.0.254"}).status_code == 302
    response = configured.post("/network/bonds/0/", {**bond, "name": "bond1",
                                                     "version": version()})
    assert response.status_code == 302, errors_of(response)
    document = drafts.get().document
    assert document["vlans"][0]["parent"] == "bond1"
    assert document["routes"][0]["interface"] == "bond1"
    page = configured.get("/network/bonds/").content.decode()
    assert "does not make one TCP flow faster" in page and "layer3+4" in page


def test_review_shows_the_diff_and_what_changes(configured):
    state = NetworkState.objects.create(pk=1, confirmed_text="")
    page = configured.get("/network/apply/").content.decode()
    assert '<span class="add">+[[vlans]]</span>' in page
    assert "link added: eth2.100 (vlan)" in page
    assert "address added: 10.1.100.1/24 on eth2.100" in page
    # no confirmed configuration: no address is known to move
    assert 'id="management-moves"' not in page
    before = copy.deepcopy(drafts.get().document)
    (mgmt,) = [port for port in before["interfaces"] if port["name"] == "eth1"]
    mgmt["addresses"] = ["192.0.2.9/24"]
    state.confirmed_text = to_toml(drafts.check(before))
    state.save()
    page = configured.get("/network/apply/").content.decode()
    assert re.search(r'id="management-moves"><p><strong>The management address moves'
                     r'</strong> to 192\.0\.2\.1\.', page)


def test_discarding_the_draft_brings_back_the_configuration_in_effect(configured):
    """After a rollback the draft still holds the change that failed: Discard the draft
    makes it the confirmed configuration again - only at the version shown, audited."""
    confirmed = copy.deepcopy(drafts.get().document)
    NetworkState.objects.create(pk=1, confirmed_text=to_toml(drafts.check(confirmed)))
    response = add(configured, "vlans", **{**VLAN, "name": "eth2.7", "id": "7",
                                          "addresses": ""})
    assert response.status_code == 302, errors_of(response)
    page = configured.get("/network/apply/").content.decode()
    assert 'id="discard-draft"' in page and "link added: eth2.7 (vlan)" in page

    before = snapshot()
    response = configured.post("/network/apply/discard/", {"version": version() - 1},
                               follow=True)
    assert "the draft changed since it was shown" in response.content.decode()
    assert snapshot() == before

    response = configured.post("/network/apply/discard/", {"version": version()},
                               follow=True)
    assert "The draft is the configuration in effect again" in response.content.decode()
    assert to_toml(drafts.check(drafts.get().document)) == to_toml(drafts.check(confirmed))
    assert drafts.get().version == before[0] + 1
    assert AuditEntry.objects.filter(action="network draft discarded").exists()
    page = configured.get("/network/apply/").content.decode()
    assert "Nothing: the draft is the confirmed configuration." in page
    assert 'id="discard-draft"' not in page


MTU_POLICY = """version: 1
zones:
  - {name: inside, interfaces: [eth2]}
  - {name: tagged, interfaces: [eth2.100]}
classes:
  - {name: bulk, from: inside, to: tagged, action: accept}
  - {name: clamped, from: tagged, to: inside, action: accept, mss: {mode: pmtu}}
"""


def test_review_warns_of_a_class_between_a_port_and_its_smaller_vlan(configured):
    """eth2 gets MTU 9000, its VLAN eth2.100 1500: the policy's class from one to the other
    without an MSS clamp is named on Review and apply; the clamped one is not."""
    response = edit_port(configured, "eth2", addresses="198.51.100.1/24", mtu="9000")
    assert response.status_code == 302, errors_of(response)
    page = configured.get("/network/apply/").content.decode()
    assert 'id="mtu-warnings"' not in page, "no policy yet: no paths"
    policy_drafts.import_text(MTU_POLICY, None)
    page = configured.get("/network/apply/").content.decode()
    assert 'id="mtu-warnings"' not in page, "the VLAN has its parent's 9000 so far"
    response = configured.post("/network/vlans/0/", {**VLAN, "mtu": "1500",
                                                     "version": version()})
    assert response.status_code == 302, errors_of(response)
    page = configured.get("/network/apply/").content.decode()
    warnings = re.search(r'id="mtu-warnings">(.*?)</div>', page, re.S).group(1)
    assert ("class bulk: eth2 (MTU 9000) -&gt; eth2.100 (MTU 1500): segments sized for eth2 "
            "must be cut down to eth2.100&#x27;s by path MTU discovery") in warnings
    assert "clamped" not in warnings


def test_a_viewer_sees_the_pages_but_changes_nothing(viewer_client, machine):
    page = viewer_client.get("/network/").content.decode()
    assert "eth1" in page and "Edit" not in page
    response = viewer_client.post("/network/vlans/new/", {"version": 1, **VLAN})
    assert response.status_code == 403
    response = viewer_client.post("/network/apply/discard/", {"version": version()})
    assert response.status_code == 403


# -- through the real agent ------------------------------------------------------------------

@pytest.fixture
def agent_config(agent_config, tmp_path):
    """The web tier's agent, with a network state directory of the test's own."""
    with open(agent_config, "a", encoding="utf-8") as handle:
        handle.write(f'network_state_dir = "{tmp_path / "network"}"\n')
    return agent_config


def facts_reported():
    return PeriodicState.last_result(drafts.FACTS)


def apply_draft(client, **headers):
    page = client.get("/network/apply/")
    assert page.status_code == 200
    response = client.post("/network/apply/", {"version": version(), "timeout": "60"},
                           **headers)
    assert response.status_code == 302, errors_of(response)
    job = Job.objects.filter(kind="network.apply").latest("id")
    assert response["Location"] in (f"/jobs/{job.pk}/?next=network_status",
                                    f"/network/status/?job={job.pk}")
    return wait(job, 60)


def test_apply_and_confirm_through_the_new_address(agent, admin_client, settings):
    """The management address moves (192.0.2.9 confirmed first, then 192.0.2.1): the
    page Apply leads to and the status page give the operator's session the one-time link;
    a confirm without the local address is refused; at the new address it signs the
    operator in and confirms."""
    from kit import wait_until
    wait_until(facts_reported, 30, "the agent's first network.facts")
    response = edit_port(admin_client, "eth1", role="management", addresses="192.0.2.9/24")
    assert response.status_code == 302, errors_of(response)
    # (no VLAN: the kernels the tests run on may lack 802.1Q; the namespace tier has them)
    assert add(admin_client, "routes", **ROUTE).status_code == 400   # eth2 is unused yet
    assert edit_port(admin_client, "eth2", addresses="10.1.100.1/24").status_code == 302
    assert add(admin_client, "routes", **ROUTE).status_code == 302
    first = apply_draft(admin_client)   # nothing confirmed before: no address known to move
    assert first.state == "succeeded" and not first.args["token_hash"], first.error
    wait_until(lambda: NetworkState.objects.filter(pending__isnull=False).exists(), 10,
               "the first change pending")
    assert admin_client.post("/network/status/confirm/").status_code == 302
    assert wait(Job.objects.get(kind="network.confirm"), 30).state == "succeeded"
    wait_until(lambda: NetworkState.objects.filter(confirmed__isnull=False,
                                                   pending__isnull=True).exists(), 10,
               "the first change confirmed")
    Job.objects.filter(kind="network.confirm").delete()
    response = edit_port(admin_client, "eth1", role="management", addresses="192.0.2.1/24")
    assert response.status_code == 302, errors_of(response)
    job = apply_draft(admin_client)
    assert job.state == "succeeded", job.error
    assert job.args["token_hash"] and len(job.args["token_hash"]) == 64
    # the page Apply leads to carries the new address's link and the script that goes there
    # (the old address goes away under it: a poll to it may never answer)
    moving = admin_client.get(f"/network/status/?job={job.pk}")
    assert 'class="confirm-url" href="https://192.0.2.1/network/confirm/?token=' in \
        moving.content.decode() and "network-move.js" in moving.content.decode()
    assert moving.wsgi_request.session["network_confirm_token"] in moving.content.decode()
    wait_until(lambda: NetworkState.objects.filter(pending__isnull=False).exists(), 10,
               "the pending change mirrored")
    status = admin_client.get("/network/status/", HTTP_HX_REQUEST="true")
    url = status["HX-Redirect"]
    # https on the default port, what the appliance serves, though this request was http
    assert url.startswith("https://192.0.2.1/network/confirm/?token=")
    token = url.rpartition("=")[2]
    assert ConfirmToken.objects.get().token_sha256 != token   # only the hash is kept

    from django.test import Client
    there = Client()   # another origin: no session
    page = there.get(f"/network/confirm/?token={token}", HTTP_X_TUSK_LOCAL_ADDR="192.0.2.1")
    assert page.status_code == 200 and 'id="confirm"' in page.content.decode()
    refused = there.post("/network/confirm/", {"token": token})   # no nginx: no address
    assert refused.status_code == 400 and "cannot tell which address" in \
        refused.content.decode()
    assert not Job.objects.filter(kind="network.confirm").exists()
    response = there.post("/network/confirm/", {"token": token},
                          HTTP_X_TUSK_LOCAL_ADDR="192.0.2.1")
    assert response.status_code == 302
    job = wait(Job.objects.get(kind="network.confirm"), 30)
    assert job.state == "succeeded", job.error
    assert job.created_by.username == "alice"
    assert there.get("/network/status/").status_code == 200   # signed in there
    again = there.post("/network/confirm/", {"token": token},
                       HTTP_X_TUSK_LOCAL_ADDR="192.0.2.1")
    assert again.status_code == 400 and "not valid" in again.content.decode()
    wait_until(lambda: NetworkState.objects.filter(confirmed__isnull=False,
                                                   pending__isnull=True).exists(), 10,
               "the confirmed change mirrored")
    from tusklib.target import Target
    addresses = Target(AGENT_NETNS).run(["ip", "-br", "addr"]).stdout
    assert "192.0.2.1/24" in addresses and "10.1.100.1/24" in addresses
    routes = Target(AGENT_NETNS).run(["ip", "route"]).stdout
    assert "10.20.0.0/16 via 10.1.100.254 dev eth2 proto static" in routes


@pytest.mark.parametrize("change", [
    {"ports": {"eth1": {"name": "eth1", "mtu": "big"}}},
    {"ports": ["eth1"]},
    {"routes": [{"destination": 7}]},
    {"addresses": {"eth1": "192.0.2.1"}},
    {"at": None},
])
def test_forged_facts_read_as_not_reported(admin_client, machine, change):
    """network.facts is the web user's row to write: one not of its contract's shape
    (network/contracts.py) reads as nothing reported - the pages show, and a port's checks
    wait for the agent's own - never a server error."""
    real = PeriodicState.last_result(drafts.FACTS)
    PeriodicState.objects.filter(name=drafts.FACTS).update(result={**real, **change})
    assert drafts.facts() == {} and drafts.present() is None
    for path in ("/network/", "/network/routes/", "/network/apply/"):
        assert admin_client.get(path).status_code == 200, path
    # a port nothing reported and no draft names is no port to edit yet
    assert admin_client.get("/network/interfaces/edit/?port=eth1").status_code == 404
