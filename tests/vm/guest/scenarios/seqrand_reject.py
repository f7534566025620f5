"""seqrand-reject: "reject with tcp reset" in fw on a randomised connection (class
both). A rule inserted at the top of fw's forward chain rejects the server's next
segment: fw answers the server with a reset built from that segment, which the
server must take - its socket fails with ECONNRESET - instead of finding it outside
its window and answering with a challenge ACK. Then the same towards the client on a
second connection (that one always worked: a regression guard). IPv4 and IPv6. Both
fw interfaces are captured.

Saved: results.json (how the reset endpoint's socket ended), fw-*.pcap, after- state.
"""
import socket
import time

import seqrand

from lab.namespaces import CLIENT_V4, CLIENT_V6, SERVER_V4, SERVER_V6

TIME_LIMIT = 120
FAMILIES = (("v4", CLIENT_V4, SERVER_V4), ("v6", CLIENT_V6, SERVER_V6))
SETTLE = 3          # seconds an endpoint gets to act on the reset


def run(ctx):
    lab = ctx.lab()
    seqrand.real_checksums(ctx, lab)
    seqrand.apply_policy(ctx, lab)
    results = {}
    with ctx.capture(lab.fw, "veth-c", "fw-inside", "tcp"), \
            ctx.capture(lab.fw, "veth-s", "fw-outside", "tcp"):
        for family, client, server in FAMILIES:
            for side in ("server", "client"):
                results[f"{side}-{family}"] = reset(ctx, lab, side, family, client, server)
    ctx.save_json("results.json", results)
    seqrand.save_state(ctx, lab, "after")


def reset(ctx, lab, side, family, client, server):
    """fw rejects the next segment `side` sends; returns how side's socket ended."""
    ip = "ip6" if family == "v6" else "ip"
    connection = seqrand.Connection(lab, seqrand.PORT_BOTH, server,
                                    socket.AF_INET6 if family == "v6" else socket.AF_INET)
    connection.exchange(b"before the reset")
    port = seqrand.PORT_BOTH
    rule = (f"{ip} saddr {server} tcp sport {port}" if side == "server"
            else f"{ip} saddr {client} tcp dport {port}") + " reject with tcp reset"
    inserted = ctx.run("nft", "--echo", "--handle", "insert", "rule", "inet", "tusk",
                       "forward", *rule.split(), ns=lab.fw).stdout
    handle = inserted.rsplit("# handle ", 1)[1].split()[0]
    sock = connection.server if side == "server" else connection.client
    sock.sendall(b"this segment is rejected")
    outcome = wait_for_reset(sock, SETTLE)
    ctx.run("nft", "delete", "rule", "inet", "tusk", "forward", "handle", handle, ns=lab.fw)
    connection.close()
    return {"socket": outcome, "client_port": connection.client_port}


def wait_for_reset(sock, seconds):
    """'reset' once the stack has taken a reset, 'closed' for a plain end of stream,
    'open' if neither happened within seconds."""
    deadline = time.monotonic() + seconds
    sock.settimeout(0.2)
    while time.monotonic() < deadline:
        try:
            if sock.recv(4096) == b"":
                return "closed"
        except ConnectionResetError:
            return "reset"
        except socket.timeout:
            pass
    return "open"
