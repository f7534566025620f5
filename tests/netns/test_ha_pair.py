"""Two firewalls as one (issue 23, docs/HA.md), on this kernel with plain flows: the
keepalived.conf and conntrackd.conf that ha/core/render.py writes, run by the real
daemons in two firewall namespaces (hapair.py: the topology, a flow through it). The
randomised flow's failover, on Tusk's kernel, is the VM tier's (scenario ha-seqrand)."""
import os
import shutil

import pytest
from hapair import VIP_IN, VIP_OUT, Flow, Pair

from ha.core import status

PREFIX = f"tt{os.getpid() % 100000}-ha"
PORT = 5301


@pytest.fixture
def pair(tmp_path):
    for tool, package in (("keepalived", "keepalived"), ("conntrackd", "conntrackd"),
                          ("conntrack", "conntrack")):
        if shutil.which(tool) is None:
            pytest.fail(f"missing {tool} (Debian package {package}; make test installs it)")
    pair = Pair(PREFIX, tmp_path)
    try:
        yield pair.up()
    finally:
        pair.down()


def test_the_primary_holds_the_addresses_and_the_backup_has_the_connection(pair):
    pair.settled()
    flow = Flow(pair, PORT)
    try:
        flow.progress(20)
        # conntrackd put the connection straight into the backup's kernel table
        entries = pair.wait_entries("b", PORT)
        assert "ESTABLISHED" in entries[0], entries
        # what the HA page shows of each: the roles, and the sync's numbers
        assert (status.role(pair.dir / "a"), status.role(pair.dir / "b")) == \
            ("MASTER", "BACKUP")
        backup = pair.stats("b")
        assert backup["injected"] >= 1 and backup["inject_failures"] == 0, backup
        assert backup["lost"] == 0 and backup["malformed"] == 0, backup
        assert pair.stats("a")["entries"] >= 1
    finally:
        flow.close()


def test_a_flow_survives_the_primarys_failure_and_the_failback(pair):
    pair.settled()
    flow = Flow(pair, PORT)
    try:
        flow.progress(20)
        pair.wait_entries("b", PORT)
        # fwA dies: its links go down, its daemons with them
        pair.fail("a")
        pair.wait_state("b", "MASTER", seconds=5)
        assert pair.has("b", VIP_IN) and pair.has("b", VIP_OUT)
        flow.progress(50)            # through fwB, which knew the connection
        # fwA comes back as after a reboot: no virtual address, an empty table, nothing
        # left in /run; nopreempt - fwB stays master - and fwA learns the connection
        pair.reboot("a")
        pair.wait_state("a", "BACKUP")
        assert pair.state("b") == "MASTER"
        pair.wait_entries("a", PORT, seconds=15)
        # the maintenance failback: fwB stops its daemons the clean way
        pair.stop("b")
        pair.wait_state("a", "MASTER", seconds=5)
        flow.progress(50)
        assert flow.error is None
    finally:
        flow.close()
