"""bench-seqrand (a benchmark, not a test; make bench-seqrand): single-flow iperf3
throughput through fw for plain forwarding (no ruleset, so no conntrack), conntrack
only (a Tusk class without TCP actions), seqrand (a class randomising both
directions), seqrand with SACK-permitted stripped (what FWSM users fell back to), and
the flowtable fast path without and with seqrand (classes fastpath: true), each
without loss and with 1 % loss at 20 ms RTT (netem on fw's egress towards
the server). Rounds interleave the configurations so that slow and fast moments of
the machine fall on all of them; tests/bench/bench_seqrand.py prints the table.

  BENCH_ROUNDS       rounds without loss (default 5)
  BENCH_LOSS_ROUNDS  rounds with loss (default 15): a lossy flow's throughput swings
                     by a factor of five from one loss pattern to the next, so the
                     medians need more of them; they cost little CPU
  BENCH_SECONDS      iperf3 duration (default 10)

Each run also reads the guest's CPU time from /proc/stat around the flow: the time
spent in softirq - where fw forwards, and where the endpoints' receive paths run,
the same for every configuration - and in all non-idle states, for the host to turn
into a cost per forwarded segment (bytes received / 1448).

Saved: results.json [{round, condition, config, bits_per_second, retransmits, bytes,
softirq_ticks, busy_ticks, ticks_per_second}].
"""
import os

import seqrand

TIME_LIMIT = 7200
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "5"))
LOSS_ROUNDS = int(os.environ.get("BENCH_LOSS_ROUNDS", "15"))
SECONDS = int(os.environ.get("BENCH_SECONDS", "10"))
PORT_STRIPPED, PORT_FAST_PLAIN = 5205, 5206
CONDITIONS = (("no loss", None), ("1% loss, 20 ms RTT", ("delay", "20ms", "loss", "1%")))
CONFIGS = (("plain forwarding", None), ("conntrack only", seqrand.PORT_PLAIN),
           ("seqrand", seqrand.PORT_BOTH), ("seqrand, SACK-perm stripped", PORT_STRIPPED),
           ("fast path", PORT_FAST_PLAIN), ("seqrand, fast path", seqrand.PORT_FAST))
POLICY = seqrand.POLICY.replace(
    "  - {name: ping, protocol: icmp}",
    f"  - {{name: stripped, protocol: tcp, ports: [{PORT_STRIPPED}]}}\n"
    f"  - {{name: fast-plain, protocol: tcp, ports: [{PORT_FAST_PLAIN}]}}\n"
    "  - {name: ping, protocol: icmp}").replace(
    "  - {name: diagnostics,",
    "  - {name: stripped, from: inside, to: outside, services: [stripped], action: accept,\n"
    "     seqrand: both, tcp_options: {sack_permitted: strip}}\n"
    "  - {name: fast-plain, from: inside, to: outside, services: [fast-plain], "
    "action: accept,\n     fastpath: true}\n"
    "  - {name: diagnostics,")


def cpu_ticks():
    """(softirq, non-idle) ticks of all CPUs so far, from /proc/stat."""
    with open("/proc/stat") as stat:
        user, nice, system, _idle, _iowait, irq, softirq = map(int, stat.readline().split()[1:8])
    return softirq, user + nice + system + irq + softirq


def run(ctx):
    lab = ctx.lab()
    results = []
    for index in range(max(ROUNDS, LOSS_ROUNDS)):
        for condition, impairment in CONDITIONS:
            if index >= (LOSS_ROUNDS if impairment else ROUNDS):
                continue
            ctx.run("tc", "qdisc", "del", "dev", "veth-s", "root", ns=lab.fw, check=False)
            if impairment:
                ctx.run("tc", "qdisc", "add", "dev", "veth-s", "root", "netem", *impairment,
                        "seed", str(1000 + index), ns=lab.fw)
            for config, port in CONFIGS:
                if impairment:  # the same loss pattern from the flow's first packet
                    ctx.run("tc", "qdisc", "replace", "dev", "veth-s", "root", "netem",
                            *impairment, "seed", str(1000 + index), ns=lab.fw)
                if port is None:
                    ctx.run("nft", "flush", "ruleset", ns=lab.fw)
                elif config == "conntrack only":
                    seqrand.apply_policy(ctx, lab, POLICY)
                name = f"r{index}-{condition.split(',')[0].replace(' ', '')}-" + \
                    config.replace(", ", "-").replace(" ", "-")
                softirq, busy = cpu_ticks()
                report = ctx.iperf3(lab, name, port or seqrand.PORT_PLAIN,
                                    "--time", str(SECONDS), seconds=SECONDS)
                softirq_after, busy_after = cpu_ticks()
                sent, received = report["end"]["sum_sent"], report["end"]["sum_received"]
                results.append({"round": index, "condition": condition, "config": config,
                                "bits_per_second": received["bits_per_second"],
                                "retransmits": sent.get("retransmits"),
                                "bytes": received["bytes"],
                                "softirq_ticks": softirq_after - softirq,
                                "busy_ticks": busy_after - busy,
                                "ticks_per_second": os.sysconf("SC_CLK_TCK")})
                ctx.save_json("results.json", results)
