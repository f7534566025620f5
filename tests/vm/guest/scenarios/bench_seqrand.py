"""bench-seqrand (a benchmark, not a test; make bench-seqrand): single-flow iperf3
throughput through fw for plain forwarding (no ruleset, so no conntrack), conntrack
only (a Tusk class without TCP actions), seqrand (a class randomising both
directions), seqrand with SACK-permitted stripped (what FWSM users fell back to), and
the flowtable fast path without and with seqrand (classes fastpath: true), each
without loss and with 1 % loss at 20 ms RTT (netem on fw's egress towards
the server). Rounds interleave the configurations so that slow and fast moments of
the machine fall on all of them; tests/bench/bench_seqrand.py prints the table.

With loss, every configuration of a round meets the same loss pattern (netem's seed is
the round's), and the client sends MTU-sized segments (TSO and GSO off on its NIC):
netem drops whole packets, and a 64 KB GSO packet dropped as one is a burst of 44
segments lost, not 1 % loss. Such bursts ended in retransmission timeouts that swung a
flow's throughput by a factor of twenty from one round to the next and hid the
firewall's part in it.

  BENCH_ROUNDS       rounds without loss, at least (default 8)
  BENCH_MAX_ROUNDS   ... and at most (default 32)
  BENCH_LOSS_ROUNDS  rounds with loss, at least (default 10): a lossy flow's
                     throughput swings with the loss pattern, so the means need more
  BENCH_MAX_LOSS_ROUNDS ... and at most (default 24)
  BENCH_SECONDS      iperf3 duration (default 14)

Between the least and the most, a condition gets more rounds while the 95 % interval
of any of its goals' paired ratios is wider than the goal's margin (tests/bench/
paired.py): enough rounds to resolve each goal, where the machine allows.

iperf3's client (the sender) runs on CPU 0 and its server on CPU 1: a sender that
moves between CPUs hands its segments to two CPUs' input queues through veth, which
reorders them, and reordering makes TCP retransmit what was never lost.

Each run also reads the guest's CPU time from /proc/stat around the flow: the time
spent in softirq - where fw forwards, and where the endpoints' receive paths run,
the same for every configuration - and in all non-idle states, for the host to turn
into a cost per forwarded segment (bytes received / 1448).

Saved: results.json [{round, condition, config, bits_per_second, retransmits, bytes,
bytes_sent, backlog_drops, softirq_ticks, busy_ticks, ticks_per_second}]; rounds.json
{condition: rounds run, the goals still unresolved at the end}.
"""
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench"))

import paired  # noqa: E402
import seqrand  # noqa: E402

ROUNDS = int(os.environ.get("BENCH_ROUNDS", "8"))
MAX_ROUNDS = max(ROUNDS, int(os.environ.get("BENCH_MAX_ROUNDS", "32")))
LOSS_ROUNDS = int(os.environ.get("BENCH_LOSS_ROUNDS", "10"))
MAX_LOSS_ROUNDS = max(LOSS_ROUNDS, int(os.environ.get("BENCH_MAX_LOSS_ROUNDS", "24")))
SECONDS = int(os.environ.get("BENCH_SECONDS", "14"))
PORT_STRIPPED, PORT_FAST_PLAIN = 5205, 5206
CONDITIONS = ((paired.NO_LOSS, None), (paired.LOSS, ("delay", "20ms", "loss", "1%")))
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
# every round of both conditions at the most, each flow with its setup (~15 s)
TIME_LIMIT = (MAX_ROUNDS + MAX_LOSS_ROUNDS) * len(CONFIGS) * (SECONDS + 15) + 600


def backlog_drops():
    """Packets the kernel dropped because a CPU's input backlog was full (every CPU's
    second column of /proc/net/softnet_stat): losses nobody configured."""
    with open("/proc/net/softnet_stat") as stat:
        return sum(int(line.split()[1], 16) for line in stat)


def cpu_ticks():
    """(softirq, non-idle) ticks of all CPUs so far, from /proc/stat."""
    with open("/proc/stat") as stat:
        user, nice, system, _idle, _iowait, irq, softirq = map(int, stat.readline().split()[1:8])
    return softirq, user + nice + system + irq + softirq


def wanted(results, condition, index, least, most):
    """Whether condition gets round index: up to the least always, past the most
    never, in between while a goal of it is unresolved."""
    if index < least:
        return True
    return index < most and bool(paired.unresolved(results, condition))


def run(ctx):
    lab = ctx.lab()
    results = []
    rounds = {condition: 0 for condition, _ in CONDITIONS}
    for index in range(max(MAX_ROUNDS, MAX_LOSS_ROUNDS)):
        for condition, impairment in CONDITIONS:
            least, most = (LOSS_ROUNDS, MAX_LOSS_ROUNDS) if impairment else (ROUNDS, MAX_ROUNDS)
            if rounds[condition] < index or not wanted(results, condition, index, least, most):
                continue        # this condition is done
            rounds[condition] = index + 1
            ctx.run("tc", "qdisc", "del", "dev", "veth-s", "root", ns=lab.fw, check=False)
            segmentation = "off" if impairment else "on"
            ctx.run("ethtool", "-K", "eth0", "tso", segmentation, "gso", segmentation,
                    ns=lab.client)
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
                drops = backlog_drops()
                report = ctx.iperf3(lab, name, port or seqrand.PORT_PLAIN,
                                    "--time", str(SECONDS), "--affinity", "0,1",
                                    seconds=SECONDS)
                softirq_after, busy_after = cpu_ticks()
                drops = backlog_drops() - drops
                sent, received = report["end"]["sum_sent"], report["end"]["sum_received"]
                results.append({"round": index, "condition": condition, "config": config,
                                "bits_per_second": received["bits_per_second"],
                                "retransmits": sent.get("retransmits"),
                                "bytes": received["bytes"], "bytes_sent": sent["bytes"],
                                "backlog_drops": drops,
                                "softirq_ticks": softirq_after - softirq,
                                "busy_ticks": busy_after - busy,
                                "ticks_per_second": os.sysconf("SC_CLK_TCK")})
                ctx.save_json("results.json", results)
    ctx.save_json("rounds.json", {condition: {
        "rounds": rounds[condition],
        "unresolved": [f"{config} / {base} >= {goal}"
                       for config, base, goal in paired.unresolved(results, condition)]}
        for condition, _ in CONDITIONS})
