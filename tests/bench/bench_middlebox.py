"""make bench-middlebox: what the firewall costs ordinary TCP, measured as Allman measured
middleboxes ("On the Performance of Middleboxes", IMC 2003). Not a test: it prints a
table with ratios against a baseline measured in the same run.

A lab of its own (namespaces mbox-client - mbox-fw - mbox-server, plus the bypass link
10.10.9.1/30 - 10.10.9.2/30 joining client and server around fw), the example policy
(webui/policy/examples/tusk.yaml) applied and confirmed in fw with the tusk CLI, and
the self-test responder (webui/selftest/core/responder.py) in the server namespace on
port 8009, which the example's class bulk-copy accepts. From the client namespace,
`python -m selftest.core measure` runs, for both paths one sample after the other:

  transaction  connect, a 32-byte request, a 32-byte answer, close (Allman's finger)
  feedback     16-byte pings echoed on one open connection (a new one after a failure)
  bulk         1 MiB whose last 4 bytes are random; timed until they come back

through fw (10.10.2.2) and direct (10.10.9.2), every failure counted by kind. The table
gives samples, failures, median, p10-p90, min-max and the ratio through/direct of the
median times (above 1: slower through fw). The client and the responder run pinned to
CPU 0 (see PIN).

  BENCH_TRANSACTIONS  transactions per path (default 500)
  BENCH_PINGS         pings per path (default 500)
  BENCH_BULK          bulk transfers per path (default 50)
  BENCH_SMOKE=1       a seconds-long run (20 / 20 / 3), what `make test` runs
  BENCH_JSON          also write the summary (selftest.core.stats) to this file
"""
import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.dirname(HERE)
ROOT = os.path.dirname(TESTS)
WEBUI = os.path.join(ROOT, "webui")
sys.path[:0] = [ROOT, TESTS, WEBUI]

from lab.namespaces import SERVER_BYPASS_V4, SERVER_V4, Lab  # noqa: E402
from selftest.core import responder, table  # noqa: E402

PORT = 8009
SMOKE = os.environ.get("BENCH_SMOKE") == "1"
COUNTS = {"transactions": int(os.environ.get("BENCH_TRANSACTIONS", 20 if SMOKE else 500)),
          "pings": int(os.environ.get("BENCH_PINGS", 20 if SMOKE else 500)),
          "bulk": int(os.environ.get("BENCH_BULK", 3 if SMOKE else 50))}
TUSK = os.path.join(WEBUI, "bin", "tusk")
EXAMPLE = os.path.join(WEBUI, "policy", "examples", "tusk.yaml")
# The client and the responder on one CPU, with the veth hops' softirq work (it runs
# where the sender runs): unpinned, where the scheduler happens to put a ping
# connection's two ends decides its round trip (8 or 60 us on this host) for the whole
# run, far more than what fw adds.
PIN = ("taskset", "-c", "0")


def example_policy(lab, state):
    tusk = [sys.executable, TUSK, "policy", "--netns", lab.fw, "--state-dir", state,
            "--user", "bench-middlebox"]
    subprocess.run(tusk + ["apply", EXAMPLE], check=True, stdout=subprocess.DEVNULL)
    subprocess.run(tusk + ["confirm"], check=True, stdout=subprocess.DEVNULL)


def start_responder(lab):
    proc = lab.popen(lab.server, *PIN, sys.executable, responder.__file__, "--port", str(PORT),
                     "--quiet", stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    if not line.startswith("listening"):
        proc.kill()
        raise SystemExit(f"the responder did not start in {lab.server}")
    return proc


def measure(lab):
    argv = [sys.executable, "-m", "selftest.core", "measure",
            "--path", f"through={SERVER_V4}:{PORT}", "--path", f"direct={SERVER_BYPASS_V4}:{PORT}",
            "--json-lines"]
    for field, value in COUNTS.items():
        argv += [f"--{field}", str(value)]
    done = subprocess.run(["ip", "netns", "exec", lab.client, *PIN, *argv], cwd=WEBUI,
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"the measurement failed: {done.stderr.strip()}")
    return json.loads(done.stdout.splitlines()[-1])["result"]


def main():
    if os.geteuid() != 0:
        sys.exit("bench-middlebox needs root: network namespaces and nftables")
    lab = Lab("mbox", bypass=True)
    print(f"bench-middlebox {datetime.datetime.now():%Y-%m-%d %H:%M}, {platform.node()}, "
          f"{platform.machine()}, {os.cpu_count()} CPUs, Linux {platform.release()}"
          f"{' (smoke)' if SMOKE else ''}")
    print(f"lab {lab.client} - {lab.fw} - {lab.server}, example policy in fw; "
          f"through fw to {SERVER_V4}, direct to {SERVER_BYPASS_V4}, port {PORT}; "
          f"{COUNTS['transactions']} transactions, {COUNTS['pings']} pings, "
          f"{COUNTS['bulk']} bulk transfers per path, interleaved\n", flush=True)
    server = None
    try:
        lab.up()
        with tempfile.TemporaryDirectory(prefix="bench-middlebox-") as state:
            example_policy(lab, state)
            server = start_responder(lab)
            summary = measure(lab)
    finally:
        if server:
            server.terminate()
            server.wait(10)
        lab.down()
    print(table.format_table(summary))
    if os.environ.get("BENCH_JSON"):
        with open(os.environ["BENCH_JSON"], "w") as out:
            json.dump(summary, out, indent=1)


if __name__ == "__main__":
    main()
