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
forwarding at 1 % loss, and a visible gap to the SACK-stripped row. Issue 21: seqrand
on the fast path >= 0.98 x the fast path and >= 0.97 x plain forwarding without loss,
>= 0.95 x plain forwarding at 1 % loss with no more retransmissions than the fast
path without seqrand.
"""
import json
import os
import random
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
CONFIGS = ("plain forwarding", "conntrack only", "seqrand", "seqrand, SACK-perm stripped",
           "fast path", "seqrand, fast path")
FAST, FAST_PLAIN = "seqrand, fast path", "fast path"
SEGMENT = 1448          # payload of a full segment at MTU 1500 with timestamps
NAN = float("nan")
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


def median_ci(values, resamples=2000, level=0.95):
    """The median of values and a bootstrap percentile interval around it (fixed seed:
    the same results print the same interval). With few rounds it is wide, and says so."""
    rng = random.Random(0)
    medians = sorted(statistics.median(rng.choices(values, k=len(values)))
                     for _ in range(resamples))
    cut = int((1 - level) / 2 * resamples)
    return statistics.median(values), medians[cut], medians[-cut - 1]


def per_segment_ns(record, key):
    """CPU time (softirq or all non-idle, ticks of /proc/stat) per segment received."""
    segments = record["bytes"] / SEGMENT
    return record[key] * 1e9 / record["ticks_per_second"] / segments if segments else NAN


def print_table(results, out):
    by = {(r["round"], r["condition"], r["config"]): r for r in results}
    clock = ("guest clock = instructions (-icount)" if CLOCK == "icount"
             else "guest clock = wall clock")
    counts = {c: len({r["round"] for r in results if r["condition"] == c}) for c in CONDITIONS}
    print(f"Single TCP flow through fw, iperf3 {SECONDS} s, interleaved rounds "
          f"({', '.join(f'{n} {c.split(",")[0]}' for c, n in counts.items())}), "
          f"QEMU TCG, {clock} (results in {out})")
    print("x plain / x ct-only / x fast: median of the per-round ratios to that configuration "
          "[95 % bootstrap interval]; ns/seg: guest CPU per 1448-byte segment received, in "
          "softirq (fw's forwarding) and in all")
    print(f"{'condition':20} {'configuration':29} {'Mbit/s median (min-max)':>24} "
          f"{'x plain [95 %]':>19} {'x ct-only':>9} {'x fast':>7} {'retrans':>8} "
          f"{'softirq ns/seg':>14} {'busy ns/seg':>11}")
    medians = {}
    for condition in CONDITIONS:
        rounds = sorted({r["round"] for r in results if r["condition"] == condition})
        for config in CONFIGS:
            mine = [by[(n, condition, config)] for n in rounds if (n, condition, config) in by]
            if not mine:
                continue

            def ratio(base):
                pairs = [r["bits_per_second"] / by[(r["round"], condition, base)]["bits_per_second"]
                         for r in mine if (r["round"], condition, base) in by]
                return median_ci(pairs) if pairs else (NAN, NAN, NAN)

            mbit = [r["bits_per_second"] / 1e6 for r in mine]
            spread = f"{statistics.median(mbit):9.1f} ({min(mbit):.1f}-{max(mbit):.1f})"
            plain = ratio("plain forwarding")
            medians[(condition, config)] = m = {
                "plain": plain[0], "plain_ci": plain[1:], "ct": ratio("conntrack only")[0],
                "fast": ratio(FAST_PLAIN)[0],
                "retrans": statistics.median(r["retransmits"] or 0 for r in mine),
                "softirq": statistics.median(per_segment_ns(r, "softirq_ticks") for r in mine),
                "busy": statistics.median(per_segment_ns(r, "busy_ticks") for r in mine)}
            interval = f"{m['plain']:.2f} [{plain[1]:.2f}-{plain[2]:.2f}]"
            print(f"{condition:20} {config:29} {spread:>24} {interval:>19} {m['ct']:9.2f} "
                  f"{m['fast']:7.2f} {m['retrans']:8.0f} {m['softirq']:14.0f} {m['busy']:11.0f}")
    print()
    for line in goals(medians):
        print(line)


def goals(medians):
    """Each goal as a line: what was measured, and whether it was met."""
    no_loss, loss = CONDITIONS
    checks = (
        ("seqrand", no_loss, "ct", 0.98, "conntrack only"),
        ("seqrand", loss, "plain", 0.95, "plain forwarding"),
        (FAST, no_loss, "fast", 0.98, "the fast path without seqrand"),
        (FAST, no_loss, "plain", 0.97, "plain forwarding"),
        (FAST, loss, "plain", 0.95, "plain forwarding"))
    lines = []
    for config, condition, key, goal, base in checks:
        m = medians.get((condition, config))
        if m is None:
            lines.append(f"{config}, {condition}: not measured")
            continue
        verdict = "met" if round(m[key], 2) >= goal else "NOT met"     # judged as printed
        interval = (f" [95 %: {m['plain_ci'][0]:.2f}-{m['plain_ci'][1]:.2f}]"
                    if key == "plain" else "")
        lines.append(f"{config}, {condition}: x{m[key]:.2f}{interval} {base} "
                     f"(goal >= {goal}): {verdict}")
    fast, plain_fast = medians.get((loss, FAST)), medians.get((loss, FAST_PLAIN))
    if fast and plain_fast:
        verdict = "met" if fast["retrans"] <= plain_fast["retrans"] else "NOT met"
        lines.append(f"{FAST}, {loss}: {fast['retrans']:.0f} retransmissions, the fast path "
                     f"without seqrand {plain_fast['retrans']:.0f} (goal: no more): {verdict}")
    stripped = medians.get((loss, "seqrand, SACK-perm stripped"))
    full = medians.get((loss, "seqrand"))
    if stripped and full:
        lines.append(f"SACK-perm stripped, {loss}: x{stripped['plain']:.2f} plain forwarding "
                     f"against seqrand's x{full['plain']:.2f} (goal: visibly slower)")
    return lines


if __name__ == "__main__":
    main()
