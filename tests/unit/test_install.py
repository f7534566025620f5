"""tusk-install's refusals (appliance/install.py): which disks it offers, from lsblk's
JSON tree as util-linux prints it, and the medium's SHA256SUMS. A disk with anything
mounted (or swapping) anywhere below it - a partition, LVM on RAID on a partition, a
partition of a loop device on a partition - is refused, naming what is mounted; so is a
medium that cannot prove its image is intact."""
import hashlib

import pytest

from appliance import install

GIB = 1024 ** 3


def node(name, kind, children=(), mounts=(None,), size=20 * GIB, path=None):
    """One lsblk -J -b -o NAME,KNAME,PATH,SIZE,TYPE,RO,MODEL,TRAN,MOUNTPOINTS entry."""
    entry = {"name": name, "kname": name,
             "path": path or f"/dev/{name}", "size": size, "type": kind, "ro": False,
             "model": "QEMU HARDDISK" if kind == "disk" else None,
             "tran": "sata" if kind == "disk" else None, "mountpoints": list(mounts)}
    if children:
        entry["children"] = list(children)
    return entry


def lvm_on_raid(member, mounted):
    """An md RAID1 on a partition, a volume group on it, a logical volume in that."""
    volume = {**node("dm-0", "lvm", mounts=mounted), "path": "/dev/mapper/vg-data",
              "name": "vg-data", "kname": "dm-0"}
    return node(member, "part", [node("md127", "raid1", [volume])])


def reasons(devices, swaps):
    return {disk["path"]: reason
            for disk, reason in install.candidates(devices, None, None, swaps)}


@pytest.fixture
def no_swap(tmp_path):
    path = tmp_path / "swaps"
    path.write_text("Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n")
    return str(path)


def test_lvm_on_raid_on_a_partition_mounted_refuses_both_members(no_swap):
    devices = [node("sda", "disk", [node("sda1", "part"), lvm_on_raid("sda2", ["/srv"])]),
               node("sdb", "disk", [lvm_on_raid("sdb1", ["/srv"])]),
               node("sdc", "disk")]
    found = reasons(devices, no_swap)
    assert found["/dev/sda"] == "it is in use (/dev/mapper/vg-data is mounted on /srv)"
    assert found["/dev/sdb"] == "it is in use (/dev/mapper/vg-data is mounted on /srv)"
    assert found["/dev/sdc"] is None


def test_a_partition_of_a_loop_device_on_a_partition_counts(no_swap):
    """A loop device over an image file on sdb1, partitioned, its partition mounted."""
    loop = node("loop0", "loop", [node("loop0p1", "part", mounts=["/mnt/image"])])
    devices = [node("sdb", "disk", [node("sdb1", "part", [loop])])]
    assert reasons(devices, no_swap)["/dev/sdb"] == \
        "it is in use (/dev/loop0p1 is mounted on /mnt/image)"


def test_swap_in_use_below_a_disk_counts_even_when_lsblk_does_not_say(tmp_path):
    """/proc/swaps names the kernel's device (dm-1), not the mapper path lsblk shows."""
    swaps = tmp_path / "swaps"
    swaps.write_text("Filename\tType\tSize\tUsed\tPriority\n"
                     "/dev/dm-1                               partition\t1048572\t0\t-2\n")
    volume = {**node("vg-swap", "lvm"), "kname": "dm-1", "path": "/dev/mapper/vg-swap"}
    devices = [node("sda", "disk", [node("sda1", "part", [volume])]), node("sdb", "disk")]
    found = reasons(devices, str(swaps))
    assert found["/dev/sda"] == "it is in use (/dev/mapper/vg-swap is swap in use)"
    assert found["/dev/sdb"] is None


def test_a_plain_disk_and_its_own_partitions(no_swap):
    devices = [node("sda", "disk", [node("sda1", "part", mounts=["/", "/snap"])]),
               node("sdb", "disk", [node("sdb1", "part")]),
               node("sdc", "disk", size=GIB)]
    found = reasons(devices, no_swap)
    assert found == {"/dev/sda": "it is in use (/dev/sda1 is mounted on /, /snap)",
                     "/dev/sdb": None, "/dev/sdc": "it is too small (at least 6 GiB)"}


def test_the_disks_holding_the_medium_and_the_root_are_found_at_any_depth(no_swap):
    volume = {**node("vg-root", "lvm"), "kname": "dm-0", "path": "/dev/mapper/vg-root"}
    devices = [node("sda", "disk", [node("sda1", "part", [volume])]),
               node("sdb", "disk", [node("sdb1", "part")]), node("sdc", "disk")]
    found = dict((d["path"], r) for d, r in install.candidates(
        devices, "/dev/sdb1", "/dev/mapper/vg-root", no_swap))
    assert found == {"/dev/sda": "the running system is on it",
                     "/dev/sdb": "it holds the installation medium this box booted from",
                     "/dev/sdc": None}


def test_lsblk_is_asked_for_the_tree_it_is_read_from():
    assert install.LSBLK_COLUMNS == "NAME,KNAME,PATH,SIZE,TYPE,RO,MODEL,TRAN,MOUNTPOINTS"


# -- the medium ------------------------------------------------------------------------

@pytest.fixture
def medium(tmp_path):
    (tmp_path / "boot").mkdir()
    (tmp_path / "boot" / "bzImage").write_bytes(b"kernel")
    (tmp_path / "tusk").mkdir()
    (tmp_path / "tusk" / "rootfs.ext4").write_bytes(b"root file system")
    return tmp_path


def test_a_medium_without_sha256sums_is_refused(medium):
    with pytest.raises(install.InstallError) as error:
        install.verify_medium(str(medium))
    assert str(error.value) == (
        f"the installation medium {medium} has no tusk/SHA256SUMS: its image cannot be "
        "checked, so nothing is installed (write the ISO again)")


def test_sha256sums_must_name_the_image(medium):
    (medium / "tusk" / "SHA256SUMS").write_text("")
    with pytest.raises(install.InstallError) as error:
        install.verify_medium(str(medium))
    assert "tusk/SHA256SUMS has no line for rootfs.ext4" in str(error.value)


def test_a_damaged_image_is_refused_and_an_intact_one_passes(medium):
    digest = hashlib.sha256(b"root file system").hexdigest()
    (medium / "tusk" / "SHA256SUMS").write_text(f"{digest}  rootfs.ext4\n")
    install.verify_medium(str(medium))
    (medium / "tusk" / "rootfs.ext4").write_bytes(b"root file systen")
    with pytest.raises(install.InstallError) as error:
        install.verify_medium(str(medium))
    assert "tusk/rootfs.ext4 does not match its SHA256SUMS line" in str(error.value)


def test_the_disk_question_takes_only_ascii_numbers(monkeypatch, no_swap, capsys):
    """A digit another script writes ("²", "٣") is a digit to str.isdigit() and no number to
    int(): the installer said why and asked again instead of stopping with a traceback."""
    disks = [node("sda", "disk"), node("sdb", "disk")]
    monkeypatch.setattr(install, "lsblk", lambda: disks)
    monkeypatch.setattr(install, "root_device", lambda: None)
    monkeypatch.setattr(install, "candidates", lambda devices, medium, root: [
        (disk, None) for disk in devices])
    answers = iter(["²", "٣", "99999999999", "2"])
    monkeypatch.setattr("builtins.input", lambda prompt="": next(answers))
    chosen = install.choose(type("Args", (), {"disk": None})(), None)
    assert chosen["path"] == "/dev/sdb"
    said = capsys.readouterr().out
    assert "'²' is not one of the numbers 1-2" in said and "'٣' is not one of" in said
