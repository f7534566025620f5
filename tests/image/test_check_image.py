"""The Buildroot external tree (buildroot-external/) and `make check-image`.

The image itself cannot be built here (Buildroot downloads its sources), so this tier
checks what can be checked without building: the tree's own consistency (paths, pins,
users, kernel fragments) always, and tools/check-image - Buildroot's Kconfig and
utils/check-package on our tree - when BUILDROOT names a Buildroot checkout.
"""
import base64
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

TOP = Path(__file__).resolve().parents[2]
TREE = TOP / "buildroot-external"
DEFCONFIG = TREE / "configs" / "tusk_x86_64_defconfig"
BOARD = TREE / "board" / "tusk"
CHECK_IMAGE = TOP / "tools" / "check-image"
CHECK_KERNEL_CONFIG = BOARD / "check-kernel-config.sh"


def release():
    """tools/buildroot-release: the pinned Buildroot tag and commit."""
    values = dict(re.findall(r"^(\w+)=(\S+)$", (TOP / "tools" / "buildroot-release").read_text(),
                             re.M))
    return values["BUILDROOT_TAG"], values["BUILDROOT_COMMIT"]


def defconfig_values():
    """{symbol: value} of the defconfig's SYM=value lines, strings unquoted."""
    values = {}
    for line in DEFCONFIG.read_text().splitlines():
        match = re.match(r"^(BR2_\w+)=(.*)$", line)
        if match:
            values[match[1]] = match[2].removeprefix('"').removesuffix('"')
    return values


def expand(path):
    return path.replace("$(BR2_EXTERNAL_TUSK_PATH)", str(TREE))


def users_table():
    """The users table's entries: {user: the nine makeusers fields}."""
    users = {}
    for line in (BOARD / "users.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            fields = line.split(None, 8)
            assert len(fields) >= 8, (f"users.txt: {line!r} has {len(fields)} fields, "
                                      "makeusers needs 8 or 9")
            users[fields[0]] = fields
    return users


# -- the tree, without Buildroot ------------------------------------------------------

def test_external_desc_names_the_tree_tusk():
    desc = dict(line.split(": ", 1)
                for line in (TREE / "external.desc").read_text().splitlines() if line)
    assert desc["name"] == "TUSK"
    assert desc["desc"]


def test_defconfig_paths_name_this_tree_and_exist():
    """Every path of the defconfig goes through $(BR2_EXTERNAL_TUSK_PATH) and exists;
    host paths (downloads, ccache) come from the environment, never the defconfig."""
    paths = []
    for symbol, value in defconfig_values().items():
        for word in value.split():
            if "/" in word:
                assert word.startswith("$(BR2_EXTERNAL_TUSK_PATH)/"), \
                    f"{symbol}: {word} is not under $(BR2_EXTERNAL_TUSK_PATH)"
                assert Path(expand(word)).exists(), f"{symbol}: {word} does not exist"
                paths.append(word)
    assert "$(BR2_EXTERNAL_TUSK_PATH)/../rootfs-overlay" in paths
    assert "$(BR2_EXTERNAL_TUSK_PATH)/../kernel-patches" in paths
    for host_setting in ("BR2_DL_DIR", "BR2_CCACHE_DIR", "BR2_HOST_DIR", "BR2_PRIMARY_SITE"):
        assert host_setting not in defconfig_values(), f"{host_setting} belongs to the environment"


def test_board_scripts_are_executable():
    for script in (BOARD / "post-build.sh", BOARD / "post-image.sh", CHECK_KERNEL_CONFIG,
                   CHECK_IMAGE, TOP / "tools" / "build-image"):
        assert os.access(script, os.X_OK), f"{script} is not executable"


def test_htmx_package_pins_what_package_lock_pins():
    """The image's htmx is the tarball webui/package-lock.json pins: same version, and
    the .hash file's sha512 is the lock file's integrity (npm's own check)."""
    lock = json.loads((TOP / "webui" / "package-lock.json").read_text())
    lock = lock["packages"]["node_modules/htmx.org"]
    mk = (TREE / "package" / "htmx" / "htmx.mk").read_text()
    assert re.search(r"^HTMX_VERSION = (\S+)$", mk, re.M)[1] == lock["version"]
    tarball = f"htmx.org-{lock['version']}.tgz"
    hash_file = (TREE / "package" / "htmx" / "htmx.hash").read_text()
    hashes = {(kind, name): digest
              for kind, digest, name in re.findall(r"^(sha\d+)\s+([0-9a-f]+)\s+(\S+)$",
                                                   hash_file, re.M)}
    algorithm, integrity = lock["integrity"].split("-", 1)
    assert algorithm == "sha512"
    assert hashes[("sha512", tarball)] == base64.b64decode(integrity).hex()
    assert len(hashes[("sha256", tarball)]) == 64
    assert ("sha256", "LICENSE") in hashes


def test_prometheus_client_package_pins_what_requirements_pin():
    """Buildroot 2026.02.3 has no python-prometheus-client: our tree's package builds the
    version webui/requirements.txt pins (what the tests and the VM appliance run)."""
    pins = dict(re.findall(r"^([A-Za-z0-9_.-]+)==(\S+)$",
                           (TOP / "webui" / "requirements.txt").read_text(), re.M))
    package = TREE / "package" / "python-prometheus-client"
    mk = (package / "python-prometheus-client.mk").read_text()
    version = re.search(r"^PYTHON_PROMETHEUS_CLIENT_VERSION = (\S+)$", mk, re.M)[1]
    assert version == pins["prometheus-client"]
    hash_file = (package / "python-prometheus-client.hash").read_text()
    assert re.search(rf"^sha256\s+[0-9a-f]{{64}}\s+prometheus_client-{re.escape(version)}"
                     r"\.tar\.gz$", hash_file, re.M)
    assert "BR2_PACKAGE_PYTHON_PROMETHEUS_CLIENT" in \
        (TREE / "package" / "tusk-webui" / "Config.in").read_text()


def test_users_table_has_the_unprivileged_web_user():
    users = users_table()
    name, uid, group, gid, password, home, shell = users["tusk"][:7]
    assert 0 < int(uid) < 1000 and 0 < int(gid) < 1000, "a fixed system id: /data keeps its owners"
    assert group == "tusk"
    assert password == "*" or password.startswith("!"), "the web user must not log in"
    assert shell in ("-", "/bin/false", "/usr/sbin/nologin")
    ids = [int(fields[1]) for fields in users.values()]
    assert len(ids) == len(set(ids)), "two users share a uid"


def test_every_unit_user_exists_in_the_image():
    """User=/Group= of the overlay's units name users the image creates."""
    users = users_table()
    units = sorted((TOP / "rootfs-overlay" / "usr" / "lib" / "systemd" / "system")
                   .glob("*.service"))
    wanted = {(unit.name, key, value) for unit in units
              for key, value in re.findall(r"^(User|Group)=(\S+)$", unit.read_text(), re.M)}
    assert ("tusk-web.service", "User", "tusk") in wanted
    for unit, key, value in wanted:
        known = users if key == "User" else {fields[2] for fields in users.values()}
        assert value == "root" or value in known, f"{unit}: {key}={value} is not in users.txt"


def test_kernel_fragments_are_both_merged_and_agree():
    fragments = defconfig_values()["BR2_LINUX_KERNEL_CONFIG_FRAGMENT_FILES"].split()
    assert [Path(expand(f)).name for f in fragments] == ["linux.fragment",
                                                         "linux-hardware.fragment"]
    seen = {}
    for fragment in fragments:
        for number, line in enumerate(Path(expand(fragment)).read_text().splitlines(), 1):
            if not line or line.startswith("#"):
                continue
            assert re.match(r"^CONFIG_\w+=(y|n|\d+|\".*\")$", line), \
                f"{fragment}:{number}: {line!r}"
            symbol, value = line.split("=", 1)
            assert seen.get(symbol, value) == value, f"{symbol} set to {seen[symbol]} and {value}"
            seen[symbol] = value
    assert seen["CONFIG_MODULES"] == "n", ("everything is built in: the hardware fragment "
                                           "must say =y")
    shared, hardware = (Path(expand(f)).read_text() for f in fragments)
    for driver in ("E1000E", "IGB", "IXGBE", "I40E", "ICE", "MLX5_CORE_EN", "BNXT", "R8169",
                   "BLK_DEV_NVME", "FB_EFI", "FRAMEBUFFER_CONSOLE"):
        assert f"\nCONFIG_{driver}=y\n" in hardware, driver
    # the installation medium's drivers: the test kernel reads the ISO from a CD drive
    # and a USB stick too, so they are in the fragment both kernels merge
    for driver in ("SATA_AHCI", "ATA_PIIX", "BLK_DEV_SR", "USB_STORAGE", "USB_XHCI_HCD"):
        assert f"\nCONFIG_{driver}=y\n" in shared, driver


def test_kernel_version_and_hashes_agree():
    """The kernel and the toolchain headers are the same 6.12.y, and both downloads have
    a hash (Buildroot 2026.02.3 has none on the path it looks at for 6.12.91)."""
    values = defconfig_values()
    version = values["BR2_LINUX_KERNEL_CUSTOM_VERSION_VALUE"]
    assert version.startswith("6.12.")
    assert values["BR2_KERNEL_HEADERS_6_12"] == "y"
    tarball = f"linux-{version}.tar.xz"
    kernel_hash = (TREE / "patches" / "linux" / "linux.hash").read_text()
    assert re.search(rf"^sha256\s+[0-9a-f]{{64}}\s+{re.escape(tarball)}$", kernel_hash, re.M)
    assert (TREE / "patches" / "linux-headers" / "linux-headers.hash").read_text() == kernel_hash
    assert values["BR2_DOWNLOAD_FORCE_CHECK_HASHES"] == "y"


def test_buildroot_pin_is_a_full_commit():
    tag, commit = release()
    assert re.fullmatch(r"\d{4}\.\d{2}\.\d+", tag)
    assert re.fullmatch(r"[0-9a-f]{40}", commit)


def fake_kernel(directory, config):
    """A kernel tree as the check reads it: .config, and a Kconfig declaring SLUB_TINY."""
    directory.mkdir()
    (directory / ".config").write_text(config)
    (directory / "Kconfig").write_text("config SLUB_TINY\n\tbool \"SLUB tiny\"\n"
                                       "\tdepends on EXPERT\n")
    return directory


def run_kernel_check(kernel, *fragments):
    return subprocess.run([CHECK_KERNEL_CONFIG, kernel, *fragments], capture_output=True, text=True)


def test_kernel_config_check_passes_when_every_line_survived(tmp_path):
    fragment = tmp_path / "a.fragment"
    fragment.write_text("# comment\nCONFIG_NF_TABLES=y\nCONFIG_NR_CPUS=8\nCONFIG_MODULES=n\n"
                        "CONFIG_SLUB_TINY=n\n")  # absent: EXPERT is off, so it is n
    kernel = fake_kernel(tmp_path / "k",
                         "CONFIG_NF_TABLES=y\nCONFIG_NR_CPUS=8\n# CONFIG_MODULES is not set\n")
    result = run_kernel_check(kernel, fragment)
    assert result.returncode == 0, result.stderr


def test_kernel_config_check_names_each_lost_line(tmp_path):
    """A changed value, a missing =y, and an =n symbol no Kconfig declares (a typo)."""
    fragment = tmp_path / "a.fragment"
    fragment.write_text("CONFIG_NF_TABLES=y\nCONFIG_NR_CPUS=8\nCONFIG_IP_NF_IPTABLEZ=n\n")
    kernel = fake_kernel(tmp_path / "k", "CONFIG_NR_CPUS=64\n")
    result = run_kernel_check(kernel, fragment)
    assert result.returncode == 1
    assert "a.fragment:1: fragment option lost: CONFIG_NF_TABLES=y (have: absent)" in result.stderr
    assert ("a.fragment:2: fragment option lost: CONFIG_NR_CPUS=8 "
            "(have: CONFIG_NR_CPUS=64)") in result.stderr
    assert "a.fragment:3: fragment option lost: CONFIG_IP_NF_IPTABLEZ=n" in result.stderr


def test_check_image_refuses_a_directory_that_is_not_buildroot(tmp_path):
    result = subprocess.run([CHECK_IMAGE, tmp_path], capture_output=True, text=True)
    assert result.returncode == 2
    assert "not a Buildroot checkout" in result.stderr


# -- with a Buildroot checkout: tools/check-image ---------------------------------------

@pytest.fixture(scope="module")
def buildroot():
    tag, commit = release()
    path = os.environ.get("BUILDROOT")
    if not path:
        pytest.skip(f"make check-image needs a Buildroot {tag} checkout: set BUILDROOT=dir "
                    f"(git clone --depth 1 --branch {tag} "
                    "https://gitlab.com/buildroot.org/buildroot.git, "
                    f"commit {commit[:10]}; see buildroot-external/README.md)")
    path = Path(path)
    makefile = path / "Makefile"
    assert makefile.is_file(), f"BUILDROOT={path} is not a Buildroot checkout"
    assert f"export BR2_VERSION := {tag}\n" in makefile.read_text(), \
        f"BUILDROOT={path} is not Buildroot {tag}"
    return path


def check_image(buildroot, tree=None):
    command = [CHECK_IMAGE, buildroot] + ([tree] if tree else [])
    return subprocess.run(command, capture_output=True, text=True, timeout=600)


def test_check_image_passes_on_our_tree(buildroot):
    result = check_image(buildroot)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "check-image: OK" in result.stdout
    assert "0 warnings generated" in result.stdout


def test_check_image_fails_on_a_broken_tree(buildroot, tmp_path):
    """A copy of the tree with the three kinds of fault check-image exists to catch:
    a defconfig line Kconfig drops silently, a Kconfig recursive dependency (make still
    exits 0) and a Config.in that breaks Buildroot's coding style."""
    tree = tmp_path / "buildroot-external"
    shutil.copytree(TREE, tree)
    defconfig = tree / "configs" / "tusk_x86_64_defconfig"
    defconfig.write_text(defconfig.read_text()
                         + "BR2_PACKAGE_PYTHON_DJANGO_HTMX=y\n"      # no such package
                         + "BR2_TARGET_ROOTFS_ISO9660_HYBRID=y\n"    # needs isolinux
                         + "# BR2_PACKAGE_SYSTEMD is not set\n")     # BR2_INIT_SYSTEMD selects it
    htmx = tree / "package" / "htmx" / "Config.in"
    htmx.write_text(htmx.read_text().replace('\tbool "htmx"', '    bool "htmx"'))
    webui = tree / "package" / "tusk-webui" / "Config.in"
    webui.write_text(webui.read_text().replace(  # psycopg2, which tusk-webui selects, selects it
        "\tselect BR2_PACKAGE_PYTHON3\n",
        "\tdepends on BR2_PACKAGE_POSTGRESQL\n\tselect BR2_PACKAGE_PYTHON3\n"))
    result = check_image(buildroot, tree)
    output = result.stdout
    assert result.returncode == 1, output + result.stderr
    assert "recursive dependency detected" in output
    lines = defconfig.read_text().splitlines()
    for line in ("BR2_PACKAGE_PYTHON_DJANGO_HTMX=y", "BR2_TARGET_ROOTFS_ISO9660_HYBRID=y"):
        assert f"tusk_x86_64_defconfig:{lines.index(line) + 1}: dropped: {line}" in output
    assert ("dropped: # BR2_PACKAGE_SYSTEMD is not set "
            "(.config has: BR2_PACKAGE_SYSTEMD=y)") in output
    assert "package/htmx/Config.in:2: should be indented with one tab" in output


def test_kernel_is_the_release_of_buildroots_6_12_headers(buildroot):
    """One tarball, one hash: the kernel we pin is the 6.12.y Buildroot's headers use."""
    host = (buildroot / "package" / "linux-headers" / "Config.in.host").read_text()
    headers = re.search(r'^\tdefault "([\d.]+)"\s+if BR2_KERNEL_HEADERS_6_12$', host, re.M)[1]
    assert defconfig_values()["BR2_LINUX_KERNEL_CUSTOM_VERSION_VALUE"] == headers


def test_users_table_gives_fixed_ids_with_buildroots_mkusers(buildroot, tmp_path):
    """Run Buildroot's mkusers on what the image feeds it - the postgresql package's user
    (an automatic id) and then our table - and read the ids from the written passwd."""
    mk = (buildroot / "package" / "postgresql" / "postgresql.mk").read_text()
    package_users = re.search(r"^define POSTGRESQL_USERS\n(.*?)\nendef", mk, re.M | re.S)[1]
    table = tmp_path / "users"
    table.write_text(package_users + "\n" + (BOARD / "users.txt").read_text())
    target = tmp_path / "target"
    (target / "etc").mkdir(parents=True)
    for name in ("passwd", "group", "shadow"):
        shutil.copy(buildroot / "system" / "skeleton" / "etc" / name, target / "etc" / name)
    config = tmp_path / "config"
    config.write_text('BR2_TARGET_GENERIC_PASSWD_METHOD="sha-256"\n')
    result = subprocess.run(["bash", buildroot / "support" / "scripts" / "mkusers", table, target],
                            capture_output=True, text=True,
                            env={**os.environ, "BR2_CONFIG": str(config)})
    assert result.returncode == 0, result.stderr
    passwd = {fields[0]: fields for fields in
              (line.split(":") for line in (target / "etc" / "passwd").read_text().splitlines())}
    users = users_table()
    for name in ("tusk", "postgres"):
        assert passwd[name][2] == users[name][1], f"{name} got uid {passwd[name][2]}"
    assert passwd["tusk"][6] == "/bin/false"
