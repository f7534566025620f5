"""Flows jobs forged by someone who controls the web process: job rows written straight
into the database with the web's role (the ORM), past the forms. The real agent checks
every argument again with the form's own code (flows/core/flowref.py) and refuses naming
the field; nothing is captured (no Capture row, no file, no packet socket) and nothing is
deleted from the connection table. The connections are real kernel entries in the
agent's namespace, made over ctnetlink."""
import os
import time

import pytest
from flowsample import flow_sample
from test_captures import packet_sockets
from test_metrics import make_token, scrape
from tuskweb import AGENT_NETNS, wait

from diag.models import Capture
from flows.agent_jobs import SAMPLE
from flows.core import ctnetlink as nl
from flows.core.conntrack import Conntrack
from flows.models import FlowSettings
from jobs import queue
from jobs.models import Job, PeriodicState

REAL = nl.Tuple("10.98.1.2", "10.98.2.2", 6, 40000, 5201)
OTHER = nl.Tuple("10.98.1.2", "10.98.2.2", 6, 40001, 5201)


@pytest.fixture
def table(agent, router):
    """Two established connections in the agent's namespace: {tuple: id}."""
    with Conntrack(AGENT_NETNS) as conntrack:
        conntrack.create(b"".join(nl.new_entry(conntrack.next_seq(), t) for t in (REAL, OTHER)))
        return {t: conntrack.get(4, t).id for t in (REAL, OTHER)}


def entries():
    with Conntrack(AGENT_NETNS) as conntrack:
        return {(e.orig, e.id) for e in conntrack.entries()}


def flow(ident, **changed):
    return {"id": ident, "family": 4, "proto": 6, "src": REAL.src, "dst": REAL.dst,
            "sport": REAL.sport, "dport": REAL.dport, "zone": 0, **changed}


def refused(kind, args):
    job = wait(queue.enqueue(kind, args), 60)
    assert job.state == "failed", job.result
    return job


def nothing_captured(agent_config):
    assert not Capture.objects.exists()
    assert os.listdir(agent_config.parent / "captures") == []
    assert packet_sockets(AGENT_NETNS) == []


BAD = [
    ("the arguments as a list", lambda i: ["flow"], "the job's arguments must be a table"),
    ("the flow as text", lambda i: {"flow": "10.98.1.2 40000 10.98.2.2 5201"},
     "flow: must be a table of id, family"),
    ("no flow", lambda i: {}, "flow: missing"),
    ("a filter of the row's own", lambda i: {"flow": flow(i), "filter": "tcp"},
     "filter: unknown argument"),
    ("interfaces of the row's own", lambda i: {"flow": flow(i), "interfaces": ["eth1", "lo"]},
     "interfaces: unknown argument"),
    ("a path", lambda i: {"flow": flow(i), "path": "/etc/shadow"}, "path: unknown argument"),
    ("a field the flow has not", lambda i: {"flow": flow(i, filter="host 1.2.3.4")},
     "flow.filter: unknown field"),
    ("an address that is not one", lambda i: {"flow": flow(i, src="10.98.1.2 or port 22")},
     "flow.src: must be an IPv4 or IPv6 address"),
    ("an IPv6 address for IPv4", lambda i: {"flow": flow(i, dst="fd00::1")},
     "flow.dst: fd00::1 is not an IPv4 address"),
    ("a family that is none", lambda i: {"flow": flow(i, family=5)}, "flow.family: must be 4"),
    ("ICMP", lambda i: {"flow": flow(i, proto=1)},
     "flow.proto: must be the number of a protocol with ports"),
    ("a port out of range", lambda i: {"flow": flow(i, sport=70000)},
     "flow.sport: must be a port"),
    ("the id as text", lambda i: {"flow": flow(str(i))}, "flow.id: must be a conntrack id"),
    ("the id as a boolean", lambda i: {"flow": flow(True)}, "flow.id: must be a conntrack id"),
    ("a negative zone", lambda i: {"flow": flow(i, zone=-1)}, "flow.zone: must be a conntrack"),
    ("a missing port", lambda i: {"flow": {k: v for k, v in flow(i).items() if k != "dport"}},
     "flow.dport: missing"),
]
BAD_CAPTURE = BAD + [
    ("a capture of a day", lambda i: {"flow": flow(i), "seconds": 86400},
     "seconds: must be a whole number from 1 to 600"),
    ("no time at all", lambda i: {"flow": flow(i), "seconds": 0}, "seconds: must be a whole"),
    ("the time as text", lambda i: {"flow": flow(i), "seconds": "10"}, "seconds: must be a whole"),
    ("analyze as text", lambda i: {"flow": flow(i), "analyze": "yes"},
     "analyze: must be true or false"),
]


@pytest.mark.parametrize("what,args,message", BAD_CAPTURE, ids=[b[0] for b in BAD_CAPTURE])
def test_a_forged_capture_is_refused_by_field_and_captures_nothing(table, agent_config, what,
                                                                    args, message):
    job = refused("flows.capture", args(table[REAL]))
    assert message in job.error and "nothing done" in job.error, job.error
    nothing_captured(agent_config)


@pytest.mark.parametrize("what,args,message", BAD, ids=[b[0] for b in BAD])
def test_a_forged_drop_is_refused_by_field_and_deletes_nothing(table, what, args, message):
    before = entries()
    job = refused("flows.drop", args(table[REAL]))
    assert message in job.error and "nothing done" in job.error, job.error
    assert entries() == before


def test_a_drop_under_another_id_deletes_nothing(table):
    """The tuple of a real connection with the id of another (or of one that ended): the
    agent compares the kernel's id and deletes nothing."""
    before = entries()
    for ident in (table[OTHER], table[REAL] ^ 1, 0):
        job = refused("flows.drop", {"flow": flow(ident)})
        assert "no such connection now" in job.error
    assert entries() == before


def test_a_capture_under_another_id_or_tuple_captures_nothing(table, agent_config):
    for forged in (flow(table[OTHER]), flow(table[REAL], sport=40002),
                   flow(table[REAL], src="10.98.1.9")):
        job = refused("flows.capture", {"flow": forged, "seconds": 1})
        assert "no such connection now" in job.error
    nothing_captured(agent_config)


def test_a_forged_drop_of_a_real_connection_deletes_that_one_only(table):
    """What an admin may do through the page, a forged row may do too - no more."""
    job = wait(queue.enqueue("flows.drop", {"flow": flow(table[REAL])}), 60)
    assert job.state == "succeeded", job.error
    assert entries() == {(OTHER, table[OTHER])}


def test_a_forged_capture_takes_its_filter_and_interfaces_from_the_kernel(table, agent_config):
    """A valid row of a real connection: the capture's filter is the kernel entry's tuple
    and its interfaces the routes to both ends, within the job's limits."""
    job = wait(queue.enqueue("flows.capture", {"flow": flow(table[REAL]), "seconds": 1}), 60)
    assert job.state == "succeeded", job.error
    [cap] = Capture.objects.all()
    assert cap.spec["interfaces"] == ["eth1", "eth3"]
    assert cap.spec["max_seconds"] == 1 and cap.spec["max_mb"] <= 50      # the agent's quota
    assert cap.spec["filter"] == (
        "(tcp and src host 10.98.1.2 and src port 40000 and dst host 10.98.2.2 and dst port 5201)"
        " or (tcp and src host 10.98.2.2 and src port 5201 and dst host 10.98.1.2 and dst port "
        "40000)")


def test_forged_settings_do_not_lengthen_a_capture(db, admin_client):
    """Settings written past their form: the page still draws, and a capture length out
    of range is refused by the form before any job exists."""
    FlowSettings.objects.create(pk=1, elephant_mbps=0, rows=30000, capture_seconds=30000)
    assert admin_client.get("/flows/").status_code == 200
    response = admin_client.post("/flows/capture/", {**flow(1), "seconds": 30000})
    assert response.status_code == 400
    assert "seconds: must be a whole number from 1 to 600" in response.content.decode()
    assert not Job.objects.exists()


FORGED_SAMPLES = [
    ["not", "a", "table"],
    flow_sample(flows=[{**flow_sample()["flows"][0], "bps": ["fast", "slow"]}]),
    flow_sample(flows=[{**flow_sample()["flows"][0], "orig": "10.0.0.1"}]),
    flow_sample(entries="many"),
    flow_sample(cpu=None),
    flow_sample(**{"pass": {"number": 1, "last": ["x"], "read": None}}),
]


@pytest.mark.parametrize("row", FORGED_SAMPLES, ids=range(len(FORGED_SAMPLES)))
def test_a_forged_sample_row_reads_as_no_sample(db, admin_client, row):
    """The flows.sample row is the web user's to write: one not of the contract's shape
    is no sample on the Flows page and no elephant on /metrics - never a server error
    (before, a rate of text was a 500 on the page)."""
    PeriodicState.objects.update_or_create(name=SAMPLE, defaults={"result": row})
    page = admin_client.get("/flows/")
    assert page.status_code == 200
    assert 'id="flows-summary"' not in page.content.decode()
    assert elephant_lines(admin_client) == []


def elephant_lines(client):
    token = make_token(client, f"t{time.monotonic_ns()}")
    scraped = scrape(token)
    assert scraped.status_code == 200
    return [line for line in scraped.content.decode().splitlines()
            if line.startswith("tusk_class_elephant")]


def test_a_sample_of_the_contracts_shape_is_shown(db, admin_client):
    """The other side of the forged rows: the same row, well formed, is the page's."""
    PeriodicState.objects.update_or_create(name=SAMPLE, defaults={"result": flow_sample()})
    page = admin_client.get("/flows/").content.decode()
    assert 'id="flows-summary"' in page and 'data-sport="40000"' in page
