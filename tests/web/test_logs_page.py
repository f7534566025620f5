"""The Logs page on real components: ulogd on the image's configuration in the agent's
namespace (lab/ulogd.py) recording packets that hand-written NFLOG rules of the policy's
shape log between the peers, the page (Django test client) reading the same directory the
agent keeps, and the real agent applying the settings the page saves: the storage bound,
and rsyslog forwarding to receivers on the namespace's loopback."""
import dataclasses
import os
import subprocess

import pytest
from django.utils import timezone
from kit import wait_until
from netns.pcaps import ns_socket, tcp_connect
from netns.test_logs_ulogd import Receiver, rfc5424
from tuskweb import PEER_A, PEER_B, errors_of, wait

from accounts.models import AuditEntry
from jobs.models import Job, PeriodicState
from lab.ulogd import Ulogd
from logs.core.constants import CURRENT, FORWARDER_TASK, KEEP_TASK
from logs.models import LogSettings
from policy.models import Revision, TargetState

POLICY = """version: 1
zones:
  - {name: inside, interfaces: [eth1]}
  - {name: outside, interfaces: [eth3]}
services:
  - {name: web, protocol: tcp, ports: [5209]}
classes:
  - {name: ping, from: inside, to: outside, services: [], action: accept}
  - {name: web, from: inside, to: outside, services: [web], action: drop}
"""
RULES = """
table inet tusk
delete table inet tusk
table inet tusk {
	limit log_rate { rate 50/second burst 100 packets }
	chain forward {
		type filter hook forward priority filter; policy drop;
		ct state established,related accept
		iifname "eth1" oifname "eth3" tcp dport 5209 limit name "log_rate" \
			log prefix "tusk:drop:web" group 1
		iifname "eth1" oifname "eth3" tcp dport 5209 drop
		limit name "log_rate" log prefix "tusk:drop:" group 1
	}
}
"""


@pytest.fixture
def log_dir(netns, peers, tmp_path, settings, system_users):
    """ulogd in the agent's namespace, writing where the agent of agent_config (state_dir
    tmp_path/policy) and the web process look: tmp_path/logs; the rules loaded there."""
    settings.TUSK = dataclasses.replace(settings.TUSK, state_dir=str(tmp_path / "policy"))
    subprocess.run(["ip", "netns", "exec", netns, "nft", "-f", "-"], input=RULES, text=True,
                   check=True)
    ulogd = Ulogd(netns, str(tmp_path / "logs")).start()
    yield tmp_path / "logs"
    ulogd.stop()


@pytest.fixture
def confirmed(db):
    """POLICY as the confirmed revision (and so the draft's start)."""
    Revision.objects.create(number=1, created=timezone.now(), user="alice", action="apply",
                            outcome="confirmed", policy_text=POLICY, ruleset="",
                            ruleset_sha256="1" * 64)
    TargetState.objects.create(pk=1, confirmed=1)


def denied(peers, port=5209):
    """A TCP connection attempt from peer-a to peer-b that the rules drop and log."""
    tcp_connect(peers[0], PEER_B, port, timeout=0.5)


def udp_from_peer(peers, port, count=1):
    sock = ns_socket(peers[0], 2, 2)    # AF_INET, SOCK_DGRAM
    for _ in range(count):
        sock.sendto(b"tusk", (PEER_B, port))
    sock.close()


def rows(response):
    return response.content.decode().count('<tr class="record"')


def test_a_denied_packet_is_on_the_page_filtered_with_its_class_and_zones(
        admin_client, log_dir, confirmed, peers):
    denied(peers)
    udp_from_peer(peers, 7777)
    wait_until(lambda: rows(admin_client.get("/logs/")) == 2, 10, "two records on the page")
    response = admin_client.get("/logs/", {
        "cls": "web", "verdict": "drop", "zone": "outside", "address": "10.98.1.0/24",
        "port": "5209", "protocol": "tcp", "since": timezone.now().strftime("%Y-%m-%dT00:00"),
        "limit": "10", "live": "on"})
    assert response.status_code == 200
    html = response.content.decode()
    assert rows(response) == 1 and 'data-verdict="drop" data-class="web"' in html
    # the class as the draft has it (classes[1]), the interfaces with their zones
    assert '<a href="/policy/classes/1/">web</a>' in html
    assert 'inside <span class="muted">eth1</span>' in html
    assert 'outside <span class="muted">eth3</span>' in html
    assert f"{PEER_A}:" in html and f"{PEER_B}:5209" in html and "SYN" in html
    for other in ({"cls": "(default)"}, {"port": "7777"}, {"protocol": "udp"}):
        found = admin_client.get("/logs/", other)
        assert rows(found) == 1 and 'data-class=""' in found.content.decode(), other
        assert "default deny" in found.content.decode()
    for nothing in ({"cls": "ping"}, {"verdict": "accept"}, {"address": "192.0.2.0/24"},
                    {"port": "22"}, {"zone": "inside", "protocol": "icmp"},
                    {"until": "2000-01-01T00:00"}):
        found = admin_client.get("/logs/", nothing)
        assert rows(found) == 0 and b"No record matches." in found.content, nothing


def test_the_api_finds_what_the_page_finds_and_pages_back_in_time(
        admin_user, log_dir, confirmed, peers):
    """GET /api/v1/logs: the page's filters (its form checks them), newest first, and a
    `next` query for the older records until there are none."""
    from django.test import Client

    from accounts import tokens
    token = {"HTTP_AUTHORIZATION": "Bearer " + tokens.create("logs", "read", admin_user,
                                                              1)[1]}
    client = Client()
    udp_from_peer(peers, 7771)
    denied(peers)
    udp_from_peer(peers, 7772)
    wait_until(lambda: len(client.get("/api/v1/logs", **token).json()["records"]) == 3, 10,
               "three records through the API")
    newest = client.get("/api/v1/logs?limit=2", **token).json()
    assert [r["destination_port"] for r in newest["records"]] == [7772, 5209]
    assert newest["records"][1]["cls"] == "web" and newest["records"][1]["verdict"] == "drop"
    older = client.get("/api/v1/logs" + newest["next"], **token).json()
    assert [r["destination_port"] for r in older["records"]] == [7771]
    assert older["next"] is None
    only = client.get("/api/v1/logs?cls=web&zone=outside&protocol=tcp", **token).json()
    assert [r["destination_port"] for r in only["records"]] == [5209]
    bad = client.get("/api/v1/logs?zone=nowhere&address=example.net", **token)
    assert bad.status_code == 422
    assert {p["path"] for p in bad.json()["problems"]} == {"zone", "address"}


@pytest.mark.django_db
def test_a_bad_filter_is_named_by_field(admin_client):
    response = admin_client.get("/logs/", {"address": "10.1.2.300", "port": "70000",
                                           "cls": "Web!", "since": "yesterday",
                                           "verdict": "allow", "limit": "0"})
    assert response.status_code == 400
    errors = errors_of(response)
    assert errors["address"] == ["&#x27;10.1.2.300&#x27; is not an IP address or prefix"]
    assert set(errors) == {"address", "port", "cls", "since", "verdict", "limit"}
    both = admin_client.get("/logs/", {"since": "2026-01-02T00:00", "until": "2026-01-01T00:00"})
    assert both.status_code == 400 and errors_of(both) == {"until": ["before From"]}


def test_the_page_follows_new_records_until_an_end_time_is_set(admin_client, viewer_client,
                                                                log_dir, peers):
    page = admin_client.get("/logs/")
    assert 'hx-trigger="every 2s"' in page.content.decode() and rows(page) == 0
    denied(peers)
    wait_until(lambda: rows(admin_client.get("/logs/", HTTP_HX_REQUEST="true")) == 1, 10,
               "the new record in the polled fragment")
    fragment = admin_client.get("/logs/", HTTP_HX_REQUEST="true")
    assert b"<html" not in fragment.content and b'id="log-records"' in fragment.content
    frozen = admin_client.get("/logs/", {"until": "2099-01-01T00:00", "live": "on"})
    assert b"hx-trigger" not in frozen.content and rows(frozen) == 1
    # a viewer sees the records, not the settings
    seen = viewer_client.get("/logs/")
    assert rows(seen) == 1 and b"storage-form" not in seen.content
    assert b"syslog-form" not in seen.content
    assert viewer_client.post("/logs/syslog/", {"host_1": "192.0.2.1"}).status_code == 403


@pytest.mark.django_db
def test_the_settings_forms_name_each_bad_field_and_save_nothing(admin_client):
    response = admin_client.post("/logs/syslog/", {
        "host_1": "bad host!", "port_1": "514", "transport_1": "udp",
        "host_2": "192.0.2.1", "port_2": "70000", "transport_2": "udp",
        "host_3": "192.0.2.1", "port_3": "514", "transport_3": "file",
        "host_4": "224.0.0.1", "port_4": "514", "transport_4": "tcp"})
    assert response.status_code == 400
    errors = errors_of(response)
    assert "neither an IP address nor a host name" in errors["host_1"][0]
    assert errors["port_2"] and errors["transport_3"]
    assert errors["host_4"] == ["224.0.0.1 is not the address of one host"]
    twice = admin_client.post("/logs/syslog/", {
        "host_1": "192.0.2.1", "port_1": "514", "transport_1": "udp",
        "host_2": "192.0.2.1", "port_2": "514", "transport_2": "udp"})
    assert errors_of(twice) == {"host_2": ["udp://192.0.2.1:514 is named twice"]}
    storage = admin_client.post("/logs/storage/", {"files": "1", "file_mb": "100000"})
    assert set(errors_of(storage)) == {"files", "file_mb"}
    assert not LogSettings.objects.exists() and not Job.objects.exists()
    assert not AuditEntry.objects.exists()


def test_syslog_settings_are_applied_by_the_agent_and_records_reach_the_receivers(
        agent, agent_config, admin_client, log_dir, netns, peers):
    subprocess.run(["ip", "-n", netns, "link", "set", "lo", "up"], check=True)
    receiver = Receiver(netns)
    try:
        udp, tcp = receiver.ports()
        response = admin_client.post("/logs/syslog/", {
            "host_1": "127.0.0.1", "port_1": str(udp), "transport_1": "udp",
            "host_2": "127.0.0.1", "port_2": str(tcp), "transport_2": "tcp"})
        assert response.status_code == 302
        job = wait(Job.objects.get(kind="logs.apply"))
        assert job.state == "succeeded", job.error
        assert job.result["targets"] == [f"udp://127.0.0.1:{udp}", f"tcp://127.0.0.1:{tcp}"]
        audit = AuditEntry.objects.get(action="log syslog settings")
        assert audit.username == "alice" and audit.detail["syslog"][1]["port"] == tcp
        denied(peers)
        wait_until(lambda: all(receiver.messages.values()), 20,
                   lambda: f"the record on both receivers: {receiver.messages}")
        for transport in ("udp", "tcp"):
            message = rfc5424(receiver.messages[transport][0])
            assert (message["app"], message["msgid"]) == ("tusk", "firewall")
            assert '"oob.prefix": "tusk:drop:web"' in message["msg"]
        page = wait_until(lambda: (page := admin_client.get("/logs/")) and
                          b"forwarding to udp://127.0.0.1" in page.content and page, 10,
                          "the page saying where the agent forwards")
        assert b'value="127.0.0.1"' in page.content      # the form shows what is set
        # no receiver left: rsyslogd stops, its configuration and positions go
        admin_client.post("/logs/syslog/", {"host_1": "", "port_1": "514"})
        job = wait(Job.objects.filter(kind="logs.apply").latest("id"))
        assert job.state == "succeeded" and job.result["running"] is False
        assert os.listdir(agent_config.parent / "syslog") == []
    finally:
        receiver.close()


def test_the_storage_bound_is_the_agents_to_keep(agent, admin_client, log_dir, peers):
    response = admin_client.post("/logs/storage/", {"files": "2", "file_mb": "1"})
    assert response.status_code == 302
    assert wait(Job.objects.get(kind="logs.apply")).state == "succeeded"
    assert AuditEntry.objects.get(action="log storage settings").detail["files"] == 2
    wait_until(lambda: (PeriodicState.last_result(KEEP_TASK) or {}).get("files") == 2, 10,
               "the agent keeping 2 files")
    kept = PeriodicState.last_result(KEEP_TASK)
    assert kept["file_mb"] == 1 and kept["refused"] == "" and kept["writers"]
    assert os.listdir(log_dir) == [CURRENT]
    page = admin_client.get("/logs/")
    assert b"at most 2 files of 1 MB" in page.content and b"ulogd writing" in page.content
    assert PeriodicState.last_result(FORWARDER_TASK) in (None, {"running": False, "pid": None,
                                                                "targets": [], "refused": ""})
