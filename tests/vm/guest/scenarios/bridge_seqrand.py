"""bridge-seqrand: sequence randomisation on bridged traffic (issue 39's question: does
the kernel's bridge conntrack confirm through the seqadj step?), with Tusk's policy. fw
bridges veth-c and veth-s with no address (lab bridge=True); the policy's zones are
bridged, so its classes go to table bridge tusk_bridge, built on conntrack's own bridge
hooks (nf_conntrack_bridge, not br_netfilter): class both sets the seqrand-bi helper,
plain does not, diagnostics admits ping; nothing admits port CLOSED. Before the policy,
the ruleset of a policy without bridged zones: the bridge drops everything.

netem on the bridge ports drops 1 % (towards the server while the client uploads,
towards the client while it downloads), so SACK blocks flow both ways; both runs again
over IPv6. Captured on both bridge ports with real checksums; the host pairs every
segment as it does for the routed seqrand-sack (tests/vm/test_bridge.py).

Saved: fw-inside.pcap, fw-outside.pcap, <run>-client.json / -server.json (iperf3),
state before and after each run (seqadj counters, conntrack, both endpoints' nstat,
the bridge table's counters as <run>-nft-counters.json), ruleset.txt, results.json
(what crossed before the policy, and to the closed port).
"""
import json
import socket

import seqrand

from lab.namespaces import SERVER_V4, SERVER_V6

TIME_LIMIT = 300
SECONDS = 3
CLOSED = 5209
POLICY = f"""\
version: 1
zones:
  - {{name: inside, interfaces: [veth-c], bridged: true}}
  - {{name: outside, interfaces: [veth-s], bridged: true}}
services:
  - {{name: rand-both, protocol: tcp, ports: [{seqrand.PORT_BOTH}]}}
  - {{name: plain, protocol: tcp, ports: [{seqrand.PORT_PLAIN}]}}
  - {{name: ping, protocol: icmp}}
  - {{name: ping6, protocol: icmpv6}}
classes:
  - {{name: both, from: inside, to: outside, services: [rand-both], action: accept,
     seqrand: both}}
  - {{name: plain, from: inside, to: outside, services: [plain], action: accept}}
  - {{name: diagnostics, from: inside, to: outside, services: [ping, ping6],
     action: accept}}
"""
# the same zones on routed links: a policy with no bridged zone
UNBRIDGED = """\
version: 1
zones:
  - {name: inside, interfaces: [veth-c]}
  - {name: outside, interfaces: [veth-s]}
"""
RUNS = (("upload", "veth-s", seqrand.PORT_BOTH, (), SERVER_V4),
        ("download", "veth-c", seqrand.PORT_BOTH, ("--reverse",), SERVER_V4),
        ("upload-v6", "veth-s", seqrand.PORT_BOTH, (), SERVER_V6),
        ("download-v6", "veth-c", seqrand.PORT_BOTH, ("--reverse",), SERVER_V6),
        ("plain", "veth-s", seqrand.PORT_PLAIN, (), SERVER_V4))


def impair(ctx, lab, interface):
    for name in ("veth-c", "veth-s"):
        ctx.run("tc", "qdisc", "del", "dev", name, "root", ns=lab.fw, check=False)
    ctx.run("tc", "qdisc", "add", "dev", interface, "root", "netem", "delay", "10ms",
            "loss", "1%", ns=lab.fw)


def save_state(ctx, lab, name):
    seqrand.save_state(ctx, lab, name)
    ctx.run("nft", "-j", "list", "counters", "table", "bridge", "tusk_bridge", ns=lab.fw,
            save=f"{name}-nft-counters.json")


def crosses(ctx, lab, port=None):
    """Whether a ping (port None) or a TCP connection to port crosses the bridge."""
    if port is None:
        return ctx.run("ping", "-c", "1", "-W", "2", SERVER_V4, ns=lab.client,
                       check=False).returncode == 0
    try:
        seqrand.Connection(lab, port, SERVER_V4, socket.AF_INET, timeout=3).close()
        return True
    except OSError:
        return False


def run(ctx):
    lab = ctx.lab(bridge=True)
    seqrand.real_checksums(ctx, lab)
    results = {}
    seqrand.apply_policy(ctx, lab, UNBRIDGED)
    results["before_policy"] = {"ping": crosses(ctx, lab),
                                "tcp": crosses(ctx, lab, seqrand.PORT_PLAIN)}
    seqrand.apply_policy(ctx, lab, POLICY)
    ctx.run("nft", "list", "ruleset", ns=lab.fw, save="ruleset.txt")
    results["with_policy"] = {"ping": crosses(ctx, lab), "closed": crosses(ctx, lab, CLOSED)}
    ctx.save_text("results.json", json.dumps(results, indent=1) + "\n")
    save_state(ctx, lab, "before")
    with ctx.capture(lab.fw, "veth-c", "fw-inside", "tcp"), \
            ctx.capture(lab.fw, "veth-s", "fw-outside", "tcp"):
        for name, interface, port, args, server in RUNS:
            impair(ctx, lab, interface)
            ctx.iperf3(lab, name, port, "--time", str(SECONDS), *args, server=server)
            save_state(ctx, lab, name)
