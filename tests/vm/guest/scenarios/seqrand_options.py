"""seqrand-options: segments with odd TCP option lists on a randomised connection
(class both). After a normal exchange the client's namespace sends hand-made pure
ACKs that are in the connection's window (seq = the client's snd_nxt, ack = its
rcv_nxt, learnt from its own capture), each with its own option list: a valid SACK,
one repeated, one not a whole number of blocks, one whose length runs past the
header, a kind byte last, lengths 1 and 0 after a valid block, an end-of-list
followed by garbage. Each has its own IP ID and window (IPv6 has no IP ID); both fw
interfaces are captured. All of it over IPv4, then over IPv6.

Saved: crafted.json ({v4, v6}: the connection's client port and server, IP ID or
window -> option bytes), fw-*.pcap, client-v4/-v6.pcap, before-/after- state
(tcp_options_malformed among the counters).
"""
import socket
import struct

import seqrand
from inet import tcp_packet
from pcaps import ns_socket

from lab.namespaces import CLIENT_V4, CLIENT_V6, SERVER_V4, SERVER_V6

TIME_LIMIT = 180
FIRST_ID = 0x7a00
FAMILIES = (("v4", socket.AF_INET, CLIENT_V4, SERVER_V4),
            ("v6", socket.AF_INET6, CLIENT_V6, SERVER_V6))


def sack(*edges):
    return bytes([5, 2 + 4 * len(edges)]) + b"".join(struct.pack("!I", e % 2**32) for e in edges)


def option_lists(rcv_nxt):
    """name -> option bytes (a multiple of 4). Edges lie in data the client received."""
    a, b, c, d = rcv_nxt - 2000, rcv_nxt - 1500, rcv_nxt - 1000, rcv_nxt - 500
    nop2 = b"\x01\x01"
    return {
        "valid": nop2 + sack(a, b),
        "repeated": nop2 + sack(a, b) + nop2 + sack(c, d),
        "odd-sack": nop2 + sack(a, b) + b"\x05\x06\0\0\0\x09" + nop2,
        "past-header": b"\x01\x01\x05\x22" + struct.pack("!II", a % 2**32, b % 2**32),
        "kind-last": b"\x01" * 11 + b"\x05",
        "length-1": nop2 + sack(a, b) + b"\x22\x01\x01\x01",
        "length-0": nop2 + sack(a, b) + b"\x22\x00\x01\x01",
        "eol-garbage": nop2 + sack(a, b) + b"\x00\x05\x01\xff",
    }


def run(ctx):
    lab = ctx.lab()
    seqrand.real_checksums(ctx, lab)
    seqrand.apply_policy(ctx, lab)
    seqrand.save_state(ctx, lab, "before")
    crafted = {}
    # from the handshake on: the host learns the connections' offsets from it
    with ctx.capture(lab.fw, "veth-c", "fw-inside", "tcp"), \
            ctx.capture(lab.fw, "veth-s", "fw-outside", "tcp"):
        for name, family, client, server in FAMILIES:
            crafted[name] = craft(ctx, lab, name, family, client, server)
    ctx.save_json("crafted.json", crafted)
    seqrand.save_state(ctx, lab, "after")


def craft(ctx, lab, name, family, client, server):
    """One connection of the family, the crafted ACKs on it, then a last exchange ->
    {client_port, server, port, segments: {IP ID (IPv4) or window (IPv6): what was
    sent}}."""
    connection = seqrand.Connection(lab, seqrand.PORT_BOTH, server, family=family)
    with ctx.capture(lab.client, "eth0", f"client-{name}", "tcp") as capture:
        connection.exchange(b"o" * 3000)
        segments = capture.wait_for(
            lambda found: any(s.src == server and s.size for s in found),
            what="the server's data")
    last = [s for s in segments if s.src == server and s.size][-1]
    rcv_nxt, snd_nxt = last.seq + last.size, last.ack
    crafted = {}
    with ns_socket(lab.client, family, socket.SOCK_RAW, socket.IPPROTO_RAW) as raw:
        for index, (kind, options) in enumerate(option_lists(rcv_nxt).items()):
            # IPv6 has no IP ID: the window (which fw leaves alone) tells them apart
            mark = FIRST_ID + index
            raw.sendto(tcp_packet(family, client, server, connection.client_port,
                                  seqrand.PORT_BOTH, snd_nxt, rcv_nxt, 0x10, options,
                                  ipid=mark, window=mark), (server, 0))
            crafted[mark] = {"name": kind, "options": options.hex()}
    # the connection still works after all of them
    connection.exchange(b"after")
    connection.close()
    return {"client_port": connection.client_port, "server": server,
            "port": seqrand.PORT_BOTH, "segments": crafted}
