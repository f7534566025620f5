"""make bench-tune: what the throughput profile does for one flow and for four, on
Tusk's kernel in the VM (TCG, 4 vCPUs) with a 4-queue virtio-net NIC. Not a test: it
boots the NIC VM once (tests/vm/vm.py nic_host), runs the guest scenario
tests/vm/guest/scenarios/bench_tune.py and prints, per configuration and number of
streams, the median throughput of the rounds with ratios against "one queue" and
"driver default" (each the median of the per-round ratios: the rounds interleave
the configurations), the sender's retransmissions and the out-of-order segments
counted in the receiver's capture.

  BENCH_ROUNDS   rounds (default 3)    BENCH_SECONDS  iperf3 duration (default 5)

Wall clock: -icount would run the 4 vCPUs one at a time, which is what steering
is about. On a 2-core host 4 vCPUs share 2 cores: read ratios, not absolute numbers.
"""
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parents[1]), str(HERE.parent / "vm")]

import vm  # noqa: E402

ROUNDS = os.environ.get("BENCH_ROUNDS", "3")
SECONDS = os.environ.get("BENCH_SECONDS", "5")
CONFIGS = ("driver default", "one queue", "throughput profile")


def main():
    kernel = os.environ.get("TUSK_KERNEL") or vm.kernel()
    rootfs = vm.rootfs()
    out = Path(tempfile.mkdtemp(prefix="bench-tune-"))
    budget = int(ROUNDS) * 6 * (int(SECONDS) + 40) + 300
    with vm.nic_host(out / "host-tap0.pcap"):
        run = vm.run_guest(["env", f"BENCH_ROUNDS={ROUNDS}", f"BENCH_SECONDS={SECONDS}",
                            "python3", "/tusk/tests/vm/guest/run.py", "bench-tune"],
                           kernel, rootfs, out / "out", timeout=budget, cpus=vm.NIC_QUEUES,
                           qemu_args=vm.NIC_QEMU_ARGS, netns=vm.NIC_NETNS)
    results_file = out / "out" / "bench-tune" / "results.json"
    if not results_file.exists():
        sys.exit(f"the benchmark produced no results: {run.failure()}")
    print_table(json.loads(results_file.read_text()), out)
    if run.failure():
        print(f"\nnote: the run did not finish cleanly: {run.failure()}")


def ratio(results, config, streams, baseline):
    """Median over rounds of config / baseline in the same round."""
    by_round = {}
    for r in results:
        if r["streams"] == streams:
            by_round.setdefault(r["round"], {})[r["config"]] = r["mbps"]
    ratios = [row[config] / row[baseline] for row in by_round.values()
              if config in row and baseline in row and row[baseline]]
    return statistics.median(ratios) if ratios else float("nan")


def print_table(results, out):
    guest = json.loads((out / "out" / "guest.json").read_text())
    rounds = len({r["round"] for r in results})
    print(f"Tusk tuning benchmark - kernel {guest['kernel_release']}, {guest['cpus']} vCPUs "
          f"(TCG), 4-queue virtio-net, {rounds} rounds of {SECONDS} s")
    print(f"{'streams':>7} {'configuration':20} {'Mbit/s median (min-max)':>26} "
          f"{'x one queue':>11} {'x default':>9} {'retrans':>7} {'out of order':>12}")
    for streams in (1, 4):
        for config in CONFIGS:
            rows = [r for r in results if r["config"] == config and r["streams"] == streams]
            if not rows:
                continue
            mbps = [r["mbps"] for r in rows]
            print(f"{streams:>7} {config:20} {statistics.median(mbps):>9.1f} "
                  f"({min(mbps):.1f}-{max(mbps):.1f}){'':>2} "
                  f"{ratio(results, config, streams, 'one queue'):>11.2f} "
                  f"{ratio(results, config, streams, 'driver default'):>9.2f} "
                  f"{sum(r['retransmits'] or 0 for r in rows):>7} "
                  f"{sum(r['out_of_order'] for r in rows):>12}")
    print(f"\nraw results: {out / 'out' / 'bench-tune' / 'results.json'}")


if __name__ == "__main__":
    main()
