"""seqrand-handshake: the Tusk policy with one class per randomisation mode (both,
initiator, none) live in fw, applied with the tusk CLI; two IPv4 and two IPv6
connections per class, each an exchange of 3000 bytes, captured on both fw interfaces
with real checksums.

Saved for tests/vm/test_seqrand.py: fw-inside.pcap, fw-outside.pcap,
connections.json (class and client port of each), before-/after- state (seqadj
counters, conntrack entries over ctnetlink).
"""
import os
import socket

import seqrand

from lab.namespaces import SERVER_V4, SERVER_V6

TIME_LIMIT = 180
CLASSES = (("both", seqrand.PORT_BOTH), ("initiator", seqrand.PORT_INITIATOR),
           ("plain", seqrand.PORT_PLAIN))
FAMILIES = ((socket.AF_INET, SERVER_V4), (socket.AF_INET6, SERVER_V6))
PER_FAMILY = 2


def run(ctx):
    lab = ctx.lab()
    seqrand.real_checksums(ctx, lab)
    seqrand.apply_policy(ctx, lab)
    seqrand.save_state(ctx, lab, "before")
    made = []
    with ctx.capture(lab.fw, "veth-c", "fw-inside", "tcp"), \
            ctx.capture(lab.fw, "veth-s", "fw-outside", "tcp"):
        for name, port in CLASSES:
            for family, server in FAMILIES:
                for _ in range(PER_FAMILY):
                    connection = seqrand.Connection(lab, port, server, family)
                    payload = os.urandom(3000)
                    if connection.exchange(payload) != payload:
                        raise AssertionError(f"class {name}: the echo differs")
                    connection.close()
                    made.append({"class": name, "port": port, "server": server,
                                 "client_port": connection.client_port})
    ctx.save_json("connections.json", made)
    seqrand.save_state(ctx, lab, "after")
