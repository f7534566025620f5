"""bench-ha (make bench-ha, not a test): what a failover of the pair costs one flow, on
Tusk's kernel (tests/netns/hapair.py: fwA and fwB with keepalived and conntrackd as
ha/core/render.py configures them, each with a Tusk policy applied with the tusk CLI).

Rows: the flow's class - plain (conntrack only), fast path (flowtable), seqrand (both
directions randomised) - times VRRP's advertisement interval, 1000 ms and 100 ms. Per
row one pair and one flow of echoed 4 KB chunks (each compared), and FAILOVERS
failovers in turn: the master dies (links down, daemons killed), the backup takes over,
the dead box comes back as after a boot and learns the connections; then the other
way. Per failover: the flow's largest gap (the longest wait for a chunk's echo around
it), the endpoints' retransmitted segments, resets, and whether every chunk came back
intact (bytes lost or changed: the flow breaks and says why).

Writes results.json: {row: {"advert_ms", "class", "failovers": [{"gap_s", "retrans",
"resets", "error"}], "echoed", "chunk_bytes", "error" (the flow's: a chunk lost, changed
or late), "stopped" (why a failover could not be made, with "sync": both firewalls'
conntrackd numbers then)}}.
"""
import json
import os
import time

from hapair import Flow, Pair
from scenario import pair_firewall, pair_policy

TIME_LIMIT = 3600
PORT = 5401
FAILOVERS = int(os.environ.get("BENCH_FAILOVERS", "5"))
CHUNK = 4096
PAUSE = 0.01
CLASSES = {
    "plain": "",
    "fast path": ", fastpath: true",
    "seqrand": ", seqrand: both",
}
ADVERTS = tuple(int(a) for a in os.environ.get("BENCH_ADVERTS", "1000,100").split(","))
# the classes to run, their names with - for a space: plain,fast-path,seqrand
WANTED = os.environ.get("BENCH_CLASSES", "plain,fast-path,seqrand").split(",")
NSTAT = ("TcpRetransSegs", "TcpExtTCPAbortOnData", "TcpEstabResets", "TcpOutRsts")


def run(ctx):
    results = {}
    for advert in ADVERTS:
        for name, extra in CLASSES.items():
            if name.replace(" ", "-") not in WANTED:
                continue
            row = f"{name}, {advert} ms"
            results[row] = one_row(ctx, row, name, extra, advert)
            ctx.save_json("results.json", results)


def nstat(ctx, pair, who):
    out = ctx.run("nstat", "--ignore", "--zeros", "--noupdate", "--json",
                  ns=pair.names[who]).stdout
    found = json.loads(out)
    counters = next(iter(found.values())) if found else {}
    return {key: int(counters.get(key, 0)) for key in NSTAT}


def totals(ctx, pair):
    both = [nstat(ctx, pair, who) for who in ("client", "server")]
    return {key: sum(b[key] for b in both) for key in NSTAT}


def one_row(ctx, row, name, extra, advert):
    slug = row.replace(", ", "-").replace(" ", "")
    policy = ctx.dir / f"{slug}.yaml"
    policy.write_text(pair_policy("bench", PORT, extra))

    firewall = pair_firewall(ctx, policy, slug)

    pair = Pair("bh", ctx.dir / f"{slug}-pair", advert_ms=advert, firewall=firewall)
    found = {"advert_ms": advert, "class": name, "chunk_bytes": CHUNK, "failovers": [],
             "error": ""}
    try:
        pair.up()
        pair.settled(seconds=max(3, 12 * advert / 1000))
        flow = Flow(pair, PORT, chunk_bytes=CHUNK, pause=PAUSE, timeout=30)
        master, backup = "a", "b"
        try:
            flow.progress(50, seconds=60)
            for _ in range(FAILOVERS):
                pair.wait_entries(backup, PORT, seconds=60)
                before = totals(ctx, pair)
                flow.longest_wait = 0.0
                pair.fail(master)
                pair.wait_state(backup, "MASTER", seconds=60)
                flow.progress(100, seconds=120)
                after = totals(ctx, pair)
                found["failovers"].append({
                    "gap_s": round(flow.longest_wait, 3),
                    "retrans": after["TcpRetransSegs"] - before["TcpRetransSegs"],
                    "resets": sum(after[k] - before[k] for k in NSTAT[1:]),
                    "error": ""})
                pair.reboot(master)
                pair.wait_state(master, "BACKUP", seconds=60)
                master, backup = backup, master
        except AssertionError as error:
            # a failover that could not be made (the backup never learnt the connection)
            # stops the row; the flow itself may still be intact
            found["stopped"] = str(error)[:2000]
            found["sync"] = {side: pair.stats(side) for side in ("a", "b")
                             if pair.daemons.get(side)}
        finally:
            flow.finish()
            found["echoed"] = flow.echoed
            if flow.error is not None:
                found["error"] = repr(flow.error)
    finally:
        pair.down()
        time.sleep(1)
    return found
