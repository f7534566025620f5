"""The appliance's runtime under QEMU, as an operator meets it.

Tusk's kernel boots a root filesystem laid out like the image (tools/build-appliance-
rootfs: Debian trixie's programs + webui/ + rootfs-overlay/, systemd, the same unit
files) with a management NIC, two traffic NICs and three disks: the live system (vda),
the installation medium (vdb, an ISO9660 labelled TUSK_MEDIUM with the kernel and
the system image, as the ISO carries them) and an empty 6 GiB disk (vdc).

1. live boot: every Tusk unit comes up; the console menu is on the serial console;
   the dashboard answers over HTTPS on the management address with the certificate
   made at first boot; nothing is forwarded yet (fail-closed ruleset).
2. a policy imported, applied and confirmed over HTTPS is live in nft.
3. tusk-install refuses the live system's disk and the medium, then installs to vdc
   from the console menu.
4. the VM boots from vdc alone (SeaBIOS, then UEFI/OVMF): the same policy is loaded
   before the interfaces come up, the admin's password and the revision history are
   the ones of the live session.
The steps share one sequence of boots; a failed step fails the ones after it.
"""
import hashlib
import re
import subprocess
from pathlib import Path

import pytest

import vm
from appliance_vm import Appliance, hidden, make_medium

ROOT = vm.ROOT
ARTIFACTS = ROOT / "tests" / "artifacts" / "vm"
BOOT_SECONDS = 900          # first boot under TCG: systemd, initdb, migrations, gunicorn
PASSWORD = "elephant flows need room"
OVMF = {"code": "/usr/share/OVMF/OVMF_CODE_4M.fd", "vars": "/usr/share/OVMF/OVMF_VARS_4M.fd"}
UNITS = ("tusk-data", "tusk-net", "tusk-firewall", "tusk-tune", "tusk-db", "tusk-setup",
         "tusk-agent", "tusk-web", "tusk-nginx", "tusk-console@ttyS0", "systemd-networkd")
POLICY = """\
version: 1
settings:
  confirm_timeout: 600
zones:
  - name: inside
    interfaces: [ens4]
  - name: outside
    interfaces: [ens5]
services:
  - name: replication
    protocol: tcp
    ports: [5201]
classes:
  - name: bulk-copy
    comment: the appliance test's class
    from: inside
    to: outside
    services: [replication]
    action: accept
    seqrand: both
"""
MENU = r"Enter an option"
SHELL_OPTION = "8"


class Steps:
    def __init__(self):
        self.failed = None
        self.vm = None
        self.facts = {}


@pytest.fixture(scope="module")
def steps():
    state = Steps()
    yield state
    if state.vm:
        state.vm.kill()


@pytest.fixture
def step(steps, request):
    if steps.failed:
        pytest.fail(f"an earlier step failed ({steps.failed})", pytrace=False)
    failures = request.session.testsfailed
    yield steps
    # the call's report is logged before fixtures are torn down
    if request.session.testsfailed > failures:
        steps.failed = request.node.name


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    for tool in ("xorriso", "qemu-img"):
        if subprocess.run(["which", tool], capture_output=True).returncode:
            pytest.fail(f"missing {tool} (make vm-deps installs it)", pytrace=False)
    directory = tmp_path_factory.mktemp("appliance")
    kernel = vm.kernel()
    image = directory / "rootfs.ext4"
    build = subprocess.run([ROOT / "tools" / "build-appliance-rootfs", "image", image],
                           capture_output=True, text=True)
    if build.returncode:
        pytest.fail(f"tools/build-appliance-rootfs failed:\n{build.stderr[-4000:]}",
                    pytrace=False)
    live = directory / "live.qcow2"
    subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", "-F", "raw", "-b", image, live],
                   check=True)
    medium = make_medium(directory / "medium.iso", kernel, image)
    target = directory / "target.img"
    subprocess.run(["qemu-img", "create", "-q", "-f", "raw", target, "6G"], check=True)
    return {"dir": directory, "kernel": kernel, "live": live, "medium": medium,
            "target": target}


def menu(appliance, timeout=BOOT_SECONDS):
    return appliance.expect(MENU, timeout)


def open_shell(appliance):
    """From the menu's prompt (where every step leaves the console) into its shell."""
    appliance.send(SHELL_OPTION + "\n")
    appliance.expect(r"[#$] $|[#$] \S*$", 60)
    appliance.send("export PS1='# ' TERM=dumb; stty -echo\n")
    rc, _ = appliance.shell("true")
    assert rc == 0


def close_shell(appliance):
    appliance.send("exit\n")
    menu(appliance, 60)


def ok(appliance, command, timeout=120):
    rc, output = appliance.shell(command, timeout)
    assert rc == 0, f"`{command}` exited {rc} in the VM:\n{output}"
    return output


def log_in(appliance, password):
    client = appliance.wait_https(BOOT_SECONDS)
    status, body = client.login("admin", password)
    assert status == 200 and "Log out" in body, \
        f"login as admin failed (HTTP {status})"
    return client


# -- 1. live boot ---------------------------------------------------------------------

def test_live_boot_brings_every_service_up(step, work):
    step.vm = Appliance("live", [(work["live"], "qcow2", False), (work["medium"], "raw", True),
                                 (work["target"], "raw", False)], ARTIFACTS,
                        kernel=work["kernel"])
    menu(step.vm)
    client = step.vm.wait_https(BOOT_SECONDS)
    assert client
    open_shell(step.vm)
    for unit in UNITS:
        rc, out = step.vm.shell(f"systemctl is-active {unit}")
        assert rc == 0, f"{unit} is not active: {out.strip()}\n" + \
            ok(step.vm, f"systemctl status --no-pager -l {unit} | tail -20")
    # UTF8 cluster on /data, in RAM (live)
    assert "tmpfs" in ok(step.vm, "findmnt -n -o FSTYPE /data")
    encoding = ok(step.vm, "runuser -u postgres -- psql -h /run/postgresql -tAc "
                  "\"select pg_encoding_to_char(encoding) from pg_database where datname='tusk'\"")
    assert encoding.strip().endswith("UTF8")
    # no policy confirmed yet: the fail-closed ruleset; the host table guards the box
    ruleset = ok(step.vm, "nft list ruleset")
    assert "fail closed" in ruleset and "policy drop" in ruleset
    assert 'iifname "ens3" tcp dport { 80, 443 } accept' in ruleset
    # forwarding went on only once a forward ruleset (here the fail-closed one) loaded
    assert ok(step.vm, "sysctl -n net.ipv4.ip_forward").strip() == "1"
    # nginx's master is root, its workers tusk-nginx: no database role, no web files
    nginx = ok(step.vm, "id -u tusk-nginx").strip()
    assert set(ok(step.vm, "ps -o uid= -C nginx").split()) == {"0", nginx}
    step.facts["initial"] = ok(step.vm, "cat /etc/tusk/initial-admin").split()[1]
    close_shell(step.vm)


def test_dashboard_answers_over_https_with_the_first_boot_certificate(step):
    der, version = step.vm.certificate()
    assert version in ("TLSv1.2", "TLSv1.3")
    open_shell(step.vm)
    on_box = ok(step.vm, "openssl x509 -in /data/tls/tusk.crt -outform DER | sha256sum")
    text = ok(step.vm, "openssl x509 -in /data/tls/tusk.crt -noout -subject -issuer")
    close_shell(step.vm)
    assert hashlib.sha256(der).hexdigest() == on_box.split()[0], \
        "nginx serves another certificate than the one first boot made"
    subject = re.search(r"subject=(.*)", text).group(1)
    issuer = re.search(r"issuer=(.*)", text).group(1)
    assert subject == issuer and "Tusk" in subject       # self-signed
    # the one-time password works once and must be changed
    client = step.vm.wait_https(60)
    status, body = client.login("admin", step.facts["initial"])
    assert status == 200 and "Choose your own password" in body, body[-2000:]
    status, body = client.post("/accounts/password/", {
        "old_password": step.facts["initial"], "new_password1": PASSWORD,
        "new_password2": PASSWORD})
    assert status == 200 and "Password changed" in body, body[-2000:]


# -- 2. a policy from the web UI --------------------------------------------------------

def test_policy_applied_over_https_is_live_in_nft(step):
    client = log_in(step.vm, PASSWORD)
    client.get("/policy/import/")
    status, body = client.post("/policy/import/", {"text": POLICY})
    assert status == 200 and "Imported" in body, body[-2000:]
    status, body = client.get("/policy/apply/")
    version = hidden(body, "version")
    status, body = client.post("/policy/apply/", {"version": version, "timeout": "600"})
    assert status == 200, body[-2000:]
    open_shell(step.vm)
    ok(step.vm, "for i in $(seq 300); do tusk policy status | grep -q 'pending revision: 1' "
                "&& break; sleep 1; done; tusk policy status | grep 'pending revision: 1'", 330)
    close_shell(step.vm)
    status, body = client.post("/policy/confirm/", {})
    assert status == 200, body[-2000:]
    open_shell(step.vm)
    ok(step.vm, "for i in $(seq 300); do tusk policy status | grep -q 'confirmed revision: 1' "
                "&& break; sleep 1; done; tusk policy status", 330)
    table = ok(step.vm, "nft list table inet tusk")
    assert 'tusk: classes[0] bulk-copy' in table and 'ct helper set "seqrand-both"' in table \
        and 'iifname @zone_inside oifname @zone_outside tcp dport 5201' in table \
        and re.search(r'set zone_inside \{[^}]*elements = \{ "ens4" \}', table)
    close_shell(step.vm)


# -- 3. install --------------------------------------------------------------------------

def test_install_refuses_the_boot_disks_then_installs(step):
    open_shell(step.vm)
    for disk, reason in (("/dev/vda", "running system"), ("/dev/vdb", "installation medium")):
        rc, out = step.vm.shell(f"tusk-install --disk {disk} --yes")
        assert rc == 1 and reason in out, out
    close_shell(step.vm)
    step.vm.send("5\n")                                   # Install to disk
    step.vm.expect(r"3\) /dev/vdc", 120)
    step.vm.expect(r"disk number", 30)
    step.vm.send("3\n")
    step.vm.expect(r"Type the disk's name \(vdc\)", 30)
    step.vm.send("vdc\n")
    step.vm.expect(r"Tusk is installed on /dev/vdc", 900)
    menu(step.vm, 120)
    step.vm.send("7\n")                                   # Power off
    step.vm.expect(r"\[y/N\]", 30)
    step.vm.send("y\n")
    step.vm.wait_exit(300)
    step.vm.kill()
    step.vm = None


# -- 4. the installed system -------------------------------------------------------------

def installed_boot(step, work, name, firmware=None):
    step.vm = Appliance(name, [(work["target"], "raw", False)], ARTIFACTS, firmware=firmware)
    menu(step.vm)
    client = log_in(step.vm, PASSWORD)          # the live session's password: data kept
    open_shell(step.vm)
    assert "ext4" in ok(step.vm, "findmnt -n -o FSTYPE /data")
    assert ok(step.vm, "findmnt -n -o SOURCE /").strip().startswith("/dev/vda")
    # booted by the firmware we meant: the kernel sees EFI only when GRUB came from the ESP
    efi, _ = step.vm.shell("test -d /sys/firmware/efi")
    assert (efi == 0) == bool(firmware), f"/sys/firmware/efi {'missing' if efi else 'present'}"
    status = ok(step.vm, "tusk policy status")
    assert "confirmed revision: 1" in status and "pending" not in status
    table = ok(step.vm, "nft list table inet tusk")
    assert 'tusk: classes[0] bulk-copy' in table
    journal = ok(step.vm, "journalctl -b -u tusk-firewall --no-pager -o cat")
    assert "policy revision 1 loaded" in journal, journal
    # loaded before any interface was up
    order = ok(step.vm, "systemctl show -p ActiveEnterTimestampMonotonic tusk-firewall "
                        "systemd-networkd")
    firewall, networkd = (int(v) for v in re.findall(r"=(\d+)", order))
    assert firewall < networkd
    close_shell(step.vm)
    status, body = client.get("/policy/")        # the draft, kept in the database
    assert status == 200 and "bulk-copy" in body, body[-2000:]
    return client


def test_installed_system_boots_from_disk_with_policy_and_data(step, work):
    installed_boot(step, work, "installed-bios")
    step.vm.send("7\n")
    step.vm.expect(r"\[y/N\]", 30)
    step.vm.send("y\n")
    step.vm.wait_exit(300)
    step.vm.kill()
    step.vm = None


def test_installed_system_boots_under_uefi(step, work):
    for path in OVMF.values():
        if not Path(path).exists():
            pytest.fail(f"missing {path} (Debian package ovmf; make vm-deps)", pytrace=False)
    installed_boot(step, work, "installed-uefi", firmware=OVMF)
