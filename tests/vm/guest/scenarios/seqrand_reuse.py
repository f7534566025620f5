"""seqrand-reuse: a client reuses its source port while fw still holds the old
connection as ESTABLISHED - both endpoints forgot it without fw seeing a reset (each
aborts with its outgoing resets dropped in its own namespace), as after a crash or a
lost reset. conntrack lets the new SYN through as "ignored" and takes the server's
SYN/ACK that acknowledges it as the sign to follow the new connection; with a
randomised offset on the entry it used to compare that ack across sequence spaces,
never matched, kept the old window and marked the new connection's segments
INVALID. Per class (both, initiator, plain) and family: a connection, the silent
abort, the same client port again, an exchange.

Saved: results.json (per class and family: the old entry's state before the reuse,
how the new connection went), before-/after- state.
"""
import socket

import conntrack
import seqrand

from lab.namespaces import SERVER_V4, SERVER_V6

TIME_LIMIT = 180
CLASSES = (("both", seqrand.PORT_BOTH), ("initiator", seqrand.PORT_INITIATOR),
           ("plain", seqrand.PORT_PLAIN))
FAMILIES = (("v4", socket.AF_INET, SERVER_V4), ("v6", socket.AF_INET6, SERVER_V6))
QUIET = """table inet quiet {
    chain out {
        type filter hook output priority 0;
        tcp flags rst drop
    }
}
"""


def run(ctx):
    lab = ctx.lab()
    seqrand.apply_policy(ctx, lab)
    seqrand.save_state(ctx, lab, "before")
    results = []
    for name, port in CLASSES:
        for family_name, family, server in FAMILIES:
            record = {"class": name, "family": family_name}
            results.append(record)
            old = seqrand.Connection(lab, port, server, family)
            old.exchange(b"the old connection")
            record["client_port"] = old.client_port
            forget(ctx, lab, old)
            record["old_state"] = state_of(lab, old.client_port, server, port)
            try:
                new = seqrand.Connection(lab, port, server, family,
                                         client_port=old.client_port)
                payload = b"the new connection, same ports " * 40
                record["result"] = "ok" if new.exchange(payload) == payload else "echo differs"
            except OSError as exc:
                record["result"] = f"failed: {exc!r}"
            record["new_state"] = state_of(lab, old.client_port, server, port)
            if record["result"] == "ok":
                new.close()
    ctx.save_json("results.json", results)
    seqrand.save_state(ctx, lab, "after")


def forget(ctx, lab, connection):
    """Both ends abort the connection; the resets never leave their namespaces, so fw
    keeps the entry ESTABLISHED."""
    for ns in (lab.client, lab.server):
        ctx.run("nft", "-f", "-", ns=ns, input=QUIET)
    connection.close()                   # SO_LINGER 0: an abort, a reset each way
    for ns in (lab.client, lab.server):
        ctx.run("nft", "delete", "table", "inet", "quiet", ns=ns)


def state_of(lab, client_port, server, port):
    return conntrack.find(conntrack.entries(lab.fw), client_port, port, server)["tcp_state"]
