"""seqrand-fastpath: connections of class fast, randomised (both) and offloaded to the
flowtable, whose fast path translates them (kernel-patches/0015). Per family:

- transfer: 4 MB each way with SHA-256 checks; the entry read mid-connection must be
  offloaded;
- update (IPv4): the client's offset is changed over ctnetlink while the connection
  is offloaded, as conntrackd updates an entry; the client's next segment ("probe")
  must leave fw with the new offset, and once the offset is put back its
  retransmission with the old one, and the connection goes on;
- fin: an orderly close each way, which takes the slow path (FIN tears the flow
  down): both ends must read the end of the stream;
- reset: a connection closed with a reset: the server must see it.

Captured on both fw interfaces (headers and the first bytes of payload). Saved:
results.json, entries.json (mid-connection entries by family), update.json (the
offsets before and during the update, when it was in force), fw-inside.pcap and
fw-outside.pcap, before- and after- state.
"""
import socket
import struct
import time

import conntrack
import seqrand

from lab.namespaces import SERVER_V4, SERVER_V6

TIME_LIMIT = 180
SIZE = 4 * 1024 * 1024
SHIFT = 0x10000000              # added to the client's offset by the update
FAMILIES = (("v4", socket.AF_INET, SERVER_V4), ("v6", socket.AF_INET6, SERVER_V6))


def run(ctx):
    lab = ctx.lab()
    seqrand.apply_policy(ctx, lab)
    seqrand.save_state(ctx, lab, "before")
    results, entries, update = {}, {}, {}
    with ctx.capture(lab.fw, "veth-c", "fw-inside", "tcp"), \
            ctx.capture(lab.fw, "veth-s", "fw-outside", "tcp"):
        for name, family, server in FAMILIES:
            connection = seqrand.Connection(lab, seqrand.PORT_FAST, server, family)
            result = results[name] = {"client_port": connection.client_port}
            up = seqrand.transfer(connection.client, connection.server, SIZE)
            down = seqrand.transfer(connection.server, connection.client, SIZE)
            result["transfer"] = up[0] == up[1] and down[0] == down[1]
            entries[name] = conntrack.find(conntrack.entries(lab.fw), connection.client_port,
                                           seqrand.PORT_FAST)
            if family == socket.AF_INET:
                update = probe_with_shifted_offset(lab, connection, entries[name])
                result["update"] = update.pop("echo") == b"probe"
            result["fin"] = orderly_close(connection)
            result["reset"] = reset_seen(lab, server, family)
    ctx.save_json("results.json", results)
    ctx.save_json("entries.json", entries)
    ctx.save_json("update.json", update)
    seqrand.save_state(ctx, lab, "after")


def probe_with_shifted_offset(lab, connection, entry):
    original = entry["seqadj_orig"]
    shifted = {key: (value + SHIFT) % (1 << 32) if key.startswith("offset") else value
               for key, value in original.items()}
    start = time.time()         # the captures' clock
    conntrack.update_seqadj(lab.fw, entry, shifted)
    during = conntrack.find(conntrack.entries(lab.fw), connection.client_port,
                            seqrand.PORT_FAST)
    connection.client.sendall(b"probe")
    time.sleep(0.5)             # the probe and a retransmission or two leave shifted
    conntrack.update_seqadj(lab.fw, entry, original)
    end = time.time()
    echo = seqrand.read_exactly(connection.server, 5)
    return {"before": original, "during": during, "echo": echo, "window": [start, end]}


def orderly_close(connection):
    connection.client.shutdown(socket.SHUT_WR)
    server_eof = connection.server.recv(1) == b""
    connection.server.shutdown(socket.SHUT_WR)
    client_eof = connection.client.recv(1) == b""
    connection.client.close()
    connection.server.close()
    return server_eof and client_eof


def reset_seen(lab, server, family):
    """Whether the server sees the reset of a client that aborts an offloaded connection."""
    connection = seqrand.Connection(lab, seqrand.PORT_FAST, server, family)
    connection.exchange(b"offloaded")   # the first established packet offloads it,
    connection.exchange(b"offloaded")   # later ones take the fast path
    connection.client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    connection.client.close()
    try:
        connection.server.recv(1)
        seen = False            # the end of the stream, or data: no reset
    except ConnectionResetError:
        seen = True
    except OSError:             # a timeout: the reset never came
        seen = False
    connection.server.close()
    return seen
