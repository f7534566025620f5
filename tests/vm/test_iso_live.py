"""The appliance's ISO (make iso) boots into the live system from every way in that
test_appliance.py, which boots it from a USB stick under SeaBIOS and goes on to install,
does not take: a CD under SeaBIOS, a CD and a USB stick under UEFI (OVMF).

Each boot must show, on the serial console: GRUB's embedded config finding the medium,
the kernel unpacking the root filesystem into RAM and running its /init, systemd
starting as PID 1 of the live system, and no kernel trouble. Then the VM is stopped:
the rest of the live system is test_appliance.py's. The three boot two at a time, with
one vCPU each. Console logs: tests/artifacts/vm/appliance-iso-<way>.log.
"""
import concurrent.futures
import re
import time
from pathlib import Path

import pytest
import vm
from appliance_vm import Appliance

ARTIFACTS = vm.ROOT / "tests" / "artifacts" / "vm"
OVMF = {"code": "/usr/share/OVMF/OVMF_CODE_4M.fd", "vars": "/usr/share/OVMF/OVMF_VARS_4M.fd"}
WAYS = {  # name: (firmware, how the ISO is attached)
    "bios-cd": (None, "cd"),
    "uefi-cd": (OVMF, "cd"),
    "uefi-usb": (OVMF, "usb"),
}
# where GRUB's embedded config found the ISO 9660 file system
MEDIUM_ROOT = r"cd\d*|hd\d+(,msdos1)?"
# what systemd prints on the console once it runs, as PID 1 of the live system
SYSTEMD = r"Welcome to [^\r\n]*!"


@pytest.fixture(scope="module")
def iso():
    try:
        return vm.iso()
    except RuntimeError as error:
        pytest.fail(str(error), pytrace=False)


def boot(iso, way):
    """One way in, as far as systemd -> (seconds from power-on to each step, the
    console log's text, a failure or None)."""
    firmware, attach = WAYS[way]
    start = time.monotonic()
    # one vCPU: the ways boot two at a time on the host's two cores
    box = Appliance(f"iso-{way}", [], ARTIFACTS, firmware=firmware, iso=(iso, attach),
                    cpus=1)
    times, failure = {}, None
    try:
        grub = box.expect(r"Tusk: GRUB from \S*, boot medium (\S*) \(TUSK_MEDIUM", 120)
        if not re.fullmatch(MEDIUM_ROOT, grub.group(1)):
            failure = f"GRUB found the medium on {grub.group(1)}"
        times["grub"] = round(time.monotonic() - start)
        for step, pattern in (("unpacking", r"Unpacking initramfs"),
                              ("init", r"Run /init as init process"), ("systemd", SYSTEMD)):
            box.expect(pattern, 300)
            times[step] = round(time.monotonic() - start)
    except AssertionError as error:
        failure = str(error)
    finally:
        box.kill()
    return times, box.log_path.read_text(errors="replace"), failure


@pytest.fixture(scope="module")
def boots(iso):
    for firmware, _ in WAYS.values():
        if firmware and not all(Path(p).exists() for p in firmware.values()):
            pytest.fail(f"missing {firmware['code']} (Debian package ovmf; make vm-deps)",
                        pytrace=False)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        running = {way: pool.submit(boot, iso, way) for way in WAYS}
        return {way: future.result() for way, future in running.items()}


@pytest.mark.parametrize("way", WAYS)
def test_the_iso_boots_into_the_live_system(boots, way):
    times, console, failure = boots[way]
    print(f"{way}: seconds from power-on: {times}")
    assert failure is None, f"{way}: {failure}"
    trouble = [line for line in console.splitlines() if vm.KERNEL_TROUBLE.search(line)]
    assert not trouble, f"{way}: the kernel reported trouble:\n" + "\n".join(trouble)
