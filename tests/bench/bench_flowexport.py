"""make bench-flowexport: what exporting flows costs the firewall, and which exporter
(issue 40, item 1; docs/MONITORING.md). Not a test: it prints a table, and ratios
against no export measured in the same run.

The lab's client - fw - server namespaces on this host's kernel, fw forwarding with
conntrack (accounting and timestamps on). Two conditions, each with every exporter in
turn, in rounds (BENCH_ROUNDS, default 3), the exporters alternating so that the host's
drift cancels (BENCH_CONDITIONS: "new held", either or both):

  100 000 connections  BENCH_CONNECTIONS (100 000) established connections held open
                       through fw, and an iperf3 elephant through it for BENCH_SECONDS
                       (20): the elephant's rate, and what the exporter and the host spent
  5 000 new/s          connrate.py's client paced at 5 000 connections a second for
                       BENCH_SECONDS: the rate it reached, and the same CPU times

The exporters, each in fw, each sending to its own nfcapd in the server's namespace
(whose records are counted at the end: an exporter whose records a collector cannot
read exports nothing), with an active timeout of 10 s (six times the default's scans,
so that a 20 s window holds two):

  none          no export
  tusk          tusk-flowexport: conntrack's DESTROY events and a scan of the table
  ulogd2        ulogd2's NFCT input (events, its own hash of every connection) with its
                IPFIX output
  softflowd     libpcap on fw's inside port, IPFIX
  pmacct        pmacctd (libpcap) with the nfprobe plugin, IPFIX

"exporter CPU" is the exporter's processes' user + system time over the window, as a
share of one CPU; "host busy" the share of all CPUs not idle (every namespace's work is
this host's, a packet's path on veth included). Before each window of new connections
fw's table is emptied, so that no window pays for the one before's connections timing
out. The ratios are host busy with the exporter over without it, per round, as
a geometric mean with a 95 % bootstrap interval (paired.mean_ci).

What this host cannot show: the fast path (no flowtables in this kernel), where a
packet-capture exporter must still see every packet while conntrack's counters come
from the flowtable's.
"""
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.dirname(HERE)
ROOT = os.path.dirname(TESTS)
sys.path[:0] = [HERE, TESTS, os.path.join(TESTS, "netns"), os.path.join(ROOT, "webui"), ROOT]

import paired  # noqa: E402
from kit import wait_until  # noqa: E402

from flows.core import ctnetlink as nl  # noqa: E402
from flows.core import export  # noqa: E402
from lab.namespaces import SERVER_V4, Lab  # noqa: E402

ROUNDS = int(os.environ.get("BENCH_ROUNDS", "3"))
SECONDS = float(os.environ.get("BENCH_SECONDS", "20"))
HELD = int(os.environ.get("BENCH_CONNECTIONS", "100000"))
CONDITIONS = os.environ.get("BENCH_CONDITIONS", "new held").split()
RATE = 5000
ACTIVE = 10
CONNRATE = os.path.join(HERE, "connrate.py")
EXPORTER = os.path.join(ROOT, "webui", "bin", "tusk-flowexport")
EXPORTERS = ("none", "tusk", "ulogd2", "softflowd", "pmacct")
PORTS = {"tusk": 4739, "ulogd2": 4740, "softflowd": 4741, "pmacct": 4742}
PER_PROCESS = 15000          # connections one process holds (within its open files)
USER_HZ = os.sysconf("SC_CLK_TCK")
ULOGD_PLUGINS = "/usr/lib/x86_64-linux-gnu/ulogd"
RULESET = """
table inet bench {
    chain forward {
        type filter hook forward priority 0; policy drop;
        ct state established,related accept
        ct state new accept
    }
}
"""


def start_exporter(lab, name, work):
    """The exporter in fw (None for none), sending to its nfcapd."""
    port = PORTS.get(name)
    target = f"{SERVER_V4}:{port}"
    if name == "none":
        return None
    if name == "tusk":
        conf = os.path.join(work, "export.json")
        with open(conf, "w", encoding="utf-8") as handle:
            handle.write(export.render(export.check({
                "active_timeout": ACTIVE, "collectors": [{"address": SERVER_V4,
                                                          "port": port}]})))
        argv = [sys.executable, EXPORTER, conf, os.path.join(work, "status.json")]
    elif name == "ulogd2":
        conf = os.path.join(work, "ulogd.conf")
        with open(conf, "w", encoding="utf-8") as handle:
            handle.write(f"""[global]
logfile="{work}/ulogd.log"
loglevel=5
plugin="{ULOGD_PLUGINS}/ulogd_inpflow_NFCT.so"
plugin="{ULOGD_PLUGINS}/ulogd_output_IPFIX.so"
stack=ct1:NFCT,ipfix1:IPFIX

[ct1]

[ipfix1]
oid=1
host="{SERVER_V4}"
port={port}
proto="udp"
""")
        argv = ["ulogd", "-c", conf]
    elif name == "softflowd":
        argv = ["softflowd", "-d", "-i", "veth-c", "-n", target, "-v", "10", "-t",
                f"maxlife={ACTIVE}", "-p", os.path.join(work, "softflowd.pid"), "-c",
                os.path.join(work, "softflowd.ctl"), "-m", str(HELD + 50000)]
    else:
        conf = os.path.join(work, "pmacctd.conf")
        with open(conf, "w", encoding="utf-8") as handle:
            handle.write(f"""daemonize: false
pcap_interface: veth-c
plugins: nfprobe
nfprobe_receiver: {target}
nfprobe_version: 10
nfprobe_timeouts: maxlife={ACTIVE}
nfprobe_maxflows: {HELD + 50000}
""")
        argv = ["pmacctd", "-f", conf]
    proc = subprocess.Popen(["ip", "netns", "exec", lab.fw, *argv], stdout=subprocess.DEVNULL,
                            stderr=open(os.path.join(work, f"{name}.stderr"), "w"),
                            start_new_session=True)
    time.sleep(1)
    if proc.poll() is not None:
        with open(os.path.join(work, f"{name}.stderr"), encoding="utf-8") as said:
            raise SystemExit(f"{name} exited: {said.read()[-600:]}")
    return proc


def tree(pid):
    """pid and its descendants."""
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        try:
            for task in os.listdir(f"/proc/{current}/task"):
                with open(f"/proc/{current}/task/{task}/children", encoding="ascii") as kids:
                    todo += [int(k) for k in kids.read().split()]
        except OSError:
            pass
    return found


def cpu_of(proc):
    if proc is None:
        return 0.0
    total = 0
    for pid in tree(proc.pid):
        try:
            with open(f"/proc/{pid}/stat", encoding="ascii") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
        except OSError:
            pass
    return total / USER_HZ


def host_times():
    """(ticks running, ticks in all) of every CPU so far (/proc/stat: user, nice, system,
    irq and softirq against those and idle and iowait; steal and guest left out)."""
    with open("/proc/stat", encoding="ascii") as handle:
        user, nice, system, idle, iowait, irq, softirq = (
            int(v) for v in handle.readline().split()[1:8])
    running = user + nice + system + irq + softirq
    return running, running + idle + iowait


def stop(proc):
    if proc is None:
        return
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def window(lab, proc, load):
    """load() run while the exporter's and the host's CPU are read around it."""
    cpu0, (run0, all0), t0 = cpu_of(proc), host_times(), time.monotonic()
    result = load()
    cpu1, (run1, all1), t1 = cpu_of(proc), host_times(), time.monotonic()
    busy = (run1 - run0) / max(all1 - all0, 1)
    return {"exporter_cpu": (cpu1 - cpu0) / (t1 - t0), "host_busy": busy, **result}


def elephant(lab):
    out = lab.ns(lab.client, "iperf3", "-c", SERVER_V4, "-p", "5201", "-t",
                 str(int(SECONDS)), "-J").stdout
    report = json.loads(out)
    return {"rate": report["end"]["sum_received"]["bits_per_second"] / 1e9}


def new_connections(lab):
    out = lab.ns(lab.client, sys.executable, CONNRATE, "client", SERVER_V4, "5301",
                 str(SECONDS), str(RATE)).stdout
    run = json.loads(out)
    return {"rate": run["connections"] / run["elapsed"], "failed": run["failed"]}


def collectors(lab, base):
    procs = {}
    for name, port in PORTS.items():
        directory = os.path.join(base, f"nfcapd-{name}")
        os.makedirs(directory, exist_ok=True)
        procs[name] = subprocess.Popen(
            ["ip", "netns", "exec", lab.server, "nfcapd", "-b", SERVER_V4, "-p", str(port),
             "-w", directory, "-t", "3600"], stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL)
    return procs


def records(base, procs):
    counts = {}
    for name, proc in procs.items():
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
        directory = os.path.join(base, f"nfcapd-{name}")
        total = 0
        for file in os.listdir(directory):
            if file.startswith("nfcapd.2"):
                out = subprocess.run(["nfdump", "-r", os.path.join(directory, file), "-q",
                                      "-o", "csv"], capture_output=True, text=True).stdout
                total += sum(1 for line in out.splitlines() if line and line[0].isdigit())
        counts[name] = total
    return counts


def main():
    lab = Lab("fx").up()
    base = tempfile.mkdtemp(prefix="tusk-bench-flowexport-")
    results = []
    held, keep, server = [], [], None
    try:
        lab.ns(lab.fw, "nft", "-f", "-", input=RULESET)
        for name, value in (("net.netfilter.nf_conntrack_acct", "1"),
                            ("net.netfilter.nf_conntrack_timestamp", "1")):
            nl.sysctl(lab.fw, name, value)
        lab.ns(lab.client, "sysctl", "-qw", "net.ipv4.ip_local_port_range=1024 65000")
        procs = collectors(lab, base)
        server = subprocess.Popen(["ip", "netns", "exec", lab.server, sys.executable,
                                   CONNRATE, "server", "5301"], stdout=subprocess.PIPE)
        server.stdout.readline()
        chunks = [min(PER_PROCESS, HELD - first) for first in range(0, HELD, PER_PROCESS)]
        ports = [str(6001 + i) for i in range(len(chunks))]
        for port in ports:
            keeper = subprocess.Popen(["ip", "netns", "exec", lab.server, sys.executable,
                                       CONNRATE, "keep", port], stdout=subprocess.PIPE)
            keeper.stdout.readline()
            keep.append(keeper)
        conditions = (("5 000 new/s", new_connections),
                      (f"{HELD:,} connections".replace(",", " "), elephant))
        for condition, load in conditions[:2 if "held" in CONDITIONS else 1] \
                if "new" in CONDITIONS else conditions[1:]:
            if load is elephant:
                for port, count in zip(ports, chunks):
                    holder = subprocess.Popen(["ip", "netns", "exec", lab.client,
                                               sys.executable, CONNRATE, "hold", SERVER_V4,
                                               port, str(count)],
                                              stdin=subprocess.PIPE, stdout=subprocess.PIPE)
                    held.append(holder)
                    print(f"holding: {holder.stdout.readline().decode().strip()}", flush=True)
                entries = lab.ns(lab.fw, "conntrack", "-C").stdout.strip()
                print(f"fw's conntrack table: {entries} entries", flush=True)
            for number in range(ROUNDS):
                order = EXPORTERS if number % 2 == 0 else tuple(reversed(EXPORTERS))
                for name in order:
                    if load is elephant:
                        lab.ns(lab.server, "iperf3", "-s", "-1", "-D", "-p", "5201")
                        wait_until(lambda: lab.ns(lab.server, "ss", "-Hltn",
                                                  "sport = :5201").stdout, 10, "iperf3")
                    if load is new_connections:
                        lab.ns(lab.fw, "conntrack", "-F", check=False)
                    work = tempfile.mkdtemp(dir=base)
                    proc = start_exporter(lab, name, work)
                    time.sleep(3)         # past the exporter's start (its first dump)
                    try:
                        found = window(lab, proc, lambda: load(lab))
                    finally:
                        stop(proc)
                    found.update(round=number, condition=condition, config=name)
                    results.append(found)
                    print(json.dumps(found), flush=True)
        counts = records(base, procs)
    finally:
        for proc in (*held, server, *keep):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()
        lab.down()
    report(results, counts)


def report(results, counts):
    print()
    print(f"make bench-flowexport: {ROUNDS} rounds of {SECONDS:.0f} s, active timeout "
          f"{ACTIVE} s")
    print("| condition | exporter | exporter CPU (% of a CPU) | host busy (%) | rate | "
          "host busy vs none (95 % interval) | records at its collector |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for condition in dict.fromkeys(r["condition"] for r in results):
        for name in EXPORTERS:
            mine = [r for r in results if r["condition"] == condition and r["config"] == name]
            cpu = statistics.median(100 * r["exporter_cpu"] for r in mine)
            busy = statistics.median(100 * r["host_busy"] for r in mine)
            rate = statistics.median(r["rate"] for r in mine)
            unit = "Gbit/s" if "connections" in condition else "conn/s"
            ratio = "-" if name == "none" else "x{:.3f} ({:.3f}-{:.3f})".format(
                *paired.mean_ci(paired.paired(results, condition, name, "none",
                                              measure=lambda r: r["host_busy"])))
            print(f"| {condition} | {name} | {cpu:.1f} | {busy:.1f} | {rate:.2f} {unit} | "
                  f"{ratio} | {counts.get(name, '-')} |")


if __name__ == "__main__":
    main()
