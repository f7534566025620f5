"""seqrand-pmtu: path-MTU discovery through a randomised connection (class both).
The client uploads 4 MB to a server that advertises MSS 1460 (its own MTU is 1500)
over a path whose last hop is narrower:

- router: a router behind fw whose link to the server has MTU 1200 (IPv4) or 1280
  (IPv6) sends the "too big" errors; they quote the client's segment as fw rewrote
  it, so fw must translate the quote back or the client drops them as out of window
  and the connection black-holes;
- fw: fw's own interface towards the server has MTU 1200, so fw raises the error
  itself, about the segment before it was rewritten: it must not translate it.

Saved: results.json (per case: completed or why not), route-<case>.txt (the client's
route to the server afterwards), fw-<case>-*.pcap (ICMP on both fw interfaces),
<case>- state (client nstat: OutOfWindowIcmps; seqadj counters).
"""
import socket

import seqrand
from lab.namespaces import SERVER_V4, SERVER_V6

TIME_LIMIT = 300
SIZE = 4 * 1024 * 1024
CASES = (("router-v4", socket.AF_INET, SERVER_V4, {"router_mtu": 1200}, None),
         ("router-v6", socket.AF_INET6, SERVER_V6, {"router_mtu": 1280}, None),
         ("fw-v4", socket.AF_INET, SERVER_V4, {}, 1200))


def run(ctx):
    results = {}
    for name, family, server, lab_options, fw_mtu in CASES:
        lab = ctx.lab(**lab_options)
        seqrand.apply_policy(ctx, lab)
        if fw_mtu:
            lab.mtu(lab.fw, "veth-s", fw_mtu)
        with ctx.capture(lab.fw, "veth-c", f"fw-{name}-inside", "icmp or icmp6"), \
                ctx.capture(lab.fw, "veth-s", f"fw-{name}-outside", "icmp or icmp6"):
            results[name] = upload(lab, family, server)
        flag = "-6" if family == socket.AF_INET6 else "-4"
        ctx.run("ip", flag, "route", "get", server, ns=lab.client, save=f"route-{name}.txt")
        seqrand.save_state(ctx, lab, name)
        lab.down()
    ctx.save_json("results.json", results)


def upload(lab, family, server):
    try:
        connection = seqrand.Connection(lab, seqrand.PORT_BOTH, server, family, timeout=15)
    except OSError as exc:
        return {"completed": False, "error": f"connect: {exc!r}"}
    try:
        sent, received = seqrand.transfer(connection.client, connection.server, SIZE)
        return {"completed": sent == received, "client_port": connection.client_port,
                "error": "" if sent == received else "data differs"}
    except OSError as exc:
        return {"completed": False, "client_port": connection.client_port,
                "error": repr(exc)}
    finally:
        connection.close()
