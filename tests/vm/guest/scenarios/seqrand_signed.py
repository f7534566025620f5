"""seqrand-signed: SYNs signed with TCP-MD5 (option 19, RFC 2385) or TCP-AO (option
29, RFC 5925) through the randomising classes. Both sign the segment with its
sequence numbers: an offset breaks every MAC, and a BGP session through a seqrand
class never opens. The helper must leave such connections alone and count them.
The client's namespace sends hand-made SYNs - unsigned, MD5, AO - per class (both,
initiator, plain) and family, each from its own source port with a known sequence
number; fw's outside interface is captured.

Saved: sent.json (per SYN: class, family, kind, source port, seq), fw-outside.pcap,
before-/after- state (seqrand_skipped_signed among the counters).
"""
import socket

import seqrand
from inet import tcp_packet
from pcaps import ns_socket

from lab.namespaces import CLIENT_V4, CLIENT_V6, SERVER_V4, SERVER_V6

TIME_LIMIT = 120
FIRST_PORT = 41000
CLASSES = (("both", seqrand.PORT_BOTH), ("initiator", seqrand.PORT_INITIATOR),
           ("plain", seqrand.PORT_PLAIN))
FAMILIES = (("v4", socket.AF_INET, CLIENT_V4, SERVER_V4),
            ("v6", socket.AF_INET6, CLIENT_V6, SERVER_V6))
MSS = b"\x02\x04\x05\xb4"
OPTIONS = {
    "unsigned": MSS,
    # kind 19, length 18: the 16-byte digest; two NOPs to a multiple of 4
    "md5": MSS + b"\x13\x12" + bytes(range(16)) + b"\x01\x01",
    # kind 29, length 16: KeyID, RNextKeyID and a 12-byte MAC (HMAC-SHA-1-96)
    "ao": MSS + b"\x1d\x10\x07\x07" + bytes(range(12)),
}


def run(ctx):
    lab = ctx.lab()
    seqrand.apply_policy(ctx, lab)
    seqrand.save_state(ctx, lab, "before")
    sent, port = [], FIRST_PORT
    with ctx.capture(lab.fw, "veth-s", "fw-outside", "tcp") as capture:
        for family_name, family, client, server in FAMILIES:
            with ns_socket(lab.client, family, socket.SOCK_RAW, socket.IPPROTO_RAW) as raw:
                for name, dport in CLASSES:
                    for kind, options in OPTIONS.items():
                        seq = 0x10000000 + port * 0x1000
                        raw.sendto(tcp_packet(family, client, server, port, dport, seq, 0,
                                              0x02, options, window=64240, ipid=port),
                                   (server, 0))
                        sent.append({"class": name, "family": family_name, "kind": kind,
                                     "sport": port, "seq": seq})
                        port += 1
        capture.wait_for(lambda found: sum(s.syn for s in found) >= len(sent), 10,
                         "every SYN through fw")
    ctx.save_json("sent.json", sent)
    seqrand.save_state(ctx, lab, "after")
