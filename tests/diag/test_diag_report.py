"""The health report against simulated connections whose truth is known (simflow):
each test sets one property - a window limit, loss, reordering, a sequence offset
with or without rewritten SACK, a clamp, a stripped option - and checks that the
report finds it, in numbers and in the verdict's words, and finds nothing else."""
import pytest
from simflow import Sim, write_pcap, write_pcapng

from diag.core.analyze import analyze

OFFSET = 0x3A5C1E77


def report_of(tmp_path, **kwargs):
    sim = Sim(**kwargs).run()
    return analyze([write_pcapng(tmp_path / "both.pcapng", sim.packets)]), sim


def only_flow(report):
    assert report["flows_total"] == 1 and len(report["flows"]) == 1
    return report["flows"][0]


def kinds(flow):
    return [f["kind"] for f in flow["findings"]]


def test_window_limited_flow_is_named_with_its_numbers(tmp_path):
    report, _ = report_of(tmp_path, segments=1500, rtt=0.04, bandwidth=1e9,
                          server={"wscale": None})
    flow = only_flow(report)
    verdict = flow["verdict"]
    assert verdict["kind"] == "window-limited" and verdict["severity"] == "problem"
    assert verdict["text"] == ("window-limited: server window 64 KiB at 40 ms caps this flow at "
                               "13.1 Mbit/s (it achieved 12.9 Mbit/s) — the server does not use "
                               "window scaling")
    c2s = flow["directions"]["c2s"]
    assert c2s["window"] == {"min": 65535, "max": 65535, "scaled": False}
    assert c2s["window_limit_bps"] == pytest.approx(65535 * 8 / 0.04, rel=0.01)
    assert c2s["retransmissions"] == {"needed": 0, "spurious": 0}
    assert (flow["handshake"]["client"]["wscale"] == 7
            and flow["handshake"]["server"]["wscale"] is None)


def test_window_limit_blames_the_side_that_did_not_offer_scaling(tmp_path):
    report, _ = report_of(tmp_path, segments=800, rtt=0.04, bandwidth=1e9,
                          client={"wscale": None})
    assert report["flows"][0]["verdict"]["text"].endswith(
        "the client did not offer window scaling, so the server cannot use it")


def test_a_fast_clean_flow_is_healthy(tmp_path):
    report, _ = report_of(tmp_path, segments=600, rtt=0.02, bandwidth=100e6)
    flow = only_flow(report)
    assert flow["verdict"]["kind"] == "healthy"
    assert not [f for f in flow["findings"] if f["severity"] in ("problem", "warning")]
    c2s = flow["directions"]["c2s"]
    assert c2s["new_bytes"] == flow["bytes"]["c2s"] == 600 * 1460
    assert c2s["throughput_bps"] == pytest.approx(100e6, rel=0.02)
    assert flow["handshake"]["rtt_ms"] == pytest.approx(20, abs=0.1)
    assert [p["interface"] for p in flow["points"]] == ["outside", "inside"]


def test_fwsm_sack_outside_the_sequence_space_is_flagged_and_explained(tmp_path):
    report, _ = report_of(tmp_path, segments=800, loss=(100, 300, 301, 500),
                          seq_offset=OFFSET, translate_sack=False)
    flow = only_flow(report)
    assert flow["verdict"]["kind"] == "sack-outside"
    broken = [f for f in flow["findings"] if f["kind"] == "sack-outside"]
    # at the client's side the blocks are in the randomised space: every one outside
    assert len(broken) == 1 and broken[0]["explained"]
    assert "seen at outside" in broken[0]["text"]
    assert f"sequence offset ({OFFSET:#010x}) they fit" in broken[0]["text"]
    sack = flow["directions"]["c2s"]["sack"]
    assert sack["outside"] == sack["blocks"] > 0
    assert flow["directions"]["c2s"]["retransmissions"]["needed"] == 4
    offsets = [c for c in flow["firewall"]["changes"] if c["kind"] == "seq-offset"]
    assert [(c["direction"], c["offset"]) for c in offsets] == [("c2s", OFFSET)]


def test_randomisation_with_rewritten_sack_is_not_flagged(tmp_path):
    report, _ = report_of(tmp_path, segments=800, loss=(100, 300, 301, 500),
                          seq_offset=OFFSET, translate_sack=True)
    flow = only_flow(report)
    assert "sack-outside" not in kinds(flow)
    assert flow["directions"]["c2s"]["sack"]["outside"] == 0
    assert flow["directions"]["c2s"]["sack"]["blocks"] > 0
    assert flow["verdict"]["kind"] == "loss"
    assert flow["verdict"]["text"].startswith(
        "loss: the client retransmitted 4 segments (0.50% of 804 data segments) that the "
        "server needed")


def test_clamp_and_stripped_sack_seen_from_a_pair_of_captures(tmp_path):
    sim = Sim(segments=200, clamp=1380, strip_kinds=(4,)).run()
    one = analyze([write_pcapng(tmp_path / "both.pcapng", sim.packets)])
    outside = write_pcap(tmp_path / "outside.pcap", [p for p in sim.packets if p[1] == "outside"])
    inside = write_pcap(tmp_path / "inside.pcap", [p for p in sim.packets if p[1] == "inside"],
                        nano=True)
    two = analyze([outside, inside])
    for report, names in ((one, ["outside", "inside"]), (two, ["outside.pcap", "inside.pcap"])):
        flow = only_flow(report)
        assert [p["interface"] for p in flow["points"]] == names
        changes = [(c["kind"], c["direction"], c.get("before"), c.get("after"), c.get("option"))
                   for c in flow["firewall"]["changes"]]
        assert changes == [("mss", "c2s", 1460, 1380, None),
                           ("option", "c2s", None, None, "sack_permitted"),
                           ("mss", "s2c", 1460, 1380, None)]
        assert flow["verdict"]["text"].startswith("SACK is off (the firewall removed it)")
        assert flow["directions"]["c2s"]["mss"] == 1380
        assert flow["directions"]["c2s"]["mss_seen"] == 1380


def test_loss_reordering_and_spurious_retransmissions_counted(tmp_path):
    # segments 50 and 120 are overtaken before the firewall: each triggers a fast
    # retransmission that turns out spurious (D-SACK); 200 is resent after its ACK
    report, _ = report_of(tmp_path, segments=500, reorder=(50, 120), resend=(200,), loss=(300,))
    c2s = only_flow(report)["directions"]["c2s"]
    assert c2s["reordered"] == 2
    assert c2s["retransmissions"] == {"needed": 1, "spurious": 3}
    assert c2s["sack"]["dsack"] == 3
    assert len(c2s["series"]["retransmits"]) == 4


def test_sequence_numbers_wrapping_around_are_one_flow(tmp_path):
    report, _ = report_of(tmp_path, segments=400, client_isn=0xFFFFFF00, seq_offset=0x100)
    flow = only_flow(report)
    assert flow["verdict"]["kind"] == "healthy"
    assert flow["bytes"]["c2s"] == 400 * 1460


def test_short_snap_length_still_counts_every_byte(tmp_path):
    report, _ = report_of(tmp_path, segments=300, snaplen=96)
    flow = only_flow(report)
    assert flow["bytes"]["c2s"] == 300 * 1460
    assert flow["verdict"]["kind"] == "healthy"


def test_a_capture_started_mid_flow_is_analysed_without_its_handshake(tmp_path):
    sim = Sim(segments=400).run()
    later = [p for p in sim.packets if p[1] == "outside"][200:]
    flow = only_flow(analyze([write_pcap(tmp_path / "late.pcap", later)]))
    assert flow["handshake"]["client"] is None
    assert "no-handshake" in kinds(flow)
    assert flow["directions"]["c2s"]["retransmissions"] == {"needed": 0, "spurious": 0}
    assert flow["client"] == "10.0.0.1:40000"    # the higher port is the client's


def test_ipv6_flow_and_series_bounded(tmp_path):
    from simflow import frame
    sim = Sim(segments=3000, rtt=0.01, bandwidth=1e9).run()
    import dpkt
    packets = []
    for when, where, data in sim.packets:   # the same flow over IPv6
        ip = dpkt.ethernet.Ethernet(data).data
        tcp = ip.data
        src = ("fd00::1", tcp.sport) if tcp.sport == 40000 else ("fd00::2", tcp.sport)
        dst = ("fd00::2", tcp.dport) if tcp.dport == 5201 else ("fd00::1", tcp.dport)
        packets.append((when, where, frame(src, dst, tcp.seq, tcp.ack, tcp.flags, tcp.win,
                                           tcp.opts, len(tcp.data), ipv6=True)))
    flow = only_flow(analyze([write_pcapng(tmp_path / "v6.pcapng", packets)]))
    assert flow["client"] == "[fd00::1]:40000" and flow["server"] == "[fd00::2]:5201"
    assert flow["bytes"]["c2s"] == 3000 * 1460
    series = flow["directions"]["c2s"]["series"]
    assert 0 < len(series["throughput"]) <= 512 and 0 < len(series["seq"]) <= 601


def test_the_same_ports_used_again_are_two_connections(tmp_path):
    first = Sim(segments=100).run().packets
    second = Sim(segments=50, client_isn=77_000_000, start=first[-1][0] + 5).run().packets
    report = analyze([write_pcapng(tmp_path / "reuse.pcapng", first + second)])
    assert report["flows_total"] == 2
    assert sorted(f["bytes"]["c2s"] for f in report["flows"]) == [50 * 1460, 100 * 1460]
    assert all(f["verdict"]["kind"] == "healthy" for f in report["flows"])
