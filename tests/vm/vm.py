"""Boots Tusk's kernel under QEMU (TCG) with the cached Debian rootfs and runs one
command in the guest; the results come back through a shared output directory.

    host                                   guest (tools/vm-init is PID 1)
    rootfs (tools/build-vm-rootfs)  --9p-> /      read-only
    the repository                  --9p-> /tusk  read-only
    out_dir                         --9p-> /out   command in, output.log + exit-status out

The root is the 9p share itself (root=root rootfstype=9p): no initramfs to build, and
the kernel has no overlayfs that an initramfs could lay over it anyway. The guest's
writable places are tmpfs. The console log is kept beside out_dir whatever happens.
"""
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from lab.builds import cached_build
from lab.paths import ROOT

QEMU = "qemu-system-x86_64"
GUEST_INIT = "/sbin/tusk-vm-init"
P9 = "trans=virtio,version=9p2000.L,msize=512000"
CONSOLE_TAIL_LINES = 60
# What the kernel prints when something went wrong in it, at the start of a line.
KERNEL_TROUBLE = re.compile(r"^(WARNING:|BUG:|Oops|Kernel panic|general protection fault|"
                            r"Call Trace:|INFO: task .* blocked)", re.MULTILINE)
# Debian 12's QEMU (7.2) with multi-threaded TCG now and then segfaults while the guest
# kernel enumerates PCI (a NULL MemoryRegion in memory_region_dispatch_write: a vCPU
# still dispatches through a mapping that a BAR write just replaced; QEMU 8.1 reworked
# how TCG commits memory maps). It happened to CI's NIC boot. Such a crash, before the
# guest has started the command, is booted again - once: it says nothing of Tusk's.
BOOT_ATTEMPTS = 2
# The NIC boot: a 4-queue virtio-net NIC (one queue pair per vCPU) whose tap lives in
# a host namespace of its own (nic_host), never in the host's.
NIC_NETNS = "tusk-vmnic"
NIC_QUEUES = 4
NIC_HOST, NIC_GUEST, NIC_INNER_NET = "10.203.0.1/24", "10.203.0.2", "10.203.1.0/24"
NIC_QEMU_ARGS = ("-netdev", f"tap,id=nic0,ifname=tap0,script=no,downscript=no,"
                 f"queues={NIC_QUEUES},vhost=off",
                 "-device", f"virtio-net-pci,netdev=nic0,mq=on,vectors={2 * NIC_QUEUES + 2}")


@dataclass
class GuestRun:
    exit_status: int | None     # None: the guest never recorded one (hang, panic, crash)
    output: str                 # the command's stdout and stderr
    out_dir: Path
    console_log: Path
    seconds: float
    timed_out: bool
    qemu_status: int = 0        # QEMU's own exit code; negative: the signal that killed it
    command_started: bool = True    # the guest's init had started the command

    def crashed_in_boot(self):
        """QEMU died of a signal we did not send before the guest started the command:
        nothing of the command's ran, so booting again repeats nothing."""
        return (not self.timed_out and self.exit_status is None and self.qemu_status < 0
                and not self.command_started)

    def console_tail(self, lines=CONSOLE_TAIL_LINES):
        text = self.console_log.read_text(errors="replace")
        return "\n".join(text.splitlines()[-lines:])

    def failure(self):
        """Why this run failed, with the end of the console log; None if it did not."""
        if self.exit_status == 0:
            return None
        if self.timed_out:
            why = f"the guest did not finish within {self.seconds:.0f} s and was killed"
        elif self.exit_status is None and self.qemu_status < 0:
            why = (f"QEMU itself died of signal {-self.qemu_status} "
                   f"({signal.Signals(-self.qemu_status).name}) before the guest recorded "
                   "an exit status")
        elif self.exit_status is None:
            why = "the guest stopped without recording an exit status (panic or crash)"
        else:
            why = f"the guest command exited with status {self.exit_status}"
        return (f"{why}; console log {self.console_log}, last lines:\n"
                f"{self.console_tail()}")


def qemu_argv(kernel, rootfs, out_dir, repo=ROOT, memory_mb=2048, cpus=2, extra_args=(),
              qemu_args=()):
    # no_timer_check: under TCG on a busy host the IO-APIC timer check can miss its
    # interrupts and panic the boot ("IO-APIC + timer doesn't work"); guests of
    # emulators skip it, as cloud images do
    append = " ".join([
        "console=ttyS0", "panic=-1", "no_timer_check", "ro", f"init={GUEST_INIT}",
        "root=root", "rootfstype=9p", f"rootflags={P9},cache=loose", *extra_args,
    ])
    return [
        QEMU, "-accel", "tcg", "-m", str(memory_mb), "-smp", str(cpus),
        "-nographic", "-no-reboot",
        # No default NIC: it costs a PXE ROM at boot; tests that need one add theirs.
        "-nic", "none",
        "-kernel", str(kernel), "-append", append,
        "-virtfs", f"local,path={rootfs},mount_tag=root,security_model=none,readonly=on",
        "-virtfs", f"local,path={repo},mount_tag=tusk,security_model=none,readonly=on",
        "-virtfs", f"local,path={out_dir},mount_tag=out,security_model=none",
        *qemu_args,
    ]


def run_guest(argv, kernel, rootfs, out_dir, timeout, console_log=None, repo=ROOT,
              memory_mb=2048, cpus=2, extra_args=(), qemu_args=(), netns=None):
    """Boots the VM, runs argv in the guest (as root, cwd /) and waits for the power-off
    or the timeout. out_dir must be empty or absent; it receives whatever the guest
    writes to /out. extra_args: more kernel command line (kunit.enable=1); qemu_args:
    more QEMU options (-icount for benchmarks, a NIC); netns: the host network namespace
    QEMU runs in (where a NIC's tap device is). Returns a
    GuestRun; the guest's failures are not raised."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    if any(out_dir.iterdir()):
        raise ValueError(f"{out_dir} is not empty: results of an earlier run would mix in")
    console_log = Path(console_log or out_dir.with_name(out_dir.name + "-console.log"))
    (out_dir / "command").write_text(shlex.join(argv) + "\n")

    argv_qemu = qemu_argv(kernel, rootfs, out_dir, repo, memory_mb, cpus, extra_args,
                          qemu_args)
    if netns:
        argv_qemu = ["ip", "netns", "exec", netns, *argv_qemu]
    for attempt in range(1, BOOT_ATTEMPTS + 1):
        run = _boot_once(argv_qemu, out_dir, console_log, timeout)
        if not run.crashed_in_boot() or attempt == BOOT_ATTEMPTS:
            return run
        # QEMU 7.2 (Debian 12's) crashed before the command started: keep its console
        # log beside the others, and boot again into an emptied out_dir.
        crashed_log = console_log.with_name(f"{console_log.stem}.qemu-crash-{attempt}.log")
        console_log.rename(crashed_log)
        print(f"QEMU died of signal {-run.qemu_status} while booting (console log "
              f"{crashed_log}); booting again", file=sys.stderr)
        for path in out_dir.iterdir():
            shutil.rmtree(path) if path.is_dir() else path.unlink()
        (out_dir / "command").write_text(shlex.join(argv) + "\n")


def _boot_once(argv_qemu, out_dir, console_log, timeout):
    start = time.monotonic()
    timed_out = False
    with open(console_log, "wb") as log:
        qemu = subprocess.Popen(argv_qemu,
                                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        try:
            qemu.wait(timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            qemu.kill()
            qemu.wait()
    seconds = time.monotonic() - start

    status_file = out_dir / "exit-status"
    exit_status = int(status_file.read_text()) if status_file.exists() else None
    output_file = out_dir / "output.log"
    output = output_file.read_text(errors="replace") if output_file.exists() else ""
    return GuestRun(exit_status, output, out_dir, console_log, seconds, timed_out,
                    qemu.returncode, output_file.exists())


def kernel():
    """Tusk's test kernel, built by `make kernel` (which installs its Debian packages;
    cached by a hash of its inputs) -> the bzImage path."""
    return cached_build(["make", "-s", "--no-print-directory", "-C", str(ROOT), "kernel"],
                        "Tusk's kernel")


def fwsm_kernel():
    """Benchmark only: Tusk's test kernel plus tests/bench/fwsm/ (SACK blocks left
    untranslated, as Cisco FWSM did), for make bench's "FWSM default" row. Cached
    like kernel(); never in the image."""
    patches = sorted((ROOT / "tests" / "bench" / "fwsm").glob("*.patch"))
    return cached_build([str(ROOT / "tools" / "build-kernel"), "--test",
                         *(arg for patch in patches for arg in ("--patch", str(patch)))],
                        "the FWSM-emulation kernel")


def iso():
    """The appliance's ISO (make iso: tools/build-iso, cached) -> its path."""
    return Path(cached_build([str(ROOT / "tools" / "build-iso")], "the appliance's ISO"))


def rootfs():
    """The guest's root filesystem (tools/build-vm-rootfs, cached) -> its directory."""
    return cached_build([str(ROOT / "tools" / "build-vm-rootfs")], "the guest's root filesystem")


@contextmanager
def nic_host(pcap):
    """The host's end of the guest's NIC, in the namespace NIC_NETNS: a multi-queue tap
    (QEMU opens one file per queue), its address, a route to the guest's inner network,
    an iperf3 server and a capture of port 5201 on the tap into pcap. Yields pcap."""
    subprocess.run(["ip", "netns", "del", NIC_NETNS], capture_output=True)
    subprocess.run(["ip", "netns", "add", NIC_NETNS], check=True)
    processes = []
    try:
        for command in (["link", "set", "lo", "up"],
                        ["tuntap", "add", "dev", "tap0", "mode", "tap", "multi_queue", "vnet_hdr"],
                        ["addr", "add", NIC_HOST, "dev", "tap0"],
                        ["link", "set", "tap0", "up"],
                        ["route", "add", NIC_INNER_NET, "via", NIC_GUEST, "dev", "tap0",
                         "onlink"]):
            subprocess.run(["ip", "-n", NIC_NETNS, *command], check=True)
        in_ns = ["ip", "netns", "exec", NIC_NETNS]
        processes.append(subprocess.Popen([*in_ns, "iperf3", "--server"],
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        processes.append(subprocess.Popen([*in_ns, "tcpdump", "-i", "tap0", "-n", "-U", "-s",
                                           "96", "-w", str(pcap), "tcp port 5201"],
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        yield pcap
    finally:
        for process in processes:
            process.terminate()
            process.wait(10)
        subprocess.run(["ip", "netns", "del", NIC_NETNS], capture_output=True)
