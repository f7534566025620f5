"""bench-policy-flow (a benchmark, not a test; part of make bench-policy): one iperf3
flow through fw on Tusk's kernel for plain forwarding (no ruleset), conntrack only,
the 1 000-class policy of tests/bench/bench_policy.py with the flow in its last class,
and the same policy with that class on the flowtable fast path (which the host
kernel cannot do). Rounds interleave the configurations.

  BENCH_ROUNDS (default 9)   BENCH_SECONDS (default 10)

Saved: results.json [{round, config, bits_per_second}], class counters.
"""
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench"))

from bench_policy import CONNTRACK_ONLY, classes_policy  # noqa: E402

from policy.core.normalise import load_policy  # noqa: E402
from policy.core.render import render  # noqa: E402

TIME_LIMIT = 14400
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "9"))
SECONDS = int(os.environ.get("BENCH_SECONDS", "10"))
PORT = 5201


def run(ctx):
    lab = ctx.lab()
    configs = [
        ("plain forwarding (no ruleset)", None),
        ("conntrack only", CONNTRACK_ONLY),
        ("1 000-class policy, flow in the last class",
         render(load_policy(classes_policy(1000, iperf_port=PORT)))),
        ("1 000-class policy, last class on the fast path",
         render(load_policy(classes_policy(1000, iperf_port=PORT, fastpath=True)))),
    ]
    for index, (_, ruleset) in enumerate(configs):
        if ruleset:
            ctx.save_text(f"ruleset-{index}.nft", ruleset)
    results = []
    for number in range(ROUNDS):
        for index, (config, ruleset) in enumerate(configs):
            ctx.run("nft", "flush", "ruleset", ns=lab.fw)
            if ruleset:
                ctx.run("nft", "-f", str(ctx.dir / f"ruleset-{index}.nft"), ns=lab.fw)
            report = ctx.iperf3(lab, f"r{number}-c{index}", PORT, "--time", str(SECONDS),
                                seconds=SECONDS)
            results.append({"round": number, "config": config,
                            "bits_per_second": report["end"]["sum_received"]["bits_per_second"]})
            if ruleset:
                ctx.run("nft", "-j", "list", "counters", "table", "inet", "tusk", ns=lab.fw,
                        save=f"r{number}-c{index}-counters.json", check=False)
            ctx.save_json("results.json", results)
