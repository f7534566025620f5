"""The firewall's log end to end: a policy with logged classes applied and confirmed with
the CLI (its renderer's log rules: NFLOG group 1, tusk:<verdict>:<class>, the default deny
tusk:drop:, one named limit log_rate), ulogd on the image's configuration in fw, real
packets between the lab's namespaces, and the records as the Logs page reads them."""
import socket
import time

import pytest
from kit import wait_until
from netns.pcaps import ns_socket, tcp_connect, tcp_exchange
from test_logs_ulogd import newest, udp_burst

from lab.namespaces import CLIENT_V4, SERVER_V4, SERVER_V6
from lab.ulogd import Ulogd
from logs.core import records

RATE = 5     # the policy's log_rate; the burst is twice it (LOG_BURST_FACTOR)
POLICY = f"""
settings: {{log_rate: {RATE}, log_default_deny: true}}
services:
  - {{name: echo, protocol: tcp, ports: [5201]}}
  - {{name: web, protocol: tcp, ports: [5209]}}
  - {{name: dns, protocol: udp, ports: [5300]}}
classes:
  - {{name: backup, from: inside, to: outside, services: [echo], action: accept, log: true}}
  - {{name: web, from: inside, to: outside, services: [web], action: drop, log: true}}
  - {{name: dns, from: inside, to: outside, services: [dns], action: reject, log: true}}
  - {{name: quiet, from: inside, to: outside, services: [], action: drop}}
"""


@pytest.fixture
def log_dir(lab, tmp_path):
    ulogd = Ulogd(lab.fw, str(tmp_path / "logs")).start()
    yield ulogd.log_dir
    ulogd.stop()


def test_a_confirmed_policy_logs_each_verdict_and_the_default_deny(lab, fw, server_echo,
                                                                   log_dir):
    fw(POLICY)
    accepted = tcp_exchange(lab.client, SERVER_V4, 5201)                # accepted, logged
    assert accepted.result == "ok", accepted
    tcp_connect(lab.client, SERVER_V4, 5209, timeout=0.5)               # dropped, logged
    rejected = udp_burst(lab, SERVER_V6, 5300, 1)                       # rejected, logged
    quiet = udp_burst(lab, SERVER_V4, 5999, 1)                          # class quiet: none
    wait_until(lambda: len(newest(log_dir)) >= 3, 10, "three records")
    time.sleep(0.5)    # anything else would have come by now
    found = newest(log_dir)
    assert sorted((r.verdict, r.cls, r.protocol_name, r.destination_port) for r in found) == [
        ("accept", "backup", "tcp", 5201), ("drop", "web", "tcp", 5209),
        ("reject", "dns", "udp", 5300)]
    for record in found:
        assert (record.interface_in, record.interface_out) == ("veth-c", "veth-s")
        assert record.source in (CLIENT_V4, "fd00:10:1::2")
    assert [r.source_port for r in found if r.cls == "dns"] == [rejected]
    # one record for the connection: the class sees its first packet, established
    # traffic is accepted before any class
    assert [r.source_port for r in found if r.cls == "backup"] == [accepted.sport]
    assert newest(log_dir, records.Filter(port=quiet)) == []
    # zones with no class between them: the default deny logs, through the same limit
    from_server = udp_burst_from_server(lab, 6000)
    wait_until(lambda: newest(log_dir, records.Filter(cls="")), 10, "the default deny's record")
    deny = newest(log_dir, records.Filter(cls=""))
    assert [(r.verdict, r.source, r.source_port, r.interface_in) for r in deny] == \
        [("drop", SERVER_V4, from_server, "veth-s")]


def udp_burst_from_server(lab, port, count=1):
    sock = ns_socket(lab.server, socket.AF_INET, socket.SOCK_DGRAM)
    with sock:
        for _ in range(count):
            sock.sendto(b"tusk", (CLIENT_V4, port))
        return sock.getsockname()[1]


def test_a_flood_logs_no_more_than_the_policys_rate(lab, fw, log_dir):
    fw(POLICY)
    time.sleep(1)      # the burst is full again
    started = time.monotonic()
    source = udp_burst(lab, SERVER_V4, 5300, 2000)     # class dns: every one rejected
    elapsed = time.monotonic() - started

    def logged():
        return newest(log_dir, records.Filter(cls="dns", port=source), limit=5000)
    # ulogd writes what the limit let through at its own pace (on a loaded machine it may
    # take a while); the burst is over, so waiting cannot add records, only find them
    wait_until(lambda: len(logged()) >= 2 * RATE * 0.8, 20, "the flood's first records")
    time.sleep(1)      # and anything beyond the limit would have come by now
    flood = logged()
    assert 2 * RATE * 0.8 <= len(flood) <= 2 * RATE + RATE * (elapsed + 1.5), (len(flood),
                                                                                elapsed)
