"""The scenarios' boot itself: the kernel asked for is the one that ran, with both
CPUs, the guest's userland, a clean kernel log, and a runner that finished with
every scenario passed."""
import struct

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
