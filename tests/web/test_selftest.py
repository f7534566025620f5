"""The Self-test page with the real agent: Allman's middlebox measurement between two peer
namespaces routed through the agent's namespace (the "firewall"; no rules) and joined
directly by a link of their own (the baseline). Lab mode: the agent starts the responder
and the client itself; hardware mode: responders the test starts, as an operator would
on two hosts, and a control request from the agent's namespace. Traffic only ever
flows between these namespaces."""
import dataclasses
import subprocess
import sys

import pytest
from tuskweb import PEER_A as A
from tuskweb import PEER_A_GATEWAY as ROUTER_A
from tuskweb import PEER_B as B
from tuskweb import PEER_B_DIRECT as DIRECT
from tuskweb import wait

from accounts.models import AuditEntry
from jobs.models import Job
from lab.paths import WEBUI
from selftest.models import SelfTest

RESPONDER = WEBUI / "selftest" / "core" / "responder.py"
PORT = 8009
METRICS = ("transaction", "feedback", "bulk")
SMALL = {"transactions": 20, "pings": 20, "bulk": 2, "timeout": 2}


def sh(*argv, check=True):
    return subprocess.run(argv, capture_output=True, text=True, check=check)


@pytest.fixture
def hosts(peers):
    """The web tier's peers (tests/web/conftest.py): client and server hosts."""
    return peers


@pytest.fixture
def lab_mode():
    return False


@pytest.fixture
def agent_config(agent_config, hosts, lab_mode):
    """The web tier's agent configuration; in lab mode with its [selftest] section."""
    if lab_mode:
        with open(agent_config, "a") as config:
            config.write(f'[selftest]\nclient_netns = "{hosts[0]}"\nserver_netns = "{hosts[1]}"\n'
                         f'server_address = "{B}"\ndirect_address = "{DIRECT}"\nport = {PORT}\n')
    return agent_config


@pytest.fixture
def web_lab_mode(settings, hosts):
    """The web process's side of lab mode: the same [selftest] keys."""
    settings.TUSK = dataclasses.replace(
        settings.TUSK, selftest_client_netns=hosts[0], selftest_server_netns=hosts[1],
        selftest_server_address=B, selftest_direct_address=DIRECT, selftest_port=PORT)


@pytest.fixture
def responders(hosts):
    """start(peer, *allow): the downloadable responder in a peer namespace."""
    procs = []

    def start(peer, *allow):
        argv = ["ip", "netns", "exec", peer, sys.executable, str(RESPONDER), "--port", str(PORT)]
        for address in allow:
            argv += ["--allow", address]
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        procs.append(proc)
        assert proc.stdout.readline().startswith("listening"), proc.stderr.read()
    yield start
    for proc in procs:
        proc.terminate()
        proc.wait(10)


def start(client, **fields):
    return client.post("/selftest/start/", {**SMALL, **fields})


def finished(seconds=120):
    test = SelfTest.objects.order_by("-id").first()
    wait(test.job, seconds)
    test.refresh_from_db()
    return test


def listening(peer):
    return sh("ip", "netns", "exec", peer, "ss", "-Hltn", f"sport = :{PORT}").stdout.strip()


def assert_complete(test, paths):
    assert test.state == "done", test.error or test.job.error
    for metric in METRICS:
        for path in paths:
            row = test.result["metrics"][metric][path]
            count = SMALL["bulk"] if metric == "bulk" else SMALL[f"{metric}s" if metric ==
                                                                 "transaction" else "pings"]
            assert (row["samples"], row["failures"]) == (count, 0), (metric, path, row)


@pytest.mark.parametrize("lab_mode", [True])
def test_lab_mode_runs_between_the_namespaces_and_shows_the_table(agent, hosts, web_lab_mode,
                                                                  admin_client):
    page = admin_client.get("/selftest/").content.decode()
    assert 'data-mode="lab"' in page and 'name="client_host"' not in page
    response = start(admin_client)
    assert response.status_code == 302, response.content.decode()[-2000:]
    test = finished()
    assert_complete(test, ("through", "direct"))
    assert (test.mode, test.server_host, test.direct_address) == ("lab", B, DIRECT)
    assert test.result["ratios"]["transaction"] > 0
    assert listening(hosts[1]) == ""                 # the responder went with the job
    page = admin_client.get("/selftest/").content.decode()
    for metric in ("transaction", "feedback", "bulk 1024 KiB"):
        for path in ("through", "direct"):
            assert f'data-metric="{metric}" data-path="{path}"' in page
    detail = admin_client.get(f"/selftest/{test.pk}/").content.decode()
    assert 'id="table-text"' in detail and "no baseline" not in detail
    assert AuditEntry.objects.filter(action="self-test start",
                                     target=f"self-test {test.pk}").exists()


def test_hardware_mode_asks_the_client_hosts_responder(agent, hosts, responders, admin_client):
    responders(hosts[0], ROUTER_A)      # the client host lets the firewall ask it
    responders(hosts[1])
    assert start(admin_client, client_host=A, server_host=B, direct_address=DIRECT,
                 port=PORT).status_code == 302
    test = finished()
    assert_complete(test, ("through", "direct"))
    assert test.result["paths"] == [{"name": "through", "host": B, "port": PORT},
                                    {"name": "direct", "host": DIRECT, "port": PORT}]

    assert start(admin_client, client_host=A, server_host=B, port=PORT).status_code == 302
    test = finished()
    assert_complete(test, ("through",))
    assert test.result["baseline"] is False and "direct" not in test.result["metrics"]["bulk"]
    detail = admin_client.get(f"/selftest/{test.pk}/").content.decode()
    assert "No direct path was given: no baseline" in detail


def test_a_responder_that_does_not_allow_the_firewall_fails_the_run_clearly(agent, hosts,
                                                                           responders,
                                                                           admin_client):
    responders(hosts[0])                # no --allow
    start(admin_client, client_host=A, server_host=B, port=PORT)
    test = finished()
    assert test.state == "failed"
    assert f"control requests are not accepted from {ROUTER_A} (see --allow)" in test.error
    assert test.job.state == "failed" and test.result is None
    page = admin_client.get("/selftest/").content.decode()
    assert "(see --allow)" in page


@pytest.mark.parametrize("fields, field, message", [
    ({"transactions": 10_001}, "transactions", "less than or equal to 10000"),
    ({"pings": -1}, "pings", "greater than or equal to 0"),
    ({"bulk": "many"}, "bulk", "Enter a whole number"),
    ({"timeout": 0.01}, "timeout", "greater than or equal to 0.1"),
    ({"client_host": "bad host!"}, "client_host", "'bad host!' is not an IP address or a host"),
    ({"client_host": ""}, "client_host", "This field is required"),
    ({"server_host": "10.98.2.300"}, "server_host", "is not an IP address or a host name"),
    ({"direct_address": B}, "direct_address", "a baseline must take a path that does not cross"),
    ({"port": 0}, "port", "greater than or equal to 1"),
    ({"port": 70000}, "port", "less than or equal to 65535"),
])
def test_bad_input_is_refused_by_field_and_queues_nothing(admin_client, fields, field, message):
    response = start(admin_client, **{"client_host": A, "server_host": B, "port": PORT,
                                      **fields})
    assert response.status_code == 400
    errors = response.context["form"].errors
    assert field in errors and message in " ".join(errors[field]), errors
    assert f'data-field="{field}"' in response.content.decode()
    assert not SelfTest.objects.exists() and not Job.objects.exists()


def test_viewers_see_results_but_cannot_start_one(viewer_client):
    SelfTest.objects.create(mode="hardware", params=SMALL, client_host=A, server_host=B,
                            state="failed", error="no route")
    assert start(viewer_client, client_host=A, server_host=B, port=PORT).status_code == 403
    page = viewer_client.get("/selftest/").content.decode()
    assert 'id="selftest-form"' not in page and "no route" in page
    assert SelfTest.objects.count() == 1 and not Job.objects.exists()
    download = viewer_client.get("/selftest/responder.py")
    assert download["Content-Disposition"] == 'attachment; filename="responder.py"'
    assert b"".join(download.streaming_content) == RESPONDER.read_bytes()


def forged(mode, **fields):
    """A SelfTest row and its job as the web user could write them straight into the
    database, past the form."""
    from jobs import queue
    test = SelfTest.objects.create(mode=mode, params=SMALL, **fields)
    test.job = queue.enqueue("selftest.run", {"selftest": test.pk})
    test.save(update_fields=["job"])
    return finished()


@pytest.mark.parametrize("lab_mode", [True])
def test_the_agent_measures_the_labs_addresses_not_a_forged_rows(agent, hosts, lab_mode):
    # the row asks the lab's client to measure a host of the attacker's choosing
    test = forged("lab", client_host=hosts[0], server_host=ROUTER_A, direct_address=DIRECT,
                  port=PORT)
    assert test.state == "failed" and test.result is None
    assert "server_host: the row does not hold the lab's addresses" in test.error
    assert listening(hosts[1]) == ""


@pytest.mark.parametrize("fields, message", [
    ({"client_host": "--help", "server_host": B}, "client_host: '--help' is not an IP"),
    ({"client_host": A, "server_host": "10.98.2.300"}, "server_host: '10.98.2.300' is not"),
    ({"client_host": A, "server_host": B, "direct_address": B},
     "direct_address: the same as the server host"),
    ({"client_host": A, "server_host": B, "port": 0}, "port: Ensure this value is greater"),
])
def test_the_agent_checks_a_forged_hardware_row_as_the_form_does(agent, hosts, responders,
                                                                  fields, message):
    responders(hosts[0], ROUTER_A)
    responders(hosts[1])
    test = forged("hardware", **{"port": PORT, **fields})
    assert test.state == "failed" and test.result is None
    assert message in test.error, test.error


def test_a_forged_lab_row_on_a_hardware_firewall_is_refused(agent, hosts):
    test = forged("lab", client_host=hosts[0], server_host=B, port=PORT)
    assert test.state == "failed"
    assert "mode: 'lab', but this firewall runs self-tests in hardware mode" in test.error
