"""Captures and reports through the web UI with the real agent: dumpcap runs in the
test's namespace, which routes between two peer namespaces of its own (traffic only
ever between them), and the analyser runs as an agent job."""
import os
import pwd
import re
import stat
import subprocess
from pathlib import Path

import pytest
from django.conf import settings
from kit import wait_until
from simflow import Sim, write_pcap  # the diag tier's simulator (tests/diag)
from tuskweb import AGENT_NETNS, wait
from tuskweb import PEER_A as A
from tuskweb import PEER_B as B

from accounts.models import AuditEntry
from dashboard.models import Sample
from diag.files import Directory
from diag.models import Capture, Report
from jobs import queue
from jobs.models import Job


def sh(*argv, check=True):
    return subprocess.run(argv, capture_output=True, text=True, check=check)


def sampled(*names, seconds=20):
    """Waits until the agent's statistics know these interfaces (the form offers them)."""
    def interfaces():
        sample = Sample.objects.first()
        return set(names) <= set(sample.interfaces) and sample.interfaces if sample else None
    wait_until(interfaces, seconds, f"the agent sampling {names}")


def start(client, **fields):
    data = {"interfaces": ["eth1", "eth3"], "filter": "", "max_packets": 100000, "max_mb": 10,
            "max_seconds": 60, "snaplen": 256, "ring_files": 0, "format": "pcapng", **fields}
    return client.post("/diag/start/", data)


def latest():
    return Capture.objects.order_by("-id").first()


def finished(cap, seconds=60):
    wait(cap.job, seconds)
    cap.refresh_from_db()
    return cap


def running(cap, seconds=20):
    """cap once it runs and dumpcap has its sockets open: one per interface of every
    running capture (the test's traffic must not start before)."""
    def started():
        cap.refresh_from_db()
        return cap.state == "running"
    wait_until(started, seconds, lambda: f"{cap} running ({cap.job and cap.job.message})")

    def listening():
        wanted = sum(len(c.spec["interfaces"]) for c in Capture.objects.filter(state="running"))
        return len(packet_sockets(AGENT_NETNS)) >= wanted
    wait_until(listening, seconds, "dumpcap's packet sockets")
    return cap


def packet_sockets(netns):
    lines = sh("ip", "netns", "exec", netns, "cat", "/proc/net/packet").stdout.splitlines()
    return lines[1:]


def traffic(peers, seconds=3):
    sh("ip", "netns", "exec", peers[1], "iperf3", "-s", "-1", "-D", "-B", B)
    wait_until(lambda: sh("ip", "netns", "exec", peers[1], "ss", "-Hltn",
                          "sport = :5201").stdout, 10, "iperf3 listening")
    return subprocess.Popen(["ip", "netns", "exec", peers[0], "iperf3", "-c", B, "-t",
                             str(seconds), "-b", "200M"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)


def stored(cap):
    """The capture's files in the capture directory (named from its id)."""
    with Directory(settings.TUSK.capture_dir) as shared:
        return [Path(settings.TUSK.capture_dir) / name for name in shared.names(cap.pk)]


def capinfos(path):
    return sh("capinfos", "-c", "-I", str(path)).stdout


def packets(path):
    """What Wireshark reads from a file: all its sections' packets."""
    return int(re.search(r"Number of packets:\s+(\d+)", sh("capinfos", "-c", "-M",
                                                            str(path)).stdout).group(1))


def test_capture_both_sides_to_a_packet_limit_download_and_report(agent, netns, router,
                                                                   admin_client):
    sampled("eth1", "eth3")
    assert packet_sockets(netns) == []             # nothing captures unless asked
    response = start(admin_client, filter="tcp port 5201", max_packets=2000)
    assert response.status_code == 302, response.content.decode()[-2000:]
    cap = running(latest())
    assert len(packet_sockets(netns)) >= 2         # ... and now one per interface
    client = traffic(router)
    cap = finished(cap)
    client.wait(30)
    assert (cap.state, cap.reason, cap.packets) == ("done", "packets", 2000), cap.error
    assert packet_sockets(netns) == []
    [path] = stored(cap)
    assert path.name == f"capture-{cap.pk}.pcapng"
    found = os.stat(path)      # the agent's, readable by the web user's group only
    assert (found.st_uid, found.st_gid, stat.S_IMODE(found.st_mode)) == \
        (0, pwd.getpwnam("tusk").pw_gid, 0o640)
    info = capinfos(path)
    assert "Number of packets:   2000" in info
    assert "Name = eth1" in info and "Name = eth3" in info

    response = admin_client.get(f"/diag/{cap.pk}/download/")
    assert response["Content-Type"] == "application/x-pcapng"
    stamp = cap.started_at.strftime("%Y%m%dT%H%M%SZ")
    assert response["Content-Disposition"] == \
        f'attachment; filename="tusk-capture-{cap.pk}-{stamp}.pcapng"'
    body = b"".join(response.streaming_content)
    assert body[:4] == b"\x0a\x0d\x0d\x0a" and body == path.read_bytes()

    assert admin_client.post(f"/diag/{cap.pk}/analyze/").status_code == 302
    job = wait(Job.objects.filter(kind="diag.analyze").first(), 120)
    assert job.state == "succeeded", job.error
    report = Report.objects.get(capture=cap)
    flow = report.result["flows"][0]
    assert flow["server"] == f"{B}:5201" and flow["client"].startswith(A + ":")
    assert [p["interface"] for p in flow["points"]] == ["eth1", "eth3"]
    assert flow["firewall"]["changes"] == []       # a plain router changes nothing
    page = admin_client.get(f"/diag/reports/{report.pk}/").content.decode()
    assert f"{flow['client']} → {B}:5201" in page
    assert 'data-chart="throughput"' in page and 'data-chart="seq"' in page
    assert flow["verdict"]["text"] in page.replace("&#x27;", "'")
    listing = admin_client.get("/diag/").content.decode()
    assert f'href="/diag/reports/{report.pk}/"' in listing


def test_captures_stop_at_their_duration_and_on_request(agent, netns, router, admin_client):
    sampled("eth1", "eth3")
    start(admin_client, interfaces=["eth3"], max_seconds=1, format="pcap")
    quick = finished(latest(), 30)
    assert (quick.state, quick.reason) == ("done", "duration")
    assert admin_client.get(f"/diag/{quick.pk}/download/")["Content-Type"] == \
        "application/vnd.tcpdump.pcap"

    start(admin_client, max_seconds=600)
    cap = running(latest())
    assert admin_client.post(f"/diag/{cap.pk}/stop/").status_code == 302
    cap = finished(cap, 30)                    # long before its 600 s
    assert (cap.state, cap.reason) == ("done", "request")
    assert "Name = eth1" in capinfos(stored(cap)[0])   # a complete, readable file
    assert AuditEntry.objects.filter(action="capture stop", target=f"capture {cap.pk}").exists()


@pytest.mark.parametrize("fields, field, message", [
    ({"interfaces": ["eth9"]}, "interfaces", "Select a valid choice"),
    ({"filter": "tcp port"}, "filter", "syntax error"),
    ({"filter": "ip6 and tcp[13] & 2 != 0"}, "filter", "expression rejects all packets"),
    ({"max_packets": 0}, "max_packets", "greater than or equal to 1"),
    ({"snaplen": 10}, "snaplen", "greater than or equal to 64"),
    ({"format": "pcap"}, "format", "a pcap file holds one interface"),
    ({"max_mb": 51}, "max_mb", "more than the capture storage quota (50 MB)"),
    ({"ring_files": 8, "max_mb": 10}, "ring_files", "would be under 2 MB each"),
])
def test_bad_captures_are_refused_by_field_and_queue_nothing(agent, netns, router, admin_client,
                                                             fields, field, message):
    sampled("eth1", "eth3")
    response = start(admin_client, **fields)
    assert response.status_code == 400
    errors = response.context["form"].errors
    assert field in errors and message in str(errors[field]), errors
    assert f'data-field="{field}"' in response.content.decode()
    assert not Capture.objects.exists() and not Job.objects.exists()


def test_quota_deletes_the_oldest_captures_first(agent, netns, router, admin_client, tmp_path):
    sampled("eth1", "eth3")
    olds = []
    for size in (30, 15):   # MB, sparse files: the quota counts their length
        old = Capture.objects.create(spec={"interfaces": ["eth1"]}, state="done",
                                     bytes=size * 1_000_000)
        with open(tmp_path / "captures" / f"capture-{old.pk}.pcapng", "wb") as handle:
            handle.truncate(size * 1_000_000)
        olds.append(old)
    gone = stored(olds[0])
    start(admin_client, max_mb=20, max_seconds=1)
    cap = finished(latest())
    assert cap.state == "done", cap.error
    assert not Capture.objects.filter(pk=olds[0].pk).exists()
    assert gone and not any(path.exists() for path in gone)
    assert Capture.objects.filter(pk=olds[1].pk).exists()      # 15 + 20 <= 50: kept
    assert cap.job.result["deleted"] == [olds[0].pk]
    assert AuditEntry.objects.filter(action="capture deleted", target=f"capture {olds[0].pk}",
                                     detail__why="storage quota").exists()

    start(admin_client, interfaces=["eth1"], max_mb=45, max_seconds=600)
    holder = running(latest())                 # it may grow to 45 MB: the 15 MB one went
    assert not Capture.objects.filter(pk=olds[1].pk).exists()
    start(admin_client, interfaces=["eth3"], max_mb=10, max_seconds=1)
    refused = finished(latest())
    assert (refused.state, stored(refused)) == ("failed", [])
    assert "the storage quota (50 MB) is held by running captures" in refused.error
    assert Capture.objects.filter(pk=cap.pk).exists()      # nothing deleted in vain
    admin_client.post(f"/diag/{holder.pk}/stop/")
    assert finished(holder).reason == "request"


def test_viewers_see_but_cannot_capture_stop_delete_or_download(agent, netns, router,
                                                                viewer_client, tmp_path):
    cap = Capture.objects.create(spec={"interfaces": ["eth1"]}, state="done")
    (tmp_path / "captures" / f"capture-{cap.pk}.pcapng").write_bytes(b"\x0a\x0d\x0d\x0a")
    assert start(viewer_client).status_code == 403
    for action in ("stop", "delete", "analyze"):
        assert viewer_client.post(f"/diag/{cap.pk}/{action}/").status_code == 403
    assert viewer_client.get(f"/diag/{cap.pk}/download/").status_code == 403
    assert viewer_client.get("/diag/").status_code == 200
    assert Capture.objects.count() == 1 and not Job.objects.exists()


def test_ordinary_jobs_run_while_every_capture_slot_is_busy(agent, netns, router, admin_client):
    sampled("eth1", "eth3")
    for _ in range(5):   # four capture slots, one more waits for a slot
        start(admin_client, interfaces=["eth1"], max_seconds=600)
    caps = list(Capture.objects.order_by("id"))
    for cap in caps[:4]:
        running(cap)
    plan = queue.enqueue("tuning.plan", {"profile": "throughput"})
    assert wait(plan, 60).state == "succeeded", plan.error
    caps[4].refresh_from_db()
    assert caps[4].state == "queued"            # the fifth capture waits for a slot
    assert all(Capture.objects.get(pk=c.pk).state == "running" for c in caps[:4])
    admin_client.post(f"/diag/{caps[4].pk}/stop/")   # stopped before it ever ran
    for cap in caps[:4]:
        admin_client.post(f"/diag/{cap.pk}/stop/")
    for cap in caps:
        assert finished(cap, 30).reason == "request"
    assert stored(caps[4]) == [] and caps[4].started_at is None


def test_an_uploaded_pcap_is_analysed_and_junk_is_refused(agent, admin_client, tmp_path):
    sim = Sim(segments=800, rtt=0.04, bandwidth=1e9, server={"wscale": None}).run()
    path = write_pcap(tmp_path / "slow.pcap", [p for p in sim.packets if p[1] == "outside"])
    with open(path, "rb") as handle:
        assert admin_client.post("/diag/upload/", {"file": handle}).status_code == 302
    cap = latest()
    assert (cap.source, cap.name, cap.state) == ("upload", "slow.pcap", "done")
    job = wait(Job.objects.get(kind="diag.analyze"), 60)
    assert job.state == "succeeded", job.error
    report = Report.objects.get(capture=cap)
    assert report.result["flows"][0]["verdict"]["kind"] == "window-limited"
    page = admin_client.get(f"/diag/reports/{report.pk}/").content.decode()
    assert "window-limited: server window 64 KiB at 40 ms caps this flow at 13.1 Mbit/s" in page

    junk = tmp_path / "notes.pcap"
    junk.write_text("not a capture")
    with open(junk, "rb") as handle:
        response = admin_client.post("/diag/upload/", {"file": handle})
    assert response.status_code == 400
    assert "not a pcap or pcapng file (it starts with 6e6f7420)" in \
        str(response.context["upload"].errors["file"])
    assert Capture.objects.count() == 1


def test_a_ring_buffer_keeps_the_newest_files_and_downloads_as_one_pcapng(agent, netns, router,
                                                                         admin_client, tmp_path):
    sampled("eth1", "eth3")
    start(admin_client, interfaces=["eth1"], snaplen=262144, max_mb=4, ring_files=2,
          max_seconds=4, filter="tcp port 5201")
    cap = running(latest())
    client = traffic(router, seconds=3)
    cap = finished(cap)
    client.wait(30)
    assert (cap.state, cap.reason) == ("done", "duration"), cap.error
    files = stored(cap)                          # older files were overwritten
    assert [f.name for f in files] == [f"capture-{cap.pk}-1.pcapng", f"capture-{cap.pk}-2.pcapng"]
    assert all(os.path.getsize(f) <= 2_100_000 for f in files)
    body = b"".join(admin_client.get(f"/diag/{cap.pk}/download/").streaming_content)
    assert body == b"".join(f.read_bytes() for f in files)
    joined = tmp_path / "joined.pcapng"
    joined.write_bytes(body)
    assert packets(joined) == sum(packets(f) for f in files) > 0   # one valid file


def test_a_killed_agent_leaves_a_complete_file_and_a_failed_capture(agent, netns, router,
                                                                    admin_client):
    sampled("eth1", "eth3")
    # the filter lets nothing through once iperf3 is done: dumpcap, which otherwise
    # ends at the first packet it fails to report on the dead agent's pipe, must be
    # told (PR_SET_PDEATHSIG), and closes its file then
    start(admin_client, interfaces=["eth1"], max_seconds=600, filter="tcp port 5201")
    cap = running(latest())
    client = traffic(router, seconds=2)
    client.wait(30)
    wait_until(lambda: not sh("ip", "netns", "pids", router[1]).stdout, 10,
               "the iperf3 server ending after the last FIN")
    agent.kill()
    wait_until(lambda: not packet_sockets(netns), 10, "dumpcap ending with the agent")
    agent.start()
    cap = finished(cap, 30)
    assert cap.state == "failed" and "the agent stopped during this capture" in cap.error
    assert "the agent" in cap.job.error and "stopped while running this job" in cap.job.error
    body = b"".join(admin_client.get(f"/diag/{cap.pk}/download/").streaming_content)
    [path] = stored(cap)
    assert body == path.read_bytes() and packets(path) > 100
    assert cap.bytes == len(body)


def test_uploads_keep_to_their_size_limit_and_the_quota(agent, admin_client, tmp_path):
    big = tmp_path / "big.pcap"
    with open(big, "wb") as handle:
        handle.write(bytes.fromhex("d4c3b2a1"))
        handle.truncate(5_000_001)
    with open(big, "rb") as handle:
        response = admin_client.post("/diag/upload/", {"file": handle})
    assert response.status_code == 400
    assert "5000001 bytes: more than the 5 MB an upload may have" in \
        str(response.context["upload"].errors["file"])
    assert 'data-field="file"' in response.content.decode()
    assert not Capture.objects.exists() and not Job.objects.exists()

    gone = Capture.objects.create(spec={"interfaces": ["eth1"]}, state="done")
    old = tmp_path / "captures" / f"capture-{gone.pk}.pcapng"
    with open(old, "wb") as handle:
        handle.truncate(48_000_000)
    sim = Sim(segments=2000, rtt=0.01, bandwidth=1e9).run()
    path = write_pcap(tmp_path / "flow.pcap", [p for p in sim.packets if p[1] == "outside"])
    assert 2_000_000 < os.path.getsize(path) < 5_000_000
    with open(path, "rb") as handle:
        assert admin_client.post("/diag/upload/", {"file": handle}).status_code == 302
    assert not Capture.objects.filter(pk=gone.pk).exists() and not old.exists()
    upload = latest()
    assert stored(upload) == [tmp_path / "captures" / f"upload-{upload.pk}.pcap"]
    assert stored(upload)[0].read_bytes() == Path(path).read_bytes()
    assert AuditEntry.objects.filter(action="capture deleted", username="alice").exists()


def test_a_report_from_a_hostile_capture_is_escaped(admin_client):
    evil = '<script>alert(1)</script>'
    direction = {"packets": 1, "data_packets": 1, "bytes": 1, "new_bytes": 1,
                 "throughput_bps": 8.0, "retransmissions": {"needed": 0, "spurious": 0},
                 "reordered": 0, "sack": {"blocks": 0, "outside": 0, "dsack": 0},
                 "rtt_ms": None, "window": None, "window_limit_bps": None,
                 "series": {"throughput": [[0, 8.0], [1, 16.0]], "seq": [[0, 0], [1, 1]],
                            "retransmits": [[1, 1]], "bucket_s": 1}}
    options = {"mss": 1460, "wscale": 7, "sack_permitted": True, "timestamps": True}
    result = {"version": 1, "packets": 2, "tcp_packets": 2, "flows_total": 1,
              "warnings": [evil], "files": [{"name": evil, "format": "pcapng", "packets": 2,
                                              "interfaces": [evil], "error": None}],
              "flows": [{"id": "1", "client": evil, "server": "10.0.0.2:80", "start": 0.0,
                         "duration": 1.0, "bytes": {"c2s": 1, "s2c": 1},
                         "throughput_bps": {"c2s": 8.0, "s2c": 8.0},
                         "verdict": {"kind": evil, "severity": "ok", "text": evil},
                         "findings": [{"kind": "x", "severity": "info", "text": evil}],
                         "handshake": {"client": options, "server": options, "rtt_ms": 1.0},
                         "points": [{"interface": evil, "file": evil, "packets": 2,
                                     "handshake": {"client": options, "server": None,
                                                   "rtt_ms": None}}],
                         "firewall": {"ingress": evil, "egress": evil, "changes": [
                             {"kind": "mss", "direction": "c2s", "text": evil}]},
                         "directions": {"c2s": direction, "s2c": direction}}]}
    cap = Capture.objects.create(source="upload", name="x.pcapng", state="done")
    report = Report.objects.create(capture=cap, result=result)
    page = admin_client.get(f"/diag/reports/{report.pk}/").content.decode()
    assert "<script>alert" not in page
    assert page.count("&lt;script&gt;alert(1)&lt;/script&gt;") >= 9
    assert 'data-chart="throughput"' in page and 'class="mark"' in page


def test_a_capture_through_the_api_is_started_downloaded_and_reported(agent, netns, router,
                                                                      admin_user):
    """An operate token: start with limits (a bad one refused by name), the capture's
    packets downloaded as pcapng, its health report made and read - the page's checks
    and files, through the API."""
    from django.test import Client

    from accounts import tokens
    token = {"HTTP_AUTHORIZATION": "Bearer " + tokens.create("ids", "operate", admin_user,
                                                              1)[1]}
    client = Client()
    sampled("eth1", "eth3")
    refused = client.post("/api/v1/captures", {"interfaces": ["eth1", "eth9"],
                                               "filter": "tcp port"},
                          content_type="application/json", **token)
    assert refused.status_code == 422
    assert {p["path"] for p in refused.json()["problems"]} >= {"interfaces", "filter"}
    started = client.post("/api/v1/captures", {"interfaces": ["eth1", "eth3"],
                                               "filter": "tcp port 5201",
                                               "max_packets": 1500, "max_mb": 10},
                          content_type="application/json", **token)
    assert started.status_code == 202, started.content
    cap = running(Capture.objects.get(pk=started.json()["id"]))
    traffic(router).wait(30)
    cap = finished(cap)
    shown = client.get(started["Location"], **token).json()
    assert (shown["state"], shown["reason"], shown["packets"]) == ("done", "packets", 1500)
    download = client.get(f"/api/v1/captures/{cap.pk}/download", **token)
    assert download.status_code == 200 and download["Content-Type"] == "application/x-pcapng"
    assert b"".join(download.streaming_content)[:4] == b"\n\r\r\n"   # a pcapng section
    job = client.post(f"/api/v1/captures/{cap.pk}/analyze", **token)
    assert job.status_code == 202
    wait(Job.objects.get(pk=job.json()["id"]), 120)
    report = client.get(f"/api/v1/captures/{cap.pk}", **token).json()["report"]
    found = client.get(f"/api/v1/reports/{report}", **token).json()
    assert found["capture"] == cap.pk and found["result"]["flows"]
    assert client.delete(f"/api/v1/captures/{cap.pk}", **token).status_code == 204
    assert not stored(cap)
    assert AuditEntry.objects.filter(action="capture start", token="ids").exists()
