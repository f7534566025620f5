"""hook-bypass: the IDS hook's bypass on Tusk's kernel (the host kernel has no
flowtables). A policy whose bulk class never takes the fast path (fastpath: never), the
hook's table (flows/core/hook.py) with its flowtable over the policy's interfaces, and a
bypass of the server's address: an iperf3 flow of that class must then be offloaded to
the hook's flowtable, whatever its class says. And a port the policy drops: with the
same bypass in force, its connection never gets through - a bypass goes after the
policy, never past it.

Saved: policy.yaml, bypassed-*.json (iperf3), bypassed-entries.json (conntrack entries
during the flow), dropped.json (the connection attempt), hook.txt (the table, listed).
"""
import subprocess

import conntrack
import seqrand
from scenario import listening

from flows.core import hook
from lab.namespaces import SERVER_V4
from tusklib.target import Target
from tusklib.values import InterfaceName

TIME_LIMIT = 120
SECONDS = 3
PORT, DROPPED = 5202, 5209
POLICY = f"""\
version: 1
zones:
  - {{name: inside, interfaces: [veth-c]}}
  - {{name: outside, interfaces: [veth-s]}}
services:
  - {{name: bulk, protocol: tcp, ports: [{PORT}]}}
classes:
  - {{name: bulk, from: inside, to: outside, services: [bulk], action: accept,
     fastpath: never}}
"""


def run(ctx):
    lab = ctx.lab()
    seqrand.apply_policy(ctx, lab, POLICY)
    target = Target(lab.fw)
    request = hook.request_of({"action": "bypass", "prefix": f"{SERVER_V4}/32", "ttl": 300,
                               "reason": "vetted transfer"})
    assert hook.add(target, request, [InterfaceName("veth-c"), InterfaceName("veth-s")])
    ctx.save_text("hook.txt", ctx.run("nft", "list", "table", "inet", "tusk_hook",
                                      ns=lab.fw).stdout)
    with open(ctx.dir / "bypassed-server.json", "w") as report:
        server = lab.popen(lab.server, "iperf3", "--server", "--one-off", "--json", "--port",
                           str(PORT), stdout=report, stderr=subprocess.STDOUT,
                           stdin=subprocess.DEVNULL)
        ctx.wait_until(lambda: listening(lab, PORT), 30, "iperf3 -s")
        with open(ctx.dir / "bypassed-client.json", "w") as out:
            client = lab.popen(lab.client, "iperf3", "--client", SERVER_V4, "--port",
                               str(PORT), "--time", str(SECONDS), "--json", stdout=out,
                               stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
            ctx.wait_until(lambda: offloaded(lab), SECONDS + 5,
                           "the bypassed connection on the hook's flowtable")
            ctx.save_json("bypassed-entries.json", conntrack.entries(lab.fw))
            client.wait(SECONDS + 60)
        server.wait(30)
    ctx.save_json("dropped.json", {"connected": connects(lab, DROPPED)})


def offloaded(lab):
    return any(e["orig"]["dport"] == PORT and e["status"] & conntrack.IPS_OFFLOAD
               for e in conntrack.entries(lab.fw))


def connects(lab, port):
    """Whether a TCP connection from the client reaches a listener on the server's port
    (the policy has no class for it: its default deny drops it)."""
    listener = lab.popen(lab.server, "python3", "-c", (
        "import socket; s = socket.create_server(('0.0.0.0', %d)); s.settimeout(8); "
        "s.accept()" % port), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        probe = subprocess.run(["ip", "netns", "exec", lab.client, "python3", "-c", (
            "import socket, sys; socket.create_connection((sys.argv[1], %d), timeout=3)"
            % port), SERVER_V4], capture_output=True)
        return probe.returncode == 0
    finally:
        listener.kill()
        listener.wait()

