"""ha-seqrand: a randomised flow that survives the failover of a pair of firewalls
(tests/netns/hapair.py: fwA and fwB, keepalived and conntrackd as ha/core/render.py
configures them, the pair's host table) on Tusk's kernel. Each firewall has the Tusk
policy with class both (seqrand both) applied with the tusk CLI.

A flow of 16 KB chunks, each echoed and compared, runs through fwA; fwA dies (links
down, daemons killed) and fwB, which conntrackd gave the connection with its offsets,
takes over; fwA comes back as after a boot and learns the connection from fwB; fwB
stops cleanly and fwA takes over again. Twice: without loss, and with 1 % loss on
both segments' endpoint ports (SACK blocks across the failover).

Saved per run (plain, loss): <run>-client.pcap and <run>-server.pcap (the flow at both
endpoints: one offset pair end to end, whichever firewall rewrote it), <run>-flow.json
(chunks echoed, error, the longest wait for one), <run>-{a,b}-seqadj-*.json (each
firewall's counters at the end), <run>-b-entries.json (fwB's table before the
failover, offsets included), <run>-a-entries.json (fwA's after it learnt the
connection back), <run>-nstat-{client,server}.json, <run>-sync-{a,b}.json.
"""

import conntrack
import seqrand
from hapair import Flow, Pair
from scenario import pair_firewall, pair_policy

TIME_LIMIT = 420
PORT = seqrand.PORT_BOTH
ADVERT_MS = 1000        # under TCG a guest may stall for a few 100 ms: no false takeover
POLICY = pair_policy("both", PORT, ", seqrand: both")
RUNS = (("plain", None), ("loss", "1%"))


def run(ctx):
    policy = ctx.dir / "policy.yaml"
    policy.write_text(POLICY)
    for name, loss in RUNS:
        one_run(ctx, name, loss, policy)


def one_run(ctx, name, loss, policy):
    firewall = pair_firewall(ctx, policy, name)

    pair = Pair("ha", ctx.dir / f"{name}-pair", advert_ms=ADVERT_MS, firewall=firewall)
    try:
        pair.up()
        # checksums computed by the endpoints' stacks, not left to an offload veth
        # never performs: the captures are then verified segment by segment
        for who in ("client", "server"):
            pair.run(who, "ethtool", "-K", "eth0", "tx", "off")
        if loss:
            for switch, port in (("in", "client-eth0"), ("out", "server-eth0")):
                pair.run(switch, "tc", "qdisc", "add", "dev", port, "root", "netem",
                         "loss", loss)
        pair.settled(seconds=4)
        with ctx.capture(pair.names["client"], "eth0", f"{name}-client", f"tcp port {PORT}"), \
                ctx.capture(pair.names["server"], "eth0", f"{name}-server",
                            f"tcp port {PORT}"):
            flow = Flow(pair, PORT, chunk_bytes=16384, pause=0.01, timeout=30)
            try:
                failover(ctx, pair, flow, name)
            finally:
                flow.finish()
                ctx.save_json(f"{name}-flow.json", {
                    "client_port": flow.client_port, "echoed": flow.echoed,
                    "error": repr(flow.error) if flow.error else "",
                    "longest_wait": round(flow.longest_wait, 3)})
        for side in ("a", "b"):
            ctx.save_json(f"{name}-{side}-seqadj.json", counters(pair, side))
        for who in ("client", "server"):
            ctx.run("nstat", "--ignore", "--zeros", "--noupdate", "--json",
                    ns=pair.names[who], save=f"{name}-nstat-{who}.json")
    finally:
        pair.down()


def failover(ctx, pair, flow, name):
    flow.progress(30, seconds=60)
    learnt(ctx, pair, "b", name)
    pair.fail("a")
    pair.wait_state("b", "MASTER", seconds=30)
    flow.progress(60, seconds=90)
    pair.reboot("a")
    pair.wait_state("a", "BACKUP", seconds=30)
    learnt(ctx, pair, "a", name)
    pair.stop("b")
    pair.wait_state("a", "MASTER", seconds=30)
    flow.progress(60, seconds=90)


def learnt(ctx, pair, side, name):
    """Once the backup has the connection: its table and its sync's report, saved."""
    pair.wait_entries(side, PORT, seconds=60)
    ctx.save_json(f"{name}-{side}-entries.json", conntrack.entries(pair.names[side]))
    ctx.save_json(f"{name}-sync-{side}.json", pair.stats(side))


def counters(pair, side):
    text = pair.run(side, "cat", "/proc/net/nf_conntrack_seqadj").stdout
    return {key: int(value) for key, value in (line.split() for line in text.splitlines())}
