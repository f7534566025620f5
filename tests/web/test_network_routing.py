"""The Network pages' routing (issue 39: BGP, OSPF and BFD with FRR): the settings, BGP
neighbours and OSPF links through the forms, saved only when the network holds together
and each problem next to its field; a neighbour's TCP MD5 password written once and never
shown again - not on a page, not in the audit log, not by the API (a PUT of what a GET
gave keeps it), not in a revision's diff; and what FRR reports, as the agent recorded it.
The web tier's namespace: eth1 the management port, eth2 198.51.100.1/24 2001:db8:2::1/64
(test_network_pages' configured)."""
import json

import pytest
from test_api import bearer, make_token
from test_network_pages import add, configured, machine, snapshot, version  # noqa: F401
from tuskweb import errors_of

from accounts.models import AuditEntry, Scope
from jobs.models import PeriodicState
from network import draft as drafts
from network.models import Revision

PASSWORD = "s3cret-md5.key"
SETTINGS = {"router_id": "", "asn": "65001", "prefixes": "198.51.100.0/24",
            "communities": "65001:100 no-export", "bfd_interval": "300",
            "bfd_multiplier": "3"}
NEIGHBOUR = {"address": "198.51.100.2", "remote_as": "65010", "description": "upstream",
             "password": PASSWORD, "bfd": "on", "accept": "0.0.0.0/0"}


def neighbours():
    return drafts.get().document["routing"]["bgp"]["neighbours"]


@pytest.fixture
def routed(configured):  # noqa: F811 - the fixture of test_network_pages
    client = configured
    response = client.post("/network/routing/", {"version": version(), **SETTINGS})
    assert response.status_code == 302, errors_of(response)
    response = add(client, "neighbours", **NEIGHBOUR)
    assert response.status_code == 302, errors_of(response)
    return client


def test_settings_a_neighbour_and_an_ospf_link_through_the_forms(routed):
    routing = drafts.get().document["routing"]
    assert routing["bgp"]["asn"] == 65001
    assert routing["bgp"]["communities"] == ["65001:100", "no-export"]
    assert neighbours() == [{"address": "198.51.100.2", "remote_as": 65010,
                             "description": "upstream", "bfd": True,
                             "accept": ["0.0.0.0/0"], "blackhole": False,
                             "password": PASSWORD}]
    response = add(routed, "ospf", interface="eth2", area="0", cost="10", bfd="on",
                   point_to_point="on")
    assert response.status_code == 302, errors_of(response)
    page = routed.get("/network/routing/").content.decode()
    assert "198.51.100.2" in page and "65010" in page and ">set<" in page
    assert 'id="ospf-links"' in page and "eth2" in page
    for url in ("/network/routing/", "/network/neighbours/0/", "/network/ospf/0/",
                "/network/neighbours/new/", "/network/ospf/new/", "/network/apply/"):
        response = routed.get(url)
        assert response.status_code == 200, url
        assert PASSWORD not in response.content.decode(), url
    assert not any(PASSWORD in json.dumps(entry.detail) for entry in AuditEntry.objects.all())


def test_a_password_left_empty_stays_and_one_removed_goes(routed):
    response = routed.post("/network/neighbours/0/", {
        "version": version(), **NEIGHBOUR, "password": "", "remote_as": "65011"})
    assert response.status_code == 302, errors_of(response)
    assert neighbours()[0]["password"] == PASSWORD and neighbours()[0]["remote_as"] == 65011
    response = routed.post("/network/neighbours/0/", {
        "version": version(), **NEIGHBOUR, "password": "", "no_password": "on"})
    assert response.status_code == 302, errors_of(response)
    assert neighbours()[0]["password"] == ""


BAD = [
    ("a neighbour on no link", "neighbours", {**NEIGHBOUR, "address": "10.9.9.9"},
     "address", "BGP sessions are single-hop"),
    ("a password with a space", "neighbours", {**NEIGHBOUR, "password": "two words"},
     "password", "not shown: it is a password"),
    ("an accepted prefix with host bits", "neighbours", {**NEIGHBOUR, "accept": "10.0.0.1/8"},
     "accept", "host bits"),
    ("OSPF on the management port", "ospf", {"interface": "eth1", "area": "0", "cost": "0"},
     "interface", "not a routed traffic link"),
    ("an OSPF area that is none", "ospf", {"interface": "eth2", "area": "backbone",
                                           "cost": "0"}, "area", "is not an OSPF area"),
]


@pytest.mark.parametrize("what,section,fields,field,message", BAD, ids=[b[0] for b in BAD])
def test_bad_routing_input_names_the_field_and_saves_nothing(routed, what, section, fields,
                                                             field, message):
    before = snapshot()
    response = add(routed, section, **fields)
    assert response.status_code == 400
    errors = errors_of(response)
    assert any(message in m for m in errors.get(field, [])), errors
    assert "two words" not in response.content.decode()
    assert snapshot() == before


def test_bad_settings_name_the_field(routed):
    before = snapshot()
    response = routed.post("/network/routing/", {"version": version(), **SETTINGS,
                                                 "communities": "65001:99999",
                                                 "router_id": "::1"})
    assert response.status_code == 400
    errors = errors_of(response)
    assert any("0-65535" in m for m in errors["communities"]), errors
    assert any("IPv4" in m for m in errors["router_id"]), errors
    assert snapshot() == before


def test_the_api_hides_the_password_and_a_put_of_what_it_read_keeps_it(routed, admin_user):
    headers = bearer(make_token(admin_user, Scope.ADMIN))
    response = routed.get("/api/v1/network", **headers)
    document = response.json()
    assert document["routing"]["bgp"]["neighbours"][0]["password"] == "(hidden)"
    assert PASSWORD not in response.content.decode()
    document["routing"]["bgp"]["neighbours"][0]["description"] = "changed by the API"
    response = routed.put("/api/v1/network", json.dumps(document), content_type="application/json",
                          HTTP_IF_MATCH=response["ETag"], **headers)
    assert response.status_code == 200, response.content
    assert PASSWORD not in response.content.decode()
    assert neighbours()[0]["password"] == PASSWORD
    assert neighbours()[0]["description"] == "changed by the API"
    # "(hidden)" for an address whose password the draft does not have is refused
    document["routing"]["bgp"]["neighbours"].append({
        "address": "198.51.100.3", "remote_as": 65020, "password": "(hidden)"})
    response = routed.put("/api/v1/network", json.dumps(document), content_type="application/json",
                          HTTP_IF_MATCH=f'"{version()}"', **headers)
    assert response.status_code == 422
    assert [p["path"] for p in response.json()["problems"]] == \
        ["routing.bgp.neighbours[1].password"]


def test_a_revisions_diff_hides_the_password(routed, admin_user):
    text = f'[routing.bgp]\nasn = 65001\n\n[[routing.bgp.neighbours]]\npassword = "{PASSWORD}"\n'
    from django.utils import timezone
    Revision.objects.create(number=1, created=timezone.now(), user="a", action="apply",
                            outcome="confirmed", text="")
    Revision.objects.create(number=2, created=timezone.now(), user="a", action="apply",
                            outcome="confirmed", text=text)
    page = routed.get("/network/history/2/").content.decode()
    assert 'password = &quot;(hidden)&quot;' in page and PASSWORD not in page
    headers = bearer(make_token(admin_user, Scope.READ))
    for url in ("/api/v1/network/revisions/2", "/api/v1/network/revisions/2/diff"):
        response = routed.get(url, **headers)
        assert response.status_code == 200 and PASSWORD not in response.content.decode(), url


def test_the_routing_page_shows_what_frr_reports(routed):
    PeriodicState.objects.update_or_create(name=drafts.ROUTING, defaults={"result": {
        "running": True, "at": 1.0,
        "sessions": [{"address": "198.51.100.2", "remote_as": 65010, "state": "Active",
                      "up_seconds": 0, "received": 0, "sent": 0}],
        "bfd": [{"peer": "198.51.100.2", "status": "down"}],
        "ospf": [{"neighbour": "10.20.0.2", "version": 3, "interface": "eth2",
                  "state": "Full"}]}})
    page = routed.get("/network/routing/").content.decode()
    assert 'id="bgp-sessions"' in page and '"bad">Active' in page
    assert '"bad">down' in page and '"ok">Full' in page
    PeriodicState.objects.filter(name=drafts.ROUTING).update(result={"forged": "<script>"})
    page = routed.get("/network/routing/").content.decode()
    assert "The agent has not reported it yet." in page


def test_the_health_panel_says_which_session_is_down(routed, settings):
    from dashboard.health import run as health
    from network.core.normalise import to_toml
    from network.models import NetworkState
    assert not [c for c in health() if c["name"] == "routing"]   # nothing confirmed yet
    NetworkState.objects.update_or_create(pk=1, defaults={
        "confirmed": 1, "confirmed_text": to_toml(drafts.check(drafts.get().document))})
    import time
    status = {"running": True, "at": time.time(), "bfd": [], "ospf": [],
              "sessions": [{"address": "198.51.100.2", "remote_as": 65010,
                            "state": "Established", "up_seconds": 9, "received": 1,
                            "sent": 1}]}
    PeriodicState.objects.update_or_create(name=drafts.ROUTING, defaults={"result": status})
    [row] = [c for c in health() if c["name"] == "routing"]
    assert row["ok"] is True and "1 of 1 BGP sessions up" in row["detail"]
    status["sessions"][0]["state"] = "Idle"
    PeriodicState.objects.filter(name=drafts.ROUTING).update(result=status)
    [row] = [c for c in health() if c["name"] == "routing"]
    assert row["ok"] is False and "198.51.100.2 Idle" in row["detail"]
