"""The scenarios' boot itself: the kernel asked for is the one that ran, with both
CPUs, the guest's userland, a clean kernel log, and a runner that finished with
every scenario passed; and a QEMU crash while booting, booted again."""
import os
import signal
import struct
import subprocess
import threading
import time

import vm
from vm import KERNEL_TROUBLE

SETUP_HEADER_VERSION_POINTER = 0x20E      # Linux/x86 boot protocol: kernel_version


def bzimage_version(path):
    """The version string a bzImage carries: '<release> (<user>@<host>) <version>'."""
    data = path.read_bytes()
    (offset,) = struct.unpack_from("<H", data, SETUP_HEADER_VERSION_POINTER)
    start = 0x200 + offset
    return data[start:data.index(b"\0", start)].decode()


def test_guest_ran_the_kernel_it_was_given(guest, vm_kernel):
    facts = guest.json("guest.json")
    version = bzimage_version(vm_kernel)
    assert version.startswith(facts["kernel_release"] + " ("), (version, facts)
    assert version.endswith(facts["kernel_version"]), (version, facts)


def test_guest_has_both_cpus_and_its_userland(guest):
    facts = guest.json("guest.json")
    # Without ACPI in the kernel, QEMU's -smp 2 shows one CPU.
    assert facts["cpus"] == 2, facts
    assert facts["nft"].startswith("nftables v1.1."), facts


def test_kernel_log_is_clean(guest):
    console = guest.run.console_log.read_text(errors="replace")
    trouble = [m.group(0) for m in KERNEL_TROUBLE.finditer(console)]
    assert not trouble, f"the kernel reported {trouble} - see {guest.run.console_log}"


def test_guest_runner_finished_with_every_scenario_passed(guest):
    assert guest.run.exit_status == 0, (f"{guest.run.failure()}\nrunner output:\n"
                                        f"{guest.run.output}")


def qemu_of(out_dir):
    """The pid of the QEMU whose /out share is out_dir, once it runs."""
    found = subprocess.run(["pgrep", "-f", f"path={out_dir},mount_tag=out"],
                           capture_output=True, text=True).stdout.split()
    return int(found[0]) if found else None


def test_a_qemu_crash_while_booting_boots_again_but_not_once_the_command_ran(
        vm_kernel, vm_rootfs, tmp_path):
    """Debian 12's QEMU sometimes segfaults while the guest enumerates PCI
    (vm.BOOT_ATTEMPTS). Played here with a real SIGSEGV: in the boot, QEMU boots
    again; once the command has started, a crash is the run's result, not retried."""
    out = tmp_path / "out"
    box = {}
    runner = threading.Thread(target=lambda: box.update(run=vm.run_guest(
        ["sh", "-c", "touch /out/started; sleep 600"], vm_kernel, vm_rootfs, out, 300)))
    runner.start()
    crashed_log = tmp_path / "out-console.qemu-crash-1.log"
    try:
        # the first boot: crash it while the kernel is still starting
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and (qemu_of(out) is None or b"PCI" not in (
                (tmp_path / "out-console.log").read_bytes()
                if (tmp_path / "out-console.log").exists() else b"")):
            time.sleep(0.2)
        first = qemu_of(out)
        assert first is not None, "the first boot never reached PCI"
        os.kill(first, signal.SIGSEGV)
        # the second boot: crash it once the command runs
        deadline = time.monotonic() + 240
        while (time.monotonic() < deadline and runner.is_alive()
               and not (out / "started").exists()):
            time.sleep(0.2)
        assert crashed_log.exists(), "QEMU was not booted again after the crash"
        assert (out / "started").exists(), "the second boot never started the command"
        second = qemu_of(out)
        assert second not in (None, first)
        os.kill(second, signal.SIGSEGV)
    finally:
        runner.join(360)
        if runner.is_alive() and qemu_of(out):
            os.kill(qemu_of(out), signal.SIGKILL)
    run = box["run"]
    assert run.exit_status is None and run.qemu_status == -signal.SIGSEGV, run
    assert run.command_started
    assert "QEMU itself died of signal 11 (SIGSEGV)" in run.failure()
    assert not (tmp_path / "out-console.qemu-crash-2.log").exists()
