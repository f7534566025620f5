"""bench-elephant (a benchmark, not a test; make bench-elephant): one elephant through
Tusk's defaults - the example policy, its class bulk-copy promoted to the fast path past
its first megabyte (fastpath: auto) - on Tusk's kernel, in three parts; rounds
interleave what is compared, so each ratio is paired within a round
(tests/bench/bench_elephant.py prints the tables):

  esnet   ESnet's method: a single stream at emulated RTTs of 10, 50 and 90 ms, MTU 1500
          and 9000, without loss and with 1 loss in 22 000 packets (netem on fw's way
          to the server, seeded per round), through plain forwarding and through Tusk's
          defaults. The endpoints' TCP buffers are ESnet's host tuning (up to 256 MB).
  mixed   the elephant alone, and beside (a) short connections through another class
          (admin: connect, 1 kB, close, from 8 parallel clients as fast as they go), (b)
          100 concurrent bulk flows (iperf3 -P 100 through bulk-copy), (c) a SYN flood
          at the default deny (outside -> inside, which no class accepts), as fast as a
          raw socket sends; with the loss path's counters (dashboard/loss.py) read
          around each flow, beside the elephant's retransmissions.
  cost    what promotion costs: connections per second through bulk-copy with
          fastpath auto and never, and the time a new connection takes to carry its
          first megabyte with each.

  BENCH_ROUNDS   rounds (default 2)      BENCH_SECONDS  an elephant's flow (default 8)
  BENCH_PARTS    any of esnet,mixed,cost (default all)
  BENCH_RTTS, BENCH_MTUS  the ESnet part's (default 10,50,90 and 1500,9000)

Saved: results.json [{part, round, condition, config, bits_per_second, retransmits,
bytes_sent, loss: {stage key: packets lost during the flow}, extra}].
"""
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[4]
sys.path.insert(0, str(ROOT / "webui"))
from scenario import listening  # noqa: E402

from dashboard import loss as loss_path  # noqa: E402  (plain Python: no Django here)
from lab.namespaces import CLIENT_V4, SERVER_V4  # noqa: E402
from scenarios import bench_flow  # noqa: E402
from scenarios.bench_flow import example_policy  # noqa: E402

ROUNDS = int(os.environ.get("BENCH_ROUNDS", "2"))
SECONDS = int(os.environ.get("BENCH_SECONDS", "8"))
PARTS = os.environ.get("BENCH_PARTS", "esnet,mixed,cost").split(",")
ELEPHANT, BULK, SHORT, FLOODED = 5201, 8003, 22, 9    # bulk-copy, bulk-copy, admin, none
RTTS = tuple(int(n) for n in os.environ.get("BENCH_RTTS", "10,50,90").split(","))
MTUS = tuple(int(n) for n in os.environ.get("BENCH_MTUS", "1500,9000").split(","))
ESNET_LOSS = 100 / 22000          # per cent: ESnet's 1 in 22 000
TCP_BUFFERS = "4096 131072 268435456"
SHORT_CLIENTS = 8
FIRST_MB_CONNECTIONS = 20
TIME_LIMIT = 4 * 3600


DEFAULTS, NEVER = example_policy(), example_policy(fastpath="never")

SERVER = """
import socket, sys, threading
listener = socket.create_server(("0.0.0.0", int(sys.argv[1])), backlog=4096)
def drain(connection):
    with connection:
        while connection.recv(1 << 16):
            pass
while True:
    connection, _ = listener.accept()
    threading.Thread(target=drain, args=(connection,), daemon=True).start()
"""
# connect, send `size` bytes, close; as many times as it can for `seconds`, from `clients`
# processes: prints connections done and, per connection, the seconds it took
CLIENT = """
import json, os, socket, sys, time
host, port, size, seconds, clients = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), \\
    float(sys.argv[4]), int(sys.argv[5])
limit = int(sys.argv[6]) if len(sys.argv) > 6 else None     # connections per client
payload = b"x" * size
readers = []
for _ in range(clients):
    read, write = os.pipe()
    if os.fork() == 0:
        os.close(read)
        done, took, end = 0, [], time.monotonic() + seconds
        while time.monotonic() < end and (limit is None or done < limit):
            started = time.monotonic()
            try:
                with socket.create_connection((host, port), timeout=10) as sock:
                    sock.sendall(payload)
                    sock.shutdown(socket.SHUT_WR)
                    sock.recv(1)
            except OSError:
                continue
            took.append(time.monotonic() - started)
            done += 1
        os.write(write, json.dumps([done, took[:200]]).encode())
        os._exit(0)
    os.close(write)
    readers.append(read)
results = []
for read in readers:
    data = b""
    while chunk := os.read(read, 1 << 20):
        data += chunk
    results.append(json.loads(data))
    os.wait()
print(json.dumps({"connections": sum(r[0] for r in results),
                  "seconds": [t for r in results for t in r[1]]}))
"""
FLOOD = f"""
import socket, struct, sys, time
def checksum(data):
    if len(data) % 2:
        data += b"\\0"
    total = sum(struct.unpack("!%dH" % (len(data) // 2), data))
    total = (total >> 16) + (total & 0xffff)
    return ~(total + (total >> 16)) & 0xffff
src, dst = socket.inet_aton("{SERVER_V4}"), socket.inet_aton("{CLIENT_V4}")
sock = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_TCP)
end, sent, port = time.monotonic() + float(sys.argv[1]), 0, 1024
while time.monotonic() < end:
    port = port + 1 if port < 65000 else 1024
    header = struct.pack("!HHIIBBHHH", port, {FLOODED}, sent, 0, 5 << 4, 2, 65535, 0, 0)
    pseudo = src + dst + struct.pack("!BBH", 0, socket.IPPROTO_TCP, len(header))
    header = header[:16] + struct.pack("!H", checksum(pseudo + header)) + header[18:]
    sock.sendto(header, ("{CLIENT_V4}", 0))
    sent += 1
print(sent)
"""


class Bench(bench_flow.Bench):
    """bench_flow's set-up (policy, MTU, the sender's offloads: changed only where they
    differ), and this benchmark's parts."""

    def __init__(self, ctx, lab):
        super().__init__(ctx, lab, tune_args=())

    def save(self):
        self.ctx.save_json("results.json", self.results)

    def impair(self, rtt_ms=0, loss=0.0, seed=0):
        """netem on fw's way to the server: delay (the RTT: replies are not delayed) and
        loss; a limit that holds the largest window in flight."""
        self.ctx.run("tc", "qdisc", "del", "dev", "veth-s", "root", ns=self.lab.fw,
                     check=False)
        if rtt_ms or loss:
            args = ["delay", f"{rtt_ms}ms"] + (["loss", f"{loss:.6f}%"] if loss else [])
            self.ctx.run("tc", "qdisc", "add", "dev", "veth-s", "root", "netem", *args,
                         "limit", "200000", "seed", str(1000 + seed), ns=self.lab.fw)
        # with loss, wire-sized segments: netem drops single segments, not 64 kB bursts
        self.set_offloads(not loss)

    def counters(self):
        """The loss path's counters in fw now, read as the agent's sampler reads them."""
        def text(*argv):
            return self.lab.ns(self.lab.fw, *argv, check=False).stdout
        seqadj = loss_path.seqadj_counters(text("cat", "/proc/net/nf_conntrack_seqadj"))
        return loss_path.counters(text("ip", "-s", "-s", "-j", "link", "show"),
                                  text("tc", "-s", "-j", "qdisc", "show"),
                                  text("cat", "/proc/net/softnet_stat"),
                                  text("cat", "/proc/net/stat/nf_conntrack"), seqadj)

    # -- one elephant ------------------------------------------------------------------

    def elephant(self, part, index, condition, config, extra=None, beside=None):
        before = self.counters()
        background = beside() if beside else None
        name = re.sub(r"[^A-Za-z0-9-]+", "_", f"{part}-r{index}-{condition}-{config}")
        try:
            report = self.ctx.iperf3(self.lab, name, ELEPHANT, "--time", str(SECONDS),
                                     "--affinity", "0,1", seconds=SECONDS)
        finally:
            background_result = background() if background else None
        after = self.counters()
        sent, received = report["end"]["sum_sent"], report["end"]["sum_received"]
        lost = {key: after[key] - before.get(key, 0) for key in after
                if after[key] > before.get(key, 0)}
        self.results.append({
            "part": part, "round": index, "condition": condition, "config": config,
            "bits_per_second": received["bits_per_second"],
            "retransmits": sent.get("retransmits"), "bytes_sent": sent["bytes"],
            "mss": report["start"].get("tcp_mss_default"), "loss": lost,
            "extra": {**(extra or {}), "beside": background_result}})
        self.save()

    # -- the parts -----------------------------------------------------------------------

    def esnet(self, index):
        for rtt in RTTS:
            for mtu in MTUS:
                for loss in (0.0, ESNET_LOSS):
                    condition = f"rtt {rtt} ms, mtu {mtu}, " + (
                        "1/22000 loss" if loss else "no loss")
                    self.set_mtu(mtu)
                    for config, policy in (("plain forwarding", ""),
                                           ("Tusk defaults", DEFAULTS)):
                        self.set_policy(policy)
                        self.impair(rtt, loss, seed=index * 100 + rtt)
                        self.elephant("esnet", index, condition, config,
                                      extra={"rtt_ms": rtt, "mtu": mtu, "loss": loss / 100})
        self.impair()
        self.set_mtu(1500)

    def mixed(self, index):
        self.set_policy(DEFAULTS)
        self.impair()
        for condition, beside in (("alone", None), ("beside short connections", self.short),
                                  ("beside 100 bulk flows", self.bulk),
                                  ("beside a SYN flood at the default deny", self.flood)):
            self.elephant("mixed", index, condition, "Tusk defaults", beside=beside)

    def cost(self, index):
        self.impair()
        for config, policy in (("auto", DEFAULTS), ("never", NEVER)):
            self.set_policy(policy)
            rate = self.connections(BULK + 1, 1024, SECONDS, SHORT_CLIENTS)
            first = self.connections(BULK + 1, 1 << 20, None, 1, count=FIRST_MB_CONNECTIONS)
            self.results.append({"part": "cost", "round": index, "condition": "promotion",
                                 "config": config,
                                 "connections_per_second": rate["connections"] / SECONDS,
                                 "first_mb_seconds": first["seconds"]})
            self.save()

    # -- what runs beside, and the clients -----------------------------------------------

    def server(self, port):
        process = self.lab.popen(self.lab.server, sys.executable, "-c", SERVER, str(port),
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.ctx.wait_until(lambda: listening(self.lab, port), 30, f"a server on {port}")
        return process

    def connections(self, port, size, seconds, clients, count=None):
        """connect, size bytes, close, for `seconds` from `clients` processes (count: that
        many connections, one after the other, instead)."""
        server = self.server(port)
        try:
            if count is not None:
                out = self.ctx.run(sys.executable, "-c", CLIENT, SERVER_V4, str(port),
                                   str(size), "600", "1", str(count), ns=self.lab.client,
                                   timeout=660).stdout
                return json.loads(out)
            out = self.ctx.run(sys.executable, "-c", CLIENT, SERVER_V4, str(port), str(size),
                               str(seconds), str(clients), ns=self.lab.client,
                               timeout=seconds + 120).stdout
            return json.loads(out)
        finally:
            server.kill()
            server.wait()

    def _beside(self, start):
        """start() -> a process; returns the function the elephant calls when done, which
        stops it and gives what it printed."""
        process = start()
        time.sleep(1)           # under way before the elephant starts

        def stop():
            try:
                out, _ = process.communicate(timeout=SECONDS + 60)
            except subprocess.TimeoutExpired:
                process.kill()
                out, _ = process.communicate()
            return out.strip() if out else ""
        return stop

    def short(self):
        server = self.server(SHORT)

        def start():
            return self.lab.popen(self.lab.client, sys.executable, "-c", CLIENT, SERVER_V4,
                                  str(SHORT), "1024", str(SECONDS + 2), str(SHORT_CLIENTS),
                                  stdout=subprocess.PIPE, text=True)
        stop = self._beside(start)

        def done():
            out = stop()
            server.kill()
            server.wait()
            found = json.loads(out) if out.startswith("{") else {"connections": 0}
            return {"connections_per_second": found["connections"] / (SECONDS + 2)}
        return done

    def bulk(self):
        iperf = self.lab.popen(self.lab.server, "iperf3", "--server", "--one-off", "--port",
                               str(BULK), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.ctx.wait_until(lambda: listening(self.lab, BULK), 30, "iperf3 for the bulk flows")

        def start():
            return self.lab.popen(self.lab.client, "iperf3", "--client", SERVER_V4, "--port",
                                  str(BULK), "--parallel", "100", "--time", str(SECONDS + 2),
                                  "--json", stdout=subprocess.PIPE, text=True)
        stop = self._beside(start)

        def done():
            out = stop()
            iperf.kill()
            iperf.wait()
            try:
                end = json.loads(out[out.index("{"):] if "{" in out else "{}").get("end", {})
            except ValueError:
                end = {}
            return {"bits_per_second": end.get("sum_received", {}).get("bits_per_second")}
        return done

    def flood(self):
        def start():
            return self.lab.popen(self.lab.server, sys.executable, "-c", FLOOD,
                                  str(SECONDS + 2), stdout=subprocess.PIPE, text=True)
        stop = self._beside(start)

        def done():
            out = stop()
            return {"syns_per_second": int(out) / (SECONDS + 2) if out.isdigit() else None}
        return done


def run(ctx):
    lab = ctx.lab()
    for ns in (lab.client, lab.server):
        for name in ("net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem"):
            ctx.run("sysctl", "-qw", f"{name}={TCP_BUFFERS}", ns=ns)
    for name in ("net.core.rmem_max", "net.core.wmem_max"):
        ctx.run("sysctl", "-qw", f"{name}=268435456")
    bench = Bench(ctx, lab)
    for index in range(ROUNDS):
        for part in PARTS:
            getattr(bench, part)(index)
    bench.set_policy("")
    ctx.save_json("loss-stages.json", [s.key for s in loss_path.STAGES])
