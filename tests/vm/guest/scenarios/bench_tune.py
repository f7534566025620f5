"""bench-tune (make bench-tune; measured, not judged): what the throughput profile does
for one flow and for four, on the NIC boot's 4-queue virtio-net NIC (see tune_nic.py
for the topology). Configurations, interleaved in every round:

  driver default      4 queue pairs, spread over the vCPUs by virtio-net itself
  one queue           the NIC at one queue pair and nothing else (a driver that opens one)
  throughput profile  one queue pair to start with, then tusk-tune apply throughput

Each: iperf3 from the host through fw to recv with 1 (reader pinned to one CPU, see
tune_nic.py) and with 4 parallel streams;
Mbit/s and the sender's retransmissions from iperf3, and out-of-order data segments
counted from a capture in recv. results.json: one record per measurement.
"""
import json
import os
from pathlib import Path

import dpkt

from scenarios.tune_nic import HOST, PORT, nic_name, set_up, tune

TIME_LIMIT = 3600
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "3"))
SECONDS = int(os.environ.get("BENCH_SECONDS", "5"))
CONFIGS = ("driver default", "one queue", "throughput profile")
STREAMS = (1, 4)
READER_CPU = 2


def out_of_order(path):
    """Data segments from the host that arrived below the highest byte already seen,
    per connection (loss recovery included: read it with the retransmissions)."""
    highest, late = {}, 0
    with open(path, "rb") as handle:
        for _, frame in dpkt.pcap.Reader(handle):
            ip = dpkt.ethernet.Ethernet(frame).data
            if not isinstance(ip, dpkt.ip.IP) or not isinstance(ip.data, dpkt.tcp.TCP):
                continue
            tcp = ip.data
            length = ip.len - ip.hl * 4 - tcp.off * 4
            if tcp.sport != PORT or length <= 0:
                continue
            top = highest.get(tcp.dport)
            if top is not None and (tcp.seq - top) % (1 << 32) > (1 << 31):
                late += 1
            end = (tcp.seq + length) % (1 << 32)
            if top is None or (end - top) % (1 << 32) < (1 << 31):
                highest[tcp.dport] = end
    return late


def prepare(ctx, iface, config):
    ctx.run("ethtool", "-L", iface, "combined", "4" if config == "driver default" else "1")
    if config == "throughput profile":
        tune(ctx, "apply", "apply", "throughput")


def measure(ctx, config, streams, round_number):
    name = f"r{round_number}-{config.replace(' ', '-')}-{streams}"
    # one stream: the reader pinned, as in tests/vm/test_vm_tuning.py (tun would follow
    # a wandering reader between queues); four: iperf3's threads where they run
    pin = ["taskset", "-c", str(READER_CPU)] if streams == 1 else []
    with ctx.capture("recv", "veth-recv", name, f"tcp port {PORT}", snaplen=96):
        ctx.run(*pin, "iperf3", "--client", HOST, "--port", str(PORT), "--reverse", "--time",
                str(SECONDS), "--parallel", str(streams), "--json", ns="recv",
                save=f"{name}.json", timeout=SECONDS + 120)
    report = json.loads((ctx.dir / f"{name}.json").read_text())
    record = {"round": round_number, "config": config, "streams": streams,
              "mbps": report["end"]["sum_received"]["bits_per_second"] / 1e6,
              "retransmits": report["end"]["sum_sent"].get("retransmits"),
              "out_of_order": out_of_order(ctx.dir / f"{name}.pcap")}
    (ctx.dir / f"{name}.pcap").unlink()
    return record


def run(ctx):
    iface = nic_name()
    set_up(ctx, iface)
    # every configuration forwards; only the throughput profile tunes
    Path("/proc/sys/net/ipv4/ip_forward").write_text("1")
    results = []
    for round_number in range(ROUNDS):
        for config in CONFIGS:
            prepare(ctx, iface, config)
            for streams in STREAMS:
                results.append(measure(ctx, config, streams, round_number))
                ctx.save_json("results.json", results)
            if config == "throughput profile":
                tune(ctx, "rollback", "rollback")
