"""bench-bridge (a benchmark, not a test; make bench-bridge): one iperf3 flow through fw
as a transparent bridge (lab bridge=True) on Tusk's kernel: a plain Linux bridge (no
ruleset: no filtering, no conntrack), then Tusk's bridge mode - the policy's bridged
zones in table bridge tusk_bridge, the flow in a class on the bridge's own conntrack -
and the same class with seqrand. Rounds interleave the configurations so that slow and
fast moments of the machine fall on all of them; tests/bench/bench_bridge.py prints the
table with each configuration's paired ratio to the plain bridge.

iperf3's client runs on CPU 0 and its server on CPU 1 (bench-seqrand says why).

  BENCH_ROUNDS (default 8)   BENCH_SECONDS (default 14)

Saved: results.json [{round, condition, config, bits_per_second, retransmits}].
"""
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench"))

import paired  # noqa: E402
import seqrand  # noqa: E402

from scenarios.bridge_seqrand import POLICY  # noqa: E402

ROUNDS = int(os.environ.get("BENCH_ROUNDS", "8"))
SECONDS = int(os.environ.get("BENCH_SECONDS", "14"))
PLAIN, TUSK, SEQRAND = "plain Linux bridge", "Tusk bridge mode", "Tusk bridge mode + seqrand"
CONFIGS = ((PLAIN, None), (TUSK, seqrand.PORT_PLAIN), (SEQRAND, seqrand.PORT_BOTH))
TIME_LIMIT = ROUNDS * len(CONFIGS) * (SECONDS + 15) + 600


def run(ctx):
    lab = ctx.lab(bridge=True)
    results = []
    for index in range(ROUNDS):
        for config, port in CONFIGS:
            if port is None:
                ctx.run("nft", "flush", "ruleset", ns=lab.fw)
            elif config == TUSK:
                seqrand.apply_policy(ctx, lab, POLICY)
            name = f"r{index}-" + config.replace(" + ", "-").replace(" ", "-")
            report = ctx.iperf3(lab, name, port or seqrand.PORT_PLAIN, "--time", str(SECONDS),
                                "--affinity", "0,1", seconds=SECONDS)
            sent, received = report["end"]["sum_sent"], report["end"]["sum_received"]
            results.append({"round": index, "condition": paired.NO_LOSS, "config": config,
                            "bits_per_second": received["bits_per_second"],
                            "retransmits": sent.get("retransmits")})
            ctx.save_json("results.json", results)
