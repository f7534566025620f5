"""The console menu as an operator meets it: tusk-console on a pseudo-terminal (its
controlling terminal, so Ctrl-C and Ctrl-D work as on tty1), against a --root tree with
fake NICs in /sys. Tusk's own programs run for real (tusk-net apply writes the
systemd-networkd files); the host's (systemctl, ip, manage.py, tusk-install) are one
recording script named by TUSK_COMMANDS, and the shell is the real /bin/sh."""
import os
import pty
import select
import signal
import subprocess
import sys
import time

import pytest
from appliancetree import TUSK_CONSOLE, Appliance, Nic, ip_json
from kit import wait_until

from appliance import network

PATH = "/etc/tusk/network.toml"
PROMPT = "Enter an option: "
TIMEOUT = 20


class Terminal:
    """A program on a pseudo-terminal: what it wrote, what is typed."""

    def __init__(self, argv, env, sigint=signal.SIG_DFL):
        self.pid, self.fd = pty.fork()
        if self.pid == 0:
            try:
                signal.signal(signal.SIGINT, sigint)   # as the program's starter left it
                os.execve(argv[0], argv, env)
            finally:
                os._exit(127)
        self.output = ""
        self.mark = 0
        self.status = None

    def _read(self, deadline):
        ready, _, _ = select.select([self.fd], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            return None
        try:
            data = os.read(self.fd, 65536)
        except OSError:        # EIO: the program has ended
            data = b""
        self.output += data.decode("utf-8", "replace").replace("\r\n", "\n")
        return data

    def expect(self, text, timeout=TIMEOUT):
        """Waits for text; returns what came before it since the last expect."""
        deadline = time.monotonic() + timeout
        while text not in self.output[self.mark:]:
            data = self._read(deadline)
            if not data:
                raise AssertionError(f"{'ended' if data == b'' else 'timed out'} waiting for "
                                     f"{text!r}; after the last match:\n"
                                     f"{self.output[self.mark:]}")
        start = self.output.index(text, self.mark)
        before, self.mark = self.output[self.mark:start], start + len(text)
        return before

    def type(self, line):
        os.write(self.fd, line.encode() + b"\r")

    def press(self, key):
        os.write(self.fd, key)

    def wait(self, timeout=TIMEOUT):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self._read(min(deadline, time.monotonic() + 0.1))
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.status = os.waitstatus_to_exitcode(status)
                return self.status
        raise AssertionError(f"still running; output:\n{self.output[self.mark:]}")

    def close(self):
        if self.status is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
                os.waitpid(self.pid, 0)
            except ProcessLookupError:
                pass
        os.close(self.fd)


def runs_below(pid, command):
    """Whether a descendant of pid runs command (its whole command line)."""
    for found in subprocess.run(["pgrep", "-x", "-f", command], capture_output=True,
                                text=True).stdout.split():
        ancestor = int(found)
        try:
            while ancestor > 1:
                with open(f"/proc/{ancestor}/stat") as stat:   # field 4: the parent's pid
                    ancestor = int(stat.read().rsplit(")", 1)[1].split()[1])
                if ancestor == pid:
                    return True
        except FileNotFoundError:      # it ended meanwhile
            continue
    return False


@pytest.fixture
def box(tmp_path):
    box = Appliance(tmp_path / "root", Nic("enp0s2", mac="52:54:00:00:00:02"),
                    Nic("enp0s3", mac="52:54:00:00:00:03"),
                    Nic("enp0s10", mac="52:54:00:00:00:0a", carrier="0", driver="e1000e"),
                    Nic("veth0", device=False))
    box.behave({"systemctl is-active": {"rc": 3},
                "ip": {"stdout": ip_json(("inet", "192.168.1.5", 24, "global"),
                                         ("inet6", "fe80::1", 64, "link"))}})
    box.table["shell"] = ["/bin/sh"]
    return box


@pytest.fixture
def console(box):
    terminals = []

    def start(*args, sigint=signal.SIG_DFL, **env):
        terminal = Terminal([sys.executable, TUSK_CONSOLE, "--root", box.root, *args],
                            box.env(**env), sigint)
        terminals.append(terminal)
        terminal.expect(PROMPT)
        return terminal
    yield start
    for terminal in terminals:
        terminal.close()


def test_header_and_menu_of_a_live_box(console):
    terminal = console()
    header = terminal.output.strip().split("\n\n")
    assert header == [
        "Tusk dev — management: enp0s2 192.168.1.5 — dashboard: https://192.168.1.5/\n"
        "LIVE (not installed): data is lost at power-off; option 5 installs Tusk to a disk",
        " 1) Assign interfaces\n 2) Set management address\n 3) Reset admin password\n"
        " 4) Show dashboard URL\n 5) Install to disk\n 6) Reboot\n 7) Power off\n 8) Shell\n"
        " 9) Unlock admin login\n10) Console password",
        PROMPT.strip()]


def test_an_installed_box_offers_no_install(box, console):
    box.write("/proc/mounts", "/dev/sda4 /data ext4 rw 0 0\n")
    box.write("/usr/lib/tusk/version", "1.4.0\n")
    box.behave({"ip": {"stdout": ip_json()}})
    terminal = console()
    assert terminal.output.startswith(
        "\nTusk 1.4.0 — management: enp0s2 (no address yet) — dashboard: (no address yet)\n\n"
        " 1) Assign interfaces\n 2) Set management address\n 3) Reset admin password\n"
        " 4) Show dashboard URL\n 6) Reboot\n")
    terminal.type("5")
    assert terminal.expect(PROMPT).startswith(
        "5\n\n'5' is not an option: Tusk already runs from a disk (install to disk is offered "
        "on the live system only)\n")
    assert box.commands() == [("ip", "-j", "addr", "show", "dev", "enp0s2")] * 2
    assert "\n11) System slots\n" in terminal.output


def test_system_slots_boot_the_other_slot_once_on_the_operators_word(box, console):
    box.write("/proc/mounts", "/dev/vda5 /data ext4 rw 0 0\n")
    box.behave({"ip": {"stdout": ip_json()},
                "tusk-boot slots": {"stdout": "slot A: release 1.4.0 - running, good\n"}})
    terminal = console()
    terminal.type("11")
    terminal.expect("Boot the other slot once, now? [y/N]: ")
    terminal.type("n")
    assert terminal.expect(PROMPT).startswith("n\nNothing changed.\n")
    terminal.type("11")
    terminal.expect("Boot the other slot once, now? [y/N]: ")
    terminal.type("y")
    terminal.expect(PROMPT)
    assert [c for c in box.commands() if c[0] != "ip"] == [
        ("tusk-boot", "slots"), ("tusk-boot", "slots"), ("tusk-boot", "slots", "--once"),
        ("systemctl", "reboot")]


def test_system_slots_ask_nothing_when_the_slots_cannot_be_read(box, console):
    box.write("/proc/mounts", "/dev/vda5 /data ext4 rw 0 0\n")
    box.behave({"ip": {"stdout": ip_json()},
                "tusk-boot slots": {"rc": 1, "stdout": "no slots\n"}})
    terminal = console()
    terminal.type("11")
    assert "tusk-boot exited with status 1" in terminal.expect(PROMPT)
    assert [c for c in box.commands() if c[0] != "ip"] == [("tusk-boot", "slots")]


def test_a_box_without_data_says_so(box, console):
    box.write("/proc/mounts", "/dev/root / ext4 rw 0 0\n")
    box.behave({"ip": {"rc": 1, "stderr": 'Device "enp0s2" does not exist.\n'}})
    terminal = console()
    assert terminal.output.startswith(
        "\nTusk dev — management: addresses unknown: ip -j addr show dev enp0s2 failed "
        "(exit 1): Device \"enp0s2\" does not exist.\n"
        "WARNING: /data is not mounted: settings are not kept (see `systemctl status "
        "tusk-data`)\n\n 1) Assign interfaces\n")
    assert " 5) Install to disk" not in terminal.output


def test_invalid_choices_name_what_was_wrong(console):
    terminal = console()
    for typed in ("13", "reboot", "0"):
        terminal.type(typed)
        assert terminal.expect(PROMPT).startswith(
            f"{typed}\n\n{typed!r} is not an option: enter a number from 1 to 12\n")
    terminal.type("11")
    assert terminal.expect(PROMPT).startswith(
        "11\n\n'11' is not an option on the live system: it has no system slots (install to "
        "disk first)\n")


def test_assign_interfaces_writes_network_toml_and_applies_it(box, console):
    terminal = console()
    terminal.type("1")
    listing = terminal.expect("Management interface (name or number) [enp0s2]: ")
    assert listing == (
        "1\n\nEthernet interfaces:\n"
        " 1) enp0s2           52:54:00:00:00:02  link up       virtio_net\n"
        " 2) enp0s3           52:54:00:00:00:03  link up       virtio_net\n"
        " 3) enp0s10          52:54:00:00:00:0a  link down     e1000e\n\n")
    terminal.type("2")
    terminal.expect("Traffic interfaces [none]: ")
    terminal.type("enp0s2, 3=10.1.0.1/24")
    terminal.expect("The new configuration:\n")
    assert terminal.expect("Write and apply it now? [y/N]: ") == (
        "  management  enp0s3           DHCP\n"
        "  traffic     enp0s2           (link up, no address)\n"
        "  traffic     enp0s10          10.1.0.1/24\n"
        "  system      host tusk, DNS none, NTP none, time zone UTC\n"
        "(a dashboard session on an interface that changes is cut off; a change the "
        "dashboard left pending is dropped)\n")
    terminal.type("y")
    applied = terminal.expect("Applied.\n")
    assert applied.startswith(f"y\nWritten: {box.path(PATH)}\n")
    for name in ("enp0s3", "enp0s2", "enp0s10"):
        assert f"wrote /run/systemd/network/10-tusk-{name}.network\n" in applied
    assert "systemd-networkd is not running: it reads these files when it starts\n" in applied
    config = network.load(box.path(PATH))
    assert [(p.name, p.role, p.addresses, p.dhcp) for p in config.interfaces] == [
        ("enp0s3", "management", (), True), ("enp0s2", "traffic", (), False),
        ("enp0s10", "traffic", ("10.1.0.1/24",), False)]
    files = box.network_files()
    assert sorted(files) == ["10-tusk-enp0s10.network", "10-tusk-enp0s2.network",
                             "10-tusk-enp0s3.network"]
    assert "[Network]\nDHCP=ipv4\n" in files["10-tusk-enp0s3.network"]
    assert "ConfigureWithoutCarrier=yes\n" in files["10-tusk-enp0s10.network"]
    assert "Address=10.1.0.1/24\n" in files["10-tusk-enp0s10.network"]
    # the console's change is confirmed at once: it is the box's confirmed revision
    assert box.tusk_net("status").stdout == "confirmed revision: 1\n"
    # the header follows the new management interface
    assert terminal.expect(PROMPT).startswith(
        "\nTusk dev — management: enp0s3 192.168.1.5")
    assert ("ip", "-j", "addr", "show", "dev", "enp0s3") in box.commands()
    # and the next assignment starts from what is written
    terminal.type("1")
    terminal.expect("Management interface (name or number) [enp0s3]: ")
    terminal.type("")
    terminal.expect("Traffic interfaces [enp0s2, enp0s10=10.1.0.1/24]: ")
    terminal.type("")
    terminal.expect("[y/N]: ")
    terminal.type("n")
    assert terminal.expect(PROMPT).startswith("n\nNothing changed.\n")


BAD_ASSIGNMENTS = [
    ("eth7", None, "Management interface 'eth7': not one of the interfaces found (enp0s2, "
                   "enp0s3, enp0s10) or their numbers 1-3"),
    ("4", None, "Management interface '4': not one of the interfaces found (enp0s2, enp0s3, "
                "enp0s10) or their numbers 1-3"),
    ("²", None, "Management interface '²': not one of the interfaces found (enp0s2, enp0s3, "
                "enp0s10) or their numbers 1-3"),   # "²".isdigit(), and int() refuses it
    ("", "veth0", "Traffic interface 'veth0': not one of the interfaces found (enp0s2, enp0s3, "
                  "enp0s10) or their numbers 1-3"),
    ("", "1", "Traffic interface enp0s2: it is the management interface; one interface cannot "
              "do both"),
    ("", "enp0s3,2", "Traffic interface enp0s3: listed twice"),
    ("", "enp0s3,,enp0s10", "Traffic interfaces 'enp0s3,,enp0s10': an empty entry between "
                            "commas"),
    ("", "enp0s3=10.1.0.0/24", "Address for enp0s3 '10.1.0.0/24': '10.1.0.0/24' is the "
                               "network address of 10.1.0.0/24; give the interface's own "
                               "address, e.g. 10.1.0.1/24"),
    ("", "enp0s3=dhcp", "Address for enp0s3 'dhcp': DHCP is only for the management "
                        "interface; give an address/prefix, or none"),
]


@pytest.mark.parametrize("management, traffic, message", BAD_ASSIGNMENTS,
                         ids=[f"{m or '-'}:{t or '-'}" for m, t, _ in BAD_ASSIGNMENTS])
def test_bad_assignments_are_named_and_nothing_is_written(box, console, management, traffic,
                                                          message):
    terminal = console()
    terminal.type("1")
    terminal.expect("Management interface (name or number) [enp0s2]: ")
    terminal.type(management)
    if traffic is not None:
        terminal.expect("Traffic interfaces [none]: ")
        terminal.type(traffic)
    before = terminal.expect(PROMPT)
    assert f"\n\n{message}\n\n" in before
    assert not os.path.exists(box.path(PATH))
    assert box.network_files() == {}


def test_overlapping_subnets_are_refused_with_the_file_checks(box, console):
    box.write(PATH, '[management]\ninterface = "enp0s2"\naddress = "10.0.0.2/16"\n')
    terminal = console()
    terminal.type("1")
    terminal.expect("[enp0s2]: ")
    terminal.type("")
    terminal.expect("Traffic interfaces [none]: ")
    terminal.type("enp0s3=10.0.9.1/24")
    assert "\n\nThat configuration is not valid:\n" \
           f"  {box.path(PATH)}: interfaces[1].addresses[0]: 10.0.9.1/24 overlaps 10.0.0.2/16 " \
           "of enp0s2 (interfaces[0].addresses[0]): a subnet belongs to one interface\n" \
        in terminal.expect(PROMPT)


def test_set_a_static_management_address_then_dhcp_again(box, console):
    terminal = console()
    terminal.type("2")
    assert terminal.expect("[dhcp]: ") == (
        "2\n\nManagement interface enp0s2: DHCP\n"
        "Address: dhcp, or address/prefix such as 192.168.1.1/24 ")
    terminal.type("192.168.7.2/24")
    terminal.expect("Default gateway (none for none) [none]: ")
    terminal.type("192.168.7.1")
    terminal.expect("DNS servers, comma-separated (none for none) [none]: ")
    terminal.type("192.168.7.53, 2001:db8::53")
    terminal.expect("[y/N]: ")
    terminal.type("yes")
    terminal.expect("Applied.\n")
    config = network.load(box.path(PATH))
    assert (config.management.addresses, config.management.dhcp, config.routes,
            config.system.dns) == (("192.168.7.2/24",), False,
                                   (network.Route("default", "192.168.7.1", 0, "enp0s2"),),
                                   ("192.168.7.53", "2001:db8::53"))
    mgmt_file = box.network_files()["10-tusk-enp0s2.network"]
    assert "[Network]\nDHCP=no\nAddress=192.168.7.2/24\n" in mgmt_file
    assert "[Route]\nDestination=0.0.0.0/0\nGateway=192.168.7.1\n" in mgmt_file
    assert "DNS=192.168.7.53 2001:db8::53\n" in \
        box.read("/run/systemd/resolved.conf.d/50-tusk.conf")
    terminal.expect(PROMPT)
    # the current values are the defaults; none clears one
    terminal.type("2")
    terminal.expect("[192.168.7.2/24]: ")
    terminal.type("")
    terminal.expect("[192.168.7.1]: ")
    terminal.type("none")
    terminal.expect("[192.168.7.53, 2001:db8::53]: ")
    terminal.type("")
    terminal.expect("[y/N]: ")
    terminal.type("y")
    terminal.expect("Applied.\n")
    config = network.load(box.path(PATH))
    assert (config.management.addresses, config.routes, config.system.dns) == (
        ("192.168.7.2/24",), (), ("192.168.7.53", "2001:db8::53"))
    terminal.expect(PROMPT)
    terminal.type("2")
    terminal.expect("[192.168.7.2/24]: ")
    terminal.type("dhcp")
    terminal.expect("[y/N]: ")
    terminal.type("y")
    terminal.expect("Applied.\n")
    config = network.load(box.path(PATH))
    assert (config.management.addresses, config.management.dhcp) == ((), True)
    assert "[Network]\nDHCP=ipv4\n" in box.network_files()["10-tusk-enp0s2.network"]


BAD_ADDRESSES = [
    (["10.0.0.0/24"], "Address '10.0.0.0/24': '10.0.0.0/24' is the network address of "
                      "10.0.0.0/24; give the interface's own address, e.g. 10.0.0.1/24"),
    (["192.168.1.1"], "Address '192.168.1.1': '192.168.1.1' has no prefix length; write it "
                      "with one, e.g. 192.168.1.1/24"),
    (["none"], "Address 'none': 'none' has no prefix length; write it with one, e.g. "
               "none/24"),
    (["10.0.0.2/24", "10.0.1.1"], "Gateway '10.0.1.1': 10.0.1.1 is outside the subnet "
                                  "10.0.0.0/24 of the address 10.0.0.2/24"),
    (["10.0.0.2/24", "", "1.1.1.1, dns.example"], "DNS server 'dns.example': 'dns.example' "
                                                  "is not an IP address"),
    (["10.0.0.2/24", "", "", "maybe"], "'maybe' is not an answer to \"Write and apply it "
                                       "now?\": type y or n"),
]


@pytest.mark.parametrize("answers, message", BAD_ADDRESSES,
                         ids=[answers[-1] or "-" for answers, _ in BAD_ADDRESSES])
def test_bad_management_addresses_are_named(box, console, answers, message):
    terminal = console()
    terminal.type("2")
    for answer in answers:
        terminal.expect("]: ")
        terminal.type(answer)
    assert f"\n\n{message}\n\n" in terminal.expect(PROMPT)
    assert not os.path.exists(box.path(PATH))


def test_an_invalid_network_toml_is_named_in_the_header_and_option_2(box, console):
    box.write(PATH, '[management]\ninterface = "enp0s2"\naddress = "10.0.0.0/24"\n')
    terminal = console()
    problem = (f"{box.path(PATH)}: [management] address: '10.0.0.0/24' is the network "
               "address of 10.0.0.0/24; give the interface's own address, e.g. 10.0.0.1/24")
    assert terminal.output.startswith(
        f"\nTusk dev — management: not configured: {problem} (option 1 rewrites it)\n")
    terminal.type("2")
    assert terminal.expect(PROMPT).startswith(
        f"2\n\nThe network configuration is not valid:\n  {problem}\n"
        "Option 1 (assign interfaces) writes a new one.\n")


def test_reset_admin_password_shows_the_one_time_password(box, console):
    box.behave({"ip": {"stdout": ip_json(("inet", "192.168.1.5", 24, "global"))},
                "manage": {"stdout": "reset admin 'admin' with one-time password: "
                                     "Xq3-vT9_kLm2\n"}})
    box.write("/etc/tusk/initial-admin", "admin old-password\n")
    terminal = console()
    terminal.type("3")
    terminal.expect("[y/N]: ")
    terminal.type("")
    assert terminal.expect(PROMPT).startswith("\nNothing changed.\n")
    terminal.type("3")
    terminal.expect("[y/N]: ")
    terminal.type("y")
    assert terminal.expect(PROMPT).startswith(
        "y\nResetting (this takes a few seconds)...\n\n"
        "User 'admin', one-time password: Xq3-vT9_kLm2\n"
        "Log in with it on the dashboard; it then asks for a new password.\n\n"
        "Dashboard (enp0s2):\n  https://192.168.1.5/\n")
    manage = [call for call in box.calls() if call["name"] == "manage"]
    assert [(call["argv"], call["tusk_config"]) for call in manage] == [
        (["tusk_admin", "admin"], box.path("/etc/tusk/tusk.toml"))]
    assert manage[0]["cwd"].endswith("/webui")
    assert not os.path.exists(box.path("/etc/tusk/initial-admin"))   # its password is gone


def test_a_failed_reset_says_why(box, console):
    box.behave({"ip": {"stdout": ip_json()},
                "manage": {"rc": 1, "stderr": "Traceback...\ndjango.db.utils.OperationalError: "
                                              "connection refused\n"}})
    terminal = console()
    terminal.type("3")
    terminal.expect("[y/N]: ")
    terminal.type("y")
    assert terminal.expect(PROMPT).startswith(
        "y\nResetting (this takes a few seconds)...\nResetting the password failed (exit 1):\n"
        "  Traceback...\n  django.db.utils.OperationalError: connection refused\n")


def test_dashboard_url_and_the_initial_password(box, console):
    box.behave({"ip": {"stdout": ip_json(("inet", "192.168.1.5", 24, "global"),
                                         ("inet6", "2001:db8::5", 64, "global"))}})
    box.write("/etc/tusk/initial-admin", "admin Ab1-cD2_eF3\n")
    terminal = console()
    terminal.type("4")
    assert terminal.expect(PROMPT).startswith(
        "4\n\nDashboard (enp0s2):\n  https://192.168.1.5/\n  https://[2001:db8::5]/\n"
        "The certificate is self-signed: the browser asks you to accept it once.\n"
        "First login: user 'admin', one-time password: Ab1-cD2_eF3\n"
        "The dashboard asks for a new password at the first login.\n")
    os.unlink(box.path("/etc/tusk/initial-admin"))
    box.behave({"ip": {"stdout": ip_json()}})
    terminal.type("4")
    assert terminal.expect(PROMPT).startswith(
        "4\n\nenp0s2 has no address yet (DHCP may still be asking); option 2 sets a static "
        "one.\n\n")


def test_install_reboot_and_power_off_run_their_programs(box, console):
    terminal = console()
    terminal.type("5")
    terminal.expect(PROMPT)
    terminal.type("6")
    terminal.expect("Reboot now? [y/N]: ")
    terminal.type("n")
    assert terminal.expect(PROMPT).startswith("n\nNot rebooted.\n")
    terminal.type("7")
    terminal.expect("Power off now? [y/N]: ")
    terminal.type("N")
    assert terminal.expect(PROMPT).startswith("N\nNot powered off.\n")
    assert [c for c in box.commands() if c[0] != "ip"] == [("tusk-install",)]
    terminal.type("6")
    terminal.expect("Reboot now? [y/N]: ")
    terminal.type("y")
    terminal.expect(PROMPT)
    terminal.type("7")
    terminal.expect("Power off now? [y/N]: ")
    terminal.type("yes")
    terminal.expect(PROMPT)
    assert [c for c in box.commands() if c[0] != "ip"] == [
        ("tusk-install",), ("systemctl", "reboot"), ("systemctl", "poweroff")]


def test_a_failing_program_is_reported(box, console):
    box.behave({"ip": {"stdout": ip_json()}, "tusk-install": {"rc": 4}})
    terminal = console()
    terminal.type("5")
    assert terminal.expect(PROMPT).startswith("5\ntusk-install exited with status 4\n")


def test_ctrl_c_during_a_program_stops_the_program_not_the_menu(box, console):
    box.behave({"ip": {"stdout": ip_json()},
                "tusk-install": {"stdout": "Installing...\n", "sleep": 60}})
    terminal = console()
    terminal.type("5")
    terminal.expect("Installing...\n")
    terminal.press(b"\x03")
    before = terminal.expect(PROMPT)
    assert "tusk-install was stopped by SIGINT\n" in before
    assert "interrupted: back to the menu" not in before


def test_shell_and_back_to_the_menu_ctrl_c_goes_to_the_shell(console):
    terminal = console()
    terminal.type("8")
    terminal.expect("A shell: type exit to return to the menu.\n")
    terminal.type("echo shell-$((6 * 7))")
    terminal.expect("shell-42")
    terminal.type("sleep 60; echo not-interrupted")
    wait_until(lambda: runs_below(terminal.pid, "sleep 60"), TIMEOUT, "the shell's sleep 60")
    terminal.press(b"\x03")           # interrupts the sleep, not the menu
    terminal.type("echo still-in-the-shell")
    terminal.expect("echo still-in-the-shell")   # the terminal's echo of what was typed
    terminal.expect("still-in-the-shell\n")      # the shell's
    assert terminal.output.count("not-interrupted") == 1   # only the typed line's echo
    terminal.type("exit")
    terminal.expect(PROMPT)
    terminal.type("4")
    terminal.expect("https://192.168.1.5/")


def test_ctrl_c_in_a_question_returns_to_the_menu(box, console):
    terminal = console()
    terminal.type("2")
    terminal.expect("[dhcp]: ")
    terminal.press(b"\x03")
    assert terminal.expect(PROMPT).startswith("^C\n(interrupted: back to the menu)\n")
    terminal.press(b"\x03")
    terminal.expect("(interrupted: back to the menu)")
    terminal.expect(PROMPT)
    terminal.press(b"\x1c")           # Ctrl-\ does not end the menu either
    terminal.type("4")
    terminal.expect("https://192.168.1.5/")
    assert not os.path.exists(box.path(PATH))


def test_ctrl_c_works_even_when_the_console_was_started_with_it_ignored(console):
    """A starter that ignores SIGINT (a background job of a shell, some supervisors) hands
    that on; the menu's Ctrl-C must still only go back to the menu."""
    terminal = console(sigint=signal.SIG_IGN)
    terminal.type("2")
    terminal.expect("[dhcp]: ")
    terminal.press(b"\x03")
    assert terminal.expect(PROMPT).startswith("^C\n(interrupted: back to the menu)\n")


def test_end_of_input_leaves_cleanly(console):
    terminal = console()
    terminal.press(b"\x04")
    terminal.expect("end of input: leaving the menu\n")
    assert terminal.wait() == 0
    assert "Traceback" not in terminal.output


def test_end_of_input_inside_a_question_leaves_cleanly(console):
    terminal = console()
    terminal.type("1")
    terminal.expect("[enp0s2]: ")
    terminal.press(b"\x04")
    terminal.expect("end of input: leaving the menu\n")
    assert terminal.wait() == 0


def test_a_bad_command_table_exits_2(box):
    terminal = Terminal([sys.executable, TUSK_CONSOLE, "--root", box.root],
                        box.env() | {"TUSK_COMMANDS": "[1]"})
    try:
        terminal.expect("TUSK_COMMANDS: must be a JSON object of command name -> argv list")
        assert terminal.wait() == 2
    finally:
        terminal.close()


# -- the console password, unlock admin, tusk-firewall's warning ----------------------------

SECRET = "correct-staple-42"


def test_a_console_password_set_from_the_menu_guards_the_shell(box, console):
    os.makedirs(box.path("/etc/tusk"))
    terminal = console()
    terminal.type("10")
    terminal.expect("New console password (empty: none): ")
    terminal.type("short")
    assert "The console password must have at least 8 characters; nothing changed." in \
        terminal.expect(PROMPT)
    terminal.type("10")
    terminal.expect("New console password (empty: none): ")
    terminal.type(SECRET)
    terminal.expect("The same again: ")
    terminal.type(SECRET)
    terminal.expect(f"Set ({box.path('/etc/tusk/console-password')}).")
    terminal.expect(PROMPT)
    assert SECRET not in terminal.output                  # typed, never echoed
    stored = box.read("/etc/tusk/console-password")
    assert stored.startswith("pbkdf2_sha256$600000$") and SECRET not in stored
    assert os.stat(box.path("/etc/tusk/console-password")).st_mode & 0o777 == 0o600
    terminal.type("8")
    for wrong in ("guess1", "guess2", "guess3"):
        terminal.expect("Console password: ")
        terminal.type(wrong)
        terminal.expect("Wrong password.")
    assert "The shell: 3 wrong passwords, back to the menu.\n" in terminal.expect(PROMPT)
    assert "A shell" not in terminal.output
    terminal.type("8")
    terminal.expect("Console password: ")
    terminal.type(SECRET)
    terminal.expect("A shell: type exit to return to the menu.\n")
    terminal.type("echo shell-$((6 * 7))")
    terminal.expect("shell-42")
    terminal.type("exit")
    terminal.expect(PROMPT)


def test_changing_or_clearing_the_console_password_needs_it(box, console):
    from appliance import consolepw
    box.write("/etc/tusk/console-password", consolepw.make(SECRET) + "\n")
    terminal = console()
    terminal.type("10")
    for wrong in ("a", "b", "c"):
        terminal.expect("Console password: ")
        terminal.type(wrong)
    assert "Changing the console password: 3 wrong passwords" in terminal.expect(PROMPT)
    terminal.type("3")                                    # reset admin password: guarded too
    terminal.expect("Console password: ")
    terminal.press(b"\x03")
    terminal.expect("(interrupted: back to the menu)")
    terminal.expect(PROMPT)
    assert not [c for c in box.commands() if c[0] == "manage"]
    terminal.type("10")
    terminal.expect("Console password: ")
    terminal.type(SECRET)
    terminal.expect("New console password (empty: none): ")
    terminal.type("")
    terminal.expect("Remove the console password? [y/N]: ")
    terminal.type("y")
    terminal.expect("Removed: the shell opens without a password.")
    assert not os.path.exists(box.path("/etc/tusk/console-password"))


def test_a_damaged_console_password_file_keeps_the_shell_closed(box, console):
    box.write("/etc/tusk/console-password", "md5$1$salt$hash\n")
    terminal = console()
    terminal.type("8")
    assert terminal.expect(PROMPT).startswith(
        "8\nThe shell is closed: the console password file is damaged "
        f"({box.path('/etc/tusk/console-password')}: algorithm 'md5' is not pbkdf2_sha256); "
        "clear it on the dashboard's System page.\n")


def test_unlock_admin_runs_tusk_admin_unlock(box, console):
    box.behave({"ip": {"stdout": ip_json()},
                "manage": {"stdout": "unlocked 'admin': 5 failed logins forgotten\n"}})
    terminal = console()
    terminal.type("9")
    assert terminal.expect(PROMPT).startswith(
        "9\nUnlocking the web UI user 'admin' (its failed logins are forgotten)...\n"
        "unlocked 'admin': 5 failed logins forgotten\n")
    manage = [call for call in box.calls() if call["name"] == "manage"]
    assert [(call["argv"], call["tusk_config"]) for call in manage] == [
        (["tusk_admin", "--unlock", "admin"], box.path("/etc/tusk/tusk.toml"))]


def test_the_firewalls_warning_is_shown_under_the_header(box, console):
    box.write("/run/tusk-firewall.warning", "the dashboard answers on no interface: "
              "network.toml has no valid management interface\n")
    terminal = console()
    assert "\nWARNING: the dashboard answers on no interface: network.toml has no valid " \
           "management interface\n\n 1) Assign interfaces" in terminal.output


BRIDGED = """version = 2

[[interfaces]]
name = "enp0s2"
role = "management"
addresses = ["192.168.1.5/24"]

[[interfaces]]
name = "enp0s3"

[[interfaces]]
name = "enp0s10"

[[bridges]]
name = "br0"
members = ["enp0s3", "enp0s10"]
"""


def test_the_bridge_mode_goes_off_from_the_console_and_its_ports_stay_put(box, console):
    """Option 12, shown only with a bridge: the way out of a bridge that cuts the network.
    Option 1 leaves a bridge's ports alone, as a bond's."""
    box.write(PATH, BRIDGED)
    terminal = console()
    assert "\n12) Bridge mode off\n" in terminal.output
    terminal.type("1")
    terminal.expect("Management interface (name or number) [enp0s2]: ")
    terminal.type("")
    terminal.expect("Traffic interfaces [none]: ")
    terminal.type("enp0s3")
    assert "Traffic interface enp0s3: it belongs to a bond or a bridge" in \
        terminal.expect(PROMPT)
    terminal.type("12")
    listing = terminal.expect("Write and apply it now? [y/N]: ")
    assert "Bridge br0: enp0s3, enp0s10\nTurned off, these stay traffic links without " \
        "addresses: nothing crosses between them" in listing
    assert "  traffic     enp0s3           (link up, no address)\n" in listing
    terminal.type("y")
    applied = terminal.expect("Applied.\n")
    assert "removed /run/systemd/network/10-tusk-br0.netdev" not in applied   # never written
    config = network.load(box.path(PATH))
    assert config.bridges == () and [p.name for p in config.interfaces] == [
        "enp0s2", "enp0s3", "enp0s10"]
    assert "12) Bridge mode off" not in terminal.expect(PROMPT)
    terminal.type("12")
    assert "'12' is not an option: no bridge is configured" in terminal.expect(PROMPT)
