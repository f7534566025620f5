"""The self-test's measurement (Allman, IMC 2003) through the real lab firewall: the
responder in the server namespace, the measuring client in the client namespace, through
fw and over the lab's bypass link around it; a policy that drops or rejects the port
shows as counted failures; and the smoke run of make bench-middlebox."""
import json
import os
import re
import subprocess
import sys

import pytest

from lab.namespaces import SERVER_BYPASS_V4, SERVER_V4
from lab.paths import ROOT

WEBUI = ROOT / "webui"
RESPONDER = WEBUI / "selftest" / "core" / "responder.py"
PORT = 8009
METRICS = ("transaction", "feedback", "bulk")
ALLOWED = """
    services:
      - {name: selftest, protocol: tcp, ports: [8009]}
    classes:
      - {name: selftest, from: inside, to: outside, services: [selftest], action: accept}
    """


@pytest.fixture(scope="module")
def responder(lab):
    proc = lab.popen(lab.server, sys.executable, str(RESPONDER), "--port", str(PORT),
                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout.readline().startswith("listening"), proc.stderr.read()
    yield proc
    proc.terminate()
    proc.wait(10)


def measure(lab, *extra, direct=True):
    argv = ["ip", "netns", "exec", lab.client, sys.executable, "-m", "selftest.core", "measure",
            "--path", f"through={SERVER_V4}:{PORT}", "--json-lines", *map(str, extra)]
    if direct:
        argv += ["--path", f"direct={SERVER_BYPASS_V4}:{PORT}"]
    done = subprocess.run(argv, cwd=WEBUI, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])["result"]


def test_through_fw_and_direct_both_succeed_without_failures(lab, fw, responder):
    fw(ALLOWED)
    summary = measure(lab, "--transactions", 100, "--pings", 100, "--bulk", 5)
    for metric in METRICS:
        for path, count in (("through", 5 if metric == "bulk" else 100),
                            ("direct", 5 if metric == "bulk" else 100)):
            row = summary["metrics"][metric][path]
            assert (row["samples"], row["failures"]) == (count, 0), (metric, path, row)
            assert 0 < row["ms"]["min"] <= row["ms"]["median"] <= row["ms"]["max"]
        assert summary["ratios"][metric] > 0
    assert summary["metrics"]["bulk"]["through"]["mbps"]["median"] > 10
    # the through path really crossed fw: its counter for the class moved
    counters = lab.ns(lab.fw, "nft", "list", "counter", "inet", "tusk", "class_selftest").stdout
    assert int(re.search(r"packets (\d+)", counters).group(1)) >= 100 + 1 + 5


def test_a_policy_that_drops_the_port_gives_counted_failures(lab, fw, responder):
    fw("""
    services:
      - {name: other, protocol: tcp, ports: [5201]}
    classes:
      - {name: other, from: inside, to: outside, services: [other], action: accept}
    """)    # 8009 meets the default deny: dropped, so connects time out
    summary = measure(lab, "--transactions", 3, "--pings", 3, "--bulk", 1, "--timeout", 0.3)
    for metric, count in (("transaction", 3), ("feedback", 3), ("bulk", 1)):
        through = summary["metrics"][metric]["through"]
        assert (through["samples"], through["failure_kinds"]) == \
            (0, {"connect-timeout": count}), (metric, through)
        assert summary["metrics"][metric]["direct"]["failures"] == 0
        assert summary["ratios"][metric] is None


def test_a_policy_that_rejects_the_port_counts_refused(lab, fw, responder):
    fw("""
    classes:
      - {name: refuse, from: inside, to: outside, services: [], action: reject}
    """)
    summary = measure(lab, "--transactions", 3, "--pings", 2, "--bulk", 1, direct=False)
    assert {m: summary["metrics"][m]["through"]["failure_kinds"] for m in METRICS} == \
        {"transaction": {"refused": 3}, "feedback": {"refused": 2}, "bulk": {"refused": 1}}
    assert summary["baseline"] is False


NUMBER = r"\d+\.\d+"
ROW = re.compile(rf"^(transaction|feedback|bulk 1024 KiB)\s+(through|direct)\s+(\d+)\s+(\d+)\s+"
                 rf"({NUMBER}) ms(?: ({NUMBER}) Mbit/s)?\s+({NUMBER})-({NUMBER}) ms"
                 rf"(?: ({NUMBER})-({NUMBER}) Mbit/s)?\s+({NUMBER})-({NUMBER}) ms\s+"
                 rf"({NUMBER}|-)$")


def test_the_smoke_benchmark_prints_a_complete_table(tmp_path):
    out = tmp_path / "bench.json"
    done = subprocess.run([sys.executable, str(ROOT / "tests" / "bench" / "bench_middlebox.py")],
                          env=dict(os.environ, BENCH_SMOKE="1", BENCH_JSON=str(out)),
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("metric"))
    assert lines[header].split() == ["metric", "path", "samples", "failures", "median",
                                     "p10-p90", "min-max", "through/direct"]
    rows = [ROW.match(line) for line in lines[header + 2:header + 8]]
    assert all(rows), lines[header:]
    assert [(r.group(1).split()[0], r.group(2)) for r in rows] == \
        [(m, p) for m in METRICS for p in ("through", "direct")]
    for row in rows:
        samples, failures = int(row.group(3)), int(row.group(4))
        assert (samples, failures) == ((3 if row.group(1).startswith("bulk") else 20), 0)
        assert float(row.group(7)) <= float(row.group(5)) <= float(row.group(8))
        assert (row.group(13) == "-") == (row.group(2) == "direct")
        assert (row.group(6) is not None) == row.group(1).startswith("bulk")
    summary = json.loads(out.read_text())
    assert set(summary["metrics"]) == set(METRICS) and summary["baseline"] is True
