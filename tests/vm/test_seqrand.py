"""Sequence randomisation on Tusk's kernel, judged from what the guest scenarios
(tests/vm/guest/scenarios/seqrand_*.py) captured and recorded on both sides of fw.

Each test names the scenario it reads; the scenarios ran once, in the VM the session
booted (conftest.py). Offsets: R_o shifts the client's sequence space as the server
sees it, R_r the server's as the client sees it.
"""
import errno
import json
import struct

import dpkt
import pytest
import seqcheck
from saved import counters_delta, invalid_drops, load, nstat

MOD = 1 << 32
IPS_SEQ_ADJUST, IPS_OFFLOAD, IPS_HW_OFFLOAD = 1 << 6, 1 << 14, 1 << 15


def capture_flows(folder, inside="fw-inside.pcap", outside="fw-outside.pcap", entries=None):
    outside_segments = seqcheck.read(folder / outside)
    if entries is not None:
        outside_segments = seqcheck.translated(outside_segments, seqcheck.nat_endpoints(entries))
    found = seqcheck.flows(seqcheck.read(folder / inside), outside_segments)
    return {flow.client[1]: flow for flow in found.values()}


def flows_by_connection(folder):
    """capture_flows keyed by (client port, server address, server port): the kernel may
    give a client the same ephemeral port towards two servers (IPv4 and IPv6, say), so a
    client port alone does not name one connection of several."""
    found = seqcheck.flows(seqcheck.read(folder / "fw-inside.pcap"),
                           seqcheck.read(folder / "fw-outside.pcap"))
    return {(flow.client[1], *flow.server): flow for flow in found.values()}


def connection_key(connection):
    return connection["client_port"], connection["server"], connection["port"]


def assert_translated(flow, checksums=True):
    r_o, r_r = flow.offsets()
    report = seqcheck.check(flow, r_o, r_r, checksums)
    assert report.pairs > 0, f"flow {flow.client}: nothing seen on both sides"
    assert not report.problems(), "\n".join(report.problems())
    return report


def entry_for(entries, client_port, dport=None, dst=None):
    found = [e for e in entries if e["orig"] and e["orig"]["proto"] == 6
             and e["orig"]["sport"] == client_port
             and (dport is None or e["orig"]["dport"] == dport)
             and (dst is None or e["orig"]["dst"] == dst)]
    assert len(found) == 1, f"{len(found)} conntrack entries for client port {client_port}"
    return found[0]


def offset(seqadj):
    return seqadj["offset_after"] % MOD if seqadj else 0


# -- handshake: offsets per connection, per class ---------------------------------------

@pytest.fixture(scope="module")
def handshake(scenario):
    return scenario("seqrand-handshake")


def test_every_connection_gets_its_own_random_offset(handshake):
    made = load(handshake, "connections.json")
    flows = flows_by_connection(handshake)
    initiator_offsets = []
    for connection in made:
        r_o, r_r = flows[connection_key(connection)].offsets()
        kind = connection["class"]
        if kind == "plain":
            assert (r_o, r_r) == (0, 0), f"{connection}: a class without seqrand was changed"
        else:
            assert r_o != 0, f"{connection}: the initiator's ISN was not offset"
            assert (r_r != 0) == (kind == "both"), f"{connection}: R_r={r_r:#x}"
            initiator_offsets.append(r_o)
    assert len(initiator_offsets) == 8
    assert len(set(initiator_offsets)) == len(initiator_offsets), \
        f"offsets repeat across connections: {[hex(o) for o in initiator_offsets]}"


def test_every_segment_is_translated_with_valid_checksums(handshake):
    verified = 0
    for flow in flows_by_connection(handshake).values():
        verified += assert_translated(flow).checksums_verified
    assert verified > 100


def test_ctnetlink_shows_the_offsets_the_wire_shows(handshake):
    entries = load(handshake, "after-conntrack.json")
    flows = flows_by_connection(handshake)
    for connection in load(handshake, "connections.json"):
        entry = entry_for(entries, connection["client_port"], connection["port"],
                          connection["server"])
        r_o, r_r = flows[connection_key(connection)].offsets()
        helper = {"both": "seqrand-bi", "initiator": "seqrand", "plain": None}
        assert entry["helper"] == helper[connection["class"]], entry
        assert offset(entry["seqadj_orig"]) == r_o, entry
        assert offset(entry["seqadj_reply"]) == r_r, entry


def test_counters_count_randomised_connections(handshake):
    delta = counters_delta(handshake)
    assert delta["seqrand_initiator_randomised"] == 8
    assert delta["seqrand_responder_randomised"] == 4
    assert delta["seqrand_skipped_midstream"] == 0
    assert delta["seqrand_dropped_nomem"] == 0


# -- SACK under loss ---------------------------------------------------------------------

# each run through class both (the slow path) and class fast (the flowtable fast path)
SACK_RUNS = tuple(prefix + run for prefix in ("", "fast-")
                  for run in ("upload", "download", "duplicates", "upload-v6", "download-v6"))
SACK_PREVIOUS = dict(zip(SACK_RUNS, ("before",) + SACK_RUNS[:-1]))


def iperf3_flows(folder, runs):
    """{run: the captured flow of iperf3's data connection} of a scenario's runs."""
    flows = list(capture_flows(folder).values())
    by_run = {}
    for run in runs:
        connected = load(folder, f"{run}-client.json")["start"]["connected"][0]
        # a client port alone is ambiguous: IPv4 and IPv6 connections may share one
        by_run[run] = next(f for f in flows if f.client[1] == connected["local_port"]
                           and f.server[0] == connected["remote_host"])
    return by_run


@pytest.fixture(scope="module")
def sack(scenario):
    """The folder and iperf3's data connection of each run, by run name."""
    folder = scenario("seqrand-sack")
    return folder, iperf3_flows(folder, SACK_RUNS)


@pytest.mark.parametrize("run", [prefix + run for prefix in ("", "fast-") for run in (
    "upload", "download", "upload-v6", "download-v6")])
def test_sack_blocks_are_translated_edge_by_edge(sack, run):
    _, flows = sack
    report = assert_translated(flows[run])
    assert report.sack_blocks >= 20, report


@pytest.mark.parametrize("run", ["duplicates", "fast-duplicates"])
def test_dsack_blocks_are_translated_edge_by_edge(sack, run):
    _, flows = sack
    report = assert_translated(flows[run])
    assert report.dsack_blocks >= 5, report


@pytest.mark.parametrize("run", ["upload", "fast-upload"])
def test_sack_blocks_the_client_receives_lie_in_its_own_space(sack, run):
    _, flows = sack
    assert seqcheck.sack_in_own_space(flows[run]) == []


def test_fast_runs_are_translated_on_the_fast_path(sack):
    """Class fast's segments were translated by the flowtable (kernel-patches/0015),
    class both's by conntrack: the fast path's own counter tells them apart."""
    folder, _ = sack
    for run in SACK_RUNS:
        translated = counters_delta(folder, SACK_PREVIOUS[run], run)[
            "flowtable_packets_translated"]
        if run.startswith("fast-"):
            assert translated > 1000, (run, translated)
        else:
            assert translated == 0, (run, translated)


SENDERS = [("upload", "client"), ("download", "server"),
           ("fast-upload", "client"), ("fast-download", "server")]


@pytest.mark.parametrize("run,sender", SENDERS)
def test_only_lost_segments_are_retransmitted(sack, run, sender):
    _, flows = sack
    seqcheck.assert_sack_recovery(seqcheck.retransmissions(flows[run], sender))


@pytest.mark.parametrize("run,sender", SENDERS)
def test_senders_use_every_sack_block(sack, run, sender):
    """A sender counts SACK blocks outside what it has in flight as TCPSACKDiscard: the
    FWSM symptom. Under loss alone (no duplicates) there is no other reason for one."""
    folder, _ = sack
    old = nstat(folder, sender, SACK_PREVIOUS[run])
    new = nstat(folder, sender, run)
    delta = {k: new[k] - old.get(k, 0) for k in new}
    assert delta.get("TcpExtTCPSACKDiscard", 0) == 0, delta
    assert delta.get("TcpExtTCPSackRecovery", 0) > 0, delta
    assert delta.get("TcpInCsumErrors", 0) == 0, delta


def test_sack_counter_and_no_invalid(sack):
    folder, flows = sack
    seen = sum(seqcheck.check(f, *f.offsets()).sack_blocks for f in flows.values())
    assert counters_delta(folder, "before", SACK_RUNS[-1])["sack_blocks_translated"] >= seen > 0
    assert invalid_drops(folder, SACK_RUNS[-1]) == 0


# -- 2^32 wrap, long transfer, events ----------------------------------------------------

@pytest.fixture(scope="module")
def wrap(scenario):
    folder = scenario("seqrand-wrap")
    flows = capture_flows(folder)
    bulk = max(flows.values(), key=lambda f: sum(s.length for s in f.inside))
    return folder, bulk


def test_transfer_past_four_gigabytes_completes(wrap):
    folder, _ = wrap
    report = load(folder, "bulk-client.json")
    assert report["end"]["sum_received"]["bytes"] >= 4_400_000_000 > MOD


def test_sequence_numbers_cross_two_to_the_32_on_both_sides(wrap):
    _, bulk = wrap
    report = assert_translated(bulk, checksums=False)
    assert report.wrapped_inside and report.wrapped_outside, report


CLOSING = {4, 5, 6, 7, 8}        # FIN_WAIT, CLOSE_WAIT, LAST_ACK, TIME_WAIT, CLOSE


def test_long_transfer_stays_established_without_invalid(wrap):
    folder, bulk = wrap
    states = [state for sample in load(folder, "states.json") for port, state in sample
              if port == bulk.client[1]]
    # the last samples may catch the orderly close (FIN_WAIT .. CLOSE) before iperf3's
    # process ends; before it, nothing but ESTABLISHED
    while states and states[-1] in CLOSING:
        states.pop()
    assert len(states) >= 3, states
    assert set(states) == {3}, f"TCP states seen (3 = ESTABLISHED): {states}"
    assert invalid_drops(folder) == 0


def test_events_carry_the_offsets(wrap):
    folder, bulk = wrap
    r_o, r_r = bulk.offsets()
    events = [json.loads(line) for line in (folder / "events.jsonl").read_text().splitlines()]
    mine = [e for e in events if e["orig"]["sport"] == bulk.client[1]]
    assert any(offset(e["seqadj_orig"]) == r_o for e in mine), mine
    assert any(offset(e["seqadj_reply"]) == r_r for e in mine), mine


# -- NAT, FTP, payload mangling ------------------------------------------------------------

def test_nat_transfers_arrive_intact(scenario):
    folder = scenario("seqrand-nat")
    transfers = load(folder, "transfers.json")
    assert {t["nat"] for t in transfers} == {"masquerade", "snat", "dnat", "masquerade-v6"}
    assert {t["class"] for t in transfers} == {"both", "initiator", "fast"}
    assert load(folder, "after-seqadj.json")["flowtable_packets_translated"] > 0
    for transfer in transfers:
        assert transfer["upload"][0] == transfer["upload"][1], transfer
        assert transfer["download"][0] == transfer["download"][1], transfer


@pytest.mark.parametrize("nat", ["masquerade", "snat", "dnat", "masquerade-v6"])
def test_nat_connections_are_translated(scenario, nat):
    folder = scenario("seqrand-nat")
    entries = load(folder, f"{nat}-conntrack.json")
    flows = capture_flows(folder, f"fw-inside-{nat}.pcap", f"fw-outside-{nat}.pcap", entries)
    for transfer in (t for t in load(folder, "transfers.json") if t["nat"] == nat):
        report = assert_translated(flows[transfer["client_port"]])
        assert report.pairs > 1000


def test_ftp_through_nat_with_randomised_data_connections(scenario):
    folder = scenario("seqrand-ftp")
    for transfer in load(folder, "transfers.json"):
        assert transfer["upload"][0] == transfer["upload"][1], transfer
        assert transfer["download"][0] == transfer["download"][1], transfer
    entries = [e for e in load(folder, "conntrack.json") if e["orig"]["proto"] == 6]
    control = [e for e in entries if e["helper"] == "ftp"]
    data = [e for e in entries if e["helper"] == "seqrand-bi"]
    assert len(control) == 2 and len(data) == 4, entries
    for entry in data:
        assert offset(entry["seqadj_orig"]) and offset(entry["seqadj_reply"]), entry
    # the FTP helper moved the control connections itself, once per transfer (two):
    # each PASV reply +5 bytes (passive session), each PORT command +2 (active)
    moved = sorted((offset(e["seqadj_orig"]), offset(e["seqadj_reply"])) for e in control)
    assert moved == [(0, 10), (4, 0)], control
    assert "ct state invalid counter packets 0 " in (folder / "ruleset.txt").read_text()


def test_mangling_on_top_of_a_random_offset_keeps_window_tracking(scenario):
    folder = scenario("seqrand-mangle")
    results = load(folder, "connections.json")
    assert [r["result"] for r in results] == ["ok"] * len(results) and len(results) == 18, results
    assert sum(":" in r["server"] for r in results) == 6          # IPv6 among them
    entries = load(folder, "conntrack.json")
    for record in results:
        seqadj = entry_for(entries, record["client_port"], dst=record["server"])["seqadj_orig"]
        assert (seqadj["offset_after"] - seqadj["offset_before"]) % MOD == 7, seqadj
    assert invalid_drops(folder) == 0


# -- resets, ICMP errors, path MTU ---------------------------------------------------------

def test_reject_with_tcp_reset_closes_both_sides(scenario):
    results = load(scenario("seqrand-reject"), "results.json")
    for family in ("v4", "v6"):
        assert results[f"server-{family}"]["socket"] == "reset", results
        assert results[f"client-{family}"]["socket"] == "reset", results


def icmp_messages(path):
    """[(ip packet bytes)] of every ICMP/ICMPv6 message in the capture."""
    found = []
    with open(path, "rb") as handle:
        for _, frame in dpkt.pcap.Reader(handle):
            found.append(bytes(frame[14:]))
    return found


def quote(packet):
    """(outer header length, ICMP bytes, offset of the quoted TCP header in them)."""
    if packet[0] >> 4 == 4:
        header = (packet[0] & 15) * 4
        icmp = packet[header:]
        return header, icmp, 8 + (icmp[8] & 15) * 4
    return 40, packet[40:], 8 + 40


def too_big(packet, family):
    """Whether packet is an ICMP "fragmentation needed" / ICMPv6 "packet too big"."""
    if family == "v4":
        return packet[0] >> 4 == 4 and packet[9] == 1 and packet[(packet[0] & 15) * 4] == 3
    return packet[0] >> 4 == 6 and packet[6] == 58 and packet[40] == 2


def icmp_checksum_ok(packet):
    if packet[0] >> 4 == 4:
        return dpkt.in_cksum(packet[(packet[0] & 15) * 4:]) == 0
    pseudo = packet[8:40] + struct.pack("!I3xB", len(packet) - 40, 58)
    return dpkt.in_cksum(pseudo + packet[40:]) == 0


@pytest.mark.parametrize("family", ["v4", "v6"])
def test_icmp_error_in_the_original_direction_arrives_intact(scenario, family):
    folder = scenario("seqrand-icmp")
    sent = load(folder, "sent.json")[family]
    entry = entry_for(load(folder, "after-conntrack.json"), sent["client_port"])
    r_o, r_r = offset(entry["seqadj_orig"]), offset(entry["seqadj_reply"])
    inside = [p for p in icmp_messages(folder / "fw-inside.pcap")
              if p == bytes.fromhex(sent["packet"])]
    assert inside, "the error was not seen entering fw"
    outside = [p for p in icmp_messages(folder / "fw-outside.pcap") if too_big(p, family)]
    assert len(outside) == 1, outside
    _, icmp_in, at = quote(inside[0])
    _, icmp_out, _ = quote(outside[0])
    seq_in, ack_in = struct.unpack_from("!II", icmp_in, at + 4)
    seq_out, ack_out = struct.unpack_from("!II", icmp_out, at + 4)
    assert seq_out == (seq_in - r_r) % MOD, "the quoted seq is not in the server's space"
    assert ack_out == (ack_in + r_o) % MOD, "the quoted ack is not in the server's view"
    # all else intact: type, code, MTU, the quoted IP header, the rest of the quote
    assert icmp_out[:2] == icmp_in[:2] and icmp_out[4:at + 4] == icmp_in[4:at + 4]
    assert icmp_out[at + 12:] == icmp_in[at + 12:]
    assert icmp_checksum_ok(outside[0])
    mtu = "1300" if family == "v4" else "1280"
    assert f"mtu {mtu}" in (folder / f"route-{family}.txt").read_text(), \
        "the server did not take the error"


def test_path_mtu_discovery_through_a_randomised_flow(scenario):
    folder = scenario("seqrand-pmtu")
    results = load(folder, "results.json")
    cases = (("router-v4", 1200), ("router-v6", 1280), ("fw-v4", 1200), ("tunnel-v4", 1480),
             ("tunnel-plain-v4", 1480), ("router-fast-v4", 1200), ("router-fast-v6", 1280),
             ("fw-fast-v4", 1200), ("tunnel-fast-v4", 1480), ("xfrm-fast-v4", None))
    for case, mtu in cases:
        assert results[case]["completed"], (case, results[case])
        route = (folder / f"route-{case}.txt").read_text()
        if mtu:
            assert f"mtu {mtu}" in route, case
        else:   # ESP's overhead, whatever it comes to
            assert 1300 < int(route.split(" mtu ")[1].split()[0]) < 1500, route
        assert load(folder, f"{case}-seqadj.json")["icmp_quotes_dropped"] == 0, case
        client = nstat(folder, "client", case)
        ignored = client.get("TcpExtOutOfWindowIcmps", 0)
        if case.startswith(("tunnel", "xfrm")):
            # ten errors about one flight at once: Linux ignores some even without
            # seqrand (the plain control); it must take the others
            assert ignored < client["IcmpInDestUnreachs"], (case, ignored)
        else:
            assert ignored == 0, case
    # errors raised beyond fw, and by fw's tunnel egress after fw rewrote the segment -
    # with class fast too, whose connection keeps the slow path's window there (0025:
    # offloaded, the first error went back untranslated and the client ignored it)
    for case in ("router-v4", "router-v6", "tunnel-v4", "router-fast-v4", "router-fast-v6",
                 "tunnel-fast-v4"):
        assert load(folder, f"{case}-seqadj.json")["icmp_quotes_translated"] > 0, case
    # fw's forwarding raises its errors before it rewrites the segment: nothing to translate
    for case in ("fw-v4", "fw-fast-v4"):
        assert load(folder, f"{case}-seqadj.json")["icmp_quotes_translated"] == 0, case
    # class fast went the flowtable's way, class both conntrack's - and class fast
    # into a tunnel or an xfrm bundle conntrack's too (0025)
    for case, _ in cases:
        fast = load(folder, f"{case}-seqadj.json")["flowtable_packets_translated"]
        offloaded = "-fast-" in case and not case.startswith(("tunnel", "xfrm"))
        assert (fast > 0) == offloaded, (case, fast)


def test_path_mtu_discovery_through_act_ct(scenario):
    """The seqrand helper run by tc's conntrack action: the router's errors about the
    client's rewritten segments reach the client translated back (0024)."""
    folder = scenario("seqrand-act-ct")
    result = load(folder, "results.json")
    counters = load(folder, "after-seqadj.json")
    # the helper did run there: the client's ISN was offset, at ingress
    assert counters["seqrand_initiator_randomised"] == 1, counters
    assert result["completed"], result
    assert "mtu 1200" in (folder / "route.txt").read_text(), "the client took no error"
    errors = [p for p in icmp_messages(folder / "fw-inside.pcap") if too_big(p, "v4")]
    assert errors and counters["icmp_quotes_translated"] == len(errors), \
        (len(errors), counters)
    assert counters["icmp_quotes_dropped"] == 0, counters
    assert nstat(folder, "client").get("TcpExtOutOfWindowIcmps", 0) == 0


# -- odd options, ctnetlink restore, synproxy -------------------------------------------------

@pytest.mark.parametrize("family", ["v4", "v6"])
def test_odd_option_lists_are_forwarded_and_counted(scenario, family):
    folder = scenario("seqrand-options")
    crafted = load(folder, "crafted.json")[family]
    flow = flows_by_connection(folder)[connection_key(crafted)]
    r_o, r_r = flow.offsets()
    # a crafted segment's mark: its IP ID (IPv4), its window (IPv6, which has no IP ID)
    mark = (lambda s: s.ipid) if family == "v4" else (lambda s: s.window)
    for number, what in crafted["segments"].items():
        sent = [s for s in flow.inside
                if mark(s) == int(number) and s.options.hex() == what["options"]]
        got = [s for s in flow.outside if mark(s) == int(number) and s.length == 0]
        assert len(sent) == 1, f"{what['name']}: not seen entering fw"
        assert len(got) == 1, f"{what['name']}: dropped by fw"
        sent, got = sent[0], got[0]
        assert got.seq == (sent.seq + r_o) % MOD and got.ack == (sent.ack - r_r) % MOD, what
        # each well-formed SACK block up to the first malformed option translated,
        # everything else byte for byte
        assert got.options == seqcheck.shifted_sack(sent.options, -r_r), \
            f"{what['name']}: {sent.options.hex()} -> {got.options.hex()}"
        assert got.checksum_ok, what
    # five malformed lists per family
    assert counters_delta(folder)["tcp_options_malformed"] == 10


def test_restored_entry_carries_the_connection_on(scenario):
    folder = scenario("seqrand-ctnetlink")
    results = load(folder, "results.json")
    assert results["restored"]["continued"], results
    # a restored randomised entry of a fast-path class takes the fast path again
    fast = results["restored-fast"]
    assert fast["continued"], fast
    assert fast["entry"]["status"] & IPS_OFFLOAD, "the restored entry stayed off the fast path"
    assert fast["entry"]["helper"] == "seqrand-bi" and offset(fast["entry"]["seqadj_orig"])
    assert not results["lost"]["continued"], "a connection went on without its entry"
    read = load(folder, "entries.json")["restored"]
    assert read["helper"] == "seqrand-bi" and offset(read["seqadj_orig"]), read
    # the events the connection's own traffic raised (not those of the re-creation)
    mine = load(folder, "traffic-events.json")["restored"]
    assert any(offset(e["seqadj_orig"]) == offset(read["seqadj_orig"]) for e in mine), mine
    assert any(offset(e["seqadj_reply"]) == offset(read["seqadj_reply"]) for e in mine), mine
    # every one of them, not only the one raised when they were set (kernel-patches/0018):
    # a state synchronisation that skipped that one still learns them
    assert all(offset(e["seqadj_orig"]) == offset(read["seqadj_orig"]) for e in mine), mine
    assert load(folder, "after-seqadj.json")["seqrand_skipped_midstream"] >= 1


def test_offsets_for_an_entry_without_the_extension_are_refused(scenario):
    """The lost connection's next segment made an entry in the middle, without seqadj:
    ctnetlink refuses offsets for it (kernel-patches/0018) instead of dropping them in
    silence, so that conntrackd creates the entry again, with them."""
    update = load(scenario("seqrand-ctnetlink"), "results.json")["lost"]["offsets_update"]
    assert update["refused"] == errno.EOPNOTSUPP and update["before"] is None, update


TCP_ESTABLISHED = 3


def test_a_reused_port_opens_a_new_connection_over_a_randomised_entry(scenario):
    folder = scenario("seqrand-reuse")
    results = load(folder, "results.json")
    assert len(results) == 6, results
    for record in results:
        assert record["old_state"] == TCP_ESTABLISHED, record     # fw still held the old one
        assert record["result"] == "ok", record
        assert record["new_state"] == TCP_ESTABLISHED, record
    assert invalid_drops(folder) == 0


def test_signed_syns_are_left_alone_and_counted(scenario):
    """TCP-MD5 and TCP-AO sign the sequence numbers: seqrand must not offset them."""
    folder = scenario("seqrand-signed")
    sent = load(folder, "sent.json")
    out = {s.sport: s for s in seqcheck.read(folder / "fw-outside.pcap")
           if s.flags & 0x12 == 0x02}
    assert len(sent) == 18 and set(out) == {s["sport"] for s in sent}, sorted(out)
    for syn in sent:
        randomised = syn["class"] != "plain" and syn["kind"] == "unsigned"
        assert (out[syn["sport"]].seq != syn["seq"]) == randomised, syn
    delta = counters_delta(folder)
    assert delta["seqrand_skipped_signed"] == 8          # md5, ao x both, initiator x v4, v6
    assert delta["seqrand_initiator_randomised"] == 4


def test_synproxy_connections_are_left_to_synproxy(scenario):
    folder = scenario("seqrand-synproxy")
    results = load(folder, "results.json")
    assert all(r["echo_ok"] for r in results), results
    counters = load(folder, "after-seqadj.json")
    assert counters["seqrand_skipped_synproxy"] == len(results)
    assert counters["seqrand_initiator_randomised"] == 0
    assert "ct state invalid counter packets 0 " in (folder / "ruleset.txt").read_text()


def test_fastpath_classes_are_offloaded_randomised_or_not(scenario):
    folder = scenario("policy-fastpath")
    for name, port in (("bulk", 5202), ("both", 5201), ("fast", 5204)):
        assert load(folder, f"{name}-client.json")["end"]["sum_received"]["bytes"] > 0
        entries = [e for e in load(folder, f"{name}-entries.json")
                   if e["orig"]["proto"] == 6 and e["orig"]["dport"] == port]
        offloaded = [bool(e["status"] & IPS_OFFLOAD) for e in entries]
        if name == "both":
            assert not any(offloaded), entries
        else:
            assert any(offloaded), entries
        if name != "bulk":
            assert all(e["helper"] == "seqrand-bi" and e["seqadj_orig"] for e in entries)
    assert load(folder, "after-seqadj.json")["flowtable_packets_translated"] > 1000


# -- checksum offloads -----------------------------------------------------------------------

def within(ranges, start, length):
    """Whether [start, start + length) lies inside the union of ranges [(start, end)]."""
    position, end = start, start + length
    for a, b in sorted(ranges):
        if a <= position < b:
            position = b
        if position >= end:
            return True
    return position >= end


@pytest.mark.parametrize("case", ["gso", "gro", "gro-list", "gso-fast", "gro-fast",
                                  "gro-list-fast", "gso-v6", "gro-list-v6"])
def test_rewritten_segments_carry_valid_checksums_with_offloads(scenario, case):
    folder = scenario("seqrand-offloads")
    transfer = next(t for t in load(folder, "transfers.json") if t["case"] == case)
    assert transfer["upload"][0] == transfer["upload"][1], transfer
    assert transfer["download"][0] == transfer["download"][1], transfer
    flow = capture_flows(folder, f"{case}-fw-inside.pcap",
                         f"{case}-fw-outside.pcap")[transfer["client_port"]]
    r_o, r_r = flow.offsets()
    client_isn = flow.handshake(flow.inside, False).seq
    server_isn = flow.handshake(flow.outside, True).seq
    # (what the sender put on the wire, what fw sent on, offset, sender's ISN, sender)
    for original, forwarded, shift, isn, from_client in (
            (flow.inside, flow.outside, r_o, client_isn, True),
            (flow.outside, flow.inside, r_r, server_isn, False)):
        ranges = [((s.seq - isn) % MOD, (s.seq - isn) % MOD + s.length)
                  for s in original if flow.from_client(s) == from_client and s.length]
        out = [s for s in forwarded if flow.from_client(s) == from_client and s.length]
        assert len(out) > 1000, (case, len(out))
        bad = [str(s) for s in out if s.checksum_ok is not True]
        assert not bad, f"{case}: {len(bad)} segments fw sent with a bad checksum: {bad[:3]}"
        wrong = [str(s) for s in out
                 if not within(ranges, (s.seq - shift - isn) % MOD, s.length)]
        assert not wrong, f"{case}: segments not translated by the offset: {wrong[:3]}"
    for who in ("client", "server"):
        before, after = nstat(folder, who, f"{case}-before"), nstat(folder, who, f"{case}-after")
        assert after.get("TcpInCsumErrors", 0) == before.get("TcpInCsumErrors", 0), who
    features = (folder / f"{case}-fw-features.txt").read_text()
    if case.startswith("gro-list"):
        assert "rx-gro-list: on" in features and "tx-gso-list: off" in features, features
    moved = counters_delta(folder, f"{case}-before", f"{case}-after")
    fast = moved["flowtable_packets_translated"]
    assert (fast > 0) == case.endswith("-fast"), fast


# -- randomised connections on the flowtable fast path -----------------------------------------

def test_randomised_connections_are_translated_on_the_fast_path(scenario):
    folder = scenario("seqrand-fastpath")
    results, entries = load(folder, "results.json"), load(folder, "entries.json")
    for family in ("v4", "v6"):
        assert results[family]["transfer"], family
        assert results[family]["fin"], f"{family}: an end did not read the end of the stream"
        assert results[family]["reset"], f"{family}: the server never saw the client's reset"
        entry = entries[family]
        assert entry["status"] & IPS_OFFLOAD and entry["helper"] == "seqrand-bi", entry
        assert offset(entry["seqadj_orig"]) and offset(entry["seqadj_reply"]), entry
    assert counters_delta(folder)["flowtable_packets_translated"] > 100
    assert invalid_drops(folder) == 0
    # every IPv4 segment translated by the handshake's offsets, but for those sent while
    # the update test had the client's offset shifted (and the probe, retransmitted
    # after). The endpoints leave checksums to offloads here: seqrand-offloads checks
    # the fast path's checksums.
    start, end = load(folder, "update.json")["window"]
    flow = capture_flows(folder)[results["v4"]["client_port"]]

    def unshifted(segments):
        return [s for s in segments if not start <= s.ts <= end + 0.05
                and s.payload[:5] != b"probe"]

    flow.inside, flow.outside = unshifted(flow.inside), unshifted(flow.outside)
    report = assert_translated(flow, checksums=False)
    assert report.pairs > 200, report


def test_an_offset_changed_over_ctnetlink_applies_to_the_next_offloaded_segment(scenario):
    folder = scenario("seqrand-fastpath")
    results, update = load(folder, "results.json"), load(folder, "update.json")
    assert results["v4"]["update"], "the probe never arrived once the offset was back"
    assert update["during"]["status"] & IPS_OFFLOAD, "the update took the flow off the fast path"
    assert update["during"]["seqadj_orig"]["offset_after"] % MOD == \
        (update["before"]["offset_after"] + 0x10000000) % MOD
    flow = capture_flows(folder)[results["v4"]["client_port"]]
    sent = [s for s in flow.inside if flow.from_client(s) and s.payload[:5] == b"probe"]
    left = [s for s in flow.outside if flow.from_client(s) and s.payload[:5] == b"probe"]
    assert len({s.seq for s in sent}) == 1, [str(s) for s in sent]
    r_o, _ = flow.offsets()
    shifts = [(s.seq - sent[0].seq - r_o) % MOD for s in left]
    # first with the shifted offset, at last (the retransmission that got through) without
    assert shifts[0] == 0x10000000 and shifts[-1] == 0, shifts


# -- which connections with offsets the flowtable takes ---------------------------------------

def test_only_a_helper_that_opts_in_brings_offsets_to_the_flowtable(scenario):
    """kernel-patches/0016: the seqrand helper's connections are offloaded with their
    offsets; synproxy's (no timestamp shift) and offsets set over ctnetlink without
    such a helper keep the slow path, as in Linux 6.12 - 0015 as first written took
    both. Every connection's data came back whole either way."""
    folder = scenario("flowtable-optin")
    results = load(folder, "results.json")
    assert all(r["intact"] for r in results.values()), results
    plain, rand = results["plain"], results["seqrand"]
    assert plain["status"] & IPS_OFFLOAD and not plain["status"] & IPS_SEQ_ADJUST, plain
    assert rand["helper"] == "seqrand-bi" and offset(rand["seqadj_orig"]), rand
    assert rand["status"] & IPS_OFFLOAD and rand["status"] & IPS_SEQ_ADJUST, rand
    for name in ("synproxy", "restored"):
        entry = results[name]
        assert entry["status"] & IPS_SEQ_ADJUST and not entry["helper"], (name, entry)
        assert not entry["status"] & IPS_OFFLOAD, f"the {name} connection took the fast path"
    assert counters_delta(folder)["flowtable_packets_translated"] > 0
    assert "ct state invalid counter packets 0 " in (folder / "ruleset.txt").read_text()


# -- hardware flowtable offload (netdevsim) ----------------------------------------------------

def test_the_hardware_flowtable_takes_plain_fast_path_connections(scenario):
    """The rig can tell: a connection without sequence adjustment reaches the NIC."""
    plain = load(scenario("seqrand-hardware"), "results.json")["plain"]
    assert plain["in_hardware"] and plain["status"] & IPS_HW_OFFLOAD, plain
    # one rule per direction on each of fw's two ports
    assert plain["rules_held"] == 4 and plain["rules_added"] == 4, plain
    assert plain["rules_released"], plain


def test_hardware_never_gets_a_randomised_connection(scenario):
    folder = scenario("seqrand-hardware")
    randomised = load(folder, "results.json")["seqrand"]
    assert randomised["transfer"], randomised
    assert randomised["helper"] == "seqrand-bi" and offset(randomised["seqadj_orig"])
    assert randomised["status"] & IPS_SEQ_ADJUST, randomised
    assert not randomised["status"] & (IPS_OFFLOAD | IPS_HW_OFFLOAD), randomised
    assert randomised["rules_added"] == 0, randomised
    # netdevsim leaves the endpoints' checksums to an offload it never performs (and
    # cannot turn off): seqrand-offloads checks checksums
    assert_translated(capture_flows(folder)[randomised["client_port"]], checksums=False)
    assert invalid_drops(folder) == 0


def test_offsets_for_a_connection_in_hardware_are_refused(scenario):
    """No NIC translates sequence numbers: ctnetlink refuses offsets for an entry in
    hardware (EBUSY, kernel-patches/0022) and nothing of them is applied; the flow stays
    in the NIC and goes on. Before, they were taken and the NIC forwarded the flow
    untranslated until the flowtable's garbage collector took it back."""
    gains = load(scenario("seqrand-hardware"), "results.json")["gains-seqadj"]
    assert gains["restored_in_hardware"], "the restored entry never reached the NIC"
    assert gains["refused"] == errno.EBUSY, gains
    assert not gains["updated_status"] & IPS_SEQ_ADJUST and gains["seqadj_orig"] is None, gains
    # still in the NIC (the flowtable's refresh gives netdevsim the flow's rules again
    # every second: its counters count each replace, so they are no measure here)
    assert gains["status_after"] & IPS_HW_OFFLOAD and gains["rules_held"] >= 4, gains
    assert gains["continued"], gains


def test_connections_translated_on_both_cpus_under_offset_rewrites(scenario):
    folder = scenario("seqrand-smp")
    results = load(folder, "results.json")
    assert all(c["intact"] for c in results["connections"]), results
    assert results["updates"] > 20, results
    fast = [e for e in load(folder, "entries.json") if e["orig"]["dport"] == 5204]
    assert len(fast) == 2 and all(e["status"] & IPS_OFFLOAD for e in fast), fast
    delta = counters_delta(folder)
    assert delta["flowtable_packets_translated"] > 0 and delta["seqrand_skipped_midstream"] == 0
    assert invalid_drops(folder) == 0



def test_a_malformed_offsets_update_changes_neither_direction(scenario):
    """An update whose reply offsets lack offset_after is refused whole: the original
    direction's offsets, well-formed, are not applied either (ctnetlink wrote them and
    half of the reply's before it refused - kernel-patches/0020)."""
    update = load(scenario("seqrand-ctnetlink"), "results.json")["restored"]["half_update"]
    assert update["refused"] == errno.EINVAL, update
    assert update["after"] == update["before"] and None not in update["before"], update


def test_offsets_for_a_udp_entry_are_refused(scenario):
    """Sequence adjustment is TCP's: a UDP entry created with offsets is refused, where
    it was created with the status bit that made nf_confirm() rewrite its packets as
    TCP segments (kernel-patches/0020)."""
    udp = load(scenario("seqrand-ctnetlink"), "results.json")["udp"]
    assert udp["refused"] == errno.EOPNOTSUPP and udp["entries"] == [], udp
