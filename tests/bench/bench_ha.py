"""make bench-ha: what a failover of an HA pair costs one flow, on Tusk's kernel in the
VM (QEMU TCG, the guest's wall clock: a failover's gap is time). Not a test: it boots
the VM once, runs the guest scenario tests/vm/guest/scenarios/bench_ha.py and prints,
per row (the flow's class: plain, fast path, seqrand; VRRP's advertisement interval:
1000 and 100 ms), the failover gap (the largest wait for an echoed chunk around each
failover: median and worst), the endpoints' retransmitted segments per failover, resets,
and whether the stream stayed intact - then the issue's goals, met or NOT met: gap under
1 s with 100 ms adverts, zero resets, zero corrupted or lost bytes, for every row.

  BENCH_FAILOVERS  failovers per row (default 5)
  BENCH_ADVERTS    advertisement intervals in ms (default 1000,100)
  BENCH_CLASSES    the flows' classes (default plain,fast-path,seqrand)

Under TCG a guest can stall for a few hundred ms; a 100 ms advertisement interval
(master-down after 3 x 100 ms + skew) is then tight - a false takeover shows as a gap
or a flap in the numbers, which is what this measures.
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

FAILOVERS = os.environ.get("BENCH_FAILOVERS", "5")
ADVERTS = os.environ.get("BENCH_ADVERTS", "1000,100")
CLASSES = os.environ.get("BENCH_CLASSES", "plain,fast-path,seqrand")
GAP_GOAL_S = 1.0


def main():
    kernel = os.environ.get("TUSK_KERNEL") or vm.kernel()
    rootfs = vm.rootfs()
    out = Path(tempfile.mkdtemp(prefix="bench-ha-"))
    rows = len(ADVERTS.split(",")) * len(CLASSES.split(","))
    budget = rows * (int(FAILOVERS) * 120 + 180) + 600
    run = vm.run_guest(["env", f"BENCH_FAILOVERS={FAILOVERS}", f"BENCH_ADVERTS={ADVERTS}",
                        f"BENCH_CLASSES={CLASSES}",
                        "python3", "/tusk/tests/vm/guest/run.py", "bench-ha"],
                       kernel, rootfs, out / "out", timeout=budget)
    results_file = out / "out" / "bench-ha" / "results.json"
    if not results_file.exists():
        sys.exit(f"the benchmark produced no results: {run.failure()}")
    print_table(json.loads(results_file.read_text()))
    print(f"\nguest output: {out / 'out'}")


def print_table(results):
    print(f"{'row':<22} {'failovers':>9} {'gap median':>11} {'gap worst':>10} "
          f"{'retrans/failover':>17} {'resets':>7}  stream")
    met = {"gap": True, "resets": True, "intact": True, "all": True}
    classes = ("plain", "fast path", "seqrand")
    ordered = sorted(results.items(), key=lambda item: (-item[1]["advert_ms"],
                                                        classes.index(item[1]["class"])))
    fast_adverts = [f for f in results.values() if f["advert_ms"] <= 100]
    for row, found in ordered:
        gaps = [f["gap_s"] for f in found["failovers"]]
        retrans = [f["retrans"] for f in found["failovers"]]
        resets = sum(f["resets"] for f in found["failovers"])
        intact = not found["error"]
        stopped = found.get("stopped", "")
        print(f"{row:<22} {len(gaps):>9} "
              f"{statistics.median(gaps) if gaps else float('nan'):>10.3f}s "
              f"{max(gaps) if gaps else float('nan'):>9.3f}s "
              f"{statistics.median(retrans) if retrans else float('nan'):>17} {resets:>7}  "
              + ("intact" if intact else "BROKEN: " + found["error"][:160])
              + (f"; stopped after {len(gaps)} of {FAILOVERS}: {stopped.splitlines()[0]}"
                 if stopped else ""))
        if stopped:
            met["all"] = False
        if found["advert_ms"] <= 100 and (not gaps or max(gaps) >= GAP_GOAL_S):
            met["gap"] = False
        met["resets"] &= resets == 0
        met["intact"] &= intact
    print()
    print(f"goal: gap under {GAP_GOAL_S:.0f} s with 100 ms adverts, every row: "
          + ("not measured (no row with 100 ms adverts)" if not fast_adverts
             else "met" if met["gap"] else "NOT met"))
    print(f"goal: zero resets, every row: {'met' if met['resets'] else 'NOT met'}")
    print(f"goal: zero corrupted or lost bytes (every chunk echoed intact), every row: "
          f"{'met' if met['intact'] else 'NOT met'}")
    if not met["all"]:
        print("NOT every row made all its failovers: see 'stopped' above")


if __name__ == "__main__":
    main()
