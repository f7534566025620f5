"""make bench-diag: what the health report and a capture cost. Not a test: it prints
tables with ratios against baselines measured in the same run.

1. Analysis: `tusk diag analyze` on synthetic captures of one long clean TCP
   transfer (data + ACK per segment, 128-byte snap length) of 250 k, 1 M and 4 M
   packets, pcap and pcapng, each in a fresh process: packets/s (goal >= 200 000)
   and peak RSS over that of a process that imports the analyser and reads nothing
   (goal: not growing with the file). Baseline for the rate: dpkt's own pcap reader
   iterating the same file without decoding anything.
2. Capture: one iperf3 TCP flow client -> fw -> server in the namespace lab, rounds
   alternating no capture and dumpcap on both fw interfaces (snap length 128, to a
   file) exactly as the Diagnostics page starts it; median Gbit/s and the ratio
   (goal: a capture costs < 5 %, ratio >= 0.95).

  BENCH_SECONDS  iperf3 seconds per round (default 5)
  BENCH_ROUNDS   rounds of each (default 5)
"""
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.dirname(HERE)
ROOT = os.path.dirname(TESTS)
sys.path[:0] = [ROOT, TESTS, os.path.join(TESTS, "diag"), os.path.join(ROOT, "webui")]

import dpkt  # noqa: E402
from simflow import bulk_pcap  # noqa: E402

from diag.core import capture  # noqa: E402
from lab.namespaces import SERVER_V4, Lab  # noqa: E402

SECONDS = int(os.environ.get("BENCH_SECONDS", "5"))
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "5"))
TUSK = os.path.join(ROOT, "webui", "bin", "tusk")

CHILD = r"""
import json, resource, sys, time
sys.path.insert(0, sys.argv[1])
from diag.core.analyze import analyze
import dpkt
mode, path = sys.argv[2], sys.argv[3]
start = time.perf_counter()
if mode == "analyze":
    packets = analyze([path])["packets"]
elif mode == "dpkt":
    with open(path, "rb") as f:
        packets = sum(1 for _ in dpkt.pcap.Reader(f))
else:
    packets = 0
seconds = time.perf_counter() - start
print(json.dumps({"packets": packets, "seconds": seconds,
                  "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def child(mode, path=""):
    done = subprocess.run([sys.executable, "-c", CHILD, os.path.join(ROOT, "webui"), mode, path],
                          capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def to_pcapng(source, target):
    with open(source, "rb") as f, open(target, "wb") as out:
        dpkt.pcapng.Writer(out, snaplen=65535).writepkts(
            (float(ts), buf) for ts, buf in dpkt.pcap.Reader(f))


def analysis(work):
    print("\n1. Analysis: one clean bulk flow, data + ACK per segment, snap length 128")
    print(f"{'file':<22} {'MB':>7} {'packets/s':>11} {'x dpkt read':>12} {'peak RSS MB':>12} "
          f"{'above idle':>11}")
    idle = child("idle")["rss_mb"]
    rows = {}
    for packets in (250_000, 1_000_000, 4_000_000):
        pcap = os.path.join(work, f"{packets}.pcap")
        bulk_pcap(pcap, packets // 2, snaplen=128)
        pcapng = pcap + "ng"
        to_pcapng(pcap, pcapng)
        base = child("dpkt", pcap)
        for path in (pcap, pcapng):
            got = child("analyze", path)
            rate = got["packets"] / got["seconds"]
            rows[path] = (rate, got["rss_mb"] - idle)
            print(f"{os.path.basename(path):<22} {os.path.getsize(path) / 1e6:>7.0f} "
                  f"{rate:>11,.0f} {rate / (base['packets'] / base['seconds']):>12.2f} "
                  f"{got['rss_mb']:>12.1f} {got['rss_mb'] - idle:>11.1f}")
        os.unlink(pcap)
        os.unlink(pcapng)
    one_m = [v for k, v in rows.items() if os.path.basename(k).startswith("1000000.")]
    four_m = [v for k, v in rows.items() if os.path.basename(k).startswith("4000000.")]
    slowest = min(r for r, _ in one_m)
    print(f"goal >= 200 000 packets/s on 1 M packets: slowest format {slowest:,.0f} "
          f"({'met' if slowest >= 200_000 else 'NOT met'})")
    growth = max(m for _, m in four_m) / max(max(m for _, m in one_m), 0.1)
    print(f"memory above idle, 4 M vs 1 M packets: x{growth:.2f} "
          f"({'bounded' if growth < 1.5 else 'GROWS'}; idle process {idle:.1f} MB)")


def iperf(lab):
    out = lab.ns(lab.client, "iperf3", "-c", SERVER_V4, "-p", "5201", "-t", str(SECONDS), "-J",
                 check=False).stdout
    data = json.loads(out)
    if "error" in data:
        raise RuntimeError(f"iperf3: {data['error']}")
    return data["end"]["sum_received"]["bits_per_second"] / 1e9


def capture_cost(work):
    lab = Lab("tbdiag")
    try:
        lab.up()
        server = lab.popen(lab.server, "iperf3", "-s", "-p", "5201",
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(1)
        spec = capture.Spec(interfaces=("veth-c", "veth-s"), snaplen=128,
                            max_packets=100_000_000, max_mb=100_000, max_seconds=SECONDS * 3)
        runs = {"no capture": [], "capture": []}
        packets, cpu = [], []
        for number in range(ROUNDS):
            runs["no capture"].append(iperf(lab))
            proc = subprocess.Popen(capture.argv(spec, os.path.join(work, f"c{number}.pcapng"),
                                                 netns=lab.fw),
                                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            time.sleep(1)
            runs["capture"].append(iperf(lab))
            proc.send_signal(2)
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            err = proc.communicate(timeout=30)[1].decode()
            after = resource.getrusage(resource.RUSAGE_CHILDREN)   # dumpcap's CPU time
            cpu.append((after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
                       / (SECONDS + 1))
            found = capture._PACKETS.findall(err)
            packets.append(int(found[-1]) if found else 0)
            os.unlink(os.path.join(work, f"c{number}.pcapng"))
        server.terminate()
    finally:
        lab.down()
    base = statistics.median(runs["no capture"])
    print(f"\n2. Capture cost: one iperf3 flow client -> fw -> server, {SECONDS} s, "
          f"{ROUNDS} alternating rounds; dumpcap on both fw interfaces, snap 128")
    print(f"{'setup':<12} {'median Gbit/s':>14} {'min-max':>16} {'ratio':>6}")
    for name, values in runs.items():
        print(f"{name:<12} {statistics.median(values):>14.2f} "
              f"{min(values):>7.2f}-{max(values):<7.2f} {statistics.median(values) / base:>6.3f}")
    ratio = statistics.median(runs["capture"]) / base
    print(f"packets captured per round: median {statistics.median(packets):,.0f}; dumpcap used "
          f"{statistics.median(cpu):.0%} of one CPU while capturing (this host has "
          f"{os.cpu_count()}, which the flow's sender, receiver and forwarding already fill)")
    print(f"goal: a capture costs < 5 % (ratio >= 0.95): {ratio:.3f} "
          f"({'met' if ratio >= 0.95 else 'NOT met'})")


def main():
    print(f"Tusk diagnostics benchmark - {time.strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} CPUs, "
          f"kernel {os.uname().release}, Python {sys.version.split()[0]}, dpkt {dpkt.__version__}")
    with tempfile.TemporaryDirectory(prefix="bench-diag-", dir="/var/tmp") as work:
        analysis(work)
        capture_cost(work)


if __name__ == "__main__":
    main()
