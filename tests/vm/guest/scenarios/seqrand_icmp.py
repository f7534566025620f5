"""seqrand-icmp: an ICMP error travelling in the original direction of a randomised
connection (class both) - "fragmentation needed" / "packet too big" about the
server's segment, sent from the client's side as a router there would send it. The
client learns its sequence numbers from its own capture; the error quotes the
server's next segment as the client sees it. fw must forward the error with every
byte intact but the quoted sequence numbers, translated into the server's space, and
the ICMP checksum; the server must then accept it (the quoted sequence number is in
its window) and lower its path MTU towards the client. IPv4 and IPv6.

Saved: fw-inside.pcap, fw-outside.pcap (ICMP only), sent.json (each error as sent),
route-<family>.txt (the server's route to the client afterwards), after- state.
"""
import socket

import seqrand
from pcaps import ns_socket
from scenario import CommandFailed

from lab.namespaces import CLIENT_V4, CLIENT_V6, SERVER_V4, SERVER_V6

TIME_LIMIT = 180
SETTLE = 5
MTU = {socket.AF_INET: 1300, socket.AF_INET6: 1280}
FAMILIES = (("v4", socket.AF_INET, CLIENT_V4, SERVER_V4),
            ("v6", socket.AF_INET6, CLIENT_V6, SERVER_V6))


def run(ctx):
    from scapy.layers.inet import ICMP, IP, TCP
    from scapy.layers.inet6 import ICMPv6PacketTooBig, IPv6

    lab = ctx.lab()
    seqrand.apply_policy(ctx, lab)
    sent = {}
    with ctx.capture(lab.fw, "veth-c", "fw-inside", "icmp or icmp6", snaplen=512), \
            ctx.capture(lab.fw, "veth-s", "fw-outside", "icmp or icmp6", snaplen=512):
        for name, family, client, server in FAMILIES:
            connection = seqrand.Connection(lab, seqrand.PORT_BOTH, server, family)
            with ctx.capture(lab.client, "eth0", f"client-{name}", "tcp") as capture:
                connection.exchange(b"s" * 1000)
                last = capture.wait_for(
                    lambda segments: any(s.src == server and s.size for s in segments),
                    what="the server's segment")
            seg = [s for s in last if s.src == server and s.size][-1]
            # the server's next segment as the client sees it: seq = its rcv_nxt
            quote = TCP(sport=seg.sport, dport=seg.dport, seq=(seg.seq + seg.size) % 2**32,
                        ack=seg.ack, flags="PA", window=502) / (b"\0" * 64)
            if family == socket.AF_INET:
                error = (IP(src=client, dst=server) /
                         ICMP(type=3, code=4, nexthopmtu=MTU[family]) /
                         IP(src=server, dst=client, flags="DF", ttl=63, len=1500) / quote)
            else:
                error = (IPv6(src=client, dst=server) / ICMPv6PacketTooBig(mtu=MTU[family]) /
                         IPv6(src=server, dst=client, hlim=63, plen=1440) / quote)
            raw = bytes(error)
            sender = ns_socket(lab.client, family, socket.SOCK_RAW, socket.IPPROTO_RAW)
            with sender:
                sender.sendto(raw, (server, 0))
            sent[name] = {"packet": raw.hex(), "quoted_seq": quote.seq, "quoted_ack": quote.ack,
                          "client_port": connection.client_port}
            # the host-side test judges; here only wait (a while) for it to happen
            try:
                ctx.wait_until(lambda: f"mtu {MTU[family]}" in route(lab, family, client),
                               SETTLE, f"the server to take the {name} error")
            except CommandFailed:
                pass
            connection.close()
    for name, family, client, _ in FAMILIES:
        ctx.save_text(f"route-{name}.txt", route(lab, family, client))
    ctx.save_json("sent.json", sent)
    seqrand.save_state(ctx, lab, "after")


def route(lab, family, address):
    flag = "-6" if family == socket.AF_INET6 else "-4"
    return lab.ns(lab.server, "ip", flag, "route", "get", address).stdout
