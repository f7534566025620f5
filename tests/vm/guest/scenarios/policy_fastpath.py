"""policy-fastpath: a Tusk class with the flowtable fast path, a randomised class and
a class that randomises on the fast path, side by side, live on Tusk's kernel (the
host kernel has no flowtables). An iperf3 flow through each; the conntrack entries
read during each flow must show the fast path classes' connections offloaded to the
flowtable and the randomised one not. Applying the policy proves the capability probe
finds the kernel able to translate on the fast path.

Saved: policy.yaml, <class>-*.json (iperf3), <class>-entries.json (conntrack entries
during the flow), after- state.
"""
import subprocess

import conntrack
import seqrand
from scenario import listening

from lab.namespaces import SERVER_V4

TIME_LIMIT = 180
SECONDS = 3
POLICY = f"""\
version: 1
zones:
  - {{name: inside, interfaces: [veth-c]}}
  - {{name: outside, interfaces: [veth-s]}}
services:
  - {{name: rand-both, protocol: tcp, ports: [{seqrand.PORT_BOTH}]}}
  - {{name: bulk, protocol: tcp, ports: [{seqrand.PORT_PLAIN}]}}
  - {{name: rand-fast, protocol: tcp, ports: [{seqrand.PORT_FAST}]}}
classes:
  - {{name: both, from: inside, to: outside, services: [rand-both], action: accept, seqrand: both,
     fastpath: never}}
  - {{name: bulk, from: inside, to: outside, services: [bulk], action: accept, fastpath: true}}
  - {{name: fast, from: inside, to: outside, services: [rand-fast], action: accept,
     seqrand: both, fastpath: true}}
"""
CLASSES = (("bulk", seqrand.PORT_PLAIN), ("both", seqrand.PORT_BOTH), ("fast", seqrand.PORT_FAST))


def run(ctx):
    lab = ctx.lab()
    seqrand.apply_policy(ctx, lab, POLICY)
    for name, port in CLASSES:
        with open(ctx.dir / f"{name}-server.json", "w") as report:
            server = lab.popen(lab.server, "iperf3", "--server", "--one-off", "--json",
                               "--port", str(port), stdout=report, stderr=subprocess.STDOUT,
                               stdin=subprocess.DEVNULL)
            ctx.wait_until(lambda: listening(lab, port), 30, "iperf3 -s")
            with open(ctx.dir / f"{name}-client.json", "w") as out:
                client = lab.popen(lab.client, "iperf3", "--client", SERVER_V4, "--port",
                                   str(port), "--time", str(SECONDS), "--json", stdout=out,
                                   stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
                # iperf3's control and data connections, both past their handshake
                ctx.wait_until(lambda: len(assured(lab, port)) == 2, SECONDS,
                               f"the {name} connections")
                ctx.save_json(f"{name}-entries.json", conntrack.entries(lab.fw))
                client.wait(SECONDS + 60)
            server.wait(30)
    seqrand.save_state(ctx, lab, "after")


def assured(lab, port):
    return [e for e in conntrack.entries(lab.fw)
            if e["orig"]["dport"] == port and e["status"] & conntrack.IPS_ASSURED]
