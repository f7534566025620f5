"""The VM tier's fixtures: Tusk's kernel, the guest's root filesystem, one boot per
pytest session that runs the guest scenarios (tests/vm/guest/scenarios/), and one
that runs the kernel's KUnit tests. A missing tool or a failed build fails the tier
with what to install or the build's output - never a skip.

TUSK_KERNEL=path/to/bzImage boots that kernel instead of building Tusk's
(`make kernel`: about 6 minutes the first time, cached after).
TUSK_VM_SCENARIOS="seqrand-sack smoke" runs only those scenarios; the tests of the
others are then skipped, by name, since they were asked not to run.
Each boot's /out and console log stay in tests/artifacts/vm/. In a whole run the
scenarios' boot starts beside the host tiers (scenario_boot.py).
"""
import json
import os
import shutil
from pathlib import Path

import pytest
import scenario_boot
import vm

ARTIFACTS = vm.ROOT / "tests" / "artifacts" / "vm"
# the KUnit boot's limit; make check-kernel-debug-kunit gives a KASAN kernel more
KUNIT_SECONDS = int(os.environ.get("TUSK_KUNIT_SECONDS", "300"))
NIC_PREFIX = scenario_boot.NIC_PREFIX
BESIDE = scenario_boot.BESIDE
all_scenarios = scenario_boot.all_scenarios
chosen_scenarios = scenario_boot.chosen_scenarios
chosen_beside = scenario_boot.chosen_beside
boot = scenario_boot.boot
RUNNER = scenario_boot.RUNNER


def time_limit(scenario):
    try:
        return scenario_boot.time_limit(scenario)
    except scenario_boot.ScenarioError as error:
        pytest.fail(str(error), pytrace=False)


def boot_limit(scenarios):
    try:
        return scenario_boot.boot_limit(scenarios)
    except scenario_boot.ScenarioError as error:
        pytest.fail(str(error), pytrace=False)


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
    """The scenarios' boot: the one a whole run started beside the host tiers
    (scenario_boot.py), when it booted these scenarios; a boot of its own otherwise."""
    scenarios = chosen_scenarios()
    boot_limit(scenarios)   # a scenario that does not exist fails here, by name
    run = scenario_boot.booted(scenarios, vm_kernel, vm_rootfs)
    if run is None:
        run = scenario_boot.boot_scenarios(vm_kernel, vm_rootfs, scenarios)
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
