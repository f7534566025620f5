"""The policy editor's service presets (issue 40): the catalogue page for every role, and
for admins a preset's services - and a class, if named - added to the draft whole or not
at all, through the engine's checks, each problem next to its field."""
from tuskweb import errors_of

from accounts.models import AuditEntry
from policy import draft as drafts
from policy.core.presets import PRESETS


def version():
    return drafts.get().version


def zones(client):
    for name, interfaces in (("inside", "eth1"), ("outside", "eth2")):
        response = client.post("/policy/zones/new/", {"version": version(), "name": name,
                                                      "interfaces": interfaces})
        assert response.status_code == 302, errors_of(response)


def add(client, key, **fields):
    return client.post(f"/policy/presets/{key}/", {
        f"{key}-version": version(), **{f"{key}-{name}": value for name, value in fields.items()}})


def test_the_catalogue_names_each_presets_ports_and_source(admin_client):
    page = admin_client.get("/policy/presets/").content.decode()
    for preset in PRESETS:
        assert f'id="preset-{preset.key}"' in page and f'id="form-{preset.key}"' in page
    assert "50000-51000" in page and "https://docs.globus.org/" in page
    globus, rsync = page.split('id="preset-globus"')[1], page.split('id="preset-rsync"')[1]
    assert "both ways" in globus.split("</div>")[0]
    assert "both ways" not in rsync.split("</div>")[0]
    assert "service preset" in admin_client.get("/policy/services/new/").content.decode()
    assert "Service presets" in admin_client.get("/policy/").content.decode()


def test_a_viewer_reads_the_catalogue_and_cannot_add(viewer_client):
    page = viewer_client.get("/policy/presets/").content.decode()
    assert 'id="preset-globus"' in page and 'id="form-globus"' not in page
    before = version()
    assert viewer_client.post("/policy/presets/globus/", {}).status_code == 403
    assert version() == before


def test_globus_with_its_class_goes_into_the_draft(admin_client):
    zones(admin_client)
    response = add(admin_client, "globus", class_name="globus-in", from_zone="outside",
                   to_zone="inside")
    assert response.status_code == 302, errors_of(response)
    document = drafts.get().document
    assert document["services"] == [
        {"name": "globus-https", "protocol": "tcp", "ports": [443], "comment": "preset globus"},
        {"name": "globus-data", "protocol": "tcp", "ports": ["50000-51000"],
         "comment": "preset globus"}]
    assert document["classes"] == [{
        "name": "globus-in", "services": ["globus-https", "globus-data"], "action": "accept",
        "comment": "preset globus", "from": "outside", "to": "inside"}]
    assert AuditEntry.objects.filter(action="policy preset add", target="globus").exists()
    # the other way, the services there already: only the class is added
    response = add(admin_client, "globus", class_name="globus-out", from_zone="inside",
                   to_zone="outside")
    assert response.status_code == 302, errors_of(response)
    assert len(drafts.get().document["services"]) == 2
    assert [c["name"] for c in drafts.get().document["classes"]] == ["globus-in", "globus-out"]


def test_a_refused_preset_changes_nothing_and_says_where(admin_client):
    zones(admin_client)
    response = admin_client.post("/policy/services/new/", {
        "version": version(), "name": "ssh", "protocol": "tcp", "ports": "2222"})
    assert response.status_code == 302
    before = drafts.get()
    # a class name the engine refuses: next to the class field
    response = add(admin_client, "rsync", class_name="Bad Name", from_zone="inside")
    assert response.status_code == 400
    assert "not a valid name" in " ".join(errors_of(response)["class_name"])
    # a service of the preset's name with other ports: named, at the top of its form
    response = add(admin_client, "ssh", class_name="")
    assert response.status_code == 400
    assert any("services[1].name" in m for m in errors_of(response)[""]), errors_of(response)
    # a stale page
    response = admin_client.post("/policy/presets/iscsi/", {"iscsi-version": before.version - 1})
    assert response.status_code == 400 and "changed by someone else" in response.content.decode()
    after = drafts.get()
    assert (after.version, after.document) == (before.version, before.document)
    assert admin_client.post("/policy/presets/nothing/", {}).status_code == 404
