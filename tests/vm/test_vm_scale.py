"""A randomised flow through a cluster of three boxes sharing the load, on Tusk's kernel:
the box carrying it fails and another takes it over (guest scenario scale-seqrand,
tests/vm/guest/scenarios/scale_seqrand.py; issue 39 item 4, docs/SCALE.md), judged from
what it saved: the flow at both endpoints, each box's table and counters."""
import dpkt
import pytest
import seqcheck
from saved import load, nstat
from test_seqrand import assert_translated, entry_for, offset

BOXES = 3
BFD_MS = 300      # the scenario's


@pytest.fixture(scope="module")
def scale(beside_scenario):
    return beside_scenario("scale-seqrand")


def the_flow(folder):
    said = load(folder, "flow.json")
    found = seqcheck.flows(seqcheck.read(folder / "client.pcap"),
                           seqcheck.read(folder / "server.pcap"))
    flows = [f for f in found.values() if f.client[1] == said["client_port"]]
    assert len(flows) == 1, f"{len(flows)} connections from port {said['client_port']}"
    return said, flows[0]


def test_the_flow_goes_on_through_another_box_without_a_reset(scale):
    said, flow = the_flow(scale)
    # 90 chunks of 16 KB, each compared with what was sent: before and after the failure
    assert said["error"] == "" and said["echoed"] >= 90, said
    assert said["now"] != said["carrier"], said
    resets = [str(s) for s in flow.inside + flow.outside if s.flags & dpkt.tcp.TH_RST]
    assert not resets, resets
    retransmitted = nstat(scale, "client").get("TcpRetransSegs", 0)
    print(f"fw{said['carrier']} hung; out of the upstream router's paths after "
          f"{said['detected']:.2f} s; the flow on through fw{said['now']}, its longest "
          f"wait {said['longest_wait']:.2f} s, {retransmitted} segments retransmitted")


def test_bfd_took_the_failed_box_out_and_the_flow_waited_for_it(scale):
    """Three missed 300 ms intervals, zebra's new route and the look that saw it: under
    TCG each `ip` run takes a while, so up to four times BFD's detection. The flow,
    through the hung box until then, waited about as long - proof that it was that
    box's (a flow the hang did not stop would not wait)."""
    said = load(scale, "flow.json")
    # the guest's speed: a busy host stretches every look (tests/vm/README.md)
    stretch = load(scale.parent, "guest.json")["time_scale"]
    detection = 3 * BFD_MS / 1000
    # from the hang: its last BFD packet may have come up to one interval before it
    at_least = detection - BFD_MS / 1000
    assert at_least <= said["detected"] < 4 * detection * stretch, said
    # a flow the hang did not stop waited 0.09 s (the fast path forwarded ahead of a
    # hang at prerouting, found so); one it stopped waits for most of the detection
    assert said["longest_wait"] >= detection / 2, said


def test_one_offset_pair_on_the_wire_whichever_box_rewrote(scale):
    """Every segment at the server is the client's shifted by the handshake's offsets,
    and every ACK and SACK block back, through the failed box and the one after it."""
    _, flow = the_flow(scale)
    assert_translated(flow)


def test_every_box_had_the_offsets_before_the_failure(scale):
    """The carrier's entry is its own; the other boxes' came from conntrackd's multicast
    (NOTRACK), seqrand's offsets in them."""
    said, flow = the_flow(scale)
    r_o, r_r = flow.offsets()
    for i in range(1, BOXES + 1):
        entry = entry_for(load(scale, f"fw{i}-entries.json"), said["client_port"])
        assert entry["helper"] == "seqrand-bi", (i, entry)
        assert offset(entry["seqadj_orig"]) == r_o, (i, entry)
        assert offset(entry["seqadj_reply"]) == r_r, (i, entry)


def test_no_box_took_the_synced_connection_for_a_midstream_one(scale):
    for i in range(1, BOXES + 1):
        counters = load(scale, f"fw{i}-seqadj.json")
        assert counters["seqrand_skipped_midstream"] == 0, (i, counters)
