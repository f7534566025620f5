"""The ISO that buildroot-external/board/tusk/post-image.sh writes boots under BIOS
(SeaBIOS) and UEFI (OVMF), each as a CD and as a USB stick the ISO was dd'd to.

Buildroot's outputs are stood in for by the host's: Tusk's test kernel (vm_kernel),
Debian's GRUB modules and grub-mkimage (what BR2_TARGET_GRUB2_INSTALL_TOOLS puts in
TARGET_DIR and host-grub2 in HOST_DIR), xorriso, dosfstools and mtools, a busybox initrd
whose /init prints a marker line and powers off, and a small rootfs.ext4. The script runs
as Buildroot runs it (BINARIES_DIR, TARGET_DIR, HOST_DIR). Console logs:
tests/artifacts/vm/iso-<boot>.log; boot times: tests/artifacts/vm/iso-times.json.

Under OVMF a USB stick boots through the El Torito catalog (the UEFI spec scans it before
the MBR), so one more boot hides that catalog's signature in a copy of the stick: the
firmware then starts GRUB from MBR partition 2 (the ESP), as firmware that ignores El
Torito on a disk does, and GRUB must find the ISO 9660 file system itself.
"""
import gzip
import json
import os
import re
import shutil
import struct
import subprocess
import time
import uuid
from pathlib import Path

import pytest
import vm

SCRIPT = vm.ROOT / "buildroot-external" / "board" / "tusk" / "post-image.sh"
ARTIFACTS = vm.ROOT / "tests" / "artifacts" / "vm"
TIMES = ARTIFACTS / "iso-times.json"
BOOT_SECONDS = 120         # each boot; TCG takes 6-14 s on 2 cores
MEMORY_MB = 512
GRUB_DIR = Path("/usr/lib/grub")
BUSYBOX = Path("/bin/busybox")
OVMF_PAIRS = (("OVMF_CODE_4M.fd", "OVMF_VARS_4M.fd"), ("OVMF_CODE.fd", "OVMF_VARS.fd"))
OVMF_DIR = Path("/usr/share/OVMF")
# tool -> (where the script looks for it under HOST_DIR, Debian package)
HOST_TOOLS = {"xorriso": ("bin", "xorriso"), "grub-mkimage": ("bin", "grub-common"),
              "mkfs.vfat": ("sbin", "dosfstools"), "mcopy": ("bin", "mtools")}
TEST_TOOLS = {vm.QEMU: "qemu-system-x86", "zstd": "zstd", "mke2fs": "e2fsprogs",
              "sfdisk": "fdisk", "blkid": "util-linux", "mdir": "mtools",
              "osirrox": "xorriso"}
KERNEL_ARGS = "console=tty0 console=ttyS0,115200 bonding.max_bonds=0"
# The line GRUB's embedded config prints: where the firmware started GRUB, and the
# device it found the ISO 9660 file system on.
GRUB_LINE = re.compile(r"Tusk: GRUB from (\S*), boot medium (\S*) \(TUSK_MEDIUM ([0-9-]+)\)")
MEDIUM_ROOT = re.compile(r"(cd\d*|hd\d+(,msdos1)?)")
EL_TORITO_ID = b"EL TORITO SPECIFICATION"
STICK = ("-device", "qemu-xhci", "-device", "usb-storage,drive=stick,bootindex=0")


def need(condition, what):
    if not condition:
        pytest.fail(f"missing {what} - install it with tools/ensure-apt (the VM tier's "
                    "packages: see the Makefile's VM_APT_PACKAGES)", pytrace=False)


def newc(entries):
    """A cpio archive (newc, as the kernel unpacks it) of (name, mode, data, rdev)."""
    out = bytearray()
    for ino, (name, mode, data, rdev) in enumerate([*entries, ("TRAILER!!!", 0, b"", 0)], 1):
        encoded = name.encode() + b"\0"
        fields = (ino, mode, 0, 0, 1, 0, len(data), 0, 0, rdev >> 8, rdev & 0xff,
                  len(encoded), 0)
        out += b"070701" + b"".join(b"%08X" % f for f in fields) + encoded
        out += b"\0" * (-len(out) % 4) + data
        out += b"\0" * (-len(out) % 4)
    return bytes(out)


def is_static(elf):
    """True if the ELF file has no program interpreter (PT_INTERP)."""
    data = elf.read_bytes()
    phoff, = struct.unpack_from("<Q", data, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", data, 0x36)
    return all(struct.unpack_from("<I", data, phoff + i * phentsize)[0] != 3
               for i in range(phnum))


def initrd(marker):
    init = ("#!/bin/busybox sh\n"
            "/bin/busybox mount -t proc proc /proc\n"
            f'/bin/busybox echo "{marker} cmdline=$(/bin/busybox cat /proc/cmdline)"\n'
            "/bin/busybox poweroff -f\n")
    return newc([("bin", 0o40755, b"", 0), ("dev", 0o40755, b"", 0),
                 ("proc", 0o40755, b"", 0),
                 ("dev/console", 0o20600, b"", (5 << 8) | 1),
                 ("bin/busybox", 0o100755, BUSYBOX.read_bytes(), 0),
                 ("init", 0o100755, init.encode(), 0)])


@pytest.fixture(scope="module")
def medium(vm_kernel, tmp_path_factory):
    """Runs post-image.sh on stand-ins for Buildroot's outputs -> (iso path, marker)."""
    for tool, package in TEST_TOOLS.items():
        need(shutil.which(tool), f"{tool} (Debian package {package})")
    for platform, package in (("i386-pc", "grub-pc-bin"), ("x86_64-efi", "grub-efi-amd64-bin")):
        need((GRUB_DIR / platform / "kernel.img").is_file(),
             f"{GRUB_DIR / platform} (Debian package {package})")
    need(BUSYBOX.is_file() and is_static(BUSYBOX), f"a static {BUSYBOX} (Debian package "
         "busybox-static)")
    top = tmp_path_factory.mktemp("iso")
    binaries, target, host = top / "images", top / "target", top / "host"
    for directory in (binaries, target / "usr" / "lib" / "grub", host / "bin", host / "sbin"):
        directory.mkdir(parents=True)
    for tool, (subdir, package) in HOST_TOOLS.items():
        path = shutil.which(tool) or shutil.which(tool, path="/usr/sbin:/sbin")
        need(path, f"{tool} (Debian package {package})")
        (host / subdir / tool).symlink_to(path)
    for platform in ("i386-pc", "x86_64-efi"):
        (target / "usr" / "lib" / "grub" / platform).symlink_to(GRUB_DIR / platform)

    marker = f"TUSK-ISO-BOOT-{uuid.uuid4().hex}"
    shutil.copy(vm_kernel, binaries / "bzImage")
    subprocess.run(["zstd", "-q", "-o", str(binaries / "rootfs.cpio.zst")],
                   input=initrd(marker), check=True)
    # A stale gzip cpio from an earlier build, older than the zstd one: not taken.
    (binaries / "rootfs.cpio.gz").write_bytes(gzip.compress(newc([])))
    os.utime(binaries / "rootfs.cpio.gz", (time.time() - 3600,) * 2)
    tree = top / "rootfs"
    (tree / "etc").mkdir(parents=True)
    (tree / "etc" / "tusk-release").write_text(f"{marker}\n")
    # Buildroot writes rootfs.ext2 and links rootfs.ext4 to it.
    subprocess.run(["mke2fs", "-q", "-F", "-t", "ext4", "-L", "TUSK_SYSTEM", "-d", str(tree),
                    str(binaries / "rootfs.ext2"), "8M"], check=True)
    (binaries / "rootfs.ext4").symlink_to("rootfs.ext2")

    env = {**os.environ, "BINARIES_DIR": str(binaries), "TARGET_DIR": str(target),
           "HOST_DIR": str(host)}
    run = subprocess.run([str(SCRIPT)], env=env, capture_output=True, text=True)
    assert run.returncode == 0, f"post-image.sh failed:\n{run.stdout}{run.stderr}"
    iso = binaries / "tusk.iso"
    assert iso.is_file(), run.stdout
    assert not (binaries / "tusk-iso.tmp").exists(), "post-image.sh left its work folder"
    return iso, marker


def iso_file(iso, path, into):
    """A file of the ISO 9660 file system, extracted with osirrox."""
    subprocess.run(["osirrox", "-indev", str(iso), "-extract", path, str(into)],
                   check=True, capture_output=True)
    return into


def test_iso_has_an_mbr_with_the_iso_and_an_efi_system_partition(medium):
    iso, _ = medium
    table = json.loads(subprocess.run(["sfdisk", "-J", str(iso)], check=True,
                                      capture_output=True, text=True).stdout)["partitiontable"]
    assert table["label"] == "dos", table
    first, esp = table["partitions"]
    assert first["start"] == 16 * 2048 // 512 and first.get("bootable"), table
    assert esp["type"] == "ef", table
    assert (esp["start"] + esp["size"]) * 512 <= iso.stat().st_size, table
    # The ESP holds GRUB where firmware looks on a removable disk.
    listing = subprocess.run(["mdir", "-b", "-i", f"{iso}@@{esp['start'] * 512}", "::/EFI/BOOT"],
                             check=True, capture_output=True, text=True).stdout
    assert "::/EFI/BOOT/BOOTX64.EFI" in listing.upper().split(), listing


def test_iso_volume_and_content(medium, tmp_path):
    iso, marker = medium
    blkid = subprocess.run(["blkid", "-o", "export", str(iso)], check=True, capture_output=True,
                           text=True).stdout
    assert "LABEL=TUSK_MEDIUM" in blkid.split() and "TYPE=iso9660" in blkid.split(), blkid
    for path in ("/boot/bzImage", "/boot/initrd", "/boot/grub/grub.cfg"):
        assert iso_file(iso, path, tmp_path / Path(path).name).stat().st_size > 0, path
    grub_cfg = (tmp_path / "grub.cfg").read_text()
    assert 'menuentry "Tusk live"' in grub_cfg and KERNEL_ARGS in grub_cfg, grub_cfg
    assert re.search(r"^set timeout=3$", grub_cfg, re.MULTILINE), grub_cfg
    assert (tmp_path / "initrd").read_bytes()[:4] == b"\x28\xb5\x2f\xfd", "not the zstd cpio"
    rootfs = iso_file(iso, "/tusk/rootfs.ext4", tmp_path / "rootfs.ext4")
    sums = iso_file(iso, "/tusk/SHA256SUMS", tmp_path / "SHA256SUMS").read_text()
    digest = subprocess.run(["sha256sum", str(rootfs)], check=True, capture_output=True,
                            text=True).stdout.split()[0]
    assert sums == f"{digest}  rootfs.ext4\n"
    assert rootfs.is_file() and not rootfs.is_symlink()


def ovmf(tmp_path):
    for code, variables in OVMF_PAIRS:
        if (OVMF_DIR / code).is_file() and (OVMF_DIR / variables).is_file():
            shutil.copy(OVMF_DIR / variables, tmp_path / "OVMF_VARS.fd")
            return ("-drive", f"if=pflash,format=raw,unit=0,readonly=on,file={OVMF_DIR / code}",
                    "-drive", f"if=pflash,format=raw,unit=1,file={tmp_path / 'OVMF_VARS.fd'}")
    need(False, f"{OVMF_DIR}/OVMF_CODE_4M.fd (Debian package ovmf)")


def without_el_torito(iso, copy):
    """A copy of the stick whose El Torito boot record no firmware recognises."""
    data = bytearray(iso.read_bytes())
    offset = 17 * 2048 + 7                # ISO 9660 volume descriptor 17: boot system id
    assert data[offset:offset + len(EL_TORITO_ID)] == EL_TORITO_ID, "no El Torito record"
    data[offset:offset + len(EL_TORITO_ID)] = b"X" * len(EL_TORITO_ID)
    copy.write_bytes(data)
    return copy


BOOTS = {
    # name: (firmware, how the ISO is attached, what the firmware starts GRUB from)
    "bios-cd": ("bios", "cd", None),
    "bios-usb": ("bios", "usb", r"\(hd0\)"),
    "uefi-cd": ("uefi", "cd", r"\(cd0\)/EFI/BOOT"),
    "uefi-usb": ("uefi", "usb", None),
    "uefi-usb-esp": ("uefi", "usb-no-el-torito", r"\(hd0,msdos2\)/EFI/BOOT"),
}


@pytest.mark.parametrize("name", BOOTS)
def test_iso_boots(medium, name, tmp_path):
    iso, marker = medium
    firmware, attach, started_from = BOOTS[name]
    argv = [vm.QEMU, "-accel", "tcg", "-m", str(MEMORY_MB), "-nographic", "-no-reboot",
            "-nic", "none", "-monitor", "none"]
    if firmware == "uefi":
        argv += ovmf(tmp_path)
    if attach == "cd":
        argv += ["-cdrom", str(iso)]
    else:
        stick = iso if attach == "usb" else without_el_torito(iso, tmp_path / "stick.img")
        # The file as a raw disk - what dd gives - on a USB stick; snapshot: left unchanged.
        argv += ["-drive", f"if=none,id=stick,format=raw,snapshot=on,file={stick}", *STICK]
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    log = ARTIFACTS / f"iso-{name}.log"
    log.unlink(missing_ok=True)
    argv += ["-serial", f"file:{log}"]

    start = time.monotonic()
    qemu = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT)
    try:
        qemu_output = qemu.communicate(timeout=BOOT_SECONDS)[0].decode(errors="replace")
    except subprocess.TimeoutExpired:
        qemu.kill()
        qemu_output = qemu.communicate()[0].decode(errors="replace")
    seconds = time.monotonic() - start
    console = log.read_text(errors="replace") if log.exists() else ""
    times = json.loads(TIMES.read_text()) if TIMES.exists() else {}
    times[name] = {"seconds": round(seconds, 1),
                   "marker": marker in console, "qemu": " ".join(argv)}
    TIMES.write_text(json.dumps(times, indent=2, sort_keys=True) + "\n")

    tail = "\n".join(console.splitlines()[-vm.CONSOLE_TAIL_LINES:])
    assert re.search(rf"{marker} cmdline=.*{re.escape(KERNEL_ARGS)}", console), (
        f"{name}: no marker line from the initrd's /init within {BOOT_SECONDS} s "
        f"({seconds:.0f} s, QEMU exit {qemu.returncode}); console log {log}:\n{tail}\n"
        f"QEMU: {qemu_output}")
    grub = GRUB_LINE.search(console)
    assert grub, f"{name}: GRUB's embedded config did not run; see {log}"
    cmdpath, root, _ = grub.groups()
    assert MEDIUM_ROOT.fullmatch(root), f"{name}: GRUB's root is {root}, not the ISO ({log})"
    if started_from:
        assert re.fullmatch(started_from, cmdpath), f"{name}: GRUB started from {cmdpath}"
    errors = re.findall(r"\berror: [^\r\n]*", console.split("Linux version")[0])
    assert not errors, f"{name}: GRUB reported {errors} ({log})"
    assert qemu.returncode == 0, f"{name}: QEMU exited {qemu.returncode}: {qemu_output}"
