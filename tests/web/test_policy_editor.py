"""The policy editor: every save validated whole by the policy engine; bad input gets
errors on the right fields and leaves the draft exactly as it was."""
import pytest
from tuskweb import errors_of

from accounts.models import AuditEntry
from policy import draft as drafts
from policy.models import Draft


def version():
    return drafts.get().version


def add(client, section, **fields):
    return client.post(f"/policy/{section}/new/", {"version": version(), **fields})


@pytest.fixture
def zones(admin_client):
    assert add(admin_client, "zones", name="inside", interfaces="eth1").status_code == 302
    assert add(admin_client, "zones", name="outside", interfaces="eth2 eth3").status_code == 302
    return admin_client


def test_an_address_set_and_a_class_with_an_mss_clamp(zones):
    client = zones
    response = add(client, "address_sets", name="backup", entries="10.1.0.0/16\n2001:db8::/32")
    assert response.status_code == 302
    response = add(client, "services", name="rsync", protocol="tcp", ports="873")
    assert response.status_code == 302
    response = add(client, "classes", name="bulk", from_zone="inside", to_zone="outside",
                   source=["backup"], services=["rsync"], action="accept", mss_mode="fixed",
                   mss_value="1400", seqrand="none")
    assert response.status_code == 302, errors_of(response)
    document = drafts.get().document
    assert document["classes"] == [{
        "name": "bulk", "from": "inside", "to": "outside", "source": ["backup"],
        "services": ["rsync"], "action": "accept", "mss": {"mode": "fixed", "value": 1400}}]
    assert AuditEntry.objects.filter(action="class add", target="bulk").exists()
    page = client.get("/policy/classes/").content.decode()
    assert "bulk" in page and "MSS fixed 1400" in page


def test_a_class_says_how_it_takes_the_fast_path(zones):
    client = zones
    assert add(client, "services", name="rsync", protocol="tcp", ports="873").status_code == 302
    response = add(client, "classes", name="bulk", from_zone="inside", to_zone="outside",
                   services=["rsync"], action="accept", mss_mode="none", seqrand="none",
                   fastpath="auto", fastpath_after="10 MB")
    assert response.status_code == 302, errors_of(response)
    response = add(client, "classes", name="chat", from_zone="outside", to_zone="inside",
                   action="accept", mss_mode="none", seqrand="none", fastpath="never")
    assert response.status_code == 302, errors_of(response)
    response = add(client, "classes", name="quick", from_zone="inside", action="accept",
                   mss_mode="none", seqrand="none", fastpath_after="0")
    assert response.status_code == 302, errors_of(response)
    classes = drafts.get().document["classes"]
    assert classes[0] == {"name": "bulk", "from": "inside", "to": "outside",
                          "services": ["rsync"], "action": "accept", "fastpath": "auto",
                          "fastpath_after": "10 MB"}
    assert classes[1]["fastpath"] == "never" and "fastpath_after" not in classes[1]
    assert "fastpath" not in classes[2] and classes[2]["fastpath_after"] == 0
    page = client.get("/policy/classes/").content.decode()
    assert "fast path auto" in page and "promoted after 10 MB" in page
    assert "fast path never" in page and "promoted after 0" in page
    # the form shows them back; a policy of before auto's fastpath: true as always
    form = client.get("/policy/classes/0/").content.decode()
    assert 'value="10 MB"' in form


@pytest.mark.parametrize("fields,field,message", [
    ({"mss_mode": "fixed", "mss_value": "70000"}, "mss_value", "70000 is above 65535"),
    ({"mss_mode": "fixed"}, "mss_value", "is required when mode is fixed"),
    ({"mss_mode": "pmtu", "mss_value": "1400"}, "mss_value", "only a fixed clamp takes a value"),
    ({"name": "Bad Name"}, "name", "not a valid name"),
    ({"from_zone": "nowhere"}, "from_zone", "Select a valid choice"),
    ({"fastpath": "sometimes"}, "fastpath", "Select a valid choice"),
    ({"fastpath_after": "lots"}, "fastpath_after", "lots&#x27; is not a size: a whole"),
    ({"fastpath_after": "99999999999999"}, "fastpath_after", "is above 1000000000000"),
    ({"fastpath": "always", "fastpath_after": "1 MB"}, "fastpath_after",
     "only a class whose fast path is auto"),
    ({"action": "drop", "fastpath": "auto"}, "fastpath", "the action is drop"),
    ({"fastpath_after": "<b>9</b>"}, "fastpath_after", "is not a size"),
])
def test_bad_class_input_names_the_field_and_saves_nothing(zones, fields, field, message):
    before = Draft.objects.get(pk=1)
    data = {"name": "c1", "action": "accept", "mss_mode": "none", "seqrand": "none", **fields}
    response = add(zones, "classes", **data)
    assert response.status_code == 400
    errors = errors_of(response)
    assert any(message in m for m in errors.get(field, [])), errors
    after = Draft.objects.get(pk=1)
    assert (after.version, after.document) == (before.version, before.document)


@pytest.mark.parametrize("section,fields,field,message", [
    ("address_sets", {"name": "s", "entries": "10.0.0.0/8 10.0.0.300"}, "entries",
     "entries[1]: "),
    ("address_sets", {"name": "s", "entries": "10.0.0.1 10.0.0.1"}, "entries",
     "is already listed"),
    ("services", {"name": "s", "protocol": "tcp", "ports": "70000"}, "ports", "ports[0]: "),
    ("services", {"name": "s", "protocol": "icmp", "ports": "1"}, "ports", "icmp has no ports"),
    ("zones", {"name": "z", "interfaces": "eth1"}, "interfaces", "already belongs to zone"),
    ("zones", {"name": "inside", "interfaces": "eth9"}, "name", "inside"),
    ("zones", {"name": "z", "interfaces": "a/b"}, "interfaces", "not a valid interface name"),
])
def test_bad_item_input_names_the_field_and_saves_nothing(zones, section, fields, field,
                                                          message):
    before = Draft.objects.get(pk=1)
    response = add(zones, section, **fields)
    assert response.status_code == 400
    errors = errors_of(response)
    assert any(message in m for m in errors.get(field, [])), errors
    after = Draft.objects.get(pk=1)
    assert (after.version, after.document) == (before.version, before.document)


def test_a_stale_form_is_refused(zones):
    stale = version() - 1
    response = zones.post("/policy/zones/new/", {"version": stale, "name": "dmz",
                                                 "interfaces": "eth4"})
    assert response.status_code == 400
    assert "changed by someone else" in " ".join(errors_of(response)[""])
    assert [z["name"] for z in drafts.get().document["zones"]] == ["inside", "outside"]


def test_renaming_a_zone_renames_it_in_the_classes(zones):
    add(zones, "classes", name="c1", from_zone="inside", action="accept", mss_mode="none",
        seqrand="none")
    response = zones.post("/policy/zones/0/", {"version": version(), "name": "lan",
                                               "interfaces": "eth1"})
    assert response.status_code == 302
    assert drafts.get().document["classes"][0]["from"] == "lan"


def test_a_zone_in_use_cannot_be_deleted(zones):
    add(zones, "classes", name="c1", from_zone="inside", action="accept", mss_mode="none",
        seqrand="none")
    before = version()
    response = zones.post("/policy/zones/0/delete/", {"version": before}, follow=True)
    assert "used by class(es) c1" in response.content.decode()
    assert version() == before


def test_classes_move_in_order(zones):
    add(zones, "services", name="rsync", protocol="tcp", ports="873")
    add(zones, "services", name="ssh", protocol="tcp", ports="22")
    for name, service in (("a", "rsync"), ("b", "ssh")):
        response = add(zones, "classes", name=name, from_zone="inside", to_zone="outside",
                       services=[service], action="accept", mss_mode="none", seqrand="none")
        assert response.status_code == 302, errors_of(response)
    response = zones.post("/policy/classes/1/move/up/", {"version": version()})
    assert response.status_code == 302
    assert [c["name"] for c in drafts.get().document["classes"]] == ["b", "a"]
    assert AuditEntry.objects.filter(action="class move").exists()


def test_import_replaces_the_draft_only_when_valid(admin_client):
    good = "zones:\n  - {name: lan, interfaces: [eth1]}\n"
    response = admin_client.post("/policy/import/", {"text": good})
    assert response.status_code == 302
    assert drafts.get().document == {"zones": [{"name": "lan", "interfaces": ["eth1"]}]}
    before = version()
    bad = "zones:\n  - {name: lan, interfaces: [eth1]}\nclasses:\n  - {name: x, action: maybe}\n"
    response = admin_client.post("/policy/import/", {"text": bad})
    assert response.status_code == 400
    assert "classes[0].action" in response.content.decode()
    assert version() == before


def test_export_gives_the_yaml_that_imports_back(admin_client):
    admin_client.post("/policy/import/", {"text": "zones:\n  - {name: lan, interfaces: [eth1]}\n"})
    exported = admin_client.get("/policy/export/")
    assert exported["Content-Type"] == "application/yaml"
    response = admin_client.post("/policy/import/", {"text": exported.content.decode()})
    assert response.status_code == 302


def test_apply_shows_the_diff_first(zones):
    page = zones.get("/policy/apply/").content.decode()
    assert "table inet tusk" in page and 'class="add"' in page
