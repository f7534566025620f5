"""Applying a box's half of the pair (issue 23, ha/core/applier.py): the document checked
against the box, keepalived and conntrackd started from the rendered files in each
firewall's namespace, pending until confirmed - an unconfirmed change stops them again
by itself - and the maintenance fail over: the master hands the addresses to the
backup, which keeps the connections (hapair.py's topology; the real daemons)."""
import os
import pathlib
import shutil
import subprocess
import threading
import time

import pytest
from hapair import VIP_IN, VIP_OUT, Flow, Pair, document
from kit import wait_until

from ha.core import config as ha_config
from ha.core import status
from ha.core.applier import HaApplier
from ha.core.config import HaError

PREFIX = f"tt{os.getpid() % 100000}-hp"
PORT = 5311
ADVERT_MS = 250


class AppliedPair(Pair):
    """hapair's pair, its daemons started by each firewall's HaApplier instead."""

    def __init__(self, prefix, directory):
        super().__init__(prefix, directory, advert_ms=ADVERT_MS)
        self.appliers = {}

    def start(self, side):
        self.appliers[side] = HaApplier(str(self.dir / f"{side}-ha"), netns=self.names[side])

    def text(self, side, **changes):
        doc = document(side, ADVERT_MS)
        doc["ha"].update(changes)
        return ha_config.to_toml(ha_config.from_document(doc))

    def state(self, side):
        return status.role(self.appliers[side].run_dir)

    def logs(self, side):
        applier = self.appliers[side]
        return (f"\n--- fw{side.upper()}: {applier.daemons.running()}, pending "
                f"{applier.store.pending()}, stats {applier.stats()}")

    def down(self):
        for applier in self.appliers.values():
            if applier.store.pending():   # its watchdog would wait out the test's hour
                try:
                    applier.cancel()
                except HaError:           # the daemons are stopped below either way
                    pass
            applier.daemons.stop()
        super().down()


@pytest.fixture
def pair(tmp_path):
    for tool in ("keepalived", "conntrackd", "conntrack"):
        if shutil.which(tool) is None:
            pytest.fail(f"missing {tool} (make test installs it)")
    pair = AppliedPair(PREFIX, tmp_path)
    try:
        yield pair.up()
    finally:
        pair.down()


def test_applied_pair_takes_the_addresses_and_an_unconfirmed_half_stops_by_itself(pair):
    a, b = pair.appliers["a"], pair.appliers["b"]
    revision = a.apply(pair.text("a"), user="alice", timeout=3600)
    b.apply(pair.text("b"), user="alice", timeout=10)
    assert revision.outcome == "pending"
    assert pair.run("a", "sysctl", "-n", "net.netfilter.nf_conntrack_tcp_loose").stdout == "0\n"
    pair.settled()
    a.confirm(user="alice")
    assert a.confirmed() == ha_config.parse(pair.text("a"))
    assert not os.path.exists(b.config_path)
    # fwB's half is not confirmed: at its deadline its daemons stop, fwA stays master
    wait_until(lambda: b.store.pending() is None, 25, "fwB's pending half rolled back")
    assert b.daemons.running() == {"conntrackd": False, "keepalived": False}
    assert not os.path.exists(os.path.join(b.run_dir, "keepalived.conf"))
    assert b.store.get(1).outcome.startswith("rolled back: not confirmed"), b.store.get(1).meta
    assert pair.state("a") == "MASTER" and pair.has("a", VIP_IN) and pair.has("a", VIP_OUT)


def test_fail_over_hands_the_addresses_and_the_connections_to_the_backup(pair):
    a, b = pair.appliers["a"], pair.appliers["b"]
    for side, applier in (("a", a), ("b", b)):
        applier.apply(pair.text(side), timeout=3600)
        applier.confirm()
    pair.settled()
    with pytest.raises(HaError) as refused:
        b.fail_over()
    assert refused.value.problems[0].code == ha_config.Code.ROLE
    assert "only the master" in str(refused.value)
    flow = Flow(pair, PORT)
    try:
        flow.progress(20)
        pair.wait_entries("b", PORT)
        assert a.fail_over() == "BACKUP"
        pair.wait_state("b", "MASTER")
        assert pair.has("b", VIP_IN) and not pair.has("a", VIP_IN)
        flow.progress(40)            # through fwB, which knew the connection
        # nopreempt: fwA stays backup, well past fwB's master-down interval
        time.sleep(12 * ADVERT_MS / 1000)
        assert (pair.state("a"), pair.state("b")) == ("BACKUP", "MASTER")
        assert flow.error is None
    finally:
        flow.close()


def test_a_disabled_half_stops_the_daemons_and_gives_the_addresses_up(pair):
    a = pair.appliers["a"]
    a.apply(pair.text("a"), timeout=3600)
    a.confirm()
    pair.wait_state("a", "MASTER")
    assert pair.has("a", VIP_IN)
    a.apply(pair.text("a", enabled=False), timeout=3600)
    assert a.daemons.running() == {"conntrackd": False, "keepalived": False}
    assert not pair.has("a", VIP_IN) and pair.state("a") is None
    with pytest.raises(HaError, match="not part of a pair"):
        a.fail_over()
    a.cancel()                      # the pair back, as confirmed
    pair.wait_state("a", "MASTER")


def test_a_primary_with_preemption_is_refused_a_fail_over(pair):
    a = pair.appliers["a"]
    a.apply(pair.text("a", preempt=True), timeout=3600)
    pair.wait_state("a", "MASTER")
    with pytest.raises(HaError) as refused:
        a.fail_over()
    assert refused.value.problems[0].path == "ha.preempt"
    assert pair.state("a") == "MASTER"


def test_a_half_naming_interfaces_the_box_lacks_is_refused_with_nothing_started(pair):
    a = pair.appliers["a"]
    text = pair.text("a").replace('"outside0"', '"eth9"')
    with pytest.raises(HaError) as refused:
        a.apply(text, timeout=3600)
    assert [p.path for p in refused.value.problems] == ["virtual[1].interface"]
    assert "eth9: no such interface on this box" in str(refused.value)
    assert a.store.ids() == [] and a.daemons.running() == {"conntrackd": False,
                                                           "keepalived": False}


def test_each_box_stops_its_own_conntrackd_whatever_started_beside_it(pair, tmp_path):
    """conntrackd -d has no pid file: the applier once took the newest conntrackd for its
    own, and with another box's starting beside it (the CI's leftover) stopped that one
    and left its own running. Here a process named conntrackd starts every few ms while
    fwA applies: fwA still records, and stops, the one it started."""
    a = pair.appliers["a"]
    impostor = tmp_path / "conntrackd"                 # its comm is conntrackd
    shutil.copy("/bin/sleep", impostor)
    stopping, started = threading.Event(), []

    def spawn():
        while not stopping.is_set():
            started.append(subprocess.Popen([str(impostor), "60"]))
            time.sleep(0.002)
    spawner = threading.Thread(target=spawn)
    spawner.start()
    try:
        for _ in range(3):
            a.apply(pair.text("a"), user="alice", timeout=3600)
            assert a.daemons.running() == {"conntrackd": True, "keepalived": True}
            pid = int((pathlib.Path(a.run_dir) / "conntrackd.pid").read_text())
            assert (cmdline(pid).split(b"\0")[:3]
                    == [b"conntrackd", b"-C", os.path.join(a.run_dir, "conntrackd.conf").encode()])
            a.cancel()
    finally:
        stopping.set()
        spawner.join()
        for process in started:
            process.kill()
            process.wait()
    assert a.daemons.running() == {"conntrackd": False, "keepalived": False}
    conf = os.path.join(a.run_dir, "conntrackd.conf").encode()
    assert not [pid for pid in os.listdir("/proc") if pid.isdigit() and conf in
                cmdline(pid)], "fwA's conntrackd left running"


def cmdline(pid):
    try:
        return pathlib.Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:     # gone meanwhile
        return b""
