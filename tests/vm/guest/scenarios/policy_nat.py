"""policy-nat: NAT written in a Tusk policy (not hand-written rules, as seqrand-nat
does) together with sequence randomisation, an MSS clamp and the fast path, on Tusk's
kernel (the host kernel has neither the seqrand helper nor flowtables).

The policy masquerades the inside network towards outside and forwards fw's own
address (veth-c, port 5201) to the server. Through the randomised class, iperf3 runs
under 1 % loss (netem on fw, as in seqrand-sack) once to the server directly
(masquerade) and once to fw's address (port forward, then masquerade as well), each
upload and download, captured on both fw interfaces with real checksums. Then a flow
through the fast-path class, which is masqueraded too: its entry must be offloaded
and carry the NAT tuple.

Saved: policy.yaml, fw-inside.pcap, fw-outside.pcap, <run>-client.json /
-server.json, <run>-conntrack.json (entries after each run), bulk-entries.json
(entries during the fast-path flow), before-/after- state.
"""
import subprocess

import conntrack
import seqrand
from scenario import listening

from lab.namespaces import FW_C_V4, SERVER_V4

TIME_LIMIT = 300
SECONDS = 4
POLICY = f"""\
version: 1
zones:
  - {{name: inside, interfaces: [veth-c]}}
  - {{name: outside, interfaces: [veth-s]}}
address_sets:
  - {{name: inside-nets, entries: [10.10.1.0/24]}}
services:
  - {{name: rand-both, protocol: tcp, ports: [{seqrand.PORT_BOTH}]}}
  - {{name: bulk, protocol: tcp, ports: [{seqrand.PORT_PLAIN}]}}
classes:
  - {{name: both, from: inside, to: outside, services: [rand-both], action: accept,
     seqrand: both, mss: {{mode: fixed, value: 1400}}, fastpath: never}}
  - {{name: bulk, from: inside, to: outside, services: [bulk], action: accept,
     fastpath: true}}
nat:
  source:
    - {{name: inside-out, to: outside, source: [inside-nets], translate: masquerade}}
  forwards:
    - {{name: to-server, from: inside, protocol: tcp, ports: [{seqrand.PORT_BOTH}],
       to_address: {SERVER_V4}, class: both}}
"""
# name, where the client connects, the interface netem drops on, iperf3's options
RUNS = (("masquerade-upload", SERVER_V4, "veth-s", ()),
        ("masquerade-download", SERVER_V4, "veth-c", ("--reverse",)),
        ("forward-upload", FW_C_V4, "veth-s", ()),
        ("forward-download", FW_C_V4, "veth-c", ("--reverse",)))


def impair(ctx, lab, interface=None):
    for name in ("veth-c", "veth-s"):
        ctx.run("tc", "qdisc", "del", "dev", name, "root", ns=lab.fw, check=False)
    if interface:
        ctx.run("tc", "qdisc", "add", "dev", interface, "root", "netem", "delay", "10ms",
                "loss", "1%", ns=lab.fw)


def run(ctx):
    lab = ctx.lab()
    seqrand.real_checksums(ctx, lab)
    seqrand.apply_policy(ctx, lab, POLICY)
    seqrand.save_state(ctx, lab, "before")
    with ctx.capture(lab.fw, "veth-c", "fw-inside", "tcp"), \
            ctx.capture(lab.fw, "veth-s", "fw-outside", "tcp"):
        for name, target, interface, args in RUNS:
            impair(ctx, lab, interface)
            ctx.iperf3(lab, name, seqrand.PORT_BOTH, "--time", str(SECONDS), *args,
                       server=target)
            ctx.save_json(f"{name}-conntrack.json", conntrack.entries(lab.fw))
    impair(ctx, lab)
    fast_path(ctx, lab)
    seqrand.save_state(ctx, lab, "after")


def fast_path(ctx, lab):
    port = seqrand.PORT_PLAIN
    with open(ctx.dir / "bulk-server.json", "w") as report:
        server = lab.popen(lab.server, "iperf3", "--server", "--one-off", "--json",
                           "--port", str(port), stdout=report, stderr=subprocess.STDOUT,
                           stdin=subprocess.DEVNULL)
        ctx.wait_until(lambda: listening(lab, port), 30, "iperf3 -s")
        with open(ctx.dir / "bulk-client.json", "w") as out:
            client = lab.popen(lab.client, "iperf3", "--client", SERVER_V4, "--port",
                               str(port), "--time", str(SECONDS), "--json", stdout=out,
                               stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
            # iperf3's control and data connections, both past their handshake
            ctx.wait_until(lambda: len(assured(lab, port)) == 2, SECONDS, "the connections")
            ctx.save_json("bulk-entries.json", conntrack.entries(lab.fw))
            client.wait(SECONDS + 60)
        server.wait(30)


def assured(lab, port):
    return [e for e in conntrack.entries(lab.fw)
            if e["orig"]["dport"] == port and e["status"] & conntrack.IPS_ASSURED]
