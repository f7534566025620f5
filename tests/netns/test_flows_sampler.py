"""Live flows' sampler and its ctnetlink reader (webui/flows/core) on the lab's firewall,
with the real kernel: an iperf3 flow through fw is found among thousands of idle entries
and measured at iperf3's own rate; every entry decodes as conntrack(8) prints it, NAT
and sequence adjustment included."""
import json
import re
import shutil
import socket
import statistics
import subprocess
import time

import pytest
from kit import wait_until

from diag.core.capture import check_filter
from flows.contracts import FlowSample
from flows.core import ctnetlink as nl
from flows.core.conntrack import Conntrack, Stats
from flows.core.flowref import capture_filter
from flows.core.sampler import Sampler
from lab.namespaces import FW_S_V4, SERVER_V4, SERVER_V6
from tusklib import contracts

POLICY = """
    services:
      - {name: iperf, protocol: tcp, ports: [5201, 5202]}
      - {name: udp-test, protocol: udp, ports: [5300]}
    classes:
      - {name: bulk, from: inside, to: outside, services: [iperf, udp-test], action: accept}
    """
IDLE = 10_000          # idle entries the sampler has to look past
SECONDS = 10           # of the iperf3 transfer
RATE = "1G"            # iperf3 paces to this, so that its rate is steady enough to compare


def accounting(lab):
    for name in ("net.netfilter.nf_conntrack_acct", "net.netfilter.nf_conntrack_timestamp"):
        assert nl.sysctl(lab.fw, name, "1") == "1"


def fill(lab, count, proto=17, net=200):
    """count idle entries in fw (10.<net>.x.y -> 10.<net+1>.0.1), made over ctnetlink."""
    with Conntrack(lab.fw) as conntrack:
        for first in range(0, count, 256):
            conntrack.create(b"".join(
                nl.new_entry(conntrack.next_seq(), nl.Tuple(
                    f"10.{net}.{i >> 8 & 255}.{i & 255}", f"10.{net + 1}.0.1", proto,
                    1024 + i % 60000, 9))
                for i in range(first, min(first + 256, count))))


@pytest.fixture
def tracked(lab, fw):
    """fw with the policy (which makes conntrack track its forwarded traffic) and
    accounting on; its table emptied after the test."""
    fw(POLICY)
    accounting(lab)
    lab.ns(lab.fw, "conntrack", "-F", check=False)
    yield lab
    lab.ns(lab.fw, "conntrack", "-F", check=False)


def iperf3_server(lab, port=5201):
    lab.ns(lab.server, "iperf3", "-s", "-1", "-D", "-p", str(port))
    wait_until(lambda: lab.ns(lab.server, "ss", "-Hltn", f"sport = :{port}").stdout, 10,
               "iperf3 listening")


def conntrack_cli(lab):
    """conntrack(8)'s view of fw's table: {id: {orig, reply, packets, bytes, mark, zone}}."""
    if shutil.which("conntrack") is None:
        pytest.fail("missing: conntrack (Debian package conntrack) - run `make test`")
    out = lab.ns(lab.fw, "conntrack", "-L", "-o", "extended,id").stdout
    found = {}
    for line in out.splitlines():
        fields = re.findall(r"(\w+)=(\S+)", line)
        seen = {}
        for key, value in fields:
            seen.setdefault(key, []).append(value)
        ports = (lambda i: (int(seen["sport"][i]), int(seen["dport"][i]))) \
            if "sport" in seen else (lambda i: (0, 0))
        found[int(seen["id"][0])] = {
            "orig": (seen["src"][0], seen["dst"][0], *ports(0)),
            "reply": (seen["src"][1], seen["dst"][1], *ports(1)),
            "packets": tuple(int(v) for v in seen["packets"]),
            "bytes": tuple(int(v) for v in seen["bytes"]),
            "mark": int(seen["mark"][0]), "zone": int(seen.get("zone", ["0"])[0])}
    return found


def test_an_iperf3_flow_is_on_top_at_iperf3s_rate(tracked):
    lab = tracked
    fill(lab, IDLE)
    iperf3_server(lab)
    sampler = Sampler(lab.fw, interval=1.0)
    client = subprocess.Popen(["ip", "netns", "exec", lab.client, "iperf3", "-c", SERVER_V4,
                               "-t", str(SECONDS), "-b", RATE, "-J"],
                              stdout=subprocess.PIPE, text=True)
    samples = []
    try:
        while client.poll() is None:
            samples.append(sampler.sample())
            time.sleep(1.0)
        report = json.loads(client.communicate()[0])
    finally:
        sampler.close()
        if client.poll() is None:
            client.kill()
    port = report["start"]["connected"][0]["local_port"]
    # what the agent stores of each sample holds to the contract the pages read it by
    for sample in samples:
        contracts.check(FlowSample, sample)
    on_top = [s for s in samples if s["flows"] and s["flows"][0]["orig"]["sport"] == port
              and s["flows"][0]["bps"] is not None]
    assert len(on_top) >= 4, [(s["flows"][:1], s["pass"]) for s in samples]
    top = on_top[1]["flows"][0]
    assert top["orig"] == {"src": "10.10.1.2", "dst": SERVER_V4, "sport": port, "dport": 5201}
    assert (top["protocol"], top["state"], top["nat"]) == ("tcp", "ESTABLISHED", False)
    measured = statistics.median(sum(s["flows"][0]["bps"]) for s in on_top[1:-1])
    reported = statistics.median(i["sum"]["bits_per_second"] for i in report["intervals"])
    assert 0.7 * reported < measured < 1.3 * reported, (measured, reported)
    # the whole table is read, within the share of a CPU the samples may take: in as
    # many samples as that share buys at the cost per entry measured (one on an idle
    # host - a cold make test saw 10 000 entries in one -, more on a loaded one)
    last = samples[-1]["pass"]["last"]
    assert last["entries"] >= IDLE, samples[-1]["pass"]
    # per class (by the ct mark's ordinal): the connections past min_bytes and their bytes
    elephants = last["classes"][str(top["class"])]
    assert elephants[0] >= 1 and elephants[1] >= 1 << 20, last["classes"]
    assert samples[-1]["cpu"]["share"] < 0.05, samples[-1]["cpu"]
    assert samples[-1]["entries"] >= IDLE


def test_every_entry_decodes_as_conntrack_prints_it(tracked):
    """TCP and UDP over IPv4 and IPv6, a translated connection (masquerade on the
    server side), after the traffic: the counters stand still for the comparison."""
    lab = tracked
    lab.ns(lab.fw, "nft", "-f", "-", input="""
        table ip flowtest {
            chain post {
                type nat hook postrouting priority srcnat;
                oifname "veth-s" udp dport 5300 masquerade
            }
        }""")
    try:
        for server in (SERVER_V4, SERVER_V6):
            iperf3_server(lab)
            lab.ns(lab.client, "iperf3", "-c", server, "-n", "2M")
        with nl.in_netns(lab.client):
            udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        udp.sendto(b"x" * 1000, (SERVER_V4, 5300))
        udp.close()
        with Conntrack(lab.fw) as conntrack:
            entries = {entry.id: entry for entry in conntrack.entries()}
    finally:
        lab.ns(lab.fw, "nft", "delete", "table", "ip", "flowtest", check=False)
    printed = conntrack_cli(lab)
    assert set(entries) == set(printed)
    assert {e.family for e in entries.values()} == {4, 6}
    for ident, entry in entries.items():
        cli = printed[ident]
        assert (entry.orig.src, entry.orig.dst, entry.orig.sport, entry.orig.dport) == cli["orig"]
        assert (entry.reply.src, entry.reply.dst, entry.reply.sport,
                entry.reply.dport) == cli["reply"]
        assert (entry.packets, entry.bytes, entry.mark, entry.zone) == \
            (cli["packets"], cli["bytes"], cli["mark"], cli["zone"])
        assert entry.start_ns and entry.start_ns < time.time_ns()
    [translated] = [e for e in entries.values() if e.nat]
    assert (translated.proto, translated.orig.dport, translated.reply.dst) == (17, 5300, FW_S_V4)
    # the capture's filter, from the kernel's entry: both tuples, and libpcap takes it
    text = capture_filter(translated)
    assert f"src host {FW_S_V4}" in text and "src host 10.10.1.2" in text
    assert check_filter(text) is None
    assert all(check_filter(capture_filter(e)) is None for e in entries.values()
               if e.proto in (6, 17))


def test_sequence_offsets_are_read_as_set(tracked):
    """conntrack(8) prints no sequence adjustment: an entry made over ctnetlink with
    offsets (as conntrackd restores one) is read back with them."""
    lab = tracked
    orig = nl.Tuple("10.10.1.2", SERVER_V4, 6, 40000, 5201)
    with Conntrack(lab.fw) as conntrack:
        conntrack.create(nl.new_entry(conntrack.next_seq(), orig, seqadj={
            "orig": (1000, 0, 123456789), "reply": (2000, -5, -987654)}))
        entry = conntrack.get(4, orig)
        assert entry.status & nl.IPS_SEQ_ADJUST
        assert entry.seqadj_orig == {"position": 1000, "before": 0, "after": 123456789}
        assert entry.seqadj_reply == {"position": 2000, "before": -5, "after": -987654}
        assert conntrack.get(4, nl.Tuple("10.10.1.2", SERVER_V4, 6, 40001, 5201)) is None
        # deleted only under its own id
        assert not conntrack.delete(4, orig, entry.id ^ 1)
        assert conntrack.delete(4, orig, entry.id)
        assert conntrack.get(4, orig) is None


def test_entries_made_before_accounting_are_counted_not_ranked(tracked):
    lab = tracked
    nl.sysctl(lab.fw, "net.netfilter.nf_conntrack_acct", "0")
    fill(lab, 300, net=210)
    nl.sysctl(lab.fw, "net.netfilter.nf_conntrack_acct", "1")
    fill(lab, 200, net=220)
    stats = Stats()
    with Conntrack(lab.fw) as conntrack:
        ranked = [b for b in conntrack.scan(0, stats) if b is not None]
    assert (stats.entries, stats.uncounted, len(ranked)) == (500, 300, 200)
    assert all(b.orig_bytes == b.reply_bytes == 0 for b in ranked)
