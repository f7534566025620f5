"""The flow export page and API (issue 40; docs/MONITORING.md) on real components: the
page (Django test client) and the API save the settings their one check holds, the real
agent applies them - tusk-flowexport in its namespace, sending to nfdump's nfcapd in a
peer's - and the page shows what the exporter sent. And the attacker's side: settings
rows written past the forms (as the database role tusk could), a job with arguments,
the web user at the exporter's directory - the agent refuses, naming the field, and the
exporter that runs stays as it was."""
import json
import os
import signal
import subprocess
from pathlib import Path

import collectors
import pytest
from kit import wait_until
from netns.pcaps import tcp_connect
from tuskweb import PEER_B, errors_of, wait

from accounts import tokens
from accounts.models import AuditEntry
from flows.core import export
from flows.export_jobs import APPLY, WATCH
from flows.models import FlowExportSettings
from jobs import queue
from jobs.models import Job, PeriodicState
from lab.users import WEB_USER

TRACK = """
table inet track {
    chain forward { type filter hook forward priority 0; ct state new accept; }
}
"""


def forge(document):
    """A settings row as the database role tusk could write it, past every form."""
    FlowExportSettings.objects.update_or_create(pk=1, defaults={"document": document})


@pytest.fixture
def collector(peers, tmp_path):
    """nfcapd in peer-b's namespace on PEER_B:4739; its records after it stopped."""
    directory = tmp_path / "nfcapd"
    directory.mkdir()
    proc = subprocess.Popen(["ip", "netns", "exec", peers[1], "nfcapd", "-b", PEER_B, "-p",
                             "4739", "-w", str(directory), "-t", "3600"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_until(lambda: subprocess.run(["ip", "netns", "exec", peers[1], "ss", "-Hlun",
                                       "sport = :4739"], capture_output=True,
                                      text=True).stdout, 10, "nfcapd listening")

    def records():
        proc.send_signal(signal.SIGTERM)
        proc.wait(20)
        return collectors.records(directory)
    yield records
    if proc.poll() is None:
        proc.kill()
        proc.wait()


def test_the_page_refuses_each_field_by_name_and_saves_a_good_one(admin_client):
    response = admin_client.post("/flows/export/", {
        "protocol": "ipfix", "active_timeout": "2", "address_1": "192.0.2.10",
        "port_1": "70000", "address_2": "127.0.0.1", "address_3": "192.0.2.10",
        "port_3": "70000"})
    assert response.status_code == 400
    errors = errors_of(response)
    assert "2 is outside 5-3600" in errors["active_timeout"][0]
    assert "70000 is outside 1-65535" in errors["port_1"][0]
    assert "loopback" in errors["address_2"][0]
    assert not FlowExportSettings.objects.exists() and not Job.objects.exists()
    response = admin_client.post("/flows/export/", {
        "protocol": "netflow9", "active_timeout": "30", "address_1": "192.0.2.10",
        "address_2": "2001:db8::20", "port_2": "9995"})
    assert response.status_code == 302
    saved = FlowExportSettings.objects.get(pk=1).document
    assert saved == {"protocol": "netflow9", "active_timeout": 30, "collectors": [
        {"address": "192.0.2.10", "port": 2055}, {"address": "2001:db8::20", "port": 9995}]}
    job = Job.objects.get(kind=APPLY)
    assert job.args == {}
    assert AuditEntry.objects.filter(action="flow export settings", detail__job=job.pk).exists()
    page = admin_client.get("/flows/export/").content.decode()
    assert 'value="2001:db8::20"' in page and 'value="9995"' in page


def test_a_viewer_sees_the_page_and_cannot_change_it(viewer_client):
    assert viewer_client.get("/flows/export/").status_code == 200
    assert viewer_client.post("/flows/export/", {
        "protocol": "ipfix", "active_timeout": "60", "address_1": "192.0.2.10"}
    ).status_code == 403
    assert not FlowExportSettings.objects.exists()


def test_the_api_sets_it_with_an_admin_token_and_names_what_it_refuses(admin_user, client):
    admin = {"HTTP_AUTHORIZATION": "Bearer " + tokens.create("noc", "admin", admin_user, 1)[1]}
    read = {"HTTP_AUTHORIZATION": "Bearer " + tokens.create("ro", "read", admin_user, 1)[1]}
    body = {"protocol": "ipfix", "active_timeout": 60,
            "collectors": [{"address": "192.0.2.10", "port": 70000}]}
    refused = client.put("/api/v1/flows/export", json.dumps(body),
                         content_type="application/json", **admin)
    assert refused.status_code == 422
    assert {"path": "collectors[0].port", "message": "70000 is outside 1-65535"}.items() <= \
        refused.json()["problems"][0].items()
    assert client.put("/api/v1/flows/export", json.dumps(body), content_type="application/json",
                      **read).status_code == 403
    body["collectors"] = [{"address": "192.0.2.10"}]
    done = client.put("/api/v1/flows/export", json.dumps(body),
                      content_type="application/json", **admin)
    assert done.status_code == 202 and done.json()["job"]["kind"] == APPLY
    assert done.json()["settings"]["collectors"] == [{"address": "192.0.2.10", "port": 4739}]
    shown = client.get("/api/v1/flows/export", **read).json()
    assert shown["collectors"] == [{"address": "192.0.2.10", "port": 4739}]
    assert shown["refused"] == "" and shown["exporter"] is None


def test_the_agent_exports_what_the_page_saved_and_refuses_forged_rows(
        agent, agent_config, netns, peers, collector, admin_client):
    subprocess.run(["ip", "netns", "exec", netns, "nft", "-f", "-"], input=TRACK, text=True,
                   check=True)
    response = admin_client.post("/flows/export/", {
        "protocol": "ipfix", "active_timeout": "5", "address_1": PEER_B})
    assert response.status_code == 302
    job = wait(Job.objects.get(kind=APPLY))
    assert job.state == "succeeded", job.error
    pid = job.result["pid"]
    directory = Path(agent_config).parent / "flowexport"
    conf = directory / export.CONF
    before = conf.read_bytes()
    info = os.stat(directory)
    assert (info.st_uid, info.st_mode & 0o777) == (0, 0o700)
    # the web user cannot put anything where the exporter's file is
    planted = subprocess.run(["runuser", "-u", WEB_USER, "--", "touch",
                              str(directory / "x")], capture_output=True)
    assert planted.returncode != 0 and not (directory / "x").exists()
    # connections through the namespace, exported
    for _ in range(3):
        tcp_connect(peers[0], PEER_B, 5209, timeout=0.5)
    forged = [
        ({"collectors": [{"address": '192.0.2.1", "port": 1}], "x": "', "port": 4739}]},
         "collectors[0].address: "),
        ({"collectors": [{"address": "127.0.0.1"}]}, "collectors[0].address: 127.0.0.1 is "
                                                     "not the address of a collector"),
        ({"collectors": [{"address": PEER_B, "port": "4739; rm -rf /"}]},
         "collectors[0].port: expected a whole number, got str"),
        ({"protocol": "sflow", "collectors": [{"address": PEER_B}]},
         "protocol: 'sflow' is not one of ipfix, netflow9"),
        ({"collectors": [{"address": PEER_B}] * 5}, "collectors: 5 collectors: at most 4"),
        ({"path": "/etc/shadow"}, "path: unknown key"),
    ]
    for document, message in forged:
        forge(document)
        refused = wait(queue.enqueue(APPLY))
        assert refused.state == "failed" and message in refused.error, (document, refused.error)
        assert refused.error.endswith("nothing changed")
        assert conf.read_bytes() == before and os.path.exists(f"/proc/{pid}")
    forge({"protocol": "ipfix", "active_timeout": 5, "collectors": [{"address": PEER_B}]})
    argued = wait(queue.enqueue(APPLY, {"conf": "/etc/shadow"}))
    assert argued.state == "failed" and "takes no arguments" in argued.error
    # the page shows what the agent's watch read of the exporter
    status = wait_until(lambda: (PeriodicState.last_result(WATCH) or {}).get("records"), 30,
                        "the exporter's records in the agent's report")
    assert status and PeriodicState.last_result(WATCH)["running"]
    page = admin_client.get("/flows/export/").content.decode()
    assert "exporting" in page and f"{PEER_B}:4739" in page
    # no collector: the exporter ends (sending what moved first), its files are gone
    forge({"collectors": []})
    off = wait(queue.enqueue(APPLY))
    assert off.state == "succeeded" and not off.result["running"]
    assert not os.path.exists(f"/proc/{pid}") and not conf.exists()
    records = collector()
    assert any(r["dst_port"] == 5209 and r["dst4_addr"] == PEER_B for r in records), records
