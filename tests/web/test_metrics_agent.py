"""/metrics with the real agent: a policy applied to the agent's namespace, real packets
between two peer namespaces routed through it, the agent's counter reading (nft -j list
counters in the namespace) and statistics sample, scraped with a token and parsed with
prometheus_client's own parser; and a counter reading forged by the web user's role,
which the agent reads back when it starts."""
import subprocess
import sys
import time
from datetime import UTC, datetime

from django.test import Client
from kit import wait_until
from tuskweb import PEER_B, AgentProcess, wait
from web.test_metrics import samples

from jobs import queue
from jobs.models import Job, PeriodicState
from policy import draft as drafts
from policy.models import CounterReading

POLICY = """zones:
  - {name: inside, interfaces: [eth1]}
  - {name: outside, interfaces: [eth3]}
services:
  - {name: ping, protocol: icmp}
classes:
  - {name: echo, from: inside, to: outside, services: [ping], action: accept}
  - {name: quiet, from: outside, to: inside, services: [ping], action: accept}
"""
ECHO_BYTES = 84        # IPv4 20 + ICMP 8 + ping's 56 bytes of data
UDP_BYTES = 20 + 8 + 1


def scraped(token):
    return samples(Client().get("/metrics", HTTP_AUTHORIZATION=f"Bearer {token}"))


def value(found, name, **labels):
    return found.get((name, frozenset(labels.items())))


def counter(name):
    row = CounterReading.objects.filter(pk=1).first()
    return row and row.counters.get(name)


def sysfs(netns, interface, name):
    return int(subprocess.run(["ip", "netns", "exec", netns, "cat",
                               f"/sys/class/net/{interface}/statistics/{name}"],
                              capture_output=True, text=True, check=True).stdout)


def applied(admin_user):
    drafts.import_text(POLICY, admin_user)
    job = wait(queue.enqueue("policy.apply", {"policy_text": POLICY, "timeout": 120}))
    assert job.state == "succeeded", job.error
    assert wait(queue.enqueue("policy.confirm")).state == "succeeded"


def test_real_traffic_through_a_class_is_scraped_and_listed(agent, netns, peers, admin_client,
                                                            admin_user):
    applied(admin_user)
    response = admin_client.post("/metrics/tokens/", {"name": "prometheus"})
    token = response.content.decode().split('<pre id="token-value">')[1].split("<")[0]
    wait_until(lambda: counter("class_echo") == [0, 0, None], 20,
               lambda: f"the agent reading the new table's counters: {counter('class_echo')}")
    before = time.time()

    for _ in range(3):   # three echo "connections": conntrack lets the replies pass as
        subprocess.run(["ip", "netns", "exec", peers[0], "ping", "-c", "1", "-W", "2", PEER_B],
                       check=True, capture_output=True)   # established, ahead of the classes
    # one UDP datagram no class accepts: the default deny
    subprocess.run(["ip", "netns", "exec", peers[0], sys.executable, "-c",
                    "import socket; socket.socket(socket.AF_INET, socket.SOCK_DGRAM)"
                    f".sendto(b'x', ('{PEER_B}', 9))"], check=True)
    wait_until(lambda: counter("class_echo")[0] == 3 and counter("default_deny")[0] == 1, 20,
               lambda: f"the agent counting: {CounterReading.objects.get(pk=1).counters}")

    found = scraped(token)
    labels = {"class": "echo"}
    assert value(found, "tusk_class_packets_total", **labels) == 3
    assert value(found, "tusk_class_bytes_total", **labels) == 3 * ECHO_BYTES
    assert before <= value(found, "tusk_class_last_hit_timestamp_seconds", **labels) <= time.time()
    assert value(found, "tusk_class_packets_total", **{"class": "quiet"}) == 0
    assert value(found, "tusk_class_last_hit_timestamp_seconds", **{"class": "quiet"}) is None
    assert value(found, "tusk_dropped_packets_total", reason="default_deny") == 1
    assert value(found, "tusk_dropped_bytes_total", reason="default_deny") == UDP_BYTES
    assert value(found, "tusk_dropped_packets_total", reason="invalid") == 0
    assert value(found, "tusk_ruleset_loaded") == 1

    # the interfaces' kernel counters, as the namespace's sysfs has them once the sample
    # after the traffic is in
    def interfaces_match():
        found = scraped(token)
        return all(value(found, f"tusk_interface_{metric}_total", interface=interface)
                   == sysfs(netns, interface, name)
                   for interface in ("eth1", "eth3")
                   for metric, name in (("receive_packets", "rx_packets"),
                                        ("transmit_bytes", "tx_bytes"),
                                        ("receive_drops", "rx_dropped"),
                                        ("transmit_errors", "tx_errors")))
    wait_until(interfaces_match, 20, "the scraped interface counters matching sysfs")
    found = scraped(token)
    assert value(found, "tusk_interface_receive_packets_total", interface="eth1") >= 4
    assert value(found, "tusk_interface_up", interface="eth3") == 1
    assert value(found, "tusk_conntrack_entries") >= 3      # the pings' entries, 30 s each
    assert value(found, "tusk_conntrack_entries_limit") > 0
    assert value(found, "tusk_seqadj_counters_available") == 0   # the host's kernel

    assert value(found, "tusk_agent_heartbeat_age_seconds") < 10
    task = {"task": "policy.counters"}
    assert value(found, "tusk_agent_task_runs_total", **task) >= 2
    assert value(found, "tusk_agent_task_failures_total", **task) == 0
    assert value(found, "tusk_agent_task_failing", **task) == 0
    assert value(found, "tusk_jobs", state="succeeded") == 2
    assert value(found, "tusk_capture_storage_used_bytes") == 0
    assert value(found, "tusk_capture_storage_quota_bytes") == 50_000_000
    assert time.time() - value(found, "tusk_ruleset_counters_read_timestamp_seconds") < 10

    page = admin_client.get("/policy/classes/").content.decode()
    row = next(r for r in page.split("<tr>") if '/">echo</a>' in r)
    assert f'data-packets="3" data-bytes="{3 * ECHO_BYTES}"' in row
    hit = datetime.fromisoformat(row.split('data-last-hit="')[1].split('"')[0])
    assert before - 1 <= hit.timestamp() <= time.time()
    quiet = next(r for r in page.split("<tr>") if '/">quiet</a>' in r)
    assert 'data-packets="0"' in quiet and "no hits" in quiet


def test_a_forged_counter_reading_makes_the_starting_agent_do_nothing(
        agent_config, transactional_db, netns, tmp_path):
    """The agent reads the stored reading back once, when it starts: a row the web user's
    role wrote with names that look like commands and paths, values of every wrong type
    and a future start. Nothing of it runs, names a file or survives the first reading."""
    planted = tmp_path / "pwned"
    now = datetime.now(UTC)
    CounterReading.objects.create(pk=1, read_at=now, table_loaded=True,
                                  observed_since=datetime(2999, 1, 1, tzinfo=UTC), counters={
        f"class_$(touch {planted})": [1, 2, 3], f"; touch {planted}": "x",
        "../../../etc/shadow": {"packets": 1}, "class_echo": [10 ** 30, "many", [1]],
        "default_deny": [-1, None, 1e300]})
    process = AgentProcess(agent_config).start()
    try:
        wait_until(lambda: CounterReading.objects.get(pk=1).read_at > now, 20,
                   "the agent's first reading")
        row = CounterReading.objects.get(pk=1)
        assert (row.counters, row.table_loaded) == ({}, False)   # no table in the namespace
        assert row.observed_since <= datetime.now(UTC)
        state = wait_until(lambda: PeriodicState.objects.filter(
            name="policy.counters", runs__gte=1).first(), 10, "the reading recorded")
        assert (state.error, state.failures) == ("", 0)
        assert not planted.exists()
        assert not Job.objects.exists()
    finally:
        process.stop()
