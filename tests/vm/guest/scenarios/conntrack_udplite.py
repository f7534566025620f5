"""conntrack-udplite: UDP-Lite through fw with conntrack verifying checksums
(nf_conntrack_checksum = 1, the kernel's default and the appliance's). conntrack used
to verify UDP-Lite checksums with UDP's protocol number in the pseudo-header, found
every one bad and marked the packets INVALID - and Tusk drops invalid packets. A class
accepts UDP-Lite to one port; the client sends datagrams with full and with partial
checksum coverage over IPv4 and IPv6, the server echoes each.

Saved: results.json (per family and coverage: sent, received by the server, echoes
received by the client), checksum.txt (fw's nf_conntrack_checksum), after- state.
"""
import socket

import seqrand
from pcaps import ns_socket

from lab.namespaces import SERVER_V4, SERVER_V6

TIME_LIMIT = 120
PORT = 5301
COUNT = 20
IPPROTO_UDPLITE, UDPLITE_SEND_CSCOV, UDPLITE_RECV_CSCOV = 136, 10, 11
POLICY = f"""\
version: 1
zones:
  - {{name: inside, interfaces: [veth-c]}}
  - {{name: outside, interfaces: [veth-s]}}
services:
  - {{name: lite, protocol: udplite, ports: [{PORT}]}}
classes:
  - {{name: lite, from: inside, to: outside, services: [lite], action: accept}}
"""
FAMILIES = (("v4", socket.AF_INET, SERVER_V4, "0.0.0.0"),
            ("v6", socket.AF_INET6, SERVER_V6, "::"))
COVERAGES = (("full", 0), ("partial", 12))     # 0: the whole datagram


def run(ctx):
    lab = ctx.lab()
    seqrand.apply_policy(ctx, lab, POLICY)
    ctx.run("sysctl", "-n", "net.netfilter.nf_conntrack_checksum", ns=lab.fw,
            save="checksum.txt")
    results = []
    for family_name, family, server, anywhere in FAMILIES:
        for coverage_name, coverage in COVERAGES:
            results.append({"family": family_name, "coverage": coverage_name,
                            **exchange(lab, family, server, anywhere, coverage)})
    ctx.save_json("results.json", results)
    seqrand.save_state(ctx, lab, "after")


def exchange(lab, family, server, anywhere, coverage):
    with ns_socket(lab.server, family, socket.SOCK_DGRAM, IPPROTO_UDPLITE) as listener, \
            ns_socket(lab.client, family, socket.SOCK_DGRAM, IPPROTO_UDPLITE) as client:
        for sock in (listener, client):
            sock.setsockopt(IPPROTO_UDPLITE, UDPLITE_RECV_CSCOV, 8)   # take partial too
            sock.settimeout(1)
        listener.bind((anywhere, PORT))
        if coverage:
            client.setsockopt(IPPROTO_UDPLITE, UDPLITE_SEND_CSCOV, coverage)
            listener.setsockopt(IPPROTO_UDPLITE, UDPLITE_SEND_CSCOV, coverage)
        received = echoed = 0
        for number in range(COUNT):
            client.sendto(f"datagram {number:04} ".encode() * 8, (server, PORT))
            try:
                data, peer = listener.recvfrom(2048)
            except socket.timeout:
                continue
            received += 1
            listener.sendto(data, peer)
            try:
                echoed += client.recv(2048) == data
            except socket.timeout:
                pass
    return {"sent": COUNT, "received": received, "echoed": echoed}
