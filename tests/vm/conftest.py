"""The VM tier's fixtures: Tusk's kernel, the guest's root filesystem, one boot per
pytest session that runs the guest scenarios (tests/vm/guest/scenarios/), and one
that runs the kernel's KUnit tests. A missing tool or a failed build fails the tier
with what to install or the build's output - never a skip.

TUSK_KERNEL=path/to/bzImage boots that kernel instead of building Tusk's
(`make kernel`: about 6 minutes the first time, cached after).
TUSK_VM_SCENARIOS="seqrand-sack smoke" runs only those scenarios; the tests of the
others are then skipped, by name, since they were asked not to run.
Each boot's /out and console log stay in tests/artifacts/vm/.
"""
import ast
import json
import os
import shutil
from pathlib import Path

import pytest
import vm
from guest import speed

ARTIFACTS = vm.ROOT / "tests" / "artifacts" / "vm"
SCENARIO_DIR = vm.ROOT / "tests" / "vm" / "guest" / "scenarios"
RUNNER = "/tusk/tests/vm/guest/run.py"
# Booting, the runner's start and the power-off, on top of the scenarios' own limits.
BOOT_SECONDS = 120
# the KUnit boot's limit; make check-kernel-debug-kunit gives a KASAN kernel more
KUNIT_SECONDS = int(os.environ.get("TUSK_KUNIT_SECONDS", "300"))
# Scenarios that need the NIC boot (vm.nic_host): a multi-queue virtio-net NIC, 4 vCPUs.
NIC_PREFIX = "tune_"
# Scenarios of a boot of their own (beside_guest), which make test's second session
# runs beside the first: long ones the first session's scenario boot would wait for,
# chosen so that the two sessions take about as long (tools/run-tests APPLIANCE_TESTS
# runs their tests in the second session).
BESIDE = ("ha-hazards", "ha-seqrand", "scale-seqrand", "bridge-vlan")


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
        pytest.fail(f"no guest scenario {scenario} ({path})", pytrace=False)
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "TIME_LIMIT"
                                                for t in node.targets):
            return ast.literal_eval(node.value)
    pytest.fail(f"{path} has no TIME_LIMIT", pytrace=False)


def boot_limit(scenarios):
    """How long a boot that runs scenarios may take before QEMU is killed: the runner in
    the guest stretches every scenario's TIME_LIMIT by the guest's measured slowness, up
    to speed.MAX_SCALE (guest/speed.py), so the boot may take as much longer; a hung
    scenario is still killed by the runner at its own stretched limit."""
    return round((BOOT_SECONDS + sum(map(time_limit, scenarios))) * speed.MAX_SCALE)


def built(build):
    try:
        return build()
    except RuntimeError as error:
        pytest.fail(str(error), pytrace=False)


@pytest.fixture(scope="session")
def vm_kernel():
    chosen = os.environ.get("TUSK_KERNEL")
    if chosen:
        if not os.path.isfile(chosen):
            pytest.fail(f"TUSK_KERNEL={chosen} is not a file", pytrace=False)
        return Path(chosen)
    return built(vm.kernel)


@pytest.fixture(scope="session")
def vm_rootfs():
    if os.geteuid() != 0:
        pytest.fail("the VM tier needs root: debootstrap builds the guest's root filesystem",
                    pytrace=False)
    rootfs = built(vm.rootfs)
    if shutil.which(vm.QEMU) is None:
        pytest.fail(f"missing {vm.QEMU} (Debian package qemu-system-x86) - "
                    "run `make vm-test`, which installs it", pytrace=False)
    return rootfs


def boot(name, argv, kernel, rootfs, timeout, extra_args=(), **options):
    """One boot with tests/artifacts/vm/<name>/ as /out (emptied first)."""
    out = ARTIFACTS / name
    shutil.rmtree(out, ignore_errors=True)
    return vm.run_guest(argv, kernel, rootfs, out, timeout, extra_args=extra_args, **options)


class Guest:
    """What the scenarios' boot brought back."""

    def __init__(self, run, scenarios):
        self.run = run
        self.scenarios = scenarios
        self.out = run.out_dir

    def json(self, *parts):
        return json.loads(self.out.joinpath(*parts).read_text())

    def scenario(self, name):
        """The output folder of a scenario that passed; fails the test otherwise, with
        the scenario's own log."""
        if name not in self.scenarios:
            pytest.skip(f"scenario {name} not in TUSK_VM_SCENARIOS")
        result_file = self.out / name / "result.json"
        if not result_file.exists():
            pytest.fail(f"the guest left no result for scenario {name}; guest output:\n"
                        f"{self.run.output}\n{self.run.failure() or ''}", pytrace=False)
        result = json.loads(result_file.read_text())
        if result["status"] != "passed":
            log = "\n".join(result["log_tail"])
            pytest.fail(f"guest scenario {name} {result['status']} ({result['error']}) after "
                        f"{result['seconds']} s; its output is in {self.out / name}; "
                        f"end of its log:\n{log}", pytrace=False)
        return self.out / name


@pytest.fixture(scope="session")
def guest(vm_kernel, vm_rootfs):
    scenarios = chosen_scenarios()
    timeout = boot_limit(scenarios)
    run = boot("scenarios", ["python3", RUNNER, *scenarios], vm_kernel, vm_rootfs, timeout)
    if run.exit_status is None:
        pytest.fail(run.failure(), pytrace=False)
    return Guest(run, scenarios)


@pytest.fixture(scope="session")
def nic_guest(vm_kernel, vm_rootfs):
    """One boot with 4 vCPUs and a 4-queue virtio-net NIC whose tap is in the host
    namespace tusk-vmnic, running the tune_* scenarios."""
    for tool, package in (("iperf3", "iperf3"), ("tcpdump", "tcpdump")):
        if shutil.which(tool) is None:
            pytest.fail(f"missing {tool} (Debian package {package}) - run `make test`",
                        pytrace=False)
    scenarios = chosen_scenarios(NIC_PREFIX)
    if not scenarios:
        pytest.skip("no tune-* scenario in TUSK_VM_SCENARIOS")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    timeout = boot_limit(scenarios)
    with vm.nic_host(ARTIFACTS / "nic-host-tap0.pcap") as host_pcap:
        run = boot("nic", ["python3", RUNNER, *scenarios], vm_kernel, vm_rootfs, timeout,
                   cpus=vm.NIC_QUEUES, qemu_args=vm.NIC_QEMU_ARGS, netns=vm.NIC_NETNS)
    if run.exit_status is None:
        pytest.fail(run.failure(), pytrace=False)
    guest = Guest(run, scenarios)
    guest.host_pcap = host_pcap
    return guest


@pytest.fixture(scope="session")
def scenario(guest):
    """scenario(name) -> the output folder of that guest scenario, which passed."""
    return guest.scenario


@pytest.fixture(scope="session")
def beside_scenario(vm_kernel, vm_rootfs):
    """As scenario, for the BESIDE scenarios: one boot of their own
    (tests/artifacts/vm/scenarios-beside/)."""
    scenarios = chosen_beside()
    if not scenarios:
        pytest.skip(f"none of {', '.join(BESIDE)} in TUSK_VM_SCENARIOS")
    timeout = boot_limit(scenarios)
    run = boot("scenarios-beside", ["python3", RUNNER, *scenarios], vm_kernel, vm_rootfs,
               timeout)
    if run.exit_status is None:
        pytest.fail(run.failure(), pytrace=False)
    return Guest(run, scenarios).scenario


@pytest.fixture(scope="session")
def kunit_log(vm_kernel, vm_rootfs):
    """The console log of a boot with kunit.enable=1: the kernel runs its KUnit suites
    before init, and init powers off at once."""
    run = boot("kunit", ["true"], vm_kernel, vm_rootfs, KUNIT_SECONDS,
               extra_args=("kunit.enable=1",))
    if run.exit_status is None:
        pytest.fail(run.failure(), pytrace=False)
    return run.console_log.read_text(errors="replace")
