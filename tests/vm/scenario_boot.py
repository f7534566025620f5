"""The guest scenarios' boot (tests/vm/guest/scenarios/), for the VM tier's fixtures
(conftest.py) and, in a whole run, beside the host tiers.

A whole run (tools/run-tests all) starts this file as a process of its own at once:
it waits until tools/warm-caches has built the test kernel and the guest's root
filesystem (or has ended), boots the scenarios and writes what the boot brought back to
STATUS. The VM tier's `guest` fixture, told the process's pid by
TUSK_SCENARIOS_BOOT_PID, waits for it to end and takes that boot instead of booting
again; when it left no usable STATUS (a build failed, other scenarios were chosen), the
fixture boots as it would alone. The boot (23 minutes under TCG) used to start only when
the host tiers were done and then ran alone on two cores at about 60 % of them.

usage: python3 vm/scenario_boot.py WARM_CACHES_PID   (from tests/)
"""
import ast
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import vm  # noqa: E402
from guest import speed  # noqa: E402

ARTIFACTS = vm.ROOT / "tests" / "artifacts" / "vm"
STATUS = ARTIFACTS / "scenarios.json"
SCENARIO_DIR = vm.ROOT / "tests" / "vm" / "guest" / "scenarios"
RUNNER = "/tusk/tests/vm/guest/run.py"
# Booting, the runner's start and the power-off, on top of the scenarios' own limits.
BOOT_SECONDS = 120
# Scenarios that need the NIC boot (vm.nic_host): a multi-queue virtio-net NIC, 4 vCPUs.
NIC_PREFIX = "tune_"
# Scenarios of a boot of their own (beside_guest), which make test's second session
# runs beside the first: long ones the first session's scenario boot would wait for,
# chosen so that the two sessions take about as long (tools/run-tests APPLIANCE_TESTS
# runs their tests in the second session).
BESIDE = ("ha-hazards", "ha-seqrand", "scale-seqrand", "bridge-vlan")
BUILD_POLL = 10   # seconds


class ScenarioError(Exception):
    """A scenario named that does not exist, or one without a TIME_LIMIT."""


def all_scenarios(prefix=""):
    """Every guest scenario except the benchmarks (make bench-*: measured, not judged);
    those of the NIC boot (tune_*) with prefix "tune_", the others without."""
    return sorted(p.stem.replace("_", "-") for p in SCENARIO_DIR.glob("*.py")
                  if p.stem != "__init__" and not p.stem.startswith("bench_")
                  and p.stem.startswith(NIC_PREFIX) == (prefix == NIC_PREFIX)
                  and p.stem.replace("_", "-") not in BESIDE)


def chosen_scenarios(prefix=""):
    chosen = os.environ.get("TUSK_VM_SCENARIOS", "").split()
    if chosen:
        return [s for s in chosen if s.startswith(NIC_PREFIX.replace("_", "-"))
                == (prefix == NIC_PREFIX) and s not in BESIDE]
    return all_scenarios(prefix)


def chosen_beside():
    chosen = os.environ.get("TUSK_VM_SCENARIOS", "").split()
    return [s for s in BESIDE if not chosen or s in chosen]


def time_limit(scenario):
    """The TIME_LIMIT a guest scenario module declares, read without importing it."""
    path = SCENARIO_DIR / (scenario.replace("-", "_") + ".py")
    if not path.exists():
        raise ScenarioError(f"no guest scenario {scenario} ({path})")
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "TIME_LIMIT"
                                                for t in node.targets):
            return ast.literal_eval(node.value)
    raise ScenarioError(f"{path} has no TIME_LIMIT")


def boot_limit(scenarios):
    """How long a boot that runs scenarios may take before QEMU is killed: the runner in
    the guest stretches every scenario's TIME_LIMIT by the guest's measured slowness, up
    to speed.MAX_SCALE (guest/speed.py), so the boot may take as much longer; a hung
    scenario is still killed by the runner at its own stretched limit."""
    return round((BOOT_SECONDS + sum(map(time_limit, scenarios))) * speed.MAX_SCALE)


def boot(name, argv, kernel, rootfs, timeout, extra_args=(), **options):
    """One boot with tests/artifacts/vm/<name>/ as /out (emptied first)."""
    out = ARTIFACTS / name
    shutil.rmtree(out, ignore_errors=True)
    return vm.run_guest(argv, kernel, rootfs, out, timeout, extra_args=extra_args, **options)


def boot_scenarios(kernel, rootfs, scenarios):
    return boot("scenarios", ["python3", RUNNER, *scenarios], kernel, rootfs,
                boot_limit(scenarios))


def _running(pid):
    """pid is alive (a zombie, which its parent has not reaped yet, has ended)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def _cached(command):
    return subprocess.run(command, capture_output=True).returncode == 0


def booted(scenarios, kernel, rootfs):
    """The background boot's GuestRun, once its process has ended, when it booted these
    scenarios on this kernel and root filesystem; None when there is no such boot (then
    the caller boots)."""
    pid = os.environ.get("TUSK_SCENARIOS_BOOT_PID")
    if not pid:
        return None
    while _running(int(pid)):
        time.sleep(2)
    try:
        status = json.loads(STATUS.read_text())
    except (OSError, ValueError):
        return None
    if (status.get("scenarios"), status.get("kernel"), status.get("rootfs")) != (
            scenarios, str(kernel), str(rootfs)) or "run" not in status:
        return None
    run = status["run"]
    return vm.GuestRun(**{**run, "out_dir": Path(run["out_dir"]),
                          "console_log": Path(run["console_log"])})


def main(warm_caches_pid):
    STATUS.unlink(missing_ok=True)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    scenarios = chosen_scenarios()
    # The builds are warm-caches' (in its order, at its priorities): wait for both, or
    # for its end, before asking for them (a build it failed runs here again).
    waiting = time.monotonic()
    while _running(warm_caches_pid) and not (
            _cached([str(vm.ROOT / "tools" / "build-kernel"), "--if-cached", "--test"])
            and _cached([str(vm.ROOT / "tools" / "build-vm-rootfs"), "--if-cached"])):
        time.sleep(BUILD_POLL)
    started = time.monotonic()
    print(f"scenario_boot: booting {len(scenarios)} scenarios, {started - waiting:.0f} s "
          "after the start (waiting for the builds)", flush=True)
    try:
        kernel, rootfs = vm.kernel(), vm.rootfs()
        run = boot_scenarios(kernel, rootfs, scenarios)
    except (RuntimeError, ScenarioError) as error:
        print(f"scenario_boot: {error}; the VM tier boots itself", file=sys.stderr)
        return 1
    record = asdict(run)
    record.update(out_dir=str(run.out_dir), console_log=str(run.console_log))
    partial = STATUS.with_suffix(".part")
    partial.write_text(json.dumps({"scenarios": scenarios, "kernel": str(kernel),
                                   "rootfs": str(rootfs), "run": record}))
    partial.rename(STATUS)
    print(f"scenario_boot: {len(scenarios)} scenarios, exit status {run.exit_status}, "
          f"{time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1])))
