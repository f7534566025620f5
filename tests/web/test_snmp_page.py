"""The SNMP page and API (issue 40; docs/MONITORING.md) on real components: the page
(Django test client) refuses each field by name, the real agent applies what it queued -
net-snmp's snmpd in the agent's namespace, asked by snmpget - pending until confirmed, a
passphrase left out kept. And the attacker's side (docs/SECURITY.md): no passphrase or
community in any row the web user reads (the mirror, the job's arguments once the agent
took them, its result), snmp.apply jobs forged past the form (as the database role tusk
could) refused naming the field with snmpd left as it was, and the web user at the
state directory."""
import grp
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from kit import wait_until
from tuskweb import AGENT_NETNS, errors_of, wait

from accounts import tokens
from jobs import queue
from jobs.models import Job, PeriodicState
from lab.users import SNMP_PROBE, SNMP_USER, WEB_USER, grant_search, reach_interpreter
from snmp.agent_jobs import STATUS
from snmp.core import config as snmp_config
from snmp.core.applier import SnmpApplier
from snmp.models import Revision, SnmpState

AUTH, PRIV, COMMUNITY = "auth:phrase-1", "priv:phrase-2", "ro-community-1"
LOCATION = ".1.3.6.1.2.1.1.6.0"
GOOD = {"enabled": "on", "location": "Hall B", "contact": "noc@example.net",
        "allow": "10.98.0.0/16\n2001:db8::/32", "user0_name": "noc", "user0_auth": "SHA-256",
        "user0_auth_passphrase": AUTH, "user0_privacy_passphrase": PRIV,
        "community_name": COMMUNITY, "community_allow": "10.98.1.0/24", "timeout": "600"}


def snmpget(netns, auth=AUTH, oid=LOCATION):
    return subprocess.run(["ip", "netns", "exec", netns, "snmpget", "-v3", "-l", "authPriv",
                           "-u", "noc", "-a", "SHA-256", "-A", auth, "-x", "AES", "-X", PRIV,
                           "-t", "1", "-r", "0", "127.0.0.1", oid], capture_output=True,
                          text=True)


def rows_text():
    """Everything the web user's database holds of SNMP and its jobs."""
    return json.dumps([list(Revision.objects.values()), list(SnmpState.objects.values()),
                       list(Job.objects.values("args", "result", "error", "message"))],
                      default=str)


def test_a_viewer_changes_nothing(viewer_client):
    assert viewer_client.post("/snmp/", GOOD).status_code == 403
    assert viewer_client.get("/snmp/").status_code == 200
    assert not Job.objects.exists()


def test_the_page_refuses_each_field_by_name(admin_client):
    bad = {**GOOD, "location": "Hall\u00e9", "allow": "10.98.0.1/16",
           "user0_auth_passphrase": "short", "user1_name": "bad name!",
           "user1_auth_passphrase": "x" * 9, "user1_privacy_passphrase": "x" * 9,
           "community_allow": "192.0.2.0/24"}
    response = admin_client.post("/snmp/", bad)
    assert response.status_code == 400
    errors = errors_of(response)
    assert "printable ASCII" in errors["location"][0]
    assert "host bits set" in errors["allow"][0]
    assert "at least 8" in errors["user0_auth_passphrase"][0]
    assert "letters, digits" in errors["user1_name"][0]
    assert "must differ" in errors["user1_privacy_passphrase"][0]
    assert "not inside any of snmp.allow" in errors["community_allow"][0]
    new = admin_client.post("/snmp/", {**GOOD, "user0_auth_passphrase": ""})
    assert new.status_code == 302, "the agent says a new user needs it: it has none to keep"


def test_the_api_applies_with_an_admin_token_and_names_what_it_refuses(admin_user, client):
    admin = {"HTTP_AUTHORIZATION": "Bearer " + tokens.create("noc", "admin", admin_user, 1)[1]}
    operate = {"HTTP_AUTHORIZATION": "Bearer " + tokens.create("op", "operate", admin_user,
                                                                1)[1]}
    document = {"snmp": {"enabled": True, "allow": ["10.98.0.0/16"]},
                "user": [{"name": "noc", "auth": "MD5", "auth_passphrase": AUTH,
                          "privacy": "DES", "privacy_passphrase": PRIV}]}
    refused = client.post("/api/v1/snmp/apply", {"document": document},
                          content_type="application/json", **admin)
    assert refused.status_code == 422
    paths = {p["path"] for p in refused.json()["problems"]}
    assert paths == {"user[0].auth", "user[0].privacy"}
    assert client.post("/api/v1/snmp/apply", {"document": document},
                       content_type="application/json", **operate).status_code == 403
    document["user"][0].update(auth="SHA-512", privacy="AES")
    accepted = client.post("/api/v1/snmp/apply", {"document": document},
                           content_type="application/json", **admin)
    assert accepted.status_code == 202
    got = client.get("/api/v1/snmp", **operate).json()
    assert got["document"]["snmp"]["enabled"] is False and got["running"] is None


@pytest.fixture
def snmp_reach(agent_config, system_users, netns):
    """snmpd's user runs this interpreter and reaches the agent's state directory, as in
    make run (/var/tmp/tusk-lab/NAME)."""
    problem = reach_interpreter(sys.executable, SNMP_USER, SNMP_PROBE)
    if problem:
        pytest.fail(problem)
    here = Path(agent_config).parent
    for parent in (*reversed(here.parents), here):
        grant_search(parent, SNMP_USER, "so that snmpd's user reaches the counters")
    yield
    # snmpd daemonizes: it would outlive the namespace's deletion
    applier = SnmpApplier(str(here / "snmp"), netns=AGENT_NETNS)
    if applier.store.pending():
        applier.cancel()
    applier.put(snmp_config.OFF)


def test_the_agent_applies_confirms_keeps_secrets_and_refuses_forged_jobs(
        snmp_reach, agent, agent_config, netns, admin_client):
    subprocess.run(["ip", "-n", netns, "link", "set", "lo", "up"], check=True)
    response = admin_client.post("/snmp/", GOOD)
    assert response.status_code == 302
    job = wait(Job.objects.get(kind="snmp.apply"))
    assert job.state == "succeeded", job.error
    assert "Hall B" in snmpget(netns).stdout
    assert admin_client.get("/snmp/").status_code == 200
    wait_until(lambda: SnmpState.current() and SnmpState.current().pending, 10, "mirror")
    confirm = admin_client.post("/snmp/confirm/")
    assert confirm.status_code == 302
    assert wait(Job.objects.get(kind="snmp.confirm")).state == "succeeded"
    # the counters for TUSK-MIB, and the status for the page
    wait_until(lambda: (PeriodicState.objects.filter(name=STATUS).first() or
                        PeriodicState()).result.get("counters_at"), 30, "counters written")
    page = admin_client.get("/snmp/").content.decode()
    assert "noc (SHA-256, AES)" in page and "running" in page
    # a change that leaves the passphrases and the community out keeps them
    kept = {**GOOD, "location": "Hall C", "user0_auth_passphrase": "",
            "user0_privacy_passphrase": "", "community_name": ""}
    assert admin_client.post("/snmp/", kept).status_code == 302
    assert wait(Job.objects.filter(kind="snmp.apply").latest("pk")).state == "succeeded"
    assert "Hall C" in snmpget(netns).stdout
    assert admin_client.post("/snmp/cancel/").status_code == 302
    assert wait(Job.objects.get(kind="snmp.cancel")).state == "succeeded"
    assert "Hall B" in snmpget(netns).stdout
    # no secret in any row the web user reads
    Revision.objects.all()   # mirrored by the jobs above
    text = rows_text()
    for secret in (AUTH, PRIV, COMMUNITY):
        assert secret not in text, secret
    # jobs forged past the form: refused by name, snmpd as it was
    state_dir = Path(agent_config).parent / "snmp"
    conf = state_dir / "run" / "snmpd.conf"
    before = conf.read_bytes()
    forged = [
        ({"document": {"snmp": {"enabled": True, "allow": ["10.98.0.0/16"],
                                "location": "x\nrocommunity public"}, "user": []}},
         "snmp.location: has '\\n'"),
        ({"document": {"snmp": {"enabled": True, "allow": ["10.98.0.0/16"]},
                       "user": [{"name": "noc", "auth_passphrase": 'a" rwuser x "b1234',
                                 "privacy_passphrase": PRIV}]}},
         "user[0].auth_passphrase: has a character other than"),
        ({"document": {"snmp": {"enabled": True, "allow": ["10.98.0.0/16"]},
                       "user": [{"name": "evil", "privacy_passphrase": PRIV}]}},
         "user[0].auth_passphrase: missing: a new user (evil) needs its passphrase"),
        ({"document": {"snmp": {"enabled": True, "allow": ["0.0.0.0/0"]},
                       "community": {"allow": ["10.0.0.0/8"], "name": "public12"}},
          "path": "/etc/shadow"}, "path: unknown argument"),
        ({"document": {"snmp": {"enabled": True, "allow": ["127.0.0.0/8"]},
                       "user": [{"name": "noc"}]}}, "snmp.allow[0]: 127.0.0.0/8 is loopback"),
        ({"document": {"snmp": {"enabled": True, "allow": ["10.98.0.0/16"]},
                       "user": [{"name": "noc"}]}, "timeout": 5}, "confirm_timeout: 5 s"),
    ]
    for args, message in forged:
        refused = wait(queue.enqueue("snmp.apply", args))
        assert refused.state == "failed" and message in refused.error, (args, refused.error)
        assert conf.read_bytes() == before
        assert "Hall B" in snmpget(netns).stdout
    # the web user can neither read nor plant in the state directory
    for path in (state_dir / "snmp.toml", conf):
        read = subprocess.run(["runuser", "-u", WEB_USER, "--", "cat", str(path)],
                              capture_output=True, text=True)
        assert read.returncode != 0 and AUTH not in read.stdout
    planted = subprocess.run(["runuser", "-u", WEB_USER, "--", "touch",
                              str(state_dir / "run" / "x")], capture_output=True)
    assert planted.returncode != 0 and not os.path.exists(state_dir / "run" / "x")


@pytest.mark.django_db
def test_the_counters_take_the_rows_values_only_when_they_are_numbers_and_names():
    """What the agent writes for TUSK-MIB (snmp/counters.py) from the rows /metrics reads,
    rows the web user could forge too: a good value taken, a bad one left out - never a
    row that breaks the file's shape - and the file root's, group tusk-snmp, 0640."""
    from datetime import datetime, timezone

    from django.conf import settings

    from dashboard.models import Sample
    from policy.models import READING_PK, CounterReading
    from snmp import counters
    from snmp.core import mib
    now = datetime.now(timezone.utc)
    Sample.objects.create(taken=now, interfaces={}, conntrack_count=42, conntrack_max=-5,
                          seqadj={"sack_blocks_translated": 7, "icmp_quotes_dropped": "x",
                                  "invented": 3},
                          loss={"nic.rx_missed@eth0": 3, "nic.rx_missed@bad name": 4,
                                "softnet.dropped": 2, "no.such@eth0": 9,
                                "nic.rx_crc@eth1": "12"})
    CounterReading.objects.create(pk=READING_PK, read_at=now, observed_since=now,
                                  table_loaded=True, counters={
                                      "class_bulk": [10, 20000, 0], "class_bad\nname": [1, 1, 0],
                                      "class_neg": [-1, 5, 0], "default_deny": [3, 180, 0],
                                      "class_huge": [2 ** 64, 1, 0], "class_short": [1, 2]})
    found = counters.collect(settings.TUSK, now=1000.0)
    assert found["conntrack_entries"] == 42 and found["conntrack_limit"] is None
    assert found["seqadj"] == {"sack_blocks_translated": 7, "icmp_quotes_dropped": None}
    assert found["classes"] == [["bulk", 10, 20000], ["huge", None, 1], ["neg", None, 5]]
    assert found["drops"] == {"default_deny": [3, 180]}
    assert found["loss"] == [["nic.rx_missed", "nic.rx_missed@eth0", 3],
                             ["softnet.dropped", "softnet.dropped", 2]]
    rows = mib.table(found, now=1000.0)
    assert all(kind and value is not None for _, kind, value in rows)
    path = os.path.join(settings.TUSK.state_dir, "..", "snmp-counters-test.json")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    gid = grp.getgrnam(SNMP_USER).gr_gid
    counters.write(path, found, gid)
    info = os.stat(path)
    assert (info.st_uid, info.st_gid, info.st_mode & 0o777) == (0, gid, 0o640)
    with open(path, encoding="utf-8") as handle:
        assert json.loads(handle.read()) == json.loads(mib.snapshot_text(found))
    os.unlink(path)
