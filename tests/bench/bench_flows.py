"""make bench-flows: what Live flows' sampler (webui/flows/core/sampler.py) costs at
10 000, 100 000 and 1 000 000 conntrack entries. Not a test: it prints a table.

A network namespace of its own gets the entries, made over ctnetlink in batches
(established TCP, accounting and timestamps on, as the agent sets them). For each size:

1. one whole dump as a naive sampler would read it every interval: this reader's
   (flows.core.conntrack), and conntrack(8)'s (`conntrack -L`, its CPU as a child
   plus the parsing of its text here, which prints no sequence adjustment), as the
   share of one CPU at the sampling interval;
2. the sampler itself, sample() after sample() until it has read the table twice,
   with a clock that moves one interval per sample (so the run takes the CPU it
   costs, not the wall time): CPU per sample (this thread's, the kernel's work for
   it included), the share of one CPU that is at the interval (goal < 5 % at 100 000),
   how many samples a pass over the table takes (a new flow is found within one
   pass), and the peak memory it adds to the process (a process of its own, which
   the bench starts for each row: its peak RSS over its RSS before the first sample).

Two sampler rows per size: as the agent runs it (entries under 1 MiB counted, not
ranked: the injected entries carry no bytes, so these are the idle tables of a busy
firewall), and with every entry ranked and 64 flows followed (min_bytes 0): the work
per entry's upper bound.

The global nf_conntrack_max is raised to hold the entries and put back afterwards.

  BENCH_SIZES     entries, comma-separated (default 10000,100000,1000000)
  BENCH_INTERVAL  the sampling interval in seconds (default 2, the agent's)
"""
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path[:0] = [ROOT, os.path.join(ROOT, "webui")]

from flows.core import ctnetlink as nl  # noqa: E402
from flows.core.conntrack import Conntrack, Stats  # noqa: E402
from flows.core.sampler import MIN_BYTES, Sampler  # noqa: E402

SIZES = [int(n) for n in os.environ.get("BENCH_SIZES", "10000,100000,1000000").split(",")]
INTERVAL = float(os.environ.get("BENCH_INTERVAL", "2"))
NETNS = sys.argv[2] if sys.argv[1:2] == ["--sample"] else f"tusk-bench-flows-{os.getpid()}"
MAX = "/proc/sys/net/netfilter/nf_conntrack_max"
BATCH = 256
GOAL = 0.05


def sh(*argv, **kwargs):
    return subprocess.run(argv, check=True, capture_output=True, text=True, **kwargs)


def fill(conntrack, first, last):
    """Entries first..last-1: 10.<a>.<b>.<c>:port -> 10.255.0.1:5201."""
    for start in range(first, last, BATCH):
        conntrack.create(b"".join(
            nl.new_entry(conntrack.next_seq(), nl.Tuple(
                f"10.{i >> 16 & 127}.{i >> 8 & 255}.{i & 255}", "10.255.0.1", 6,
                1024 + (i >> 23), 5201))
            for i in range(start, min(start + BATCH, last))))


def rss_kb(field):
    with open("/proc/self/status", encoding="ascii") as status:
        return int(re.search(rf"^{field}:\s+(\d+)", status.read(), re.M).group(1))


def full_dump(conntrack):
    stats, started = Stats(), time.thread_time()
    for _ in conntrack.scan(1 << 62, stats):
        pass
    return time.thread_time() - started, stats.entries


def conntrack_cli():
    """CPU seconds of `conntrack -L` (the child) and of parsing its lines' counters here."""
    before, started = resource.getrusage(resource.RUSAGE_CHILDREN), time.thread_time()
    with subprocess.Popen(["ip", "netns", "exec", NETNS, "conntrack", "-L", "-o", "id"],
                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL) as proc:
        counters = re.compile(rb"bytes=(\d+).*?bytes=(\d+).*?id=(\d+)")
        lines = sum(1 for line in proc.stdout if counters.search(line))
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    child = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return child + time.thread_time() - started, lines


class Clock:
    """One interval further at every sample."""

    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def sampled(min_bytes):
    """In this process (a child of the bench's, so that its memory is its own): samples
    until the table was read twice; prints the costs as JSON."""
    clock = Clock()
    sampler = Sampler(NETNS, INTERVAL, min_bytes=min_bytes, clock=clock)
    base, costs = rss_kb("VmRSS"), []
    try:
        while len(costs) < 5000:
            result = sampler.sample()
            costs.append(result["cpu"]["sample"])
            clock.now += INTERVAL
            if result["pass"]["number"] > 2:      # two whole passes read
                break
    finally:
        sampler.close()
    print(json.dumps({"median": statistics.median(costs), "max": max(costs),
                      "share": statistics.fmean(costs) / INTERVAL,
                      "samples": result["pass"]["last"]["samples"],
                      "tracked": result["tracked"],
                      "memory": (rss_kb("VmHWM") - base) / 1024}))


def run_sampler(min_bytes):
    done = subprocess.run([sys.executable, __file__, "--sample", NETNS, str(min_bytes)],
                          check=True, capture_output=True, text=True)
    return json.loads(done.stdout)


def main():
    if os.geteuid() != 0:
        sys.exit("bench-flows needs root: a network namespace and its conntrack table")
    with open(MAX, encoding="ascii") as handle:
        saved = handle.read().strip()
    sh("ip", "netns", "add", NETNS)
    rows = []
    try:
        if int(saved) < max(SIZES) + 1000:
            with open(MAX, "w", encoding="ascii") as handle:
                handle.write(str(max(SIZES) + 1000))
        for name in ("net.netfilter.nf_conntrack_acct", "net.netfilter.nf_conntrack_timestamp"):
            nl.sysctl(NETNS, name, "1")
        made = 0
        with Conntrack(NETNS) as conntrack:
            for size in sorted(SIZES):
                started = time.monotonic()
                fill(conntrack, made, size)
                made = size
                print(f"{size} entries made in {time.monotonic() - started:.0f} s", flush=True)
                dump, seen = full_dump(conntrack)
                cli, printed = conntrack_cli()
                ours = run_sampler(MIN_BYTES)
                ranked = run_sampler(0)
                rows.append((size, seen, dump, cli, printed, ours, ranked))
    finally:
        subprocess.run(["ip", "netns", "del", NETNS], check=False)
        with open(MAX, "w", encoding="ascii") as handle:
            handle.write(saved)
    report(rows)


def report(rows):
    print(f"\nLive flows' sampler, interval {INTERVAL:g} s, kernel {os.uname().release}, "
          f"{os.cpu_count()} CPUs; share = CPU per sample / interval (goal < {GOAL:.0%} "
          "at 100 000)\n")
    print("| entries | one whole dump: ours | conntrack -L | dumped every interval | "
          "sampler (as run) CPU/sample median / max | share of a CPU | samples per pass "
          "(finds a flow within) | memory | every entry ranked, 64 followed: CPU/sample "
          "median / max | share | memory |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for size, seen, dump, cli, printed, ours, ranked in rows:
        assert seen >= size and printed >= size, (seen, printed)
        print(f"| {size:,} | {dump:.3f} s | {cli:.3f} s | {dump / INTERVAL:.1%} | "
              f"{ours['median'] * 1000:.0f} / {ours['max'] * 1000:.0f} ms | "
              f"{ours['share']:.2%} | {ours['samples']:.0f} ({ours['samples'] * INTERVAL:.0f} s)"
              f" | {ours['memory']:.1f} MB | {ranked['median'] * 1000:.0f} / "
              f"{ranked['max'] * 1000:.0f} ms | {ranked['share']:.2%} | "
              f"{ranked['memory']:.1f} MB |")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--sample"]:
        sampled(int(sys.argv[3]))
    else:
        main()
