"""apply, verify and rollback on fake trees (TreeHost): the ordered writes land in the
tree, the values from before are saved first, verify sees drift, rollback gives back
the tree byte for byte - also after a channel change that created and removed queues.
The VM tier does the same on a real kernel (tests/vm/test_vm_tuning.py)."""
import json
import os
import stat

import fakehw
import pytest
from tunetree import snapshot

from tuning.core import applier, report
from tuning.core import profile as profiles
from tuning.core.errors import Code, TuneError
from tuning.core.host import TreeHost


def machine(tmp_path, name):
    root = fakehw.build(fakehw.MACHINES[name], str(tmp_path / "tree"))
    host = TreeHost(root)
    return root, host, applier.Tuner(host, str(tmp_path / "tree" / "state"))


def test_apply_writes_the_plan_in_order_and_verify_finds_no_drift(tmp_path):
    root, host, tuner = machine(tmp_path, "8-queue-smt")
    plan = tuner.plan("throughput")
    result = tuner.apply("throughput")
    assert [w.label for w in result.written] == [w.label for w in plan.writes]
    for write in plan.writes:
        assert report.same(write.form, applier.current_value(host, write, {}), write.new), \
            write.line()
    verified = tuner.verify()
    assert verified.drift == [] and verified.checked == len(plan.writes)
    assert tuner.plan("throughput").writes == [], "a second plan has nothing left to do"
    assert tuner.boot_profile() == "throughput"


def test_originals_are_saved_before_each_write(tmp_path):
    root, host, tuner = machine(tmp_path, "one-queue-4-cores")
    saved_before_write = []
    real_write = host.write

    def spying_write(path, value):
        state = json.loads((tmp_path / "tree" / "state" / "applied.json").read_text())
        saved_before_write.append(any(o["target"] == [path] for o in state["originals"]))
        real_write(path, value)
    host.write = spying_write
    tuner.apply("throughput")
    assert saved_before_write and all(saved_before_write)


def test_verify_reports_drift_and_rollback_restores_the_tree(tmp_path):
    root, host, tuner = machine(tmp_path, "8-queue-smt")
    before = snapshot(root)
    tuner.apply("throughput")
    host.write("/proc/irq/61/smp_affinity_list", "0-15")
    host.write("/proc/sys/net/core/netdev_budget", "300")
    drift = {label: (expected, found) for label, expected, found in tuner.verify().drift}
    assert drift == {"/proc/irq/61/smp_affinity_list": ("0", "0-15"),
                     "/proc/sys/net/core/netdev_budget": ("600", "300")}
    tuner.rollback()
    assert snapshot(root) == before
    assert tuner.boot_profile() == applier.NO_PROFILE
    with pytest.raises(TuneError) as error:
        tuner.verify()
    assert error.value.code == Code.STATE


def test_a_channel_change_is_applied_first_and_rolled_back_last(tmp_path):
    root, host, tuner = machine(tmp_path, "two-numa-nodes")
    before = snapshot(root)
    result = tuner.apply("throughput")
    labels = [w.label for w in result.written]
    assert labels[:2] == ["ethtool -L eth0 combined", "ethtool -L eth1 combined"]
    assert sorted(host.listdir("/sys/class/net/eth1/queues")) == sorted(
        [f"rx-{i}" for i in range(8)] + [f"tx-{i}" for i in range(8)])
    assert tuner.verify().drift == []
    tuner.rollback()
    assert host.writes[-2:] == [("ethtool -L eth1 combined", "16"),
                                ("ethtool -L eth0 combined", "16")]
    assert snapshot(root) == before


def test_a_second_apply_keeps_the_first_originals(tmp_path):
    root, host, tuner = machine(tmp_path, "8-queue-smt")
    before = snapshot(root)
    tuner.apply("latency")
    tuner.apply("throughput")
    tuner.rollback()
    assert snapshot(root) == before


def test_an_unsupported_knob_is_skipped_with_one_warning(tmp_path):
    root, host, tuner = machine(tmp_path, "8-queue-smt")
    # an interrupt whose affinity the kernel manages refuses writes
    os.chmod(os.path.join(root, "proc/irq/63/smp_affinity_list"), stat.S_IRUSR)
    result = tuner.apply("throughput")
    assert [label for label, _ in result.skipped] == ["/proc/irq/63/smp_affinity_list"]
    warnings = [w.message for w in result.plan.warnings if "/proc/irq/63/" in w.message]
    assert len(warnings) == 1, result.plan.warnings
    # everything else was written: a new plan has only the refused write left
    assert [w.label for w in tuner.plan("throughput").writes] == \
        ["/proc/irq/63/smp_affinity_list"]


def test_a_failed_write_undoes_the_apply(tmp_path):
    root, host, tuner = machine(tmp_path, "8-queue-smt")
    before = snapshot(root)
    # a write the kernel refuses with an error that is not "unsupported"
    broken = os.path.join(root, "sys/class/net/eth1/tx_queue_len")
    os.unlink(broken)
    os.mkdir(broken)
    before = snapshot(root)
    with pytest.raises(TuneError) as error:
        tuner.apply("throughput")
    assert error.value.code == Code.WRITE
    assert "/sys/class/net/eth1/tx_queue_len" in str(error.value)
    assert "were restored" in str(error.value)
    assert snapshot(root) == before
    assert not os.path.exists(tmp_path / "tree" / "state" / "applied.json")


def test_every_value_in_the_shipped_profiles_says_why():
    for name, path in profiles.available([profiles.SHIPPED_DIR]).items():
        assert profiles.uncommented(path) == [], name


def test_the_default_profile_is_throughput_and_all_shipped_ones_load():
    shipped = profiles.available([profiles.SHIPPED_DIR])
    assert {"throughput", "latency", "conservative"} <= set(shipped)
    assert profiles.DEFAULT_PROFILE == "throughput"
    for name in shipped:
        profiles.load(name, [profiles.SHIPPED_DIR])


def test_boot_applies_the_last_profile_the_default_first_and_nothing_after_rollback(tmp_path):
    root, host, tuner = machine(tmp_path, "8-queue-smt")
    before = snapshot(root)
    assert tuner.boot().profile == "throughput", "a new box boots with the default profile"
    tuner.rollback()
    assert tuner.boot().plan is None and snapshot(root) == before
    tuner.apply("latency")
    # a reboot: /sys and /proc come back as the kernel sets them, with a new boot id
    tuner.rollback()
    tuner._set_boot_profile("latency")
    host.write("/proc/sys/kernel/random/boot_id", "second-boot")
    assert tuner.state() is None
    result = tuner.boot()
    assert result.profile == "latency" and result.written


def test_the_boot_unit_runs_tusk_tune_boot_before_the_network():
    unit = (repo_root() / "rootfs-overlay/usr/lib/systemd/system/tusk-tune.service")
    lines = dict(line.split("=", 1) for line in unit.read_text().splitlines()
                 if "=" in line and not line.startswith("#"))
    assert lines["ExecStart"] == "/usr/bin/tusk-tune boot"
    assert "network-pre.target" in lines["Before"] and lines["Type"] == "oneshot"


def repo_root():
    from pathlib import Path
    return Path(__file__).resolve().parents[2]
