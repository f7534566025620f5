"""make bench-seqrand: what sequence randomisation costs one elephant flow, on Tusk's
kernel in the VM (TCG). Not a test: it boots the VM once, runs the guest scenario
tests/vm/guest/scenarios/bench_seqrand.py and prints throughput per configuration
and condition with ratios against plain forwarding and conntrack only, each the
median of the per-round ratios (rounds interleave the configurations).

  BENCH_ROUNDS   rounds without loss (default 5)    BENCH_SECONDS  iperf3 duration (default 10)
  BENCH_LOSS_ROUNDS  rounds with 1 % loss (default 15)
  BENCH_CLOCK    icount (default) or wall

With BENCH_CLOCK=icount QEMU runs the guest with -icount: the guest's clock counts
instructions executed, so a CPU-bound flow's throughput in guest time is bytes per
instruction - what a configuration costs - and the host's other load (the other core,
the emulator's own jitter) drops out. Wall-clock TCG throughput swings by 10 % from
run to run on a 2-core host, more than the 2 % the goals are about.

Goals (issue 3): seqrand >= 0.98 x conntrack only without loss, >= 0.95 x plain
forwarding at 1 % loss, and a visible gap to the SACK-stripped row.
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

ROUNDS = os.environ.get("BENCH_ROUNDS", "5")
LOSS_ROUNDS = os.environ.get("BENCH_LOSS_ROUNDS", "15")
SECONDS = os.environ.get("BENCH_SECONDS", "10")
CLOCK = os.environ.get("BENCH_CLOCK", "icount")
# 2 ns per instruction; idle time skipped (sleep=on) so only work advances the clock
ICOUNT = ("-icount", "shift=1,sleep=on")
CONFIGS = ("plain forwarding", "conntrack only", "seqrand", "seqrand, SACK-perm stripped")
CONDITIONS = ("no loss", "1% loss, 20 ms RTT")


def main():
    kernel = os.environ.get("TUSK_KERNEL") or vm.kernel()
    rootfs = vm.rootfs()
    out = Path(tempfile.mkdtemp(prefix="bench-seqrand-"))
    # icount runs the guest slower than real time: a generous budget
    budget = (int(ROUNDS) + int(LOSS_ROUNDS)) * 4 * (int(SECONDS) * 4 + 30) + 900
    run = vm.run_guest(["env", f"BENCH_ROUNDS={ROUNDS}", f"BENCH_LOSS_ROUNDS={LOSS_ROUNDS}",
                        f"BENCH_SECONDS={SECONDS}",
                        "python3", "/tusk/tests/vm/guest/run.py", "bench-seqrand"],
                       kernel, rootfs, out / "out", timeout=budget,
                       qemu_args=ICOUNT if CLOCK == "icount" else ())
    results_file = out / "out" / "bench-seqrand" / "results.json"
    if not results_file.exists():
        sys.exit(f"the benchmark produced no results: {run.failure()}")
    print_table(json.loads(results_file.read_text()), out)
    if run.failure():
        print(f"\nnote: the run did not finish cleanly: {run.failure()}")


def print_table(results, out):
    rate = {(r["round"], r["condition"], r["config"]): r["bits_per_second"] for r in results}
    retrans = {(r["round"], r["condition"], r["config"]): r["retransmits"] for r in results}
    clock = ("guest clock = instructions (-icount)" if CLOCK == "icount"
             else "guest clock = wall clock")
    counts = {c: len({r["round"] for r in results if r["condition"] == c}) for c in CONDITIONS}
    print(f"Single TCP flow through fw, iperf3 {SECONDS} s, interleaved rounds "
          f"({', '.join(f'{n} {c.split(",")[0]}' for c, n in counts.items())}), "
          f"QEMU TCG, {clock} (results in {out})")
    print(f"{'condition':20} {'configuration':29} {'Mbit/s median (min-max)':>26} "
          f"{'x plain':>8} {'x ct-only':>9} {'retrans':>8}")
    for condition in CONDITIONS:
        rounds = sorted({r["round"] for r in results if r["condition"] == condition})
        for config in CONFIGS:
            values = [rate[(n, condition, config)] for n in rounds
                      if (n, condition, config) in rate]
            if not values:
                continue

            def ratio(base):
                pairs = [rate[(n, condition, config)] / rate[(n, condition, base)]
                         for n in rounds if (n, condition, config) in rate
                         and rate.get((n, condition, base))]
                return statistics.median(pairs) if pairs else float("nan")

            mbit = [v / 1e6 for v in values]
            spread = f"{statistics.median(mbit):9.1f} ({min(mbit):.1f}-{max(mbit):.1f})"
            lost = [retrans[(n, condition, config)] for n in rounds
                    if (n, condition, config) in retrans]
            print(f"{condition:20} {config:29} {spread:>26} {ratio('plain forwarding'):8.2f} "
                  f"{ratio('conntrack only'):9.2f} {statistics.median(lost):8.0f}")
    print("\ngoals: seqrand >= 0.98 x conntrack only (no loss); >= 0.95 x plain forwarding "
          "(1% loss); SACK-perm stripped visibly slower at 1% loss")


if __name__ == "__main__":
    main()
