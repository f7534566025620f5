"""TUSK-MIB through a real snmpd (net-snmp 5.9.3): the test starts snmpd on 127.0.0.1
with a hand-written snmpd.conf whose pass_persist line runs webui/bin/tusk-snmp-pass on a
snapshot, walks the subtree with snmpwalk and snmpbulkwalk, and finds every OID, type
and value mib.table() gives for that snapshot - a forged class name with line breaks
among them, which must stay one value. A new snapshot (the agent's atomic rename) shows
at the next request; a snapshot replaced by a symbolic link is not followed; a set is
refused as not writable by the same responder, which answers on."""
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from kit import wait_until

from snmp.core import mib
from tusklib.files import write_atomically

PROGRAM = Path(__file__).resolve().parents[2] / "webui" / "bin" / "tusk-snmp-pass"
ROOT = "." + ".".join(map(str, mib.ROOT))
COMMUNITY = "test"
WRITER = "private"         # may write TUSK-MIB: snmpd hands a set to the responder
# snmpwalk's names for what the responder sends (Unsigned32 and Gauge32 share a tag)
SHOWN = {mib.COUNTER64: "Counter64", mib.GAUGE32: "Gauge32", mib.UNSIGNED32: "Gauge32",
         mib.INTEGER: "INTEGER", mib.OCTET_STRING: "STRING"}


def snapshot(**changes):
    found = {"version": 1, "time": time.time(), "ha_role": "master", "ruleset_loaded": True,
             "conntrack_entries": 4321, "conntrack_limit": 262144,
             "drops": {"default_deny": [17, 1020], "invalid": [3, 180]},
             "seqadj": {name: (1 << 40) + arc for arc, name in enumerate(mib.SEQADJ)},
             "classes": [[f"class-{n:03d}", n, (1 << 64) - 1 - n] for n in range(150)]
             + [["evil\nPONG\n.1.3.6.1 counter64 5", 1, 2]],
             "loss": [["nic.rx_missed", "nic.rx_missed@veth-c", 12],
                      ["softnet.dropped", "softnet.dropped", 0],
                      ["qdisc.drops", "qdisc.drops@veth-s", 1 << 33]]}
    found.update(changes)
    return found


def free_udp_port():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def agent(tmp_path):
    """snmpd on 127.0.0.1 (its port as .port), its snapshot at .path; stopped at the end
    (snmpd kills its pass_persist child as it stops)."""
    for tool, package in (("snmpd", "snmpd"), ("snmpwalk", "snmp")):
        if shutil.which(tool) is None:
            pytest.fail(f"missing: {tool} (Debian package {package}) - run `make test`")
    if os.geteuid() != 0:
        pytest.fail("this tier runs snmpd as root")
    port, path = free_udp_port(), tmp_path / "counters.json"
    conf = tmp_path / "snmpd.conf"
    conf.write_text(f"agentAddress udp:127.0.0.1:{port}\n"
                    f"rocommunity {COMMUNITY} 127.0.0.1\n"
                    f"rwcommunity {WRITER} 127.0.0.1 {ROOT}\n"
                    f"pass_persist {ROOT} {sys.executable} {PROGRAM} {path}\n")
    log = open(tmp_path / "snmpd.log", "w")
    # MIBS="": no MIB modules loaded, so none missing to complain of (Debian ships none);
    # its state in tmp_path, not /var/lib/snmp
    env = {**os.environ, "MIBS": "", "SNMP_PERSISTENT_DIR": str(tmp_path / "state")}
    proc = subprocess.Popen(["snmpd", "-f", "-Lo", "-C", "-c", str(conf)], env=env,
                            stdout=log, stderr=subprocess.STDOUT)
    proc.port, proc.path = port, path
    try:
        wait_until(lambda: proc.poll() is not None or answers(port), 20,
                   lambda: f"snmpd answering: {(tmp_path / 'snmpd.log').read_text()}")
        assert proc.poll() is None, (tmp_path / "snmpd.log").read_text()
        yield proc
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def answers(port):
    """Whether snmpd answers on port (sysUpTime.0)."""
    return subprocess.run(["snmpget", "-v2c", "-c", COMMUNITY, "-t", "0.5", "-r", "0",
                           f"127.0.0.1:{port}", ".1.3.6.1.2.1.1.3.0"], capture_output=True,
                          env={**os.environ, "MIBS": ""}).returncode == 0


def walk(agent, subtree=ROOT, tool="snmpwalk"):
    """[(OID, type, value)] of the subtree as the tool prints them with numeric OIDs (a
    string's value without its quotes); [] when it holds nothing."""
    out = subprocess.run([tool, "-v2c", "-c", COMMUNITY, "-On", "-t", "5", "-r", "1",
                          f"127.0.0.1:{agent.port}", subtree], capture_output=True,
                         text=True, env={**os.environ, "MIBS": ""})
    assert out.returncode == 0 and not out.stderr, out.stderr
    found = []
    for line in out.stdout.splitlines():
        oid, _, rest = line.partition(" = ")
        if rest.startswith("No Such"):
            continue
        kind, _, value = rest.partition(": ")
        found.append((oid, kind, value[1:-1] if kind == "STRING" else value))
    return found


def expected(table):
    """The walk of a table, without tuskSnapshotAge (it grows as the test runs)."""
    return [("." + ".".join(map(str, oid)), SHOWN[kind], str(value))
            for oid, kind, value in table if oid != mib.SNAPSHOT_AGE]


def without_age(walked):
    age = "." + ".".join(map(str, mib.SNAPSHOT_AGE))
    return [row for row in walked if row[0] != age]


def age_of(walked):
    age = "." + ".".join(map(str, mib.SNAPSHOT_AGE))
    return [int(value) for oid, _, value in walked if oid == age]


def put(path, found):
    write_atomically(str(path), mib.snapshot_text(found), mode=0o640)


def test_the_walk_is_the_table_of_the_snapshot(agent):
    found = snapshot()
    put(agent.path, found)
    table = mib.table(found)
    assert len(table) > 450                          # a walk of many GETNEXTs
    for tool in ("snmpwalk", "snmpbulkwalk"):
        walked = walk(agent, tool=tool)
        assert without_age(walked) == expected(table), tool
        assert 0 <= age_of(walked)[0] < 60
    evil = mib.get(table, mib.ROOT + (1, 3, 1, 2, 151))
    assert evil[2] == "evil?PONG?.1.3.6.1 counter64 5"


def test_a_new_snapshot_shows_at_the_next_request(agent):
    put(agent.path, snapshot())
    entries = f"{ROOT}.1.1.6.0"
    assert walk(agent, entries) == [(entries, "Gauge32", "4321")]
    put(agent.path, snapshot(conntrack_entries=99, ha_role="fault", classes=[]))
    assert walk(agent, entries) == [(entries, "Gauge32", "99")]
    assert walk(agent, f"{ROOT}.1.1.4.0") == [(f"{ROOT}.1.1.4.0", "INTEGER", "4")]
    assert walk(agent, f"{ROOT}.1.3") == []


def test_no_snapshot_or_a_link_to_one_is_only_the_state(agent, tmp_path):
    state = f"{ROOT}.1.1.3.0"
    assert walk(agent) == [(state, "INTEGER", str(mib.MISSING))]
    elsewhere = tmp_path / "elsewhere.json"
    put(elsewhere, snapshot())
    agent.path.symlink_to(elsewhere)
    assert walk(agent) == [(state, "INTEGER", str(mib.UNREADABLE))]
    agent.path.unlink()
    agent.path.write_text("{\"version\": 1, \"classes\": [[\"a\"")
    assert walk(agent) == [(state, "INTEGER", str(mib.MALFORMED))]
    put(agent.path, snapshot())
    assert walk(agent, state) == [(state, "INTEGER", str(mib.OK))]


def responders(agent):
    return Path(f"/proc/{agent.pid}/task/{agent.pid}/children").read_text().split()


def test_a_set_is_not_writable_and_the_responder_answers_on(agent):
    put(agent.path, snapshot())
    role = f"{ROOT}.1.1.4.0"
    assert walk(agent, role) == [(role, "INTEGER", "2")]
    before = responders(agent)
    for value in (["i", "3"], ["s", "x\"y"]):
        out = subprocess.run(["snmpset", "-v2c", "-c", WRITER, "-On", f"127.0.0.1:{agent.port}",
                              role, *value], capture_output=True, text=True,
                             env={**os.environ, "MIBS": ""})
        assert out.returncode != 0 and "notWritable" in out.stderr, out.stderr
        assert walk(agent, role) == [(role, "INTEGER", "2")]
    assert responders(agent) == before and len(before) == 1
