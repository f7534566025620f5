"""seqrand-mangle: payload mangling on top of a randomised initial sequence number -
the case in which conntrack's window tracking used to compare a translated ack with
an untranslated correction point. A userspace mangler on nfqueue 0 (guest/nfqueue.py)
lengthens a marker in the first client segment of each connection by 7 bytes and
hands it back with its conntrack entry, so seqadj gets a correction on top of
seqrand's random offset. Each of 12 IPv4 and 6 IPv6 connections (class initiator)
sends the marker, then 64 KB; the server echoes everything it received, and the client
checks the echo is what the mangled stream must be. With the acks of half the
connections marked INVALID and dropped, those connections stall. On IPv6 the
correction point used to be read from the wrong place in the packet (ip_hdrlen() of
an IPv6 header).

Saved: connections.json (per connection: completed or why not), conntrack.json,
after- state (the ruleset's invalid counter among it).
"""
import os
import socket

import conntrack
import seqrand
from nfqueue import Mangler

from lab.namespaces import SERVER_V4, SERVER_V6

TIME_LIMIT = 300
CONNECTIONS = ((socket.AF_INET, SERVER_V4, 12), (socket.AF_INET6, SERVER_V6, 6))
MARKER, LONGER = b"<<MANGLE-ME>>", b"<<MANGLE-ME-LONGER>>"
BULK = 64 * 1024
# segments with a payload (longer than a pure ACK with timestamps)
QUEUE_RULES = (f"tcp dport {seqrand.PORT_INITIATOR} ct state established "
               "ip length > 52 queue num 0",
               f"tcp dport {seqrand.PORT_INITIATOR} ct state established "
               "ip6 length > 32 queue num 0")


def run(ctx):
    lab = ctx.lab()
    seqrand.apply_policy(ctx, lab)
    for rule in QUEUE_RULES:
        ctx.run("nft", "insert", "rule", "inet", "tusk", "forward", *rule.split(), ns=lab.fw)
    mangler = Mangler(lab.fw, 0, MARKER, LONGER)
    results = []
    try:
        for family, server, count in CONNECTIONS:
            for _ in range(count):
                results.append(one_connection(lab, family, server))
    finally:
        mangler.close()
        ctx.save_json("connections.json", results)
        ctx.save_json("mangler.json", {"seen": mangler.seen,
                                       "mangled": [list(f) for f in mangler.mangled]})
    ctx.save_json("conntrack.json", conntrack.entries(lab.fw))
    seqrand.save_state(ctx, lab, "after")


def one_connection(lab, family, server):
    connection = seqrand.Connection(lab, seqrand.PORT_INITIATOR, server, family, timeout=10)
    record = {"client_port": connection.client_port, "server": server}
    try:
        connection.client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        connection.client.sendall(MARKER)
        first = seqrand.read_exactly(connection.server, len(LONGER))
        bulk = os.urandom(BULK)
        connection.client.sendall(bulk)
        rest = seqrand.read_exactly(connection.server, BULK)
        connection.server.sendall(first + rest)
        echo = seqrand.read_exactly(connection.client, len(LONGER) + BULK)
        record["result"] = "ok" if echo == LONGER + bulk else "echo differs"
    except OSError as exc:
        record["result"] = f"failed: {exc!r}"
    finally:
        connection.close()
    return record
