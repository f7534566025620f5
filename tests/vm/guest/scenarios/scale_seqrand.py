"""scale-seqrand: a randomised flow that survives the failure of the box of a cluster
carrying it (issue 39, item 4; docs/SCALE.md), on Tusk's kernel. tests/netns/cluster.py's
three boxes behind ECMP routers (FRR, BGP with BFD), each box's network, ha.toml (mode
"cluster": conntrackd's multicast) and host table Tusk's own; each box with the Tusk
policy of class both (seqrand both) applied with the tusk CLI.

A flow of 16 KB chunks, each echoed and compared, runs through the box the routers'
hash picks; once every box has the connection with its offsets, that box hangs (every
packet into, out of and through it dropped, its links up), BFD takes it out of both
routers' paths, and the flow goes on through another box, which rewrites it with the
offsets conntrackd gave it. The flow is an elephant: its class's automatic fast path
promotes it on the box carrying it (the hang drops at each link's ingress, ahead of the
flowtable), and on the box that takes it over once it has proved itself there again.

Saved: client.pcap and server.pcap (the flow at both ends: one offset pair end to end,
whichever box rewrote it), flow.json (chunks echoed, error, longest wait, the box that
carried the flow before and after, how long BFD took), fw<i>-entries.json (each box's
table before the failure, offsets included), fw<i>-seqadj.json (each box's counters at
the end), fw<i>-sync.txt (conntrackd's statistics), after-nstat-{client,server}.json.
"""
import shutil
import sys
import time
from pathlib import Path

import conntrack
import seqrand
from cluster import BOXES, Cluster
from kit import wait_until
from scenario import TUSK

from network.core import frr

TIME_LIMIT = 480
PORT = seqrand.PORT_BOTH
BFD_MS = 300      # under TCG a guest may stall for 100s of ms: no false detection
POLICY = (f"version: 1\n"
          f"zones:\n"
          f"  - {{name: inside, interfaces: [up0]}}\n"
          f"  - {{name: outside, interfaces: [down0]}}\n"
          f"services:\n"
          f"  - {{name: both, protocol: tcp, ports: [{PORT}]}}\n"
          f"classes:\n"
          f"  - {{name: both, from: inside, to: outside, services: [both], "
          f"action: accept, seqrand: both}}\n")


def run(ctx):
    policy = ctx.dir / "policy.yaml"
    policy.write_text(POLICY)

    def firewall(lab, i):
        state = ctx.dir / f"fw{i}-tusk-state"
        for args in (("apply", policy), ("confirm",)):
            ctx.run(sys.executable, str(TUSK), "policy", "--netns", lab.boxes[i - 1],
                    "--state-dir", str(state), *map(str, args))

    lab = Cluster("sc", ctx.dir / "cluster", firewall=firewall, bfd_ms=BFD_MS)
    lab.down()
    try:
        lab.up()
        wait_until(lab.ready, 180, lab.unready)
        for who in (lab.client, lab.server):
            # checksums computed by the endpoints' stacks: the captures are verified
            # segment by segment
            ctx.run("ethtool", "-K", "eth0", "tx", "off", ns=who)
        with ctx.capture(lab.client, "eth0", "client", f"tcp port {PORT}"), \
                ctx.capture(lab.server, "eth0", "server", f"tcp port {PORT}"):
            flow = lab.flow(PORT, chunk_bytes=16384, pause=0.01, timeout=30)
            said = {"client_port": flow.client_port}
            try:
                fail_the_carrier(ctx, lab, flow, said)
            finally:
                flow.finish()
                said.update(echoed=flow.echoed, longest_wait=round(flow.longest_wait, 3),
                            error=repr(flow.error) if flow.error else "")
                ctx.save_json("flow.json", said)
        for i in range(1, BOXES + 1):
            text = ctx.run("cat", "/proc/net/nf_conntrack_seqadj", ns=lab.boxes[i - 1]).stdout
            ctx.save_json(f"fw{i}-seqadj.json", {key: int(value) for key, value in (
                line.split() for line in text.splitlines())})
            (ctx.dir / f"fw{i}-sync.txt").write_text(lab.conntrackd_stats(i))
        for who, ns in (("client", lab.client), ("server", lab.server)):
            ctx.run("nstat", "--ignore", "--zeros", "--noupdate", "--json", ns=ns,
                    save=f"after-nstat-{who}.json")
    finally:
        save_frr_logs(ctx, lab)
        lab.down()


def save_frr_logs(ctx, lab):
    """Every router's and box's FRR daemon logs, into frr/<namespace>/."""
    for name in lab.names:
        source = Path(frr.LAB_DIR) / name
        for log in source.glob("*.log") if source.is_dir() else ():
            target = ctx.dir / "frr" / name
            target.mkdir(parents=True, exist_ok=True)
            shutil.copy(log, target / log.name)


def fail_the_carrier(ctx, lab, flow, said):
    flow.progress(30, seconds=60)
    carrier = said["carrier"] = lab.carrier()
    for i in range(1, BOXES + 1):
        # the carrier's own entry, the others' from the multicast, each with the offsets
        wait_until(lambda i=i: lab.entries(i, PORT), 60,
                   lambda i=i: f"fw{i} has the connection:\n{lab.conntrackd_stats(i)}")
        ctx.save_json(f"fw{i}-entries.json", conntrack.entries(lab.boxes[i - 1]))
    failed_at = time.monotonic()
    lab.fail(carrier)
    # the upstream router's paths, as the netns test reads them: one command per look
    wait_until(lambda: f"10.8.{carrier}.2" not in lab.paths(lab.up_router, "10.2.0.0/24"),
               30, f"fw{carrier} out of the upstream router's paths")
    said["detected"] = round(time.monotonic() - failed_at, 3)
    wait_until(lambda: f"10.9.{carrier}.2" not in lab.paths(lab.down_router, "10.1.0.0/24"),
               30, f"fw{carrier} out of the downstream router's paths")
    flow.progress(60, seconds=120)
    said["now"] = lab.carrier()
