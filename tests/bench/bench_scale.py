"""make bench-scale: what sharing the load over several boxes divides and what it costs
(issue 39, item 4; docs/SCALE.md). Not a test: it prints a table, and ratios against one
box measured in the same run.

Each round builds two labs of tests/netns/cluster.py on this host's kernel, one after the
other, the same routers, BGP and BFD in both: **one box** alone (no state sync: a box
that shares nothing) and **three boxes** sharing (each box's ha.toml a cluster's, applied
by the HA applier: conntrackd's multicast). In each, connrate.py's client (pinned to the
first CPU) opens and closes connections to the server back to back for BENCH_SECONDS
(default 8), and the benchmark reads:

  connections/s       the lab's, by the wall clock
  client CPU/conn     the client CPU's time per connection: on veth that CPU runs the
                      softirq work of every hop, routers and box included
  box share           each box's part of the connections, counted by a forward rule of
                      its own (ct state new): the connections whose policy it evaluated
  sync CPU            each box's conntrackd, CPU time per 1000 connections of the lab
  held                each box's conntrack table right after the run, per connection the
                      lab made (those that ended early are gone already): the same on
                      every box of three as on the one box means every box holds every
                      connection still tracked - the others' from the sync

BENCH_ROUNDS (default 5) rounds, the labs alternating so that the host's drift cancels;
the ratio three/one of connections/s is taken per round and summarised by its geometric
mean with a 95 % bootstrap interval (paired.mean_ci).

What this host cannot show: N boxes carrying N times what one carries. Every box here is
a namespace on the same 2 CPUs, and veth runs a packet's whole path on the sending CPU,
so the lab's total is the host's, however many boxes share it. What it does show is
each half of the trade on real daemons: the policy work a box does falls to 1/N (its
share), and what it pays instead for the others' connections (sync CPU, and the
connection table, which holds every box's connections on every box: a cluster holds as
many concurrent connections as one box, not N times as many - docs/SCALE.md).
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.dirname(HERE)
ROOT = os.path.dirname(TESTS)
sys.path[:0] = [HERE, TESTS, os.path.join(TESTS, "netns"), os.path.join(ROOT, "webui"), ROOT]

import paired  # noqa: E402
from cluster import CLIENT, SERVER, Cluster  # noqa: E402
from kit import wait_until  # noqa: E402

ROUNDS = int(os.environ.get("BENCH_ROUNDS", "5"))
SECONDS = float(os.environ.get("BENCH_SECONDS", "8"))
PORT = 5301
CONNRATE = os.path.join(HERE, "connrate.py")
SHARE = """table inet bench_share {
    chain forward {
        type filter hook forward priority -10; policy accept;
        tcp dport %d ct state new counter
    }
}
""" % PORT
USER_HZ = os.sysconf("SC_CLK_TCK")


def conntrackd_cpu(lab, i):
    """Box i's conntrackd's CPU time so far (s), 0 without one."""
    applier = lab.appliers.get(i)
    pid = applier.daemons._pid("conntrackd.pid") if applier else None
    if pid is None:
        return 0.0
    with open(f"/proc/{pid}/stat", encoding="ascii") as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / USER_HZ   # utime, stime


def counted(lab, i):
    found = json.loads(lab.ns(lab.boxes[i - 1], "nft", "-j", "list", "table", "inet",
                              "bench_share").stdout)["nftables"]
    return next(item["rule"]["expr"][-1]["counter"]["packets"] for item in found
                if "rule" in item)


def measure(boxes, directory):
    # BFD at 1 s: failures are not what this measures, and a busy host must not make
    # a session flap (the routers would then hash a connection's two halves apart)
    lab = Cluster(f"bs{boxes}", directory, boxes=boxes, sync=boxes > 1, bfd_ms=1000)
    lab.down()
    server = None
    try:
        lab.up()
        wait_until(lab.ready, 120, f"both routers with {boxes} equal paths")
        for i in range(1, boxes + 1):
            lab.ns(lab.boxes[i - 1], "nft", "-f", "-", input=SHARE)
        server = lab.popen(lab.server, sys.executable, CONNRATE, "server", str(PORT),
                           stdout=subprocess.PIPE, text=True)
        server.stdout.readline()          # listening
        before = [conntrackd_cpu(lab, i) for i in range(1, boxes + 1)]
        result = lab.ns(lab.client, sys.executable, CONNRATE, "client", SERVER, str(PORT),
                        str(SECONDS))
        run = json.loads(result.stdout)
        time.sleep(0.5)                   # the last events' sync
        made = run["connections"]
        held = [int(lab.ns(box, "cat", "/proc/sys/net/netfilter/nf_conntrack_count").stdout)
                / max(made, 1) for box in lab.boxes]
        shares = [counted(lab, i) for i in range(1, boxes + 1)]
        sync_cpu = [conntrackd_cpu(lab, i) - before[i - 1] for i in range(1, boxes + 1)]
        return {"boxes": boxes, "rate": made / run["elapsed"], "connections": made,
                "failed": run["failed"], "cpu_us": run["cpu"] / max(made, 1) * 1e6,
                "shares": [s / max(made, 1) for s in shares],
                "sync_ms_per_1000": [c / max(made, 1) * 1e6 for c in sync_cpu],
                "held": held}
    finally:
        if server is not None:
            server.kill()
        lab.down()


def main():
    if os.geteuid():
        sys.exit("make bench-scale needs root: namespaces, FRR, conntrackd")
    directory = tempfile.mkdtemp(prefix="bench-scale-")
    print(f"{ROUNDS} rounds of {SECONDS:.0f} s per lab; client {CLIENT} -> server "
          f"{SERVER}:{PORT}, connect and close (RST) back to back, pinned to one CPU\n")
    runs = {1: [], 3: []}
    for number in range(ROUNDS):
        order = (1, 3) if number % 2 == 0 else (3, 1)
        for boxes in order:
            found = measure(boxes, os.path.join(directory, f"r{number}-{boxes}"))
            runs[boxes].append(found)
            print(f"round {number + 1}, {boxes} box{'es' if boxes > 1 else ''}: "
                  f"{found['rate']:.0f} connections/s, {found['failed']} failed, shares "
                  + " ".join(f"{s:.1%}" for s in found["shares"])
                  + ", held " + " ".join(f"{s:.1%}" for s in found["held"]), flush=True)
    report(runs)


def report(runs):
    print()
    print(f"{'':<34} {'1 box':>14} {'3 boxes':>24}")

    def median(values):
        return statistics.median(values) if values else float("nan")

    one, three = runs[1], runs[3]
    print(f"{'connections/s (median)':<34} {median([r['rate'] for r in one]):>14.0f} "
          f"{median([r['rate'] for r in three]):>24.0f}")
    print(f"{'client CPU per connection (us)':<34} "
          f"{median([r['cpu_us'] for r in one]):>14.1f} "
          f"{median([r['cpu_us'] for r in three]):>24.1f}")
    shares = [median([r["shares"][i] for r in three]) for i in range(3)]
    print(f"{'box share of connections':<34} {'100 %':>14} "
          f"{' / '.join(f'{s:.1%}' for s in shares):>24}")
    sync = [median([r["sync_ms_per_1000"][i] for r in three]) for i in range(3)]
    print(f"{'conntrackd CPU per 1000 conns (ms)':<34} {'none':>14} "
          f"{' / '.join(f'{s:.1f}' for s in sync):>24}")
    held = [median([r["held"][i] for r in three]) for i in range(3)]
    print(f"{'table entries per connection made':<34} "
          f"{median([r['held'][0] for r in one]):>14.1%} "
          f"{' / '.join(f'{s:.1%}' for s in held):>24}")
    ratios = [b["rate"] / a["rate"] for a, b in zip(one, three)]
    mean, low, high = paired.mean_ci(ratios)
    print(f"\nconnections/s, 3 boxes / 1 box on this host: x{mean:.3f} ({low:.3f}-{high:.3f}, "
          f"95 % bootstrap, {len(ratios)} paired rounds)")
    print("every box holds every connection: concurrent connections, 3 boxes / 1 box: x1 "
          "(by design, docs/SCALE.md)")


if __name__ == "__main__":
    main()
