"""NAT, class logging and the settings in the policy editor: each form edits one item of
the draft, the whole document goes through the engine, its problems come back next to
the form's fields, a refused or stale form saves nothing, and a port forward can create
the class that admits it - placed where no earlier class takes its traffic first."""
import copy
import html
import re

import pytest
from tuskweb import errors_of

from accounts.models import AuditEntry
from network.models import NetworkState
from policy import draft as drafts
from policy.core.errors import PolicyError
from policy.core.model import Interval, PortForward, Settings, SourceNat, TrafficClass
from policy.core.normalise import load_policy
from policy.models import Draft

# A DMZ web server behind the firewall; everything else from outside is refused by the
# catch-all outside-rest (classes[2]), which a forward's new class must come before.
BASE = """\
version: 1
zones:
  - {name: inside, interfaces: [eth1]}
  - {name: outside, interfaces: [eth2]}
  - {name: dmz, interfaces: [eth3]}
address_sets:
  - {name: inside-nets, entries: [10.1.0.0/16]}
  - {name: other-server, entries: [10.3.0.6]}
services:
  - {name: https, protocol: tcp, ports: [443, 8443]}
  - {name: alt, protocol: tcp, ports: ["9000-9009"]}
  - {name: telnet, protocol: tcp, ports: [23]}
classes:
  - {name: inside-out, from: inside, to: outside, action: accept}
  - {name: no-telnet, services: [telnet], action: drop}
  - {name: outside-rest, from: outside, to: dmz, action: reject}
"""
FORWARD = {"name": "web", "from_zone": "outside", "address": "203.0.113.5",
           "protocol": "tcp", "ports": "443", "to_address": "10.3.0.5", "to_ports": "8443",
           "admit": "+create"}


@pytest.fixture
def editor(admin_client):
    response = admin_client.post("/policy/import/", {"text": BASE})
    assert response.status_code == 302
    return admin_client


def version():
    return drafts.get().version


def post(client, url, **fields):
    return client.post(url, {"version": version(), **fields})


def snapshot():
    draft = Draft.objects.get(pk=1)
    return draft.version, draft.document


def refused(response, field, message):
    """The form came back (400) with message on field."""
    assert response.status_code == 400
    errors = errors_of(response)
    errors = {key: [html.unescape(m) for m in messages] for key, messages in errors.items()}
    assert any(message in m for m in errors.get(field, [])), errors
    return errors


def checked(page, name):
    return re.search(rf'<input type="checkbox" name="{name}"[^>]*\bchecked>', page) is not None


def model():
    return load_policy(drafts.get().document)


def test_a_masquerade(editor):
    response = post(editor, "/policy/nat/source/new/", name="out", to_zone="outside",
                    translate="masquerade", source=["inside-nets"])
    assert response.status_code == 302, errors_of(response)
    assert drafts.get().document["nat"] == {"source": [
        {"name": "out", "to": "outside", "source": ["inside-nets"], "translate": "masquerade"}]}
    assert model().nat.source == (SourceNat(name="out", to_zone="outside",
                                            source=("inside-nets",)),)
    assert AuditEntry.objects.filter(action="source NAT rule add", target="out").exists()
    page = editor.get("/policy/nat/").content.decode()
    assert 'data-source-nat="out"' in page and "masquerade" in page


def test_source_nat_to_an_address_range_with_ports(editor):
    response = post(editor, "/policy/nat/source/new/", name="pool", to_zone="outside",
                    translate="address", address="203.0.113.5-203.0.113.9",
                    ports="1024-65535", comment="the provider's range")
    assert response.status_code == 302, errors_of(response)
    assert model().nat.source == (SourceNat(
        name="pool", to_zone="outside", translate="address", address="203.0.113.5-203.0.113.9",
        address_family="ipv4", ports=Interval(1024, 65535), comment="the provider's range"),)


@pytest.mark.parametrize("fields,field,message", [
    ({"translate": "masquerade", "address": "203.0.113.5"}, "address",
     "masquerade takes the address of the interface"),
    ({"translate": "address"}, "address", "is required when translate is address"),
    ({"translate": "address", "address": "203.0.113.0/29"}, "address", "is a prefix"),
    ({"translate": "masquerade", "ports": "1024 2048"}, "ports", "not a list"),
    ({"translate": "masquerade", "ports": "70000"}, "ports", "70000"),
])
def test_bad_source_nat_names_the_field_and_saves_nothing(editor, fields, field, message):
    before = snapshot()
    refused(post(editor, "/policy/nat/source/new/", name="out", to_zone="outside", **fields),
            field, message)
    assert snapshot() == before


def test_a_forward_that_creates_its_class_before_the_catch_all(editor):
    response = post(editor, "/policy/nat/forwards/new/", **FORWARD)
    assert response.status_code == 302, errors_of(response)
    policy = model()
    assert policy.nat.forwards == (PortForward(
        name="web", from_zone="outside", protocol="tcp", ports=(Interval(443, 443),),
        to_address="10.3.0.5", family="ipv4", class_name="web", address="203.0.113.5",
        to_ports=Interval(8443, 8443)),)
    # before outside-rest, which would reject it; no-telnet does not take port 8443
    assert [c.name for c in policy.classes] == ["inside-out", "no-telnet", "web",
                                                "outside-rest"]
    assert policy.traffic_class["web"] == TrafficClass(
        name="web", action="accept", from_zone="outside", destination=("web",),
        services=("web",), comment="admits port forward web", fastpath="auto")
    assert policy.address_set["web"].entries == ("10.3.0.5",)
    assert (policy.service["web"].protocol, policy.service["web"].ports) == (
        "tcp", (Interval(8443, 8443),))
    page = editor.get("/policy/nat/").content.decode()
    assert "Created class web (classes[2], before class outside-rest" in page
    assert 'data-forward="web"' in page
    entry = AuditEntry.objects.get(action="port forward add", target="web")
    assert entry.detail["created"]["before"] == "outside-rest"


def test_a_created_class_reuses_a_set_and_service_that_hold_exactly_the_server(editor):
    response = post(editor, "/policy/nat/forwards/new/", **{
        **FORWARD, "name": "alt", "ports": "9000-9009", "to_address": "10.3.0.6",
        "to_ports": "", "address": "", "new_class": "alt-in"})
    assert response.status_code == 302, errors_of(response)
    policy = model()
    assert policy.traffic_class["alt-in"].destination == ("other-server",)
    assert policy.traffic_class["alt-in"].services == ("alt",)
    assert "alt-in" not in policy.address_set and "alt-in" not in policy.service
    assert policy.nat.forwards[0].class_name == "alt-in"


def test_a_hairpin_forward_creates_a_class_for_every_zone(editor):
    response = post(editor, "/policy/nat/forwards/new/", **{**FORWARD, "hairpin": "on"})
    assert response.status_code == 302, errors_of(response)
    policy = model()
    assert policy.traffic_class["web"].from_zone is None
    assert policy.nat.forwards[0].hairpin


def test_a_forward_appends_its_class_when_nothing_takes_its_traffic_first(editor):
    response = post(editor, "/policy/nat/forwards/new/", **{**FORWARD, "from_zone": "dmz"})
    assert response.status_code == 302, errors_of(response)
    assert [c.name for c in model().classes][-1] == "web"
    assert "Created class web (classes[3], after the other classes)" in \
        editor.get("/policy/nat/").content.decode()


def test_a_class_that_would_accept_the_traffic_itself_goes_after_the_new_one(editor):
    """inside-out accepts everything from inside: a forward from inside needs its own
    class before it (else inside-out would take the connections, its class never)."""
    response = post(editor, "/policy/nat/forwards/new/", **{**FORWARD, "from_zone": "inside"})
    assert response.status_code == 302, errors_of(response)
    assert [c.name for c in model().classes][:2] == ["web", "inside-out"]


def test_a_forward_linking_a_class_that_does_not_accept_is_refused_on_the_class(editor):
    before = snapshot()
    errors = refused(post(editor, "/policy/nat/forwards/new/",
                          **{**FORWARD, "admit": "outside-rest"}),
                     "admit", "class 'outside-rest' rejects it: a forward needs a class "
                              "that accepts")
    assert "" not in errors
    assert snapshot() == before


def test_a_forward_linking_a_class_that_admits_it_saves_as_is(editor):
    post(editor, "/policy/nat/forwards/new/", **FORWARD)      # creates class web
    before = [c["name"] for c in drafts.get().document["classes"]]
    response = post(editor, "/policy/nat/forwards/new/", **{
        **FORWARD, "name": "web2", "ports": "8443", "to_ports": "", "admit": "web"})
    assert response.status_code == 302, errors_of(response)
    assert [c["name"] for c in drafts.get().document["classes"]] == before
    assert model().nat.forwards[1].class_name == "web"


def test_an_overlapping_forward_is_refused_on_its_ports(editor):
    assert post(editor, "/policy/nat/forwards/new/", **FORWARD).status_code == 302
    before = snapshot()
    refused(post(editor, "/policy/nat/forwards/new/", **{
        **FORWARD, "name": "web2", "ports": "400-500", "admit": "web"}),
            "ports", "already forwarded by nat.forwards[0] 'web'")
    assert snapshot() == before


def test_a_created_class_that_is_refused_saves_nothing(editor):
    """The class's name is an address set's already: neither the forward, the class nor
    the service it would make are kept, and the field for the name says why."""
    before = snapshot()
    refused(post(editor, "/policy/nat/forwards/new/", **{**FORWARD, "new_class": "inside-nets"}),
            "new_class", "address set inside-nets: 'inside-nets' is already defined")
    assert snapshot() == before


@pytest.mark.parametrize("fields,field,message", [
    ({"to_ports": "8000-8010"}, "to_ports", "a range maps port by port"),
    ({"to_address": "10.3.0.0/24"}, "to_address", "is one address, not a range or prefix"),
    ({"address": "2001:db8::5"}, "to_address", "a forward stays in one address family"),
    ({"new_class": "Web Server"}, "new_class", "not a valid name"),
    ({"ports": ""}, "ports", "This field is required"),
])
def test_bad_forward_with_a_class_to_create_names_the_field(editor, fields, field, message):
    before = snapshot()
    refused(post(editor, "/policy/nat/forwards/new/", **{**FORWARD, **fields}), field, message)
    assert snapshot() == before


def test_a_stale_forward_form_is_refused(editor):
    stale = version()
    post(editor, "/policy/nat/source/new/", name="out", to_zone="outside",
         translate="masquerade")
    before = snapshot()
    response = editor.post("/policy/nat/forwards/new/", {**FORWARD, "version": stale})
    assert response.status_code == 400
    assert "changed by someone else" in " ".join(errors_of(response)[""])
    assert snapshot() == before


def test_editing_deleting_and_moving_nat_items(editor):
    for name in ("first", "second"):
        post(editor, "/policy/nat/source/new/", name=name, to_zone="outside",
             translate="masquerade", source=["inside-nets"] if name == "first" else [])
    response = post(editor, "/policy/nat/source/1/move/up/")
    assert response.status_code == 302
    assert [r["name"] for r in drafts.get().document["nat"]["source"]] == ["second", "first"]
    form = editor.get("/policy/nat/source/1/").content.decode()
    assert 'value="first"' in form
    response = post(editor, "/policy/nat/source/1/", name="first", to_zone="dmz",
                    translate="masquerade")
    assert response.status_code == 302, errors_of(response)
    assert drafts.get().document["nat"]["source"][1]["to"] == "dmz"
    post(editor, "/policy/nat/forwards/new/", **FORWARD)
    for url in ("/policy/nat/forwards/0/delete/", "/policy/nat/source/0/delete/",
                "/policy/nat/source/0/delete/"):
        assert post(editor, url).status_code == 302
    document = drafts.get().document
    assert "nat" not in document
    assert "web" in [c["name"] for c in document["classes"]]   # the class stays


def test_the_nat_page_says_how_the_classes_see_nat(editor, viewer_user, client):
    page = editor.get("/policy/nat/").content.decode()
    assert "translates the destination <em>before</em> the classes" in page
    assert "Source NAT translates <em>after</em> the classes" in page
    assert "Add port forward" in page
    form = editor.get("/policy/nat/forwards/new/").content.decode()
    assert "create a class for it" in form and "DNAT" in form
    client.force_login(viewer_user)
    assert "Add port forward" not in client.get("/policy/nat/").content.decode()


def test_a_class_that_logs(editor):
    response = post(editor, "/policy/classes/new/", name="ssh-in", from_zone="outside",
                    to_zone="dmz", services=["https"], action="accept", mss_mode="none",
                    seqrand="none", log="on")
    assert response.status_code == 302, errors_of(response)
    assert drafts.get().document["classes"][-1]["log"] is True
    assert model().traffic_class["ssh-in"].log
    form = editor.get("/policy/classes/3/").content.decode()
    assert checked(form, "log")


def test_the_logging_settings(editor):
    before = snapshot()
    refused(post(editor, "/policy/settings/", confirm_timeout="120", log_rate="2000"),
            "log_rate", "2000 is above 1000")
    refused(post(editor, "/policy/settings/", confirm_timeout="5", log_rate="50"),
            "confirm_timeout", "5 is below 10")
    assert snapshot() == before
    form = editor.get("/policy/settings/").content.decode()
    assert checked(form, "log_default_deny")   # the default
    response = post(editor, "/policy/settings/", confirm_timeout="300", log_rate="100")
    assert response.status_code == 302, errors_of(response)
    assert model().settings == Settings(confirm_timeout=300, log_default_deny=False,
                                        log_rate=100)
    assert AuditEntry.objects.filter(action="policy settings edit").exists()
    stale = editor.post("/policy/settings/", {"version": version() - 1, "log_rate": "10"})
    assert "changed by someone else" in " ".join(errors_of(stale)[""])
    assert model().settings.log_rate == 100


# -- renames and deletes follow NAT ---------------------------------------------------------

@pytest.fixture
def with_nat(editor):
    """BASE with a masquerade of inside-nets out through outside and the forward web, whose
    class web (classes[2]) it created."""
    response = post(editor, "/policy/nat/source/new/", name="out", to_zone="outside",
                    translate="masquerade", source=["inside-nets"])
    assert response.status_code == 302, errors_of(response)
    response = post(editor, "/policy/nat/forwards/new/", **FORWARD)
    assert response.status_code == 302, errors_of(response)
    return editor


def test_renaming_a_zone_renames_it_in_the_nat_rules(with_nat):
    response = post(with_nat, "/policy/zones/1/", name="wan", interfaces="eth2")
    assert response.status_code == 302, errors_of(response)
    document = drafts.get().document
    assert document["nat"]["source"][0]["to"] == "wan"
    assert document["nat"]["forwards"][0]["from"] == "wan"
    assert [(c.get("from"), c.get("to")) for c in document["classes"]][2:] == [
        ("wan", None), ("wan", "dmz")]


def test_renaming_an_address_set_renames_it_in_the_source_nat_rules(with_nat):
    response = post(with_nat, "/policy/address_sets/0/", name="lan", entries="10.1.0.0/16")
    assert response.status_code == 302, errors_of(response)
    assert drafts.get().document["nat"]["source"][0]["source"] == ["lan"]
    assert model().nat.source[0].source == ("lan",)


def test_renaming_a_class_renames_it_in_the_port_forwards(with_nat):
    response = post(with_nat, "/policy/classes/2/", name="web-in", from_zone="outside",
                    destination=["web"], services=["web"], action="accept", mss_mode="none",
                    seqrand="none")
    assert response.status_code == 302, errors_of(response)
    assert drafts.get().document["nat"]["forwards"][0]["class"] == "web-in"
    assert model().nat.forwards[0].class_name == "web-in"


@pytest.mark.parametrize("url, message", [
    ("/policy/classes/2/delete/", "classes[2]: web is used by port forward web "
                                  "(nat.forwards[0].class); change those first"),
    ("/policy/zones/1/delete/", "zones[1]: outside is used by class(es) inside-out, web, "
                                "outside-rest; source NAT rule out (nat.source[0].to); port "
                                "forward web (nat.forwards[0].from); change those first"),
    ("/policy/address_sets/0/delete/", "address_sets[0]: inside-nets is used by source NAT "
                                       "rule out (nat.source[0].source); change those first"),
])
def test_deleting_what_nat_uses_is_refused_naming_the_nat_item(with_nat, url, message):
    before = snapshot()
    response = with_nat.post(url, {"version": version()}, follow=True)
    assert message in html.unescape(response.content.decode())
    assert snapshot() == before


def test_a_refused_delete_shows_the_problems_path(admin_client):
    """A delete no reference holds back that the engine refuses: the last zone but the
    forward's own goes, and a hairpin needs another zone."""
    text = ("version: 1\nzones:\n  - {name: outside, interfaces: [eth2]}\n"
            "  - {name: dmz, interfaces: [eth3]}\naddress_sets:\n"
            "  - {name: server, entries: [10.3.0.5]}\nclasses:\n"
            "  - {name: web-in, destination: [server], action: accept}\nnat:\n  forwards:\n"
            "    - {name: web, from: outside, address: 203.0.113.5, protocol: tcp, "
            "ports: [443], to_address: 10.3.0.5, hairpin: true, class: web-in}\n")
    assert admin_client.post("/policy/import/", {"text": text}).status_code == 302
    before = snapshot()
    response = admin_client.post("/policy/zones/1/delete/", {"version": version()},
                                 follow=True)
    assert "nat.forwards[0].hairpin: hairpin reflects the forward to hosts of the other " \
        "zones, and the policy has no zone but outside" in html.unescape(
            response.content.decode())
    assert snapshot() == before


# -- the whole document, saved through the draft's public function ------------------------

def test_save_document_is_all_or_nothing_and_refuses_a_stale_version(editor, admin_user):
    version_before, document = snapshot()
    changed = copy.deepcopy(document)
    changed["nat"] = {"source": [{"name": "out", "to": "outside", "translate": "masquerade"}]}
    with pytest.raises(drafts.StaleDraft):
        drafts.save_document(changed, version_before - 1, admin_user)
    bad = copy.deepcopy(changed)
    bad["nat"]["source"].append({"name": "out2", "to": "nowhere", "source": ["nothing"],
                                 "translate": "masquerade"})
    with pytest.raises(PolicyError) as raised:
        drafts.save_document(bad, version_before, admin_user)
    assert [p.path for p in raised.value.problems] == ["nat.source[1].to",
                                                       "nat.source[1].source[0]"]
    assert snapshot() == (version_before, document)
    saved = drafts.save_document(changed, version_before, admin_user)
    assert saved.version == version_before + 1
    assert snapshot() == (version_before + 1, changed)
    assert Draft.objects.get(pk=1).updated_by == admin_user


# -- the classes list ----------------------------------------------------------------------

def test_the_classes_list_shows_which_classes_log(editor):
    post(editor, "/policy/classes/new/", name="ssh-in", from_zone="outside", to_zone="dmz",
         services=["https"], action="accept", mss_mode="none", seqrand="none", log="on")
    page = editor.get("/policy/classes/").content.decode()
    rows = {name: row for row in page.split("<tr>")[1:]
            for name in re.findall(r'/">([a-z-]+)</a>', row)}
    assert '<span class="badge">log</span>' in rows["ssh-in"]
    assert '<span class="badge">log</span>' not in rows["inside-out"]


# -- a forward whose class admits any zone, after a catch-all to one zone ---------------------

# class to-server admits the servers in whichever zone, after outside-rest (classes[2]),
# which rejects the rest from outside to dmz: the zone the network puts the server in
# decides whether the forward stays closed.
NETWORK = """version = 2
[[interfaces]]
name = "eth0"
role = "management"
addresses = ["192.168.1.2/24"]
[[interfaces]]
name = "eth1"
role = "traffic"
addresses = ["10.1.0.1/24"]
[[interfaces]]
name = "eth2"
role = "traffic"
addresses = ["203.0.113.2/24"]
[[interfaces]]
name = "eth3"
role = "traffic"
addresses = ["10.3.0.1/24"]
"""
TO_SERVER = {**FORWARD, "to_ports": "", "admit": "to-server"}


@pytest.fixture
def any_zone_class(editor):
    text = BASE.replace("address_sets:\n", "address_sets:\n"
                        "  - {name: servers, entries: [10.3.0.5, 10.1.0.5]}\n") + \
        "  - {name: to-server, from: outside, destination: [servers], services: [https], " \
        "action: accept}\n"
    assert editor.post("/policy/import/", {"text": text}).status_code == 302
    return editor


def test_without_a_network_a_catch_all_to_one_zone_may_close_the_forward(any_zone_class):
    before = snapshot()
    refused(post(any_zone_class, "/policy/nat/forwards/new/", **TO_SERVER), "admit",
            "classes[2] 'outside-rest' comes first and, if 10.3.0.5 is in zone dmz, matches "
            "all of this forward's traffic that class 'to-server' matches, and rejects it: "
            "without a network configuration the server's zone is unknown")
    assert snapshot() == before


def test_with_the_network_the_catch_all_closes_a_forward_to_its_zone(any_zone_class):
    NetworkState.objects.create(pk=1, confirmed=1, confirmed_text=NETWORK)
    before = snapshot()
    refused(post(any_zone_class, "/policy/nat/forwards/new/", **TO_SERVER), "admit",
            "10.3.0.5 is reached through eth3, which is in zone dmz: classes[2] "
            "'outside-rest' comes first and matches all of this forward's traffic that "
            "class 'to-server' matches, and rejects it")
    assert snapshot() == before


def test_with_the_network_a_forward_to_another_zone_passes_the_catch_all(any_zone_class):
    NetworkState.objects.create(pk=1, confirmed=1, confirmed_text=NETWORK)
    response = post(any_zone_class, "/policy/nat/forwards/new/",
                    **{**TO_SERVER, "to_address": "10.1.0.5"})
    assert response.status_code == 302, errors_of(response)
    assert model().nat.forwards[0].class_name == "to-server"


def test_with_the_network_a_created_class_goes_before_the_catch_all(any_zone_class):
    NetworkState.objects.create(pk=1, confirmed=1, confirmed_text=NETWORK)
    response = post(any_zone_class, "/policy/nat/forwards/new/", **FORWARD)
    assert response.status_code == 302, errors_of(response)
    assert [c.name for c in model().classes][2:] == ["web", "outside-rest", "to-server"]
