"""The firewall's log on real components: the image's ulogd.conf run by ulogd in the lab's
fw namespace (lab/ulogd.py), real nft NFLOG rules, real packets between the lab's
namespaces, and rsyslog forwarding to receivers on fw's loopback.

The rules are written by hand in the shape the policy renders (policy/core/constants.py:
NFLOG group 1, prefix tusk:<verdict>:<class>, the default deny tusk:drop:, every log
rule through the one named limit log_rate); test_logs_policy.py does the same through a
real policy apply, tests/web/test_logs_page.py on the Logs page with the real agent."""
import grp
import ipaddress
import json
import os
import re
import socket
import threading
import time
from datetime import datetime

import pytest
from kit import wait_until
from netns.pcaps import ns_socket, tcp_connect  # importable from the web tier too

from lab.namespaces import CLIENT_V4, CLIENT_V6, SERVER_V4, SERVER_V6
from lab.ulogd import Ulogd
from logs.core import forwarder, records, storage
from logs.core.constants import CURRENT
from logs.core.settings import check

RATE, BURST = 50, 100      # the policy's default log rate, and twice it as the burst
RULES = """
table inet tusk
delete table inet tusk
table inet tusk {
	limit log_rate { rate %(rate)d/second burst %(burst)d packets }
	chain forward {
		type filter hook forward priority filter; policy drop;
		ct state established,related accept
		iifname "veth-c" oifname "veth-s" tcp dport 5209 limit name "log_rate" \
			log prefix "tusk:drop:web" group 1
		iifname "veth-c" oifname "veth-s" tcp dport 5209 drop
		iifname "veth-c" oifname "veth-s" udp dport 5300 limit name "log_rate" \
			log prefix "tusk:reject:dns" group 1
		iifname "veth-c" oifname "veth-s" udp dport 5300 reject
		iifname "veth-c" oifname "veth-s" udp dport 5400 log prefix "tusk:accept:bulk" group 1
		iifname "veth-c" oifname "veth-s" udp dport 5400 accept
		limit name "log_rate" log prefix "tusk:drop:" group 1
	}
}
"""


@pytest.fixture
def rules(lab):
    """The hand-written ruleset in fw (bulk: every packet logged, no limit)."""
    def load(rate=RATE, burst=BURST):
        lab.ns(lab.fw, "nft", "-f", "-", input=RULES % {"rate": rate, "burst": burst})
    load()
    yield load
    lab.ns(lab.fw, "nft", "delete", "table", "inet", "tusk", check=False)


@pytest.fixture
def log_dir(lab, tmp_path):
    """ulogd on the image's configuration in fw, writing into tmp_path/logs."""
    path = str(tmp_path / "logs")
    ulogd = Ulogd(lab.fw, path).start()
    yield path
    ulogd.stop()


def web_gid():
    return grp.getgrnam("tusk").gr_gid


def newest(log_dir, match=None, limit=500):
    match = match or records.Filter()
    return storage.search(log_dir, records.parse, match.matches, limit, 1 << 30).records


def udp_burst(lab, destination, port, count, source_port=0):
    """count datagrams from the client; the source port they came from."""
    family = socket.AF_INET6 if ":" in destination else socket.AF_INET
    sock = ns_socket(lab.client, family, socket.SOCK_DGRAM)
    sock.bind(("::" if family == socket.AF_INET6 else "0.0.0.0", source_port))
    for _ in range(count):
        sock.sendto(b"tusk", (destination, port))
    used = sock.getsockname()[1]
    sock.close()
    return used


def test_a_denied_packet_is_a_record_with_class_verdict_addresses_and_ports(lab, rules,
                                                                              log_dir):
    tcp_connect(lab.client, SERVER_V4, 5209, timeout=0.5)
    rejected = udp_burst(lab, SERVER_V6, 5300, 1)
    default = udp_burst(lab, SERVER_V4, 7777, 1)
    found = wait_until(lambda: len(newest(log_dir)) >= 3 and newest(log_dir), 10,
                       "three records")
    by_class = {record.cls: record for record in found}
    web = by_class["web"]
    assert (web.verdict, web.interface_in, web.interface_out, web.protocol_name) == \
        ("drop", "veth-c", "veth-s", "tcp")
    assert (web.source, web.destination, web.destination_port) == (CLIENT_V4, SERVER_V4, 5209)
    assert web.source_port > 1023 and web.tcp_flags == "SYN"
    assert abs(web.time - time.time()) < 30
    dns = by_class["dns"]
    assert (dns.verdict, dns.protocol_name, dns.source, dns.source_port, dns.destination,
            dns.destination_port) == ("reject", "udp", CLIENT_V6, rejected, SERVER_V6, 5300)
    deny = by_class[""]
    assert (deny.verdict, deny.source, deny.source_port, deny.destination_port) == \
        ("drop", CLIENT_V4, default, 7777)
    # the files as the image lays them out: the web user's group may read, not write
    info = os.stat(os.path.join(log_dir, CURRENT))
    assert (info.st_uid, info.st_gid, info.st_mode & 0o777) == (0, web_gid(), 0o640)
    assert os.stat(log_dir).st_mode & 0o7777 == 0o2750
    # the filters the page offers
    match = records.Filter(verdict="reject", port=5300, protocol=17)
    assert [r.cls for r in newest(log_dir, match)] == ["dns"]
    assert newest(log_dir, records.Filter(cls="")) == [deny]
    assert newest(log_dir, records.Filter(interfaces=frozenset({"veth-s"}))) == found
    assert newest(log_dir, records.Filter(interfaces=frozenset({"mgmt"}))) == []
    for prefix, classes in (("fd00:10:1::/64", ["dns"]), ("10.10.0.0/16", ["", "web"]),
                            (SERVER_V6, ["dns"]), ("fd00::/8", ["dns"]), ("::/0", ["dns"])):
        match = records.Filter(address=ipaddress.ip_network(prefix))
        found_here = storage.search(log_dir, records.parse, match.matches, 10, 1 << 30,
                                    candidate=match.candidate()).records
        assert [r.cls for r in found_here] == classes, prefix


def test_a_flood_is_rate_limited_by_the_shared_limit(lab, rules, log_dir):
    started = time.monotonic()
    source = udp_burst(lab, SERVER_V4, 7777, 3000)
    elapsed = time.monotonic() - started
    marker = udp_burst(lab, SERVER_V4, 5400, 1)   # after the flood; bulk logs without limit
    wait_until(lambda: newest(log_dir, records.Filter(port=marker)), 10, "the marker's record")
    flood = newest(log_dir, records.Filter(cls="", port=source), limit=5000)
    # the burst at once, then the rate: nowhere near the 3000 packets sent
    assert BURST * 0.9 <= len(flood) <= BURST + RATE * (elapsed + 1), (len(flood), elapsed)


def rfc5424(message):
    """The fields of one RFC 5424 message (section 6), strictly."""
    found = re.fullmatch(r"<(\d{1,3})>1 (\S+) (\S+) (\S+) (\S+) (\S+) (-|\[.*?\]) (.*)",
                         message, re.S)
    assert found, message
    pri, stamp, host, app, procid, msgid, data, msg = found.groups()
    return {"facility": int(pri) >> 3, "severity": int(pri) & 7,
            "time": datetime.fromisoformat(stamp), "host": host, "app": app,
            "procid": procid, "msgid": msgid, "data": data, "msg": msg}


class Receiver:
    """A syslog receiver on the loopback of namespace ns: UDP (one message a datagram)
    and TCP (octet counting, RFC 6587 3.4.1); messages by transport, as text."""

    def __init__(self, ns):
        self.messages = {"udp": [], "tcp": []}
        self.udp = ns_socket(ns, socket.AF_INET, socket.SOCK_DGRAM)
        self.udp.bind(("127.0.0.1", 0))
        self.tcp = ns_socket(ns, socket.AF_INET, socket.SOCK_STREAM)
        self.tcp.bind(("127.0.0.1", 0))
        self.tcp.listen()
        self.udp.settimeout(0.2)
        self.tcp.settimeout(0.2)
        self.stopping = threading.Event()
        self.threads = [threading.Thread(target=f, daemon=True) for f in (self._udp, self._tcp)]
        for thread in self.threads:
            thread.start()

    def ports(self):
        return self.udp.getsockname()[1], self.tcp.getsockname()[1]

    def _udp(self):
        while not self.stopping.is_set():
            try:
                data = self.udp.recv(65536)
            except TimeoutError:
                continue
            self.messages["udp"].append(data.decode())

    def _tcp(self):
        while not self.stopping.is_set():
            try:
                conn, _ = self.tcp.accept()
            except TimeoutError:
                continue
            conn.settimeout(0.2)
            buffer = b""
            while not self.stopping.is_set():
                try:
                    chunk = conn.recv(65536)
                except TimeoutError:
                    continue
                if not chunk:
                    break
                buffer += chunk
                while b" " in buffer:
                    length, rest = buffer.split(b" ", 1)
                    assert length.isdigit(), buffer[:80]
                    if len(rest) < int(length):
                        break
                    self.messages["tcp"].append(rest[:int(length)].decode())
                    buffer = rest[int(length):]
            conn.close()

    def close(self):
        self.stopping.set()
        for thread in self.threads:
            thread.join()
        self.udp.close()
        self.tcp.close()


@pytest.fixture
def receiver(lab):
    found = Receiver(lab.fw)
    yield found
    found.close()


@pytest.fixture
def syslog_dir(tmp_path):
    path = str(tmp_path / "syslog")
    yield path
    forwarder.stop_leftover(path)


def test_records_reach_syslog_receivers_over_udp_and_tcp_as_rfc5424(lab, rules, log_dir,
                                                                    receiver, syslog_dir):
    udp_burst(lab, SERVER_V4, 7777, 1)       # logged before the forwarder: not sent
    wait_until(lambda: newest(log_dir), 10, "the first record")
    udp, tcp = receiver.ports()
    settings = check({"syslog": [{"host": "127.0.0.1", "port": udp, "transport": "udp"},
                                 {"host": "127.0.0.1", "port": tcp, "transport": "tcp"}]})
    forwarder.write(settings, log_dir, syslog_dir)
    proc = forwarder.start(syslog_dir, netns=lab.fw)
    try:
        tcp_connect(lab.client, SERVER_V4, 5209, timeout=0.5)
        wait_until(lambda: all(receiver.messages.values()) and receiver.messages, 15,
                   lambda: f"a message on both receivers: {receiver.messages}")
    finally:
        forwarder.stop(proc)
    with open(os.path.join(log_dir, CURRENT)) as handle:
        lines = handle.read().splitlines()
    assert len(lines) == 2
    for transport in ("udp", "tcp"):
        assert len(receiver.messages[transport]) == 1, receiver.messages   # not the first
        message = rfc5424(receiver.messages[transport][0])
        assert (message["facility"], message["severity"]) == (16, 5)   # local0, notice
        assert (message["app"], message["procid"], message["msgid"], message["data"]) == \
            ("tusk", "-", "firewall", "-")
        assert message["host"] not in ("", "-") and message["time"].tzinfo is not None
        assert json.loads(message["msg"]) == json.loads(lines[1])
        record = records.parse(message["msg"])
        assert (record.cls, record.verdict, record.destination_port) == ("web", "drop", 5209)


def test_rotation_keeps_the_log_within_its_bound(lab, rules, log_dir):
    files, file_bytes = 3, 200_000
    bound = files * file_bytes
    first = udp_burst(lab, SERVER_V4, 5400, 50)
    wait_until(lambda: newest(log_dir, records.Filter(port=first)), 10, "the first records")
    stop, kept = threading.Event(), []

    def agent():    # as the agent's periodic logs.keep does it, while the records come
        while not stop.is_set():
            kept.append(storage.keep(log_dir, web_gid(), files, file_bytes))
            time.sleep(0.1)
    thread = threading.Thread(target=agent)
    thread.start()
    try:
        # about 200 kB of records a burst, until the agent has rotated five times and
        # deleted (ten bursts on an idle box; more where a loaded one writes slower)
        for _ in range(40):
            udp_burst(lab, SERVER_V4, 5400, 300)
            time.sleep(0.05)
            if sum(k.rotated for k in list(kept)) >= 5 and any(k.deleted for k in list(kept)):
                break
        last = udp_burst(lab, SERVER_V4, 5400, 1)
        wait_until(lambda: newest(log_dir, records.Filter(port=last)), 10, "the last record")
    finally:
        stop.set()
        thread.join()
    final = storage.keep(log_dir, web_gid(), files, file_bytes)
    assert sum(k.rotated for k in kept) >= 5 and any(k.deleted for k in kept)
    assert all(k.writers for k in kept)        # the ulogd writing the file, found each run
    with storage.LogDirectory(log_dir) as logs:
        names = [entry.name for entry in logs.entries()]
    assert set(os.listdir(log_dir)) == set(names) <= {CURRENT, f"{CURRENT}.1", f"{CURRENT}.2"}
    assert final.total == sum(os.path.getsize(os.path.join(log_dir, n)) for n in names) <= bound
    assert newest(log_dir, records.Filter(port=first)) == []       # the oldest went first
    # ulogd opened the file anew after each SIGHUP: the newest record is in the current one
    marker = udp_burst(lab, SERVER_V4, 5400, 1)
    wait_until(lambda: marker_in_current(log_dir, marker), 10, "the marker in the current file")


def marker_in_current(log_dir, port):
    with open(os.path.join(log_dir, CURRENT), "rb") as handle:
        return any((r := records.parse(line)) and r.source_port == port for line in handle)
