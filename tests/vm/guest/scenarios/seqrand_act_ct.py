"""seqrand-act-ct: the seqrand helper run by tc's conntrack action (act_ct, the glue
Open vSwitch shares: nf_ct_helper()) instead of nftables, and path-MTU discovery
through it (kernel-patches/0024). fw has no ruleset, so no netfilter hook tracks a
packet: a clsact filter on veth-c's ingress commits each connection with the
seqrand helper (the initiator's ISN; tc's helper syntax, family-proto-name, cannot
name seqrand-bi: it splits at every "-"), one on veth-s's ingress looks its packets
up. The rewrite happens there, at ingress.

A router behind fw, whose link to the server has MTU 1200, sends "fragmentation
needed" about the client's segments as fw rewrote them; the error reaches act_ct on
veth-s, which must translate the quote back (the client drops an error whose quote is
out of its window, and the connection black-holes). Before 0024 nf_ct_helper()
returned before anything for an error, since the helper's protocol is TCP.

Saved: results.json (the upload: completed or why not), route.txt (the client's route
to the server afterwards), tc.txt (the filters and their counters), fw-*.pcap (ICMP on
both fw interfaces), after- state (seqadj counters, client nstat).
"""
import socket

import seqrand

from lab.namespaces import SERVER_V4

TIME_LIMIT = 120
SIZE = 2 * 1024 * 1024
PORT = seqrand.PORT_BOTH


def run(ctx):
    lab = ctx.lab(router_mtu=1200)
    for device, action in (("veth-c", ("ct", "commit", "helper", "ipv4-tcp-seqrand")),
                           ("veth-s", ("ct",))):
        ctx.run("tc", "qdisc", "add", "dev", device, "clsact", ns=lab.fw)
        ctx.run("tc", "filter", "add", "dev", device, "ingress", "protocol", "ip", "pref", "1",
                "matchall", "action", *action, ns=lab.fw)
    with ctx.capture(lab.fw, "veth-c", "fw-inside", "icmp"), \
            ctx.capture(lab.fw, "veth-s", "fw-outside", "icmp"):
        result = upload(lab)
    ctx.save_json("results.json", result)
    ctx.run("ip", "-4", "route", "get", SERVER_V4, ns=lab.client, save="route.txt")
    ctx.run("tc", "-s", "filter", "show", "dev", "veth-c", "ingress", ns=lab.fw,
            save="tc.txt")
    seqrand.save_state(ctx, lab, "after")


def upload(lab):
    try:
        connection = seqrand.Connection(lab, PORT, SERVER_V4, socket.AF_INET, timeout=15)
    except OSError as exc:
        return {"completed": False, "error": f"connect: {exc!r}"}
    try:
        sent, received = seqrand.transfer(connection.client, connection.server, SIZE)
        return {"completed": sent == received, "error": "" if sent == received else
                "data differs"}
    except OSError as exc:
        return {"completed": False, "error": repr(exc)}
    finally:
        connection.close()
