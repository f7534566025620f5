#!/usr/bin/env python3
"""What the test session left running, if anything: `make test` runs this after pytest
and fails when it names something. Only the tests' own things count (make run's lab,
or a PostgreSQL of the machine's, may run beside): the web tier's cluster tusk-test, the
browser tier's labs (e2e...), the tiers' namespaces, and agents, gunicorns and nginxes
whose configuration lives in a test's directory, and the watchdogs of changes a test
left pending there."""
import os
import re
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from lab.ports import running_labs  # noqa: E402

TEST_CLUSTERS = re.compile(r"^tusk-(test|e2e.*)$")
TEST_NETNS = re.compile(
    r"^(tt\d+|rtg\d+|sc\d+|cs\d+|tusk-(agent|scratch|chromium|prop|tune)-\d+|e2e\w*)(-|$)")
TEST_PLACES = ("/tmp/pytest-of-", "/var/tmp/tusk-test", "/var/tmp/tusk-lab/e2e",
               "/var/tmp/tusk-edge-", "/run/tusk-nginx-e2e", "/run/tusk-e2e",
               "/run/tusk-frr/rtg", "/run/tusk-frr/sc")
# tusklib.commit: a pending change's watchdog; /usr/lib/frr/: FRR's daemons; snmpd and
# its pass_persist responder
PROGRAMS = ("tusk-agent", "tusk.wsgi", "nginx", "ulogd", "rsyslogd", "keepalived",
            "conntrackd", "tusklib.commit", "/usr/lib/frr/", "snmpd", "tusk-snmp-pass")


def leftovers():
    found = []
    clusters = subprocess.run(["pg_lsclusters", "-h"], capture_output=True, text=True).stdout
    for line in clusters.splitlines():
        version, name, port, status = line.split()[:4]
        if TEST_CLUSTERS.match(name) and status.startswith("online"):
            found.append(f"PostgreSQL cluster {version}/{name} (port {port}) is online")
    found += [f"lab {name} (pid {lab['pid']})" for name, lab in running_labs().items()
              if name.startswith("e2e")]
    namespaces = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    found += [f"network namespace {line.split()[0]}" for line in namespaces.splitlines()
              if TEST_NETNS.match(line.split()[0])]
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            environ = Path(f"/proc/{pid}/environ").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if any(program in cmdline for program in PROGRAMS) and any(
                place in cmdline or place in environ for place in TEST_PLACES):
            found.append(f"process {pid}: {cmdline.strip()[:120]}")
    return found


if __name__ == "__main__":
    left = leftovers()
    for thing in left:
        print(f"left running after the tests: {thing}", file=sys.stderr)
    sys.exit(1 if left else 0)
