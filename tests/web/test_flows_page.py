"""The Flows page with the real agent: its sampler reads the conntrack table of the agent's
namespace, which routes between two peer namespaces under a Tusk policy with source NAT
(traffic only ever between them); the page is read with Django's test client, and its
actions - Capture this flow, Diagnose, Drop - run as the agent's jobs."""
import json
import socket
import subprocess
import time
from pathlib import Path

import dpkt
import pytest
from django.conf import settings
from kit import wait_until
from tuskweb import AGENT_NETNS, wait
from tuskweb import PEER_A as A
from tuskweb import PEER_B as B

from accounts.models import AuditEntry
from diag.core.pcapread import Reader
from diag.files import Directory
from diag.models import Capture, Report
from flows.agent_jobs import SAMPLE
from flows.core import ctnetlink as nl
from flows.core.conntrack import Conntrack
from flows.models import FlowSettings
from jobs.models import Job, PeriodicState
from policy.core.applier import Applier

OUTSIDE = "10.98.2.1"     # the agent's namespace on peer-b's side: the masquerade address
TRANSLATED = "10.98.1.3"  # peer-a's second address, the only one translated
POLICY = """version: 1
zones:
  - {name: inside, interfaces: [eth1]}
  - {name: outside, interfaces: [eth3]}
address_sets:
  - {name: translated, entries: [10.98.1.3]}
services:
  - {name: web, protocol: tcp, ports: [80]}
  - {name: iperf, protocol: tcp, ports: [5201, 5202]}
classes:
  - {name: web, from: inside, to: outside, services: [web], action: accept}
  - {name: bulk, from: inside, to: outside, services: [iperf], action: accept}
nat:
  source:
    - {name: out, to: outside, source: [translated], translate: masquerade}
"""


def sh(*argv, check=True):
    return subprocess.run(argv, capture_output=True, text=True, check=check)


@pytest.fixture
def firewall(agent, router, agent_config):
    """The policy applied and confirmed in the agent's namespace (the agent mirrors its
    revision: the page names classes from it); the peers' traffic is tracked."""
    applier = Applier(agent_config.parent / "policy", AGENT_NETNS)
    applier.apply(POLICY, user="test")
    applier.confirm(user="test")
    sh("ip", "-n", router[0], "addr", "add", f"{TRANSLATED}/24", "dev", "eth0")
    return router


def iperf3(peers, port, seconds, rate, source=A):
    """An iperf3 transfer peer-a -> peer-b through the agent's namespace, from source
    (TRANSLATED: masqueraded)."""
    sh("ip", "netns", "exec", peers[1], "iperf3", "-s", "-1", "-D", "-B", B, "-p", str(port))
    wait_until(lambda: sh("ip", "netns", "exec", peers[1], "ss", "-Hltn",
                          f"sport = :{port}").stdout, 10, "iperf3 listening")
    return subprocess.Popen(["ip", "netns", "exec", peers[0], "iperf3", "-c", B, "-p", str(port),
                             "-B", source, "-t", str(seconds), "-b", rate, "-J"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)


def sampled_flow(dport, seconds=30):
    """The data connection to dport as the agent's last sample lists it, once it has a
    rate."""
    def found():
        result = PeriodicState.last_result(SAMPLE) or {}
        flows = [f for f in result.get("flows", []) if f["orig"]["dport"] == dport
                 and f["bps"] and sum(f["bps"]) > 1e6]
        return flows[0] if flows else None
    return wait_until(found, seconds, f"the agent sampling a flow to port {dport}")


def posted(flow, **extra):
    return {"id": flow["id"], "family": flow["family"], "proto": flow["proto"],
            "src": flow["orig"]["src"], "dst": flow["orig"]["dst"],
            "sport": flow["orig"]["sport"], "dport": flow["orig"]["dport"],
            "zone": flow["zone"], **extra}


def action_job(response):
    assert response.status_code == 302, response.content.decode()[-3000:]
    assert response["Location"].startswith("/flows/actions/")
    return Job.objects.get(pk=int(response["Location"].rstrip("/").rsplit("/", 1)[1]))


def stop(*clients):
    for client in clients:
        if client.poll() is None:
            client.kill()
        client.wait()


def test_the_page_lists_the_flow_with_its_class_translation_and_rate(firewall, admin_client):
    response = admin_client.post("/flows/settings/", {"elephant_mbps": 100, "rows": 10,
                                                      "capture_seconds": 5})
    assert response.status_code == 302
    client = iperf3(firewall, 5201, 12, "300M", source=TRANSLATED)
    try:
        flow = sampled_flow(5201)
        page = admin_client.get("/flows/")
        html = page.content.decode()
        table = admin_client.get("/flows/table/", HTTP_HX_REQUEST="true").content.decode()
    finally:
        stop(client)
    assert page.status_code == 200
    assert 'hx-get="/flows/table/"' in html and "<html" in html
    assert "<html" not in table and 'id="flows-table"' in table
    row = table.split(f'data-id="{flow["id"]}"')[1].split("</tr>")[0]
    assert f"tcp {TRANSLATED}:{flow['orig']['sport']} → {B}:5201" in row
    assert '<td class="class">bulk</td>' in row                  # ordinal 2 of the policy
    reply = flow["reply"]
    assert (reply["src"], reply["dst"]) == (B, OUTSIDE)           # masqueraded
    assert f"as {OUTSIDE}:{reply['dport']} → {B}:5201" in row
    assert "elephant" in row and flow["class"] == 2
    assert 150e6 < sum(flow["bps"]) < 450e6, flow["bps"]            # paced at 300 Mbit/s
    assert "Capture</button>" in row and "Drop…</button>" in row
    entry = AuditEntry.objects.get(action="flows settings")
    assert entry.detail == {"elephant_mbps": 100, "rows": 10, "capture_seconds": 5}


def test_an_elephant_shows_its_rate_over_its_life_and_the_stage_that_lost_its_packets(
        firewall, admin_client):
    """A token bucket on the way out (eth3) drops what the elephant sends past 50 Mbit/s:
    the row charts its rate and names the qdisc as where packets were lost while it ran."""
    admin_client.post("/flows/settings/", {"elephant_mbps": 10, "rows": 10,
                                           "capture_seconds": 5})
    sh("ip", "netns", "exec", AGENT_NETNS, "tc", "qdisc", "replace", "dev", "eth3", "root",
       "tbf", "rate", "50mbit", "burst", "30000", "limit", "30000")
    client = iperf3(firewall, 5202, 15, "300M")
    try:
        sampled_flow(5202)

        def lost_row():
            table = admin_client.get("/flows/table/").content.decode()
            rows = [r.split("</tr>")[0] for r in table.split('class="flow elephant"')[1:]
                    if 'data-dport="5202"' in r]
            return rows[0] if rows and "lost while it ran" in rows[0] else None
        row = wait_until(lost_row, 20, "the elephant's row naming where it lost packets")
    finally:
        stop(client)
        sh("ip", "netns", "exec", AGENT_NETNS, "tc", "qdisc", "del", "dev", "eth3", "root",
           check=False)
    assert '<svg' in row.split('class="life"')[1]          # the rate over its life
    lost = row.split("lost while it ran")[1]
    assert "Queue (qdisc) drops on transmit on eth3</a>" in lost, lost
    assert 'href="/loss/"' in lost
    assert "on eth1" not in lost                                # nothing lost coming in


def test_settings_name_each_bad_field_and_keep_the_old_ones(agent, admin_client):
    response = admin_client.post("/flows/settings/", {"elephant_mbps": 0, "rows": 500,
                                                      "capture_seconds": "ten"})
    assert response.status_code == 400
    html = response.content.decode()
    for field in ("elephant_mbps", "rows", "capture_seconds"):
        assert f'data-field="{field}"' in html, field
    assert "greater than or equal to 1" in html and "less than or equal to 50" in html
    assert not FlowSettings.objects.exists()
    assert not AuditEntry.objects.filter(action="flows settings").exists()


def test_a_viewer_sees_the_flows_but_no_action(firewall, viewer_client):
    client = iperf3(firewall, 5201, 10, "100M")
    try:
        flow = sampled_flow(5201)
        table = viewer_client.get("/flows/table/").content.decode()
        assert f'data-id="{flow["id"]}"' in table
        assert "Capture</button>" not in table and "Drop" not in table
        for url in ("/flows/capture/", "/flows/diagnose/", "/flows/drop/"):
            assert viewer_client.post(url, posted(flow, seconds=2)).status_code == 403
        assert viewer_client.post("/flows/settings/", {"elephant_mbps": 5}).status_code == 403
    finally:
        stop(client)
    assert not Job.objects.filter(kind__startswith="flows.").exists()


def frames(path):
    """(interface name, (src, sport, dst, dport)) of every packet of a pcapng file."""
    reader = Reader(path)
    found = []
    for _, index, frame in reader:
        ip = dpkt.ethernet.Ethernet(frame).data
        found.append((reader.interfaces[index].name, (socket.inet_ntoa(ip.src), ip.data.sport,
                                                      socket.inet_ntoa(ip.dst), ip.data.dport)))
    assert reader.damage is None, reader.damage
    return found


def capture_files(pk):
    with Directory(settings.TUSK.capture_dir) as shared:
        return [Path(settings.TUSK.capture_dir) / name for name in shared.names(pk)]


def test_capture_this_flow_holds_only_that_flow_from_both_sides(firewall, admin_client):
    wanted = iperf3(firewall, 5201, 15, "200M", source=TRANSLATED)
    other = iperf3(firewall, 5202, 15, "50M")      # through the same interfaces, not captured
    try:
        flow = sampled_flow(5201)
        sampled_flow(5202)
        job = action_job(admin_client.post("/flows/capture/", posted(flow, seconds=2)))
        job = wait(job, 60)
    finally:
        stop(wanted, other)
    assert job.state == "succeeded", job.error
    cap = Capture.objects.get(pk=job.result["capture"])
    assert cap.job_id == job.pk and cap.state == "done" and cap.created_by.username == "alice"
    assert cap.spec["interfaces"] == ["eth1", "eth3"] == job.result["interfaces"]
    [path] = capture_files(cap.pk)
    sport, outside_port = flow["orig"]["sport"], flow["reply"]["dport"]
    inside = {(TRANSLATED, sport, B, 5201), (B, 5201, TRANSLATED, sport)}
    outside = {(OUTSIDE, outside_port, B, 5201), (B, 5201, OUTSIDE, outside_port)}
    seen = frames(path)
    assert len(seen) > 100
    assert {t for i, t in seen if i == "eth1"} == inside          # before translation
    assert {t for i, t in seen if i == "eth3"} == outside         # after it
    audit = AuditEntry.objects.get(action="flow capture")
    assert audit.detail["job"] == job.pk and audit.detail["sport"] == sport
    page = admin_client.get(f"/flows/actions/{job.pk}/").content.decode()
    assert f"capture {cap.pk}</a>" in page


def test_diagnose_captures_then_opens_the_flows_health_report(firewall, admin_client):
    client = iperf3(firewall, 5201, 15, "200M")
    try:
        flow = sampled_flow(5201)
        job = action_job(admin_client.post("/flows/diagnose/", posted(flow, seconds=2)))
        waiting = admin_client.get(f"/flows/actions/{job.pk}/", HTTP_HX_REQUEST="true")
        assert waiting.status_code == 200 and "HX-Redirect" not in waiting
        job = wait(job, 120)
    finally:
        stop(client)
    assert job.state == "succeeded", job.error
    report = Report.objects.get(pk=job.result["report"])
    assert report.capture_id == job.result["capture"] and report.job_id == job.pk
    [analysed] = report.result["flows"]        # one connection, seen on both interfaces
    assert analysed["client"] == f"{A}:{flow['orig']['sport']}"
    assert [p["interface"] for p in analysed["points"]] == ["eth1", "eth3"]
    done = admin_client.get(f"/flows/actions/{job.pk}/", HTTP_HX_REQUEST="true")
    assert done["HX-Redirect"] == f"/diag/reports/{report.pk}/"
    assert admin_client.get(done["HX-Redirect"]).status_code == 200


def forwarded(interface):
    out = sh("ip", "netns", "exec", AGENT_NETNS, "ip", "-s", "-j", "link", "show", interface)
    return json.loads(out.stdout)[0]["stats64"]["tx"]["bytes"]


def entry_of(flow):
    with Conntrack(AGENT_NETNS) as conntrack:
        return conntrack.get(4, nl.Tuple(flow["orig"]["src"], flow["orig"]["dst"], 6,
                                          flow["orig"]["sport"], flow["orig"]["dport"]))


def test_drop_stops_the_connection(firewall, admin_client):
    """With no TCP pickup mid-stream (nf_conntrack_tcp_loose = 0, the appliance's
    setting) the dropped connection's next segments are invalid: nothing more crosses."""
    nl.sysctl(AGENT_NETNS, "net.netfilter.nf_conntrack_tcp_loose", "0")
    client = iperf3(firewall, 5201, 30, "200M")
    try:
        flow = sampled_flow(5201)
        confirm = admin_client.get("/flows/drop/", posted(flow))
        assert confirm.status_code == 200 and 'id="confirm-drop"' in confirm.content.decode()
        assert entry_of(flow).id == flow["id"]       # the confirmation dropped nothing
        job = wait(action_job(admin_client.post("/flows/drop/", posted(flow))))
        assert job.state == "succeeded", job.error
        assert job.result["tcp_loose"] is False and "connection stops" in job.result["note"]
        assert entry_of(flow) is None
        time.sleep(1)
        before = forwarded("eth3")
        time.sleep(2)
        assert forwarded("eth3") - before < 100_000           # 200 Mbit/s was 50 MB in 2 s
        assert entry_of(flow) is None
    finally:
        stop(client)
    assert AuditEntry.objects.get(action="flow drop").detail["id"] == flow["id"]


def test_drop_with_pickup_mid_stream_says_the_connection_goes_on(firewall, admin_client):
    nl.sysctl(AGENT_NETNS, "net.netfilter.nf_conntrack_tcp_loose", "1")
    client = iperf3(firewall, 5201, 20, "100M")
    try:
        flow = sampled_flow(5201)
        before = entry_of(flow)
        assert before.start_ns                   # the firewall stamps its entries
        job = wait(action_job(admin_client.post("/flows/drop/", posted(flow))))
        assert job.state == "succeeded", job.error
        assert job.result["tcp_loose"] is True and "goes on as a new entry" in job.result["note"]
        again = wait_until(lambda: entry_of(flow), 10, "the connection taken up again")
        # A new entry, not the old one: the kernel's id hashes the entry's address and
        # tuple, and the slab may hand the freed address straight back, so the id can
        # repeat; the start time cannot.
        assert again.start_ns > before.start_ns
        page = admin_client.get(f"/flows/actions/{job.pk}/").content.decode()
        assert 'id="dropped"' in page and "goes on as a new entry" in page
    finally:
        stop(client)


def test_a_stale_row_is_refused_by_the_agent(firewall, admin_client):
    """The page's row went stale: the connection ended. The form's checks pass, the
    agent finds no such connection and does nothing."""
    client = iperf3(firewall, 5201, 3, "50M")
    flow = sampled_flow(5201)
    client.wait(30)
    wait_until(lambda: entry_of(flow) is None or entry_of(flow).tcp_state != "ESTABLISHED", 30,
               "the connection closing")
    gone = dict(flow, id=flow["id"] ^ 0xFFFF)
    job = wait(action_job(admin_client.post("/flows/capture/", posted(gone, seconds=2))))
    assert job.state == "failed" and "no such connection now" in job.error
    assert not Capture.objects.exists()
