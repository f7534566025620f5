"""Frames -> TCP segments.

`decoder(linktype)` returns a function that turns one captured frame into
    (src, dst, sport, dport, seq, ack, flags, window, options, payload_length)
or None when the frame carries no TCP segment we can use (returned as a reason
string, for the report's counts: "not TCP", "fragment", "truncated", ...).

Two paths. The common frame of an elephant flow - Ethernet II (or Linux cooked
capture, or raw IP) with an IPv4 header without options or an IPv6 header without
extension headers, then TCP - is read at the fixed offsets RFC 791/8200/9293 give,
which keeps the analysis above 200 000 packets/s. Everything else (VLAN tags, IP
options, extension headers, odd link types) goes to dpkt, which decodes the whole
frame. tests/diag/test_diag_decode.py checks that both paths agree on every field
for generated frames, so the fast path is an optimisation, not a second parser
with its own ideas.

payload_length comes from the IP header's length fields, not from the bytes
captured: a capture with a short snap length still counts every byte sent, and
keeps whatever part of the TCP options it captured.
"""
import struct

import dpkt

# link types (pcap LINKTYPE_* values)
NULL, EN10MB, RAW, LOOP, RAW_BSD, SLL, SLL2, IPV4, IPV6 = 0, 1, 101, 108, 12, 113, 276, 228, 229

NOT_TCP, FRAGMENT, TRUNCATED, UNDECODABLE = "not TCP", "fragment", "truncated", "undecodable"

_u16 = struct.Struct("!H").unpack_from
_seqack = struct.Struct("!IIBBH").unpack_from   # seq, ack, offset/NS, flags, window


def _tcp(frame, t, src, dst, total_after_tcp_start):
    """The TCP header at offset t. total_after_tcp_start: bytes from the TCP
    header's start to the end of the IP packet, from the IP length fields."""
    if len(frame) < t + 20:
        return TRUNCATED
    doff = (frame[t + 12] >> 4) * 4
    if doff < 20:
        return UNDECODABLE
    # options cut by a short snap length: what was captured of them (as dpkt does)
    sport, dport = _u16(frame, t)[0], _u16(frame, t + 2)[0]
    seq, ack, _, flags, window = _seqack(frame, t + 4)
    payload = total_after_tcp_start - doff
    if payload < 0:
        return UNDECODABLE
    return src, dst, sport, dport, seq, ack, flags, window, frame[t + 20:t + doff], payload


def _fast_ip(frame, at):
    """IPv4 without options or IPv6 without extension headers at offset `at`;
    None sends the frame to dpkt."""
    if len(frame) < at + 40:
        return None
    version = frame[at] >> 4
    if version == 4:
        if frame[at] != 0x45 or frame[at + 9] != 6 or _u16(frame, at + 6)[0] & 0x3fff:
            return None
        return _tcp(frame, at + 20, frame[at + 12:at + 16], frame[at + 16:at + 20],
                    _u16(frame, at + 2)[0] - 20)
    if version == 6:
        if frame[at + 6] != 6 or len(frame) < at + 60:
            return None
        return _tcp(frame, at + 40, frame[at + 8:at + 24], frame[at + 24:at + 40],
                    _u16(frame, at + 4)[0])
    return None


def decoder(linktype):
    """The function decoding frames of this link type (fast path, then dpkt)."""
    slow = _slow(linktype)
    if linktype == EN10MB:
        def decode(frame):
            if frame[12:14] == b"\x08\x00" or frame[12:14] == b"\x86\xdd":
                found = _fast_ip(frame, 14)
                if found is not None:
                    return found
            return slow(frame)
    elif linktype in (RAW, RAW_BSD, IPV4, IPV6):
        def decode(frame):
            found = _fast_ip(frame, 0)
            return slow(frame) if found is None else found
    elif linktype in (SLL, SLL2):
        at, proto = (16, 14) if linktype == SLL else (20, 0)

        def decode(frame):
            if frame[proto:proto + 2] in (b"\x08\x00", b"\x86\xdd"):
                found = _fast_ip(frame, at)
                if found is not None:
                    return found
            return slow(frame)
    else:
        decode = slow
    return decode


_LINK = {EN10MB: dpkt.ethernet.Ethernet, SLL: dpkt.sll.SLL, NULL: dpkt.loopback.Loopback,
         LOOP: dpkt.loopback.Loopback}
if hasattr(dpkt, "sll2"):
    _LINK[SLL2] = dpkt.sll2.SLL2


def _slow(linktype):
    link = _LINK.get(linktype)
    raw = linktype in (RAW, RAW_BSD, IPV4, IPV6)

    def decode(frame):
        try:
            if raw:
                if not frame:
                    return TRUNCATED
                ip = (dpkt.ip.IP if frame[0] >> 4 == 4 else dpkt.ip6.IP6)(frame)
            elif link is None:
                return UNDECODABLE
            else:
                ip = link(frame).data
            return from_dpkt(ip)
        except dpkt.NeedData:
            return TRUNCATED
        except (dpkt.Error, struct.error, ValueError, IndexError, KeyError, TypeError):
            return UNDECODABLE
    return decode


def from_dpkt(ip):
    """The segment tuple from a dpkt IP/IP6 object (the reference decoding)."""
    if isinstance(ip, dpkt.ip.IP):
        if ip.mf or ip.offset:
            return FRAGMENT
        tcp = ip.data
        if not isinstance(tcp, dpkt.tcp.TCP):
            return NOT_TCP if ip.p != 6 else TRUNCATED
        payload = ip.len - ip.hl * 4 - tcp.off * 4
    elif isinstance(ip, dpkt.ip6.IP6):
        tcp = ip.data
        if not isinstance(tcp, dpkt.tcp.TCP):
            return FRAGMENT if 44 in getattr(ip, "extension_hdrs", {}) else NOT_TCP
        payload = len(tcp.data)
        if not getattr(ip, "extension_hdrs", None) or not any(ip.extension_hdrs.values()):
            payload = ip.plen - tcp.off * 4
    else:
        return NOT_TCP
    if tcp.off < 5 or payload < 0:
        return UNDECODABLE
    return (bytes(ip.src), bytes(ip.dst), tcp.sport, tcp.dport, tcp.seq, tcp.ack,
            tcp.flags & 0xff, tcp.win, bytes(tcp.opts), payload)
