"""NAT from a Tusk policy on Tusk's kernel, judged from what the guest scenario
policy-nat (tests/vm/guest/scenarios/policy_nat.py) captured on both sides of fw:
masquerade and a port forward through a randomised class with an MSS clamp, SACK
under 1 % loss translated edge by edge; a masqueraded fast-path flow offloaded.
"""
import dataclasses
import struct

import pytest
import seqcheck
from saved import load, nstat
from test_seqrand import IPS_OFFLOAD, assert_translated

FW_C_V4, FW_S_V4, CLIENT_V4, SERVER_V4 = "10.10.1.1", "10.10.2.1", "10.10.1.2", "10.10.2.2"
RUNS = ("masquerade-upload", "masquerade-download", "forward-upload", "forward-download")
IPS_SRC_NAT, IPS_DST_NAT = 1 << 4, 1 << 5
MSS_OPTION = 2
CLASS_SHIFT = 17   # webui/tusklib/names.py: the class's ordinal in the ct mark


@pytest.fixture(scope="module")
def nat(scenario):
    """The folder, every run's conntrack entries, and each run's data connection as both
    captures saw it (the outside capture mapped back through the NAT tuples)."""
    folder = scenario("policy-nat")
    entries = [e for run in RUNS for e in load(folder, f"{run}-conntrack.json")]
    outside = translated(seqcheck.read(folder / "fw-outside.pcap"), entries)
    flows = {flow.client[1]: flow for flow in
             seqcheck.flows(seqcheck.read(folder / "fw-inside.pcap"), outside).values()}
    by_run = {}
    for run in RUNS:
        port = load(folder, f"{run}-client.json")["start"]["connected"][0]["local_port"]
        by_run[run] = flows[port]
    return folder, entries, by_run


def translated(segments, entries):
    """The outside capture in the inside capture's terms, connection by connection: the
    server's address and port stand for the forward's external ones in one connection
    and for themselves in another (seqcheck.nat_endpoints maps single endpoints)."""
    inside_of = {}
    for entry in entries:
        orig, reply = entry["orig"], entry["reply"]
        if orig and orig["proto"] == 6:
            outside = (reply["dst"], reply["dport"], reply["src"], reply["sport"])
            inside_of[outside] = (orig["src"], orig["sport"], orig["dst"], orig["dport"])
            inside_of[outside[2:] + outside[:2]] = (orig["dst"], orig["dport"], orig["src"],
                                                    orig["sport"])
    mapped = []
    for s in segments:
        src, sport, dst, dport = inside_of.get((s.src, s.sport, s.dst, s.dport),
                                               (s.src, s.sport, s.dst, s.dport))
        mapped.append(dataclasses.replace(s, src=src, sport=sport, dst=dst, dport=dport))
    return mapped


def entry_of(entries, client_port):
    found = [e for e in entries if e["orig"] and e["orig"]["proto"] == 6
             and e["orig"]["src"] == CLIENT_V4 and e["orig"]["sport"] == client_port]
    assert found, f"no conntrack entry for client port {client_port}"
    return found[-1]


@pytest.mark.parametrize("run", RUNS)
def test_the_policy_translates_addresses_and_randomises(nat, run):
    folder, entries, flows = nat
    flow = flows[run]
    entry = entry_of(entries, flow.client[1])
    assert entry["helper"] == "seqrand-bi", entry
    assert entry["seqadj_orig"] and entry["seqadj_reply"], entry
    # the class's ordinal (1: both) in the ct mark, beside its TCP profile (1)
    assert entry["mark"] >> CLASS_SHIFT == 1, entry
    # masquerade: the server sees fw's outside address
    assert entry["status"] & IPS_SRC_NAT and entry["reply"]["dst"] == FW_S_V4, entry
    if run.startswith("forward"):
        assert entry["orig"]["dst"] == FW_C_V4, entry
        assert entry["status"] & IPS_DST_NAT and entry["reply"]["src"] == SERVER_V4, entry
    else:
        assert entry["orig"]["dst"] == SERVER_V4 and not entry["status"] & IPS_DST_NAT


@pytest.mark.parametrize("run", RUNS)
def test_sack_blocks_behind_nat_are_translated_edge_by_edge(nat, run):
    _, _, flows = nat
    report = assert_translated(flows[run])
    assert report.sack_blocks >= 20, report


@pytest.mark.parametrize("run", RUNS)
def test_the_mss_clamp_holds_behind_nat(nat, run):
    _, _, flows = nat
    """What leaves fw is clamped: the client's SYN outside, the server's SYN/ACK inside."""
    flow = flows[run]
    left = [flow.handshake(flow.outside, False), flow.handshake(flow.inside, True)]
    assert None not in left, "no SYN outside or SYN/ACK inside"
    for segment in left:
        value = seqcheck.option_value(segment.options, MSS_OPTION)
        assert value is not None and struct.unpack("!H", value)[0] <= 1400, str(segment)


@pytest.mark.parametrize("run", RUNS)
def test_only_lost_segments_are_retransmitted_behind_nat(nat, run):
    _, _, flows = nat
    sender = "server" if run.endswith("download") else "client"
    seqcheck.assert_sack_recovery(seqcheck.retransmissions(flows[run], sender))


def test_senders_discard_no_sack_block_behind_nat(nat):
    folder, _, _ = nat
    for who in ("client", "server"):
        old, new = nstat(folder, who, "before"), nstat(folder, who, "after")
        delta = {k: new[k] - old.get(k, 0) for k in new}
        assert delta.get("TcpExtTCPSACKDiscard", 0) == 0, (who, delta)
        assert delta.get("TcpInCsumErrors", 0) == 0, (who, delta)


def test_a_masqueraded_fast_path_flow_is_offloaded(nat):
    folder, _, _ = nat
    assert load(folder, "bulk-client.json")["end"]["sum_received"]["bytes"] > 0
    entries = [e for e in load(folder, "bulk-entries.json")
               if e["orig"]["proto"] == 6 and e["orig"]["dport"] == 5202]
    assert entries
    for entry in entries:
        assert entry["status"] & IPS_OFFLOAD, entry
        assert entry["status"] & IPS_SRC_NAT and entry["reply"]["dst"] == FW_S_V4, entry
        assert entry["mark"] >> CLASS_SHIFT == 2, entry
