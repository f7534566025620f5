"""make bench-bridge: what Tusk's transparent bridge mode costs one elephant flow, on
Tusk's kernel in the VM (TCG, -icount). Not a test: it boots the VM once, runs the
guest scenario tests/vm/guest/scenarios/bench_bridge.py and prints throughput per
configuration with its ratio to a plain Linux bridge in the same run - the geometric
mean of the per-round ratios (rounds interleave the configurations) with its 95 %
bootstrap interval (tests/bench/paired.py).

  BENCH_ROUNDS (default 8)   BENCH_SECONDS (default 14)   BENCH_CLOCK icount | wall

With BENCH_CLOCK=icount the guest's clock counts the instructions it executes, so a
CPU-bound flow's throughput is bytes per instruction - what a configuration costs -
and the host's other load drops out (bench_seqrand.py says more).
"""
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parents[1]), str(HERE.parent / "vm")]

import vm  # noqa: E402
from paired import NO_LOSS, interval, median_ci  # noqa: E402

ROUNDS = os.environ.get("BENCH_ROUNDS", "8")
SECONDS = os.environ.get("BENCH_SECONDS", "14")
CLOCK = os.environ.get("BENCH_CLOCK", "icount")
ICOUNT = ("-icount", "shift=1,sleep=on")
PLAIN = "plain Linux bridge"
CONFIGS = (PLAIN, "Tusk bridge mode", "Tusk bridge mode + seqrand")


def main():
    kernel = os.environ.get("TUSK_KERNEL") or vm.kernel()
    rootfs = vm.rootfs()
    out = Path(tempfile.mkdtemp(prefix="bench-bridge-"))
    budget = int(ROUNDS) * len(CONFIGS) * (int(SECONDS) * 4 + 30) + 900
    run = vm.run_guest(["env", f"BENCH_ROUNDS={ROUNDS}", f"BENCH_SECONDS={SECONDS}",
                        "python3", "/tusk/tests/vm/guest/run.py", "bench-bridge"],
                       kernel, rootfs, out / "out", timeout=budget,
                       qemu_args=ICOUNT if CLOCK == "icount" else ())
    results_file = out / "out" / "bench-bridge" / "results.json"
    if not results_file.exists():
        sys.exit(f"the benchmark produced no results: {run.failure()}")
    print_table(json.loads(results_file.read_text()), out)
    if run.failure():
        print(f"\nnote: the run did not finish cleanly: {run.failure()}")


def print_table(results, out):
    rounds = len({r["round"] for r in results})
    print(f"\nmake bench-bridge: one iperf3 flow across fw's bridge, Tusk's kernel in the VM "
          f"({CLOCK} clock), {rounds} rounds of {SECONDS} s; raw results in {out}\n")
    print("| configuration | Mbit/s (median) | retransmits (median) | x plain bridge "
          "(95 % CI) |")
    print("| --- | --- | --- | --- |")
    for config in CONFIGS:
        mine = [r for r in results if r["config"] == config]
        if not mine:
            continue
        mbits = statistics.median(r["bits_per_second"] for r in mine) / 1e6
        retransmits = median_ci([r["retransmits"] or 0 for r in mine])[0]
        if config == PLAIN:
            ratio = "1 (the base)"
        else:
            mean, low, high = interval(results, NO_LOSS, config, PLAIN)
            ratio = f"x{mean:.3f} ({low:.3f}-{high:.3f})"
        print(f"| {config} | {mbits:.1f} | {retransmits:g} | {ratio} |")


if __name__ == "__main__":
    main()
