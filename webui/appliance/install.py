"""tusk-install: writes Tusk from the installation medium onto a disk of this box.

    tusk-install [--disk /dev/sdX] [--yes] [--fresh] [--medium DIR]

The medium is the filesystem labelled TUSK_MEDIUM (the ISO, or the USB stick it was
written to) with boot/bzImage and tusk/rootfs.ext4; --medium names a directory instead.
The disk gets a GPT for A/B upgrades (docs/UPGRADES.md): a 1 MiB BIOS boot partition,
the EFI system partition (FAT labelled TUSK_ESP: GRUB for BIOS and UEFI - the removable
path, so no firmware entry is needed -, its A/B menu and its environment), two system
slots of equal size (tusk-system-a gets rootfs.ext4, grown, with the kernel in /boot;
tusk-system-b stays empty until the first upgrade) and the data partition (ext4
labelled TUSK_DATA) on the rest. Refused: the disk holding the medium, the disk the
running system is on, any disk with a filesystem mounted or swap in use anywhere below
it (partitions, RAID, LVM, loop devices: lsblk's tree), and a medium without
tusk/SHA256SUMS. Unless --fresh, what this session configured (/data: configuration,
policy revisions, database, certificate) goes onto the new data partition, so the
installed box comes up as the live one was left.
"""
import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time

from appliance.boot import mounts

MEDIUM_LABEL = "TUSK_MEDIUM"
DATA = "/data"
BIOS_BOOT = "21686148-6449-6E6F-744E-656564454649"
ESP = "C12A7328-F81F-11D2-BA4B-00A0C93EC93B"
LINUX = "0FC63DAF-8483-4772-8E79-3D69D8477DE4"
MIB = 1024 * 1024
ESP_MIB = 64
MIN_SYSTEM_MIB = 2048
MIN_DATA_MIB = 1024
SLOTS = ("A", "B")
# GPT partition names: RAUC's system.conf finds the slots by them (/dev/disk/by-partlabel)
PARTITIONS = ("bios-boot", "esp", "tusk-system-a", "tusk-system-b", "tusk-data")
ESP_LABEL = "TUSK_ESP"
# stopped while /data is copied, started again afterwards (a live session goes on)
SERVICES = ("tusk-nginx.service", "tusk-web.service", "tusk-agent.service", "tusk-db.service")
# bonding.max_bonds=0: no bond0 of the built-in driver's own (systemd's modprobe.d asks it
# of the module; built in, only the command line reaches it): networkd makes the bonds
KERNEL_ARGS = "rootwait rw console=tty0 console=ttyS0,115200 bonding.max_bonds=0"


class InstallError(Exception):
    pass


def say(message=""):
    print(message, flush=True)


def run(argv, **kwargs):
    kwargs.setdefault("check", True)
    kwargs.setdefault("capture_output", True)
    try:
        return subprocess.run([str(a) for a in argv], text=True, **kwargs)
    except subprocess.CalledProcessError as exc:
        raise InstallError(f"{' '.join(exc.cmd)} failed (exit {exc.returncode}): "
                           f"{(exc.stderr or exc.stdout or '').strip()}") from None
    except FileNotFoundError:
        raise InstallError(f"{argv[0]} is missing on this system") from None


# -- the medium ------------------------------------------------------------------------

def find_medium(directory=None):
    """(directory with boot/bzImage and tusk/rootfs.ext4, the block device or None)."""
    if directory:
        device = None
    else:
        found = run(["blkid", "-L", MEDIUM_LABEL], check=False)
        device = found.stdout.strip()
        if found.returncode != 0 or not device:
            raise InstallError(f"no installation medium: no filesystem is labelled "
                               f"{MEDIUM_LABEL} (boot from the Tusk ISO or USB stick, or give "
                               "--medium DIR)")
        directory = next((point for source, point, _ in mounts() if source == device), None)
        if directory is None:
            directory = tempfile.mkdtemp(prefix="tusk-medium-", dir="/run")
            run(["mount", "-o", "ro", device, directory])
    for name in ("boot/bzImage", "tusk/rootfs.ext4"):
        if not os.path.isfile(os.path.join(directory, name)):
            raise InstallError(f"the installation medium {directory} has no {name}")
    return directory, device


def verify_medium(directory):
    """Every file SHA256SUMS lists matches it, and it lists the system image: a medium
    that cannot prove its image intact (no SHA256SUMS: a truncated copy, a hand-made
    stick) installs nothing."""
    sums = os.path.join(directory, "tusk", "SHA256SUMS")
    try:
        with open(sums, encoding="utf-8") as handle:
            lines = [line.split(maxsplit=1) for line in handle if line.strip()]
    except FileNotFoundError:
        raise InstallError(f"the installation medium {directory} has no tusk/SHA256SUMS: its "
                           "image cannot be checked, so nothing is installed (write the ISO "
                           "again)") from None
    listed = {name.strip().lstrip("*"): want for want, name in
              (line for line in lines if len(line) == 2)}
    if len(listed) != len(lines):
        raise InstallError(f"the installation medium {directory}: tusk/SHA256SUMS has a line "
                           "that is not '<sha256>  <file>' (write the ISO again)")
    if "rootfs.ext4" not in listed:
        raise InstallError(f"the installation medium {directory}: tusk/SHA256SUMS has no line "
                           "for rootfs.ext4 (write the ISO again)")
    say("checking the medium (SHA256SUMS) ...")
    for name, want in sorted(listed.items()):
        digest = hashlib.sha256()
        with open(os.path.join(directory, "tusk", name), "rb") as data:
            for block in iter(lambda: data.read(4 * MIB), b""):
                digest.update(block)
        if digest.hexdigest() != want:
            raise InstallError(f"the installation medium is damaged: tusk/{name} does "
                               "not match its SHA256SUMS line (write the ISO again)")


# -- disks -----------------------------------------------------------------------------

# KNAME: the kernel's name (dm-1), as /proc/swaps gives it; PATH may be /dev/mapper/...
LSBLK_COLUMNS = "NAME,KNAME,PATH,SIZE,TYPE,RO,MODEL,TRAN,MOUNTPOINTS"
PROC_SWAPS = "/proc/swaps"


def lsblk():
    """lsblk's tree: each disk with its partitions, and below them what is built on
    them (RAID, LVM, crypt, loop devices and their partitions) as nested children."""
    out = run(["lsblk", "-J", "-b", "-o", LSBLK_COLUMNS])
    return json.loads(out.stdout)["blockdevices"]


def descendants(device):
    """device and everything below it in lsblk's tree, at any depth."""
    yield device
    for child in device.get("children") or []:
        yield from descendants(child)


def disk_of(device, devices):
    """The whole disk a block device (at any depth below it) belongs to."""
    device = os.path.realpath(device)
    for disk in devices:
        if any(device in (d["path"], f"/dev/{d.get('kname')}") for d in descendants(disk)):
            return disk["path"]
    return None


def root_device():
    source = run(["findmnt", "-n", "-o", "SOURCE", "/"], check=False).stdout.strip()
    return source if source.startswith("/dev/") else None


def swapping(proc_swaps=PROC_SWAPS):
    """The devices the kernel swaps on. lsblk shows swap as the mount point [SWAP] only
    when it matches /proc/swaps itself; reading the kernel's list does not depend on
    that (nor on its version), and a swap area being written must not be overwritten."""
    with open(proc_swaps, encoding="utf-8") as handle:
        return {os.path.realpath(fields[0]) for fields in
                (line.split() for line in handle.readlines()[1:])
                if fields and fields[1] == "partition"}


def in_use(disk, swaps):
    """What is mounted or swapping at any depth below disk, as phrases."""
    found = []
    for device in descendants(disk):
        points = [m for m in device.get("mountpoints") or [] if m and m != "[SWAP]"]
        if points:
            found.append(f"{device['path']} is mounted on {', '.join(points)}")
        if "[SWAP]" in (device.get("mountpoints") or []) or \
                {device["path"], f"/dev/{device.get('kname')}"} & swaps:
            found.append(f"{device['path']} is swap in use")
    return list(dict.fromkeys(found))


def candidates(devices, medium_device, root, proc_swaps=PROC_SWAPS):
    """Every disk of lsblk's tree, each with the reason it is refused (None: it can be
    installed to). medium_device, root: the block devices of the medium and of /."""
    medium_disk = disk_of(medium_device, devices) if medium_device else None
    root_disk = disk_of(root, devices) if root else None
    swaps = swapping(proc_swaps)
    result = []
    for disk in devices:
        if disk["type"] != "disk":
            continue
        busy = in_use(disk, swaps)
        if disk["path"] == medium_disk:
            reason = "it holds the installation medium this box booted from"
        elif disk["path"] == root_disk:
            reason = "the running system is on it"
        elif busy:
            reason = f"it is in use ({'; '.join(busy)})"
        elif disk["ro"]:
            reason = "it is read-only"
        elif int(disk["size"]) < (ESP_MIB + 2 * MIN_SYSTEM_MIB + MIN_DATA_MIB + 2) * MIB:
            least = (ESP_MIB + 2 * MIN_SYSTEM_MIB + MIN_DATA_MIB) // 1024 + 1
            reason = f"it is too small (at least {least} GiB)"
        else:
            reason = None
        result.append((disk, reason))
    return result


def describe(disk):
    size = int(disk["size"]) / 1024 ** 3
    model = (disk.get("model") or "").strip() or "unknown model"
    return f"{disk['path']}  {size:.1f} GiB  {model}  {disk.get('tran') or ''}".rstrip()


def choose(args, medium_device):
    disks = candidates(lsblk(), medium_device, root_device())
    if args.disk:
        wanted = os.path.realpath(args.disk)
        for disk, reason in disks:
            if disk["path"] == wanted:
                if reason:
                    raise InstallError(f"--disk {args.disk}: refused: {reason}")
                return disk
        raise InstallError(f"--disk {args.disk}: not a disk of this box (disks: "
                           f"{', '.join(d['path'] for d, _ in disks) or 'none'})")
    usable = [disk for disk, reason in disks if reason is None]
    say("Disks:")
    for number, (disk, reason) in enumerate(disks, 1):
        say(f"  {number}) {describe(disk)}" + (f"  - refused: {reason}" if reason else ""))
    if not usable:
        raise InstallError("no disk to install to")
    while True:
        answer = input("Install Tusk on disk number (empty: cancel): ").strip()
        if not answer:
            raise InstallError("cancelled, nothing was written")
        # ASCII digits only: str.isdigit() takes other scripts' digits, int() does not
        if answer.isascii() and answer.isdigit() and len(answer) < 4 and \
                1 <= int(answer) <= len(disks):
            disk, reason = disks[int(answer) - 1]
            if reason is None:
                return disk
            say(f"{disk['path']} is refused: {reason}")
        else:
            say(f"{answer!r} is not one of the numbers 1-{len(disks)}")


def confirm(disk, args):
    if args.yes:
        return
    name = os.path.basename(disk["path"])
    say(f"\nEVERYTHING on {describe(disk)} will be erased.")
    if input(f"Type the disk's name ({name}) to install, anything else cancels: ").strip() != name:
        raise InstallError("cancelled, nothing was written")


# -- writing ----------------------------------------------------------------------------

def partition_path(disk, number):
    return f"{disk}p{number}" if disk[-1].isdigit() else f"{disk}{number}"


def install(disk, medium, fresh):
    path = disk["path"]
    image = os.path.join(medium, "tusk", "rootfs.ext4")
    image_mib = -(-os.path.getsize(image) // MIB)
    # each slot holds twice today's system: room for the releases to come
    system_mib = max(MIN_SYSTEM_MIB, 2 * image_mib)
    total_mib = int(disk["size"]) // MIB
    need_mib = 2 + ESP_MIB + 2 * system_mib + MIN_DATA_MIB
    if total_mib < need_mib:
        raise InstallError(f"{path} is too small: {total_mib} MiB, two system slots and the "
                           f"data need {need_mib} MiB")
    say(f"partitioning {path}: BIOS boot 1 MiB, EFI {ESP_MIB} MiB, system slots A and B "
        f"{system_mib} MiB each, data {total_mib - need_mib + MIN_DATA_MIB} MiB")
    run(["wipefs", "--all", "--force", path])
    names = dict(zip(("bios", "esp", "a", "b", "data"), PARTITIONS))
    table = (f"label: gpt\n"
             f"start=1MiB, size=1MiB, type={BIOS_BOOT}, name=\"{names['bios']}\"\n"
             f"size={ESP_MIB}MiB, type={ESP}, name=\"{names['esp']}\"\n"
             f"size={system_mib}MiB, type={LINUX}, name=\"{names['a']}\"\n"
             f"size={system_mib}MiB, type={LINUX}, name=\"{names['b']}\"\n"
             f"type={LINUX}, name=\"{names['data']}\"\n")
    run(["sfdisk", "--quiet", "--wipe", "always", path], input=table)
    run(["udevadm", "settle"], check=False)
    esp, slot_a, slot_b, data = (partition_path(path, n) for n in (2, 3, 4, 5))
    for part in (esp, slot_a, slot_b, data):
        wait_for(part)
    run(["mkfs.vfat", "-n", ESP_LABEL, esp])
    say(f"writing the system to slot A ({slot_a}) ...")
    run(["dd", f"if={image}", f"of={slot_a}", "bs=4M", "conv=fsync", "status=none"])
    run(["e2fsck", "-f", "-y", slot_a], check=False)
    run(["tune2fs", "-U", "random", slot_a])
    run(["resize2fs", slot_a])
    run(["wipefs", "--all", "--force", slot_b])
    run(["mkfs.ext4", "-q", "-F", "-L", "TUSK_DATA", data])
    partuuids = {slot: run(["blkid", "-s", "PARTUUID", "-o", "value", device]).stdout.strip()
                 for slot, device in zip(SLOTS, (slot_a, slot_b))}
    target = tempfile.mkdtemp(prefix="tusk-target-", dir="/run")
    mounted = []
    try:
        run(["mount", slot_a, target])
        mounted.append(target)
        boot = os.path.join(target, "boot")
        os.makedirs(boot, exist_ok=True)
        run(["cp", os.path.join(medium, "boot", "bzImage"), os.path.join(boot, "bzImage")])
        efi = os.path.join(target, "efi")
        os.makedirs(efi, exist_ok=True)
        run(["mount", esp, efi])
        mounted.append(efi)
        say("installing the boot loader (BIOS and UEFI) ...")
        grub = os.path.join(efi, "grub")
        run(["grub-install", "--target=i386-pc", f"--boot-directory={efi}", path])
        run(["grub-install", "--target=x86_64-efi", f"--efi-directory={efi}",
             f"--boot-directory={efi}", "--removable", "--no-nvram"])
        with open(os.path.join(grub, "grub.cfg"), "w", encoding="utf-8") as handle:
            handle.write(grub_cfg(partuuids))
        # slot A is the only one, and good; B is empty until an upgrade writes it
        env = os.path.join(grub, "grubenv")
        run(["grub-editenv", env, "create"])
        run(["grub-editenv", env, "set", "ORDER=A B", "A_OK=1", "A_TRY=0", "A_TRIAL=0",
             "B_OK=0", "B_TRY=0", "B_TRIAL=0"])
        data_dir = os.path.join(target, "mnt")
        run(["mount", data, data_dir])
        mounted.append(data_dir)
        if fresh:
            say("fresh install: the new box starts with a new configuration")
        else:
            carry_over(data_dir)
    finally:
        for point in reversed(mounted):
            run(["umount", point], check=False)
        os.rmdir(target)
    run(["sync"])


def grub_cfg(partuuids):
    """The ESP's grub.cfg: the A/B menu of /usr/lib/tusk/grub-ab.cfg (this system's),
    with the slots' partition UUIDs for the kernel's root=."""
    with open(GRUB_AB, encoding="utf-8") as handle:
        text = handle.read()
    return (text.replace("@A_PARTUUID@", partuuids["A"])
            .replace("@B_PARTUUID@", partuuids["B"])
            .replace("@KERNEL_ARGS@", KERNEL_ARGS))


GRUB_AB = "/usr/lib/tusk/grub-ab.cfg"


def wait_for(device, seconds=10):
    deadline = time.monotonic() + seconds
    while not os.path.exists(device):
        if time.monotonic() > deadline:
            raise InstallError(f"{device} did not appear after partitioning")
        run(["partx", "-u", device.rstrip("0123456789").rstrip("p")], check=False)
        time.sleep(0.2)


def carry_over(data_dir):
    """This session's /data onto the new data partition, with the database stopped."""
    if not os.path.isdir(os.path.join(DATA, "etc", "tusk")):
        say(f"nothing to carry over ({DATA} is empty)")
        return
    say("copying this session's configuration, policy revisions and database ...")
    active = [s for s in SERVICES
              if run(["systemctl", "is-active", "--quiet", s], check=False).returncode == 0]
    for service in active:
        run(["systemctl", "stop", service])
    try:
        run(["cp", "-a", f"{DATA}/.", data_dir])
        lost = os.path.join(data_dir, "lost+found")
        if not os.path.exists(lost):
            os.mkdir(lost, 0o700)
    finally:
        for service in reversed(active):
            run(["systemctl", "start", service], check=False)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="tusk-install", description=__doc__.splitlines()[0])
    parser.add_argument("--disk", help="the disk to install to (asked when not given)")
    parser.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    parser.add_argument("--fresh", action="store_true",
                        help="do not copy this session's configuration and data")
    parser.add_argument("--medium", help="a directory with boot/bzImage and tusk/rootfs.ext4 "
                        f"(default: the filesystem labelled {MEDIUM_LABEL})")
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        print("tusk-install: needs root", file=sys.stderr)
        return 1
    try:
        medium, device = find_medium(args.medium)
        disk = choose(args, device)
        confirm(disk, args)
        verify_medium(medium)
        install(disk, medium, args.fresh)
    except (InstallError, EOFError, KeyboardInterrupt) as error:
        message = str(error) or "cancelled, nothing was written"
        print(f"tusk-install: {message}", file=sys.stderr)
        return 1
    say(f"\nTusk is installed on {disk['path']}. Remove the installation medium and reboot.")
    return 0
