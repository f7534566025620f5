"""A randomised flow through a pair of firewalls on Tusk's kernel, failed over and back
(guest scenario ha-seqrand, tests/vm/guest/scenarios/ha_seqrand.py), judged from what
it saved: the flow at both endpoints, each firewall's table and counters, the sync's.
"""
import json

import dpkt
import pytest
import seqcheck
from saved import load, nstat
from test_seqrand import assert_translated, offset

RUNS = ("plain", "loss")
PORT = 5201


@pytest.fixture(scope="module")
def ha(beside_scenario):
    return beside_scenario("ha-seqrand")


def flow_of(folder, run):
    """What the flow's ends said, and its connection as both endpoints captured it:
    the client's capture is the "inside" of seqcheck, the server's the "outside"."""
    said = load(folder, f"{run}-flow.json")
    found = seqcheck.flows(seqcheck.read(folder / f"{run}-client.pcap"),
                           seqcheck.read(folder / f"{run}-server.pcap"))
    flows = [f for f in found.values() if f.client[1] == said["client_port"]]
    assert len(flows) == 1, f"{len(flows)} connections from port {said['client_port']}"
    return said, flows[0]


def entry_of(folder, name, client_port):
    entries = [e for e in load(folder, name) if e["orig"] and e["orig"]["proto"] == 6
               and e["orig"]["sport"] == client_port and e["orig"]["dport"] == PORT]
    assert len(entries) == 1, json.dumps(entries)
    return entries[0]


@pytest.mark.parametrize("run", RUNS)
def test_the_flow_survives_the_failover_and_the_failback_intact(ha, run):
    said, flow = flow_of(ha, run)
    # 150 chunks of 16 KB, each compared with what was sent: before, between and after
    assert said["error"] == "" and said["echoed"] >= 150, said
    resets = [str(s) for s in flow.inside + flow.outside if s.flags & dpkt.tcp.TH_RST]
    assert not resets, resets


@pytest.mark.parametrize("run", RUNS)
def test_one_offset_pair_on_the_wire_whichever_firewall_rewrote(ha, run):
    """Every segment at the server is the client's shifted by the handshake's offsets,
    and every ACK and SACK block back, through fwA, fwB and fwA again."""
    _, flow = flow_of(ha, run)
    report = assert_translated(flow)
    if run == "loss":
        assert report.sack_blocks >= 10, report


@pytest.mark.parametrize("run", RUNS)
def test_each_firewall_had_the_offsets_before_it_took_over(ha, run):
    said, flow = flow_of(ha, run)
    r_o, r_r = flow.offsets()
    for name in (f"{run}-b-entries.json", f"{run}-a-entries.json"):
        entry = entry_of(ha, name, said["client_port"])
        assert entry["helper"] == "seqrand-bi", entry
        assert offset(entry["seqadj_orig"]) == r_o, entry
        assert offset(entry["seqadj_reply"]) == r_r, entry


@pytest.mark.parametrize("run", RUNS)
def test_no_firewall_took_the_synced_connection_for_a_midstream_one(ha, run):
    for side in ("a", "b"):
        counters = load(ha, f"{run}-{side}-seqadj.json")
        assert counters["seqrand_skipped_midstream"] == 0, (side, counters)


@pytest.mark.parametrize("run", RUNS)
def test_the_sync_put_the_connection_in_without_a_failure(ha, run):
    for side in ("a", "b"):
        health = load(ha, f"{run}-sync-{side}.json")
        assert health["injected"] >= 1 and health["inject_failures"] == 0, (side, health)
        assert health["lost"] == 0 and health["malformed"] == 0, (side, health)


@pytest.mark.parametrize("run", RUNS)
def test_the_endpoints_used_every_sack_block(ha, run):
    for who in ("client", "server"):
        counters = nstat(ha, who, run)
        assert counters.get("TcpExtTCPSACKDiscard", 0) == 0, (who, counters)
        assert counters.get("TcpInCsumErrors", 0) == 0, (who, counters)

