"""bench-flow (a benchmark, not a test; part of make bench): one iperf3 TCP flow
client -> fw -> server for the rows of the single-flow performance report
(docs/PERFORMANCE.md), each without loss and with 1 % loss at 20 ms RTT. Rounds
interleave the rows; within a round every row meets the same netem loss pattern
(the generator is seeded per round and re-armed before each flow).

Rows (ROWS below; tests/bench/bench_flow.py runs rows 1 and 2 on the FWSM-emulation
kernel, the others on Tusk's kernel, and rows 1, 3, 4, 6 on the host as well):

  1 control         plain forwarding, no ruleset: no conntrack
  2 FWSM default    MSS clamped to 1380, sequence randomisation whose SACK blocks are
                    not translated (only on the kernel built with tests/bench/fwsm/),
                    a capture running on fw
  3 FWSM optimised  MSS clamped to 1460, no randomisation
  4 Tusk defaults   the example policy (flow in class bulk-copy: fastpath auto, the
                    default - promoted past its first megabyte) + the throughput profile
  5 Tusk + seqrand  row 4 with seqrand: both on bulk-copy
  6 Tusk jumbo      row 4 with MTU 9000 on every interface of the path
  7 Tusk fast path  row 4 with bulk-copy on the flowtable fast path (not in the
                    FWSM table: what closes the gap conntrack leaves; Tusk's kernel only)
  8 Tusk seqrand fast  row 5 on the fast path: randomised and offloaded (Tusk's kernel)

  BENCH_ROWS         which rows (default 1,3,4,5,6,7,8)
  BENCH_ROUNDS       rounds without loss (default 3)
  BENCH_LOSS_ROUNDS  rounds with loss (default 5; 0 leaves loss out)
  BENCH_SECONDS      iperf3 duration (default 10)

Saved: results.json, one record per flow: {row, condition, round, bits_per_second,
retransmits, tcpext: the sender's TcpExt counter deltas (SACK discarded, recoveries)}.
"""
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

TIME_LIMIT = 6 * 3600
PORT = 5201      # the example policy's class bulk-copy accepts it (service replication)
ROOT = Path(__file__).resolve().parents[4]
EXAMPLE = ROOT / "webui" / "policy" / "examples" / "tusk.yaml"
TUNE = ROOT / "webui" / "bin" / "tusk-tune"
NO_LOSS, LOSS = "no loss", "1% loss, 20 ms RTT"
IMPAIRMENT = ("delay", "20ms", "loss", "1%")
# the sender's counters that tell SACK working from SACK ignored
TCPEXT = ("TCPSACKDiscard", "TCPSackRecovery", "TCPRenoRecovery", "TCPSACKReneging",
          "TCPDSACKIgnoredNoUndo", "TCPSackShifted")
CAPTURE_SNAPLEN = 256       # the Diagnostics page's default
CAPTURE_RING = ("-C", "32", "-W", "2")   # two files of 32 MB, the oldest overwritten


@dataclass(frozen=True)
class Row:
    number: int
    name: str
    setup: str
    policy: str = ""        # "" = no ruleset at all
    tune: bool = False      # the throughput tuning profile
    mtu: int = 1500
    capture: bool = False
    fwsm_kernel: bool = False


def fwsm_policy(mss, seqrand):
    """A policy as FWSM's defaults (or its optimised settings) would be written in Tusk:
    every packet through the firewall's inspection, as FWSM's (fastpath: never)."""
    flow_class = (f"  - {{name: bulk, from: inside, to: outside, services: [iperf], "
                  f"action: accept, mss: {{mode: fixed, value: {mss}}}, fastpath: never"
                  + (", seqrand: initiator" if seqrand else "") + "}\n")
    return ("version: 1\n"
            "zones:\n"
            "  - {name: inside, interfaces: [veth-c]}\n"
            "  - {name: outside, interfaces: [veth-s]}\n"
            "services:\n"
            f"  - {{name: iperf, protocol: tcp, ports: [{PORT}]}}\n"
            "classes:\n" + flow_class)


def example_policy(**bulk_copy):
    """The example policy `make run` applies (the flow is in class bulk-copy), with
    bulk_copy's settings added to that class."""
    document = yaml.safe_load(EXAMPLE.read_text())
    for cls in document["classes"]:
        if cls["name"] == "bulk-copy":
            cls.update(bulk_copy)
    return yaml.safe_dump(document, sort_keys=False)


ROWS = {row.number: row for row in (
    Row(1, "Control", "plain forwarding, no ruleset (no conntrack)"),
    Row(2, "FWSM default", "MSS clamped to 1380, sequence randomisation of the "
        "initiator with SACK blocks left untranslated (FWSM-emulation kernel), a capture "
        "running on fw", policy=fwsm_policy(1380, True), capture=True, fwsm_kernel=True),
    Row(3, "FWSM optimised", "MSS clamped to 1460, no randomisation",
        policy=fwsm_policy(1460, False)),
    Row(4, "Tusk defaults", "the example policy (flow in class bulk-copy: MSS and TCP "
        "options untouched, fastpath auto - on the fast path past its first megabyte) and "
        "the throughput tuning profile", policy=example_policy(), tune=True),
    Row(5, "Tusk + seqrand", "row 4 with seqrand: both on class bulk-copy (SACK blocks "
        "translated)", policy=example_policy(seqrand="both"), tune=True),
    Row(6, "Tusk, jumbo frames", "row 4 with MTU 9000 on every interface of the path",
        policy=example_policy(), tune=True, mtu=9000),
    Row(7, "Tusk, fast path", "row 4 with class bulk-copy on the flowtable fast path "
        "(fastpath: true): established packets skip the forward chain and conntrack",
        policy=example_policy(fastpath=True), tune=True),
    Row(8, "Tusk + seqrand, fast path", "row 5 on the fast path (seqrand: both and "
        "fastpath: true): the flowtable translates sequence numbers and SACK blocks",
        policy=example_policy(seqrand="both", fastpath=True), tune=True),
)}


def settings():
    rows = [int(n) for n in os.environ.get("BENCH_ROWS", "1,3,4,5,6,7,8").split(",") if n]
    return (rows, int(os.environ.get("BENCH_ROUNDS", "3")),
            int(os.environ.get("BENCH_LOSS_ROUNDS", "5")),
            int(os.environ.get("BENCH_SECONDS", "10")))


def run(ctx):
    rows, rounds, loss_rounds, seconds = settings()
    lab = ctx.lab()
    # in the guest the profile's global parts (backlog, budget, conntrack table) are
    # written in the root namespace, where they take effect for the lab's fw too
    Bench(ctx, lab, tune_args=()).measure(rows, rounds, loss_rounds, seconds)


class Bench:
    """Sets fw up as each row asks (only what changed since the last flow) and runs
    the flows. Works in the guest and, for tests/bench/bench_flow.py, on the host."""

    def __init__(self, ctx, lab, tune_args):
        self.ctx, self.lab, self.tune_args = ctx, lab, tuple(tune_args)
        self.policy = self.tuned = self.mtu = self.offloads = None
        self.results = []

    def measure(self, rows, rounds, loss_rounds, seconds, conditions=(NO_LOSS, LOSS)):
        for name in rows:
            if ROWS[name].policy:
                self.ctx.save_text(f"policy-row{name}.yaml", ROWS[name].policy)
        try:
            for index in range(max(rounds, loss_rounds)):
                for condition in conditions:
                    if index >= (loss_rounds if condition == LOSS else rounds):
                        continue
                    for name in rows:
                        self.flow(ROWS[name], condition, index, seconds)
                        self.ctx.save_json("results.json", self.results)
        finally:
            self.set_tuned(False)
        return self.results

    def flow(self, row, condition, index, seconds):
        ctx, lab = self.ctx, self.lab
        self.set_mtu(row.mtu)
        self.set_policy(row.policy)
        self.set_tuned(row.tune)
        # With loss the sender sends wire-sized segments (no TSO/GSO), so netem's 1 %
        # drops single segments, not 64 KB bursts; CPU is not the limit there.
        self.set_offloads(condition != LOSS)
        ctx.run("tc", "qdisc", "del", "dev", "veth-s", "root", ns=lab.fw, check=False)
        if condition == LOSS:
            ctx.run("tc", "qdisc", "add", "dev", "veth-s", "root", "netem", *IMPAIRMENT,
                    "seed", str(1000 + index), ns=lab.fw)
        name = f"r{index}-{'loss' if condition == LOSS else 'clean'}-row{row.number}"
        before = self.tcpext()
        capture = self.start_capture(name) if row.capture else None
        try:
            report = ctx.iperf3(lab, name, PORT, "--time", str(seconds), seconds=seconds)
        finally:
            if capture:
                self.stop_capture(capture, name)
        after = self.tcpext()
        self.results.append({
            "row": row.number, "condition": condition, "round": index,
            "bits_per_second": report["end"]["sum_received"]["bits_per_second"],
            "retransmits": report["end"]["sum_sent"].get("retransmits"),
            "mss": report["start"].get("tcp_mss_default"),
            "tcpext": {key: after.get(key, 0) - before.get(key, 0) for key in TCPEXT}})

    def set_mtu(self, mtu):
        if self.mtu == mtu:
            return
        lab = self.lab
        for ns, interface in ((lab.client, "eth0"), (lab.fw, "veth-c"), (lab.fw, "veth-s"),
                              (lab.server, "eth0")):
            self.ctx.run("ip", "link", "set", interface, "mtu", str(mtu), ns=ns)
        self.mtu = mtu

    def set_policy(self, policy):
        if self.policy == policy:
            return
        if policy:
            path = self.ctx.dir / "policy.yaml"
            path.write_text(policy)
            self.ctx.tusk(self.lab, "apply", path)
            self.ctx.tusk(self.lab, "confirm")
        else:
            self.ctx.run("nft", "flush", "ruleset", ns=self.lab.fw)
        self.policy = policy

    def set_tuned(self, tuned):
        if bool(self.tuned) == tuned:
            return
        command = ("apply", "throughput") if tuned else ("rollback",)
        self.ctx.run(sys.executable, str(TUNE), *self.tune_args, "--no-policy", "--state-dir",
                     str(self.ctx.dir / "tune-state"), "--json", *command,
                     save=f"tune-{command[0]}-{len(self.results)}.json", timeout=120)
        self.tuned = tuned

    def set_offloads(self, on):
        if self.offloads == on:
            return
        state = "on" if on else "off"
        self.ctx.run("ethtool", "-K", "eth0", "tso", state, "gso", state, ns=self.lab.client)
        self.offloads = on

    def tcpext(self):
        """The sender's TcpExt counters (/proc/net/netstat of the client namespace)."""
        text = self.ctx.run("cat", "/proc/net/netstat", ns=self.lab.client).stdout
        lines = [line.split() for line in text.splitlines() if line.startswith("TcpExt:")]
        names, values = lines[0][1:], lines[1][1:]
        return {name: int(value) for name, value in zip(names, values)}

    def start_capture(self, name):
        """tcpdump on fw's inside interface as an operator's bounded capture runs:
        snap length 256, a ring of two 32 MB files, buffered writes."""
        path = Path("/tmp") / f"bench-capture-{os.getpid()}-{name}.pcap"
        proc = subprocess.Popen(
            ["ip", "netns", "exec", self.lab.fw, "tcpdump", "-i", "veth-c", "-n", "-Z", "root",
             "-s", str(CAPTURE_SNAPLEN), *CAPTURE_RING, "-w", str(path)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            text=True)
        deadline = time.monotonic() + 20
        seen = ""
        while "listening on" not in seen:
            line = proc.stderr.readline()
            if not line or time.monotonic() > deadline:
                proc.kill()
                raise RuntimeError(f"tcpdump on fw did not start: {seen!r}")
            seen += line
        return proc, path

    def stop_capture(self, capture, name):
        proc, path = capture
        proc.terminate()
        _, stderr = proc.communicate(timeout=30)
        counts = dict((key, int(value)) for value, key in
                      re.findall(r"(\d+) packets? (captured|received by filter|dropped by "
                                 r"kernel)", stderr))
        self.ctx.save_json(f"{name}-capture.json", counts)
        for old in path.parent.glob(path.name + "*"):
            old.unlink()
