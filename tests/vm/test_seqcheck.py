"""seqcheck's pairing and judging on synthetic segments whose answer is known: what
the seqrand tests of this tier conclude from the captures of fw's two sides. Pure: no
VM is booted (here in the VM tier, whose path has seqcheck).

Segments of one key - RSTs, with IP ID 0 and no payload, IPv6 pure ACKs - were paired
in capture order: one RST dropped or duplicated between the captures (netem's 2 %
duplicates behind fw, seqrand-sack's fast-duplicates run) shifted every later pair by
a segment and reported each as translated one MSS off."""
import socket

import dpkt
import pytest
import seqcheck

MOD = 1 << 32
MSS = 1448
CLIENT, SERVER = ("10.10.1.2", 56664), ("10.10.2.2", 5204)
CLIENT6, SERVER6 = ("fd00:1::2", 56664), ("fd00:2::2", 5204)
R_O, R_R = 1238106386, 3330471994          # the failing run's offsets
RST, ACK = dpkt.tcp.TH_RST, dpkt.tcp.TH_ACK


def segment(src, dst, seq, flags=RST, ack=0, ipid=0, sack=(), family=socket.AF_INET):
    options = b""
    if sack:
        options = bytes([1, 1, seqcheck.SACK, 2 + 8 * len(sack)]) + b"".join(
            (left % MOD).to_bytes(4, "big") + (right % MOD).to_bytes(4, "big")
            for left, right in sack)
    return seqcheck.Segment(
        ts=0.0, family=family, src=src[0], dst=dst[0], sport=src[1], dport=dst[1],
        ipid=None if family == socket.AF_INET6 else ipid, flags=flags, seq=seq % MOD,
        ack=ack % MOD, window=0 if flags == RST else 501, options=options, length=0,
        payload=b"", checksum_ok=None)


def client_rst(seq, shift=0):
    """The client's RST at seq, as the inside capture shows it (shift 0) or the outside
    one (shift R_O)."""
    return segment(CLIENT, SERVER, seq + shift)


def server_rst(seq, shift=0):
    """The server's RST at seq, as the outside capture shows it (shift 0) or the inside
    one (shift R_R)."""
    return segment(SERVER, CLIENT, seq + shift)


def timed(segments, start):
    for n, s in enumerate(segments):
        s.ts = start + n / 1000
    return segments


def judged(inside, outside, client=CLIENT, server=SERVER):
    flow = seqcheck.Flow(client, server, timed(inside, 1.0), timed(outside, 1.01))
    return seqcheck.check(flow, R_O, R_R)


SEQS = [940483515 + n * MSS for n in range(4)]


def test_an_rst_dropped_between_the_captures_shifts_no_other_pair():
    """Inside RSTs a, b, c, d; fw (or what is behind its inside capture) drops b."""
    inside = [client_rst(s) for s in SEQS]
    outside = [client_rst(s, R_O) for s in SEQS if s != SEQS[1]]
    report = judged(inside, outside)
    assert report.problems() == []
    assert (report.pairs, report.unpaired) == (3, 1)


def test_an_rst_duplicated_behind_fw_shifts_no_other_pair():
    """As in the failing run: netem behind fw sends a copy of one client RST, which the
    outside capture sees beside the original."""
    inside = [client_rst(s) for s in SEQS]
    outside = [client_rst(s, R_O) for s in SEQS[:2] + SEQS[1:]]
    report = judged(inside, outside)
    assert report.problems() == []
    assert (report.pairs, report.unpaired) == (5, 0)


def test_the_servers_rsts_pair_by_their_numbers_too():
    """The other direction, with the other offset: fw drops the server's second RST."""
    outside = [server_rst(s) for s in SEQS]
    inside = [server_rst(s, R_R) for s in SEQS if s != SEQS[1]]
    report = judged(inside, outside)
    assert report.problems() == []
    assert report.pairs == 3


def test_ipv6_pure_acks_pair_whichever_order_each_capture_saw_them_in():
    """An endpoint sends pure ACKs from both CPUs: the captures may see them swapped."""
    acks = [SEQS[0], SEQS[2]]
    inside = [segment(CLIENT6, SERVER6, 7, ACK, ack=a, family=socket.AF_INET6,
                      sack=[(a + MSS, a + 2 * MSS)]) for a in acks]
    outside = [segment(CLIENT6, SERVER6, 7 + R_O, ACK, ack=a - R_R, family=socket.AF_INET6,
                       sack=[(a + MSS - R_R, a + 2 * MSS - R_R)]) for a in reversed(acks)]
    report = judged(inside, outside, CLIENT6, SERVER6)
    assert report.problems() == []
    assert (report.pairs, report.sack_blocks) == (2, 2)


@pytest.mark.parametrize("wrong", [1, MSS // 2, R_O], ids=["one", "half-mss", "twice"])
def test_an_rst_translated_wrongly_is_still_reported(wrong):
    """fw moves the client's third RST by R_O + wrong instead of R_O: no inside RST
    carries its numbers, and it is reported, the others not."""
    inside = [client_rst(s) for s in SEQS]
    outside = [client_rst(s, R_O + (wrong if s == SEQS[2] else 0)) for s in SEQS]
    report = judged(inside, outside)
    assert len(report.mismatches) == 1, report.mismatches
    assert f"seq={SEQS[2]} " in report.mismatches[0]


@pytest.mark.parametrize("wrong", [MSS, -MSS])
def test_rsts_translated_a_segment_off_are_still_reported(wrong):
    """Every RST moved by R_O + wrong: where the translations land on another RST's
    numbers they pass for it, but at one end of the run one lands on none, and the
    server's RSTs the same."""
    inside = [client_rst(s) for s in SEQS] + [server_rst(s, R_R + wrong) for s in SEQS]
    outside = [client_rst(s, R_O + wrong) for s in SEQS] + [server_rst(s) for s in SEQS]
    report = judged(inside, outside)
    senders = {m.split(">")[0] for m in report.mismatches}
    assert senders == {"%s:%d" % CLIENT, "%s:%d" % SERVER}, report.mismatches


def test_a_server_rst_seen_inside_only_is_reported():
    """fw cannot make a server's RST of its own: one inside with no outside RST of
    those numbers is a translation gone wrong, even beside correct ones."""
    outside = [server_rst(s) for s in SEQS[:2]]
    inside = [server_rst(s, R_R) for s in SEQS[:2]] + [server_rst(SEQS[3], R_R)]
    report = judged(inside, outside)
    assert len(report.mismatches) == 1, report.mismatches


def test_an_extra_rst_translated_wrongly_is_still_reported():
    """An outside RST beyond every inside one, whose numbers translate to none of them
    (-MSS: what the order pairing saw in the failing run)."""
    inside = [client_rst(s) for s in SEQS]
    outside = [client_rst(s, R_O) for s in SEQS] + [client_rst(SEQS[0] - MSS, R_O)]
    report = judged(inside, outside)
    assert len(report.mismatches) == 1, report.mismatches
    assert f"seq={(SEQS[0] - MSS + R_O) % MOD} " in report.mismatches[0]


def test_a_wrong_ack_is_reported_as_well_as_a_wrong_seq():
    """Pairing by numbers takes the ack and the SACK blocks too: an IPv6 pure ACK whose
    ack fw did not move back by R_R pairs with nothing that matches, and is reported."""
    inside = [segment(CLIENT6, SERVER6, 7, ACK, ack=SEQS[0], family=socket.AF_INET6)]
    outside = [segment(CLIENT6, SERVER6, 7 + R_O, ACK, ack=SEQS[0], family=socket.AF_INET6)]
    report = judged(inside, outside, CLIENT6, SERVER6)
    assert len(report.mismatches) == 1, report.mismatches
