"""Flow export (issue 40; webui/flows/core/exporter.py, docs/MONITORING.md) against a
real collector: tusk-flowexport in the lab's firewall, nfdump's nfcapd in the server's
namespace, the records read back with nfdump. An elephant's records add up to what the
server received (its own nft counter, within 1 %) and arrive while it runs; a
masqueraded connection carries both its addresses; the class is the record's
observation domain; IPFIX and NetFlow v9 alike."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import collectors
import pytest
from kit import wait_until

from flows.core import ctnetlink as nl
from flows.core import export
from lab.namespaces import CLIENT_V4, FW_S_V4, SERVER_V4

EXPORTER = Path(__file__).resolve().parents[2] / "webui" / "bin" / "tusk-flowexport"
CONNRATE = str(Path(__file__).resolve().parents[1] / "bench" / "connrate.py")
ACTIVE = 5                  # seconds: the shortest active timeout the settings allow
SECONDS = 18                # of the elephant: three active timeouts and more
POLICY = """
    address_sets:
      - {name: inside-nets, entries: [10.10.1.0/24]}
    services:
      - {name: iperf, protocol: tcp, ports: [5201]}
      - {name: web, protocol: tcp, ports: [5202]}
      - {name: burst, protocol: tcp, ports: [5301]}
    classes:
      - {name: bulk, from: inside, to: outside, services: [iperf], action: accept}
      - {name: web, from: inside, to: outside, services: [web, burst], action: accept}
    """
MASQUERADE = """
    nat:
      source:
        - {name: out, to: outside, source: [inside-nets], translate: masquerade}
    """
# what the server receives of each port, counted as conntrack counts: IP bytes per skb
COUNTER = """
table inet received {
    counter iperf { }
    chain input { type filter hook input priority 0; tcp dport 5201 counter name iperf; }
}
"""


class Collector:
    """nfcapd in the server's namespace, its files in directory."""

    def __init__(self, lab, directory, port):
        collectors.need_nfdump()
        self.lab, self.dir, self.port = lab, Path(directory), port
        self.dir.mkdir()
        self.proc = subprocess.Popen(
            ["ip", "netns", "exec", lab.server, "nfcapd", "-b", SERVER_V4, "-p", str(port),
             "-w", str(self.dir), "-t", "3600"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_until(lambda: lab.ns(lab.server, "ss", "-Hlun", f"sport = :{port}").stdout, 10,
                   "nfcapd listening")

    def records(self):
        """nfcapd stopped (it writes its file at its end); every record, as nfdump's JSON,
        with the observation domain of its exporter ("domain")."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(20)
        assert any(self.dir.glob("nfcapd.2*")), f"nfcapd wrote no file: {list(self.dir.iterdir())}"
        return collectors.records(self.dir)

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


class Sink:
    """collectors.SINK in the server's namespace: every datagram to path."""

    def __init__(self, lab, path, port):
        self.proc = subprocess.Popen(["ip", "netns", "exec", lab.server, sys.executable, "-c",
                                      collectors.SINK, SERVER_V4, str(port), str(path)],
                                     stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout.readline().strip() == "listening"

    def stop(self):
        time.sleep(0.5)
        self.close()

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


class Export:
    """tusk-flowexport in fw on settings (a document export.check takes)."""

    def __init__(self, lab, directory, document):
        self.lab, self.dir = lab, Path(directory)
        self.conf, self.status_path = self.dir / "export.json", self.dir / "status.json"
        self.conf.write_text(export.render(export.check(document)))
        self.proc = subprocess.Popen(
            ["ip", "netns", "exec", lab.fw, sys.executable, str(EXPORTER), str(self.conf),
             str(self.status_path)], stderr=subprocess.PIPE, text=True)
        wait_until(lambda: self.status_path.exists() or self.proc.poll() is not None, 10,
                   "the exporter's first status")
        assert self.proc.poll() is None, self.proc.stderr.read()

    def status(self):
        return json.loads(self.status_path.read_text())

    def stop(self):
        """SIGTERM: it sends what moved since the last records, then ends."""
        self.proc.send_signal(signal.SIGTERM)
        assert self.proc.wait(30) == 0, self.proc.stderr.read()
        return self.status()

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def exporting(lab, fw, tmp_path):
    """start(protocol, port, policy_extra): the policy applied, accounting on, TIME_WAIT
    short (so that a closed connection's DESTROY comes within seconds), a collector and
    the exporter started; both stopped after the test."""
    started = []

    def start(protocol="ipfix", port=4739, extra="", sink=None):
        fw(POLICY + extra)
        for name, value in (("net.netfilter.nf_conntrack_acct", "1"),
                            ("net.netfilter.nf_conntrack_timestamp", "1"),
                            ("net.netfilter.nf_conntrack_tcp_timeout_time_wait", "1")):
            nl.sysctl(lab.fw, name, value)
        lab.ns(lab.fw, "conntrack", "-F", check=False)
        collector = Sink(lab, sink, port) if sink else Collector(lab, tmp_path / "nfcapd",
                                                                  port)
        started.append(collector)
        exporter = Export(lab, tmp_path, {"protocol": protocol, "active_timeout": ACTIVE,
                                          "collectors": [{"address": SERVER_V4,
                                                          "port": port}]})
        started.append(exporter)
        return collector, exporter

    yield start
    for item in reversed(started):
        item.close()
    nl.sysctl(lab.fw, "net.netfilter.nf_conntrack_tcp_timeout_time_wait", "120")
    lab.ns(lab.server, "nft", "delete", "table", "inet", "received", check=False)


def gone(lab, port):
    """fw's table has no connection to port any more (its DESTROY was sent)."""
    return f"sport={port} " not in lab.ns(lab.fw, "conntrack", "-L", check=False).stdout


def elephant(lab, seconds=SECONDS, rate="1G"):
    """An iperf3 upload client -> server on 5201; (iperf3's report, when it ended)."""
    lab.ns(lab.server, "iperf3", "-s", "-1", "-D", "-p", "5201")
    wait_until(lambda: lab.ns(lab.server, "ss", "-Hltn", "sport = :5201").stdout, 10,
               "iperf3 listening")
    out = lab.ns(lab.client, "iperf3", "-c", SERVER_V4, "-p", "5201", "-t", str(seconds),
                 "-b", rate, "-J").stdout
    return json.loads(out), time.time()


def received_bytes(lab):
    found = json.loads(lab.ns(lab.server, "nft", "-j", "list", "counter", "inet", "received",
                              "iperf").stdout)
    return next(item["counter"]["bytes"] for item in found["nftables"] if "counter" in item)


def stamp(text):
    """nfdump's JSON time (local time, milliseconds) as seconds since the epoch."""
    return time.mktime(time.strptime(text.split(".")[0], "%Y-%m-%dT%H:%M:%S")) + \
        int(text.split(".")[1]) / 1000


@pytest.mark.parametrize("protocol,port", [("ipfix", 4739), ("netflow9", 2055)])
def test_an_elephants_records_add_up_to_what_the_server_received(lab, exporting, protocol,
                                                                 port):
    collector, exporter = exporting(protocol, port)
    lab.ns(lab.server, "nft", "-f", "-", input=COUNTER)
    began = time.time()
    report, ended = elephant(lab)
    sport = report["start"]["connected"][0]["local_port"]
    wait_until(lambda: gone(lab, 5201), 30, "the elephant's connection out of fw's table")
    time.sleep(1.5)                       # its DESTROY's record out of the exporter
    status = exporter.stop()
    assert status["lost_events"] == 0 and not any(status["send_errors"].values()), status
    records = [r for r in collector.records()
               if r["src_port"] == sport and r["dst_port"] == 5201]
    assert records, f"no record of the elephant (port {sport})"
    # its records add up to what the server received, within 1 %
    total = sum(r["in_bytes"] for r in records)
    server = received_bytes(lab)
    assert abs(total - server) <= 0.01 * server, (total, server, len(records))
    assert sum(r["out_bytes"] for r in records) > 0      # the ACKs, the other way
    # records came while it ran: by the active timeout, not only at its end
    during = [r for r in records if stamp(r["received"]) < ended - 1]
    assert len(during) >= 2, [(r["received"], r["in_bytes"]) for r in records]
    assert all(began - 1 <= stamp(r["first"]) <= stamp(r["last"]) <= time.time()
               for r in records)
    # the class: bulk is the policy's first class (ordinal 1), no fast path on this kernel
    assert {r["domain"] for r in records} == {1 << 1}, {r["domain"] for r in records}
    # no NAT here: the translated fields are the addresses themselves
    last = records[-1]
    assert (last["src4_addr"], last["dst4_addr"]) == (CLIENT_V4, SERVER_V4)
    assert (last.get("src4_xlt_ip"), last.get("dst4_xlt_ip")) == (CLIENT_V4, SERVER_V4)


def test_a_masqueraded_connection_carries_both_addresses(lab, exporting, server_echo):
    collector, exporter = exporting(extra=MASQUERADE)
    done = lab.ns(lab.client, sys.executable, "-c", (
        "import socket; s = socket.create_connection(('%s', 5202)); s.sendall(b'x' * 5000);"
        " s.shutdown(socket.SHUT_WR); n = len(s.recv(65536)); print(s.getsockname()[1])"
    ) % SERVER_V4).stdout.strip()
    sport = int(done)
    wait_until(lambda: gone(lab, 5202), 30, "the connection out of fw's table")
    time.sleep(1.5)
    exporter.stop()
    records = [r for r in collector.records() if r["dst_port"] == 5202]
    assert len(records) == 1, records
    record = records[0]
    assert (record["src4_addr"], record["src_port"]) == (CLIENT_V4, sport)
    assert record["src4_xlt_ip"] == FW_S_V4, record           # as the server saw it
    assert record["dst4_xlt_ip"] == SERVER_V4
    assert int(record["dst_xlt_port"]) == 5202
    assert record["in_bytes"] > 5000 and record["out_bytes"] > 0
    assert record["domain"] == 2 << 1                          # the class web, ordinal 2


def test_every_connection_of_a_burst_has_its_record(lab, exporting, tmp_path):
    """2 000 connections in two seconds, stopped while most are still in the table: the
    exporter's last scan sends them all at once, and the collector (nfcapd with its
    default buffer) gets every record - seen failing twice: the scan's lookup overran its
    socket's buffer and killed the exporter, and an unpaced burst overran nfcapd's."""
    collector, exporter = exporting(port=4740, sink=tmp_path / "burst.bin")
    server = subprocess.Popen(["ip", "netns", "exec", lab.server, sys.executable, CONNRATE,
                               "server", "5301"], stdout=subprocess.PIPE)
    try:
        server.stdout.readline()
        made = json.loads(lab.ns(lab.client, sys.executable, CONNRATE, "client", SERVER_V4,
                                 "5301", "2", "1000").stdout)
    finally:
        server.kill()
        server.wait()
    status = exporter.stop()
    assert status["sweep_errors"] == 0 and status["lost_events"] == 0, status
    collector.stop()
    kept = collectors.replay((tmp_path / "burst.bin").read_bytes(), tmp_path / "replayed")
    ports = {r["src_port"] for r in kept if r["dst_port"] == 5301}
    assert made["failed"] == 0 and len(ports) == made["connections"], (len(ports), made)


def test_settings_the_exporter_refuses_name_the_field(tmp_path):
    """The exporter reads its file through the page's check: a file that does not hold
    (written by hand, or by a older release) stops it with the field, no traceback."""
    conf = tmp_path / "export.json"
    conf.write_text(json.dumps({"protocol": "ipfix", "collectors": [
        {"address": "192.0.2.1", "port": 70000}]}))
    run = subprocess.run([sys.executable, str(EXPORTER), str(conf), str(tmp_path / "s")],
                         capture_output=True, text=True)
    assert run.returncode == 1
    assert "collectors[0].port: 70000 is outside 1-65535" in run.stderr
    assert "Traceback" not in run.stderr
    os.unlink(conf)
