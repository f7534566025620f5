"""Bridged traffic on Tusk's kernel (issue 39's transparent bridge mode) under Tusk's
policy with bridged zones, judged from what guest/scenarios/bridge_seqrand.py captured on
both ports of fw's bridge.

The question the bridge mode's seqrand depends on: the bridge family's conntrack
(nf_conntrack_bridge, not br_netfilter) runs the helper a class set and confirms
through the seqadj step, so a bridged connection's sequence numbers and SACK blocks
are translated edge by edge as a routed one's are. Offsets: R_o shifts the client's
sequence space as the server sees it, R_r the server's as the client sees it.
"""
import subprocess

import pytest
import seqcheck
from saved import counters_delta, invalid_drops, load, nstat
from test_seqrand import assert_translated, iperf3_flows

from lab.namespaces import BRIDGED_CLIENT_V4, SERVER_V4
from logs.core import records

RANDOMISED = ("upload", "download", "upload-v6", "download-v6")
PORT_BOTH, PORT_PLAIN, CLOSED = 5201, 5202, 5209      # guest/seqrand.py, bridge_seqrand.py
RUNS = RANDOMISED + ("plain",)
PREVIOUS = dict(zip(RUNS, ("before",) + RUNS[:-1]))


@pytest.fixture(scope="module")
def bridged(scenario):
    """The folder and iperf3's data connection of each run, by run name."""
    folder = scenario("bridge-seqrand")
    return folder, iperf3_flows(folder, RUNS)


def test_a_bridge_fails_closed_and_the_policy_decides_what_crosses(bridged):
    """Without a bridged zone the bridges' table drops every frame (ARP too); with the
    policy's bridged zones its classes admit ping and the classes' ports, and its default
    deny the rest."""
    folder, _ = bridged
    results = load(folder, "results.json")
    assert results["before_policy"] == {"ping": False, "tcp": False}, results
    assert results["with_policy"] == {"ping": True, "closed": False}, results


@pytest.mark.parametrize("run", RANDOMISED)
def test_bridged_sack_blocks_are_translated_edge_by_edge(bridged, run):
    _, flows = bridged
    r_o, r_r = flows[run].offsets()
    assert r_o and r_r, f"{run}: offsets {r_o}, {r_r} - not randomised across the bridge"
    report = assert_translated(flows[run])
    assert report.sack_blocks >= 20, report


def test_the_plain_class_is_bridged_untranslated(bridged):
    _, flows = bridged
    assert flows["plain"].offsets() == (0, 0)
    assert_translated(flows["plain"])


@pytest.mark.parametrize("run,sender", [("upload", "client"), ("download", "server")])
def test_bridged_senders_use_every_sack_block(bridged, run, sender):
    folder, flows = bridged
    seqcheck.assert_sack_recovery(seqcheck.retransmissions(flows[run], sender))
    old, new = nstat(folder, sender, PREVIOUS[run]), nstat(folder, sender, run)
    delta = {k: new[k] - old.get(k, 0) for k in new}
    assert delta.get("TcpExtTCPSACKDiscard", 0) == 0, delta
    assert delta.get("TcpExtTCPSackRecovery", 0) > 0, delta
    assert delta.get("TcpInCsumErrors", 0) == 0, delta


def test_bridged_connections_carry_their_class_in_the_ct_mark(bridged):
    """What the Flows page reads of a connection - conntrack's entry, its class by the
    ordinal in the ct mark (classes[i] is i + 1 from bit 17) - for bridged connections as
    for routed ones: class both's iperf3 connections, then class plain's."""
    folder, _ = bridged
    for state, port, ordinal in (("download-v6", 5201, 1), ("plain", 5202, 2)):
        marks = {(entry["mark"] or 0) >> 17 for entry in load(folder, f"{state}-conntrack.json")
                 if entry["orig"] and entry["orig"]["proto"] == 6
                 and entry["orig"]["dport"] == port}
        assert marks == {ordinal}, (state, marks)


def test_the_bridge_tables_counters_and_seqadj_count_the_classes(bridged):
    folder, flows = bridged
    counters = {c["counter"]["name"]: c["counter"]["packets"]
                for c in load(folder, "plain-nft-counters.json")["nftables"] if "counter" in c}
    # each class counts the first packet of its connections (established ones are
    # accepted before the classes): iperf3's control and data connection per run
    assert counters["class_both"] >= 2 * len(RANDOMISED), counters
    assert counters["class_plain"] >= 2, counters
    assert invalid_drops(folder, "plain") == 0
    seen = sum(seqcheck.check(flows[run], *flows[run].offsets()).sack_blocks
               for run in RANDOMISED)
    assert counters_delta(folder, "before", "plain")["sack_blocks_translated"] >= seen > 0


def test_bridged_connections_are_logged_with_their_class_and_ports(bridged):
    """ulogd on the image's configuration reads what the bridge's table logs (NFLOG of
    the bridge family): class plain's new connections and the default deny's drop, each
    with the bridge ports it came in and went out by (Tusk's kernel has no
    br_netfilter, which would name the bridge instead), as the Logs page parses it."""
    folder, flows = bridged
    logged = [r for r in map(records.parse, (folder / "logs" / "firewall.json")
                             .read_bytes().splitlines()) if r is not None]
    plain = [r for r in logged if r.cls == "plain"]
    data_port = flows["plain"].client[1]
    assert any(r.source_port == data_port for r in plain), plain
    for record in plain:
        assert (record.verdict, record.interface_in, record.interface_out, record.source,
                record.destination, record.destination_port, record.tcp_flags) == (
            "accept", "veth-c", "veth-s", BRIDGED_CLIENT_V4, SERVER_V4, PORT_PLAIN, "SYN"), record
    denied = [r for r in logged if r.verdict == "drop" and r.destination_port == CLOSED]
    assert denied and all((r.cls, r.interface_in, r.interface_out) == ("", "veth-c", "veth-s")
                          for r in denied), logged
    # the randomised class does not log: none of its connections is there
    assert not [r for r in logged if r.destination_port == PORT_BOTH], logged


def test_the_flows_page_sampler_ranks_bridged_flows_with_class_and_offsets(bridged):
    """The Flows page's sampler over the bridge's connections, as the page shows them:
    each run's iperf3 flow on top with its rate, its class by the ct mark, not
    translated, seqrand's offsets on class both's."""
    folder, flows = bridged
    samples = load(folder, "flows-samples.json")
    for run, ordinal in (("upload", 1), ("download-v6", 1), ("plain", 2)):
        port = flows[run].client[1]
        seen = [f for s in samples for f in s["flows"][:1]
                if f["orig"]["sport"] == port and f["bps"] is not None and any(f["bps"])]
        assert seen, (run, [s["flows"][:1] for s in samples])
        top = seen[-1]
        assert (top["class"], top["protocol"], top["nat"], top["fastpath"]) == (
            ordinal, "tcp", False, False), top
        assert (top["seqadj"] is not None) == (ordinal == 1), top


def test_a_bridged_flows_capture_listens_on_its_ports_and_holds_only_it(bridged):
    """The Flows page's capture of a bridged connection: fw's routes cannot place it
    (the bridge has no address: no route, or the wrong one), its class's zones do - both
    bridge ports; its filter holds that connection on both, and nothing else."""
    folder, flows = bridged
    found = load(folder, "flow-capture.json")
    data_port = flows["plain"].client[1]
    assert found["orig"]["sport"] == data_port, found
    assert found["ports"] == ["veth-c", "veth-s"], found
    assert not any(isinstance(route, list) and route and route[0].get("dev") in
                   ("veth-c", "veth-s") for route in found["routes"].values()), found

    def count(pcap, bpf):
        out = subprocess.run(["tcpdump", "-nn", "-r", str(folder / pcap), bpf],
                             capture_output=True, text=True, check=True).stdout
        return len(out.splitlines())
    for pcap in ("fw-inside.pcap", "fw-outside.pcap"):
        held = count(pcap, found["filter"])
        assert held > 100, (pcap, held)
        assert held == count(pcap, f"tcp port {data_port} and host {SERVER_V4}"), pcap
