"""tests/vm/scenario_boot.py: in a whole run the guest scenarios' boot starts beside the
host tiers; the VM tier's `guest` fixture waits for that process to end and takes its
boot - only when it booted the scenarios, kernel and root filesystem the tier would."""
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "vm"))
import scenario_boot  # noqa: E402
import vm  # noqa: E402

KERNEL, ROOTFS = Path("/cache/kernel/bzImage"), Path("/cache/vm-rootfs/abc")
SCENARIOS = ["smoke", "policy-nat"]


@pytest.fixture
def status(tmp_path, monkeypatch):
    path = tmp_path / "scenarios.json"
    monkeypatch.setattr(scenario_boot, "STATUS", path)
    return path


def write(path, scenarios=SCENARIOS, kernel=KERNEL, rootfs=ROOTFS, exit_status=0):
    out = path.parent / "scenarios"
    path.write_text(json.dumps({
        "scenarios": scenarios, "kernel": str(kernel), "rootfs": str(rootfs),
        "run": {"exit_status": exit_status, "output": "ran", "out_dir": str(out),
                "console_log": str(out) + "-console.log", "seconds": 1200.5,
                "timed_out": False, "qemu_status": 0, "command_started": True}}))


def test_the_tier_waits_for_the_boot_then_takes_it(status, monkeypatch):
    boot = subprocess.Popen(["sleep", "1.5"])
    monkeypatch.setenv("TUSK_SCENARIOS_BOOT_PID", str(boot.pid))
    write(status, exit_status=3)
    started = time.monotonic()
    run = scenario_boot.booted(SCENARIOS, KERNEL, ROOTFS)
    assert time.monotonic() - started >= 1.4, "it did not wait for the boot to end"
    boot.wait()
    assert run == vm.GuestRun(3, "ran", status.parent / "scenarios",
                              status.parent / "scenarios-console.log", 1200.5, False)


def test_an_ended_boot_that_its_parent_has_not_reaped_has_ended(status, monkeypatch):
    boot = subprocess.Popen(["true"])
    time.sleep(0.5)                       # a zombie now: nobody waited for it
    monkeypatch.setenv("TUSK_SCENARIOS_BOOT_PID", str(boot.pid))
    write(status)
    assert scenario_boot.booted(SCENARIOS, KERNEL, ROOTFS).exit_status == 0
    boot.wait()


@pytest.mark.parametrize("left", [
    {"scenarios": ["smoke"]},                          # TUSK_VM_SCENARIOS differed
    {"kernel": Path("/elsewhere/bzImage")},            # TUSK_KERNEL
    {"rootfs": Path("/cache/vm-rootfs/other")},
    None,                                              # no status: a build failed
])
def test_a_boot_of_something_else_or_none_is_not_taken(status, monkeypatch, left):
    monkeypatch.setenv("TUSK_SCENARIOS_BOOT_PID", "999999999")
    if left is not None:
        write(status, **left)
    assert scenario_boot.booted(SCENARIOS, KERNEL, ROOTFS) is None


def test_without_a_background_boot_the_tier_boots(status, monkeypatch):
    monkeypatch.delenv("TUSK_SCENARIOS_BOOT_PID", raising=False)
    write(status)
    assert scenario_boot.booted(SCENARIOS, KERNEL, ROOTFS) is None


def test_the_boot_waits_for_warm_caches_builds_or_its_end(status, monkeypatch):
    """Never before warm-caches has built both (in its order and priorities), or ended;
    then the boot's result is written for the tier."""
    warm = subprocess.Popen(["sleep", "1"])
    asked = []
    monkeypatch.setattr(scenario_boot, "BUILD_POLL", 0.1)
    monkeypatch.setattr(scenario_boot, "_cached", lambda command: False)
    monkeypatch.setattr(vm, "kernel", lambda: asked.append(time.monotonic()) or KERNEL)
    monkeypatch.setattr(vm, "rootfs", lambda: ROOTFS)
    out = status.parent / "scenarios"
    monkeypatch.setattr(scenario_boot, "boot_scenarios", lambda kernel, rootfs, scenarios:
                        vm.GuestRun(0, "ok", out, out.with_name("c.log"), 9.0, False))
    monkeypatch.setenv("TUSK_VM_SCENARIOS", " ".join(SCENARIOS))
    started = time.monotonic()
    assert scenario_boot.main(warm.pid) == 0
    assert asked[0] - started >= 0.9
    warm.wait()
    saved = json.loads(status.read_text())
    assert (saved["scenarios"], saved["kernel"], saved["rootfs"]) == (
        SCENARIOS, str(KERNEL), str(ROOTFS))
    assert saved["run"]["output"] == "ok"
