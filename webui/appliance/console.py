"""tusk-console: the menu on the VGA and serial consoles (tusk-console@tty1, @ttyS0), in
place of a login prompt, as pfSense and OPNsense have: whoever holds the console owns
the box anyway.

    tusk-console [--root DIR]

 1) Assign interfaces          which NIC manages the box, which forward traffic
 2) Set management address     DHCP, or address/prefix + gateway + DNS servers
 3) Reset admin password       manage.py tusk_admin admin: a new one-time password
 4) Show dashboard URL         (+ the first boot's one-time password, while it is kept)
 5) Install to disk            live system only: tusk-install
 6) Reboot   7) Power off      after a y/N question
 8) Shell                      /bin/sh -l; exit returns to the menu
 9) Unlock admin login         manage.py tusk_admin --unlock admin: forgets its failed
                               logins (the dashboard's login throttling)
10) Console password           set, change or clear it
11) System slots               both slots' releases and states (A/B upgrades); boot the
                               other slot once (the next boot only, then the usual order)

The console password (optional; appliance/consolepw.py) is asked before the shell, before
changing it and before resetting the admin password - 3 tries, then back to the menu.
Typed input is not echoed. It can also be set or cleared on the dashboard's System page.
tusk-firewall's warnings (/run/tusk-firewall.warning: the dashboard answers on no
interface, nothing is forwarded) are shown under the header.

Input that is not an answer gets a message naming what was wrong, then the menu again.
Ctrl-C returns to the menu, end of input (Ctrl-D) leaves (systemd starts the menu anew).
Every program runs through tusklib.commands.Runner: --root DIR and TUSK_COMMANDS
make a test tree and test programs of the paths and the command table.
"""
import argparse
import dataclasses
import ipaddress
import os
import re
import signal
import sys
import termios

from appliance import consolepw, network
from appliance.boot import FIREWALL_WARNING, is_mounted
from appliance.netcli import current_config, interface_addresses
from network.core import model
from tusklib.commands import WEBUI, CommandError, Runner, ignore
from tusklib.files import write_atomically

VERSION_FILE = "/usr/lib/tusk/version"
TUSK_CONFIG = "/etc/tusk/tusk.toml"
INITIAL_ADMIN = "/etc/tusk/initial-admin"
PROC_MOUNTS = "/proc/mounts"
DATA = "/data"
ADMIN = "admin"
NONE_WORDS = ("none", "-")
PASSWORD_TRIES = 3


class Refused(Exception):
    """Input that is not an answer: the message says what was wrong."""


class Console:
    def __init__(self, runner, stdin=None, stdout=None):
        self.runner = runner
        self.stdin = stdin or sys.stdin
        self.stdout = stdout or sys.stdout
        self.actions = {
            "1": ("Assign interfaces", self.assign_interfaces),
            "2": ("Set management address", self.set_management_address),
            "3": ("Reset admin password", self.reset_admin_password),
            "4": ("Show dashboard URL", self.show_dashboard_url),
            "5": ("Install to disk", self.install),
            "6": ("Reboot", self.reboot),
            "7": ("Power off", self.power_off),
            "8": ("Shell", self.shell),
            "9": ("Unlock admin login", self.unlock_admin),
            "10": ("Console password", self.console_password),
            "11": ("System slots", self.system_slots),
            "12": ("Bridge mode off", self.bridge_mode_off),
        }

    # -- talking ----------------------------------------------------------------------

    def say(self, text=""):
        self.stdout.write(f"{text}\n")
        self.stdout.flush()

    def ask(self, prompt):
        """One line, stripped; EOFError at the end of input."""
        self.stdout.write(prompt)
        self.stdout.flush()
        line = self.stdin.readline()
        if not line:
            raise EOFError
        return line.strip()

    def ask_secret(self, prompt):
        """ask() without echo on a terminal (the console, the tests' pty)."""
        if not self.stdin.isatty():
            return self.ask(prompt)
        fd = self.stdin.fileno()
        before = termios.tcgetattr(fd)
        quiet = list(before)
        quiet[3] &= ~termios.ECHO
        termios.tcsetattr(fd, termios.TCSAFLUSH, quiet)
        try:
            return self.ask(prompt)
        finally:
            termios.tcsetattr(fd, termios.TCSAFLUSH, before)
            self.say()

    def confirm(self, question):
        answer = self.ask(f"{question} [y/N]: ").lower()
        if answer in ("y", "yes"):
            return True
        if answer in ("", "n", "no"):
            return False
        raise Refused(f"{answer!r} is not an answer to \"{question}\": type y or n")

    # -- the loop ---------------------------------------------------------------------

    def run(self):
        while True:
            try:
                self.show_menu()
                choice = self.ask("Enter an option: ")
                if choice == "":
                    continue
                if choice not in self.actions:
                    raise Refused(f"{choice!r} is not an option: enter a number from 1 to "
                                  f"{len(self.actions)}")
                self.actions[choice][1]()
            except Refused as refused:
                self.say(f"\n{refused}")
            except KeyboardInterrupt:
                self.say("\n(interrupted: back to the menu)")
            except EOFError:
                self.say("\nend of input: leaving the menu")
                return 0

    def show_menu(self):
        self.say()
        self.say(self.header())
        live = self.live()
        if live:
            self.say("LIVE (not installed): data is lost at power-off; option 5 installs "
                     "Tusk to a disk")
        elif live is None:
            self.say(f"WARNING: {DATA} is not mounted: settings are not kept "
                     "(see `systemctl status tusk-data`)")
        warning = network.read_text(self.runner.path(FIREWALL_WARNING))
        if warning:
            self.say(f"WARNING: {warning}")
        self.say()
        bridges = self.bridges()
        for key, (title, _) in self.actions.items():
            # installing: live only; the system slots: an installed box only; the bridge
            # mode off: where there are bridges
            if (key != "5" or live) and (key != "11" or live is False) and \
                    (key != "12" or bridges):
                self.say(f"{key:>2}) {title}")
        self.say()

    def header(self):
        version = network.read_text(self.runner.path(VERSION_FILE)) or "dev"
        try:
            interface, addresses = self.management_addresses()
        except network.NetworkError as exc:
            return (f"Tusk {version} — management: not configured: {exc.problems[0]} "
                    "(option 1 rewrites it)")
        except CommandError as exc:
            return f"Tusk {version} — management: addresses unknown: {exc}"
        shown = " ".join(addresses) or "(no address yet)"
        url = dashboard_url(addresses[0]) if addresses else "(no address yet)"
        return f"Tusk {version} — management: {interface} {shown} — dashboard: {url}"

    def management_addresses(self):
        config, _, _ = current_config(self.runner)
        if config.management is None:
            raise network.NetworkError(network.Code.VALUE, "", "no interface has the role "
                                       "management")
        interface = config.management.name
        return interface, interface_addresses(self.runner, interface)

    def live(self):
        """True on the live system (/data in RAM), False on a disk, None if not mounted."""
        try:
            kind = is_mounted(DATA, self.runner.path(PROC_MOUNTS))
        except OSError:
            return None
        if kind is None:
            return None
        return kind in ("tmpfs", "ramfs")

    # -- 1 and 2: the network -----------------------------------------------------------

    def config_or_refuse(self):
        try:
            return current_config(self.runner)[:2]
        except network.NetworkError as exc:
            raise Refused("The network configuration is not valid:\n  " +
                          "\n  ".join(map(str, exc.problems)) +
                          "\nOption 1 (assign interfaces) writes a new one.") from None

    def assign_interfaces(self):
        nics = network.detect_interfaces(self.runner.path(network.SYSFS_NET))
        if not nics:
            raise Refused("No Ethernet interface found: nothing can be assigned (is the "
                          "NIC's driver in the kernel?)")
        names = [nic.name for nic in nics]
        try:
            current, path = current_config(self.runner)[:2]
        except network.NetworkError:
            current, path = None, self.runner.path(network.DEFAULT_PATH)
        self.say("\nEthernet interfaces:")
        for line in network.nic_lines(nics, numbered=True):
            self.say(line)
        old = current.management if current else None
        default = old.name if old and old.name in names else names[0]
        answer = self.ask(f"\nManagement interface (name or number) [{default}]: ") or default
        management = pick(answer, nics, "Management interface")
        # bonds and VLANs (the dashboard's) keep their ports: those are not asked about
        kept = {p.name: p for p in (current.interfaces if current else ())
                if p.name in names and p.name != management}
        held = set(current.bond_of) | set(current.bridge_of) | \
            {v.parent for v in current.vlans} if current else set()
        asked = [p for p in kept.values() if p.role == model.TRAFFIC and p.name not in held]
        default = ", ".join(f"{p.name}={p.addresses[0]}" if len(p.addresses) == 1 else p.name
                            for p in asked) or "none"
        self.say("Traffic interfaces: names or numbers, comma-separated, each with an "
                 "address if it needs one\n(e.g. enp0s3, enp0s4=10.1.0.1/24); none for none. "
                 "Interfaces of bonds and VLANs stay as they are.")
        answer = self.ask(f"Traffic interfaces [{default}]: ") or default
        traffic = self.parse_traffic(answer, nics, management, held, kept)
        ports = [p for p in kept.values() if p.name in held]
        # the management address settings stay as they were, on whichever port
        if old:
            ports.insert(0, dataclasses.replace(old, name=management))
        else:
            ports.insert(0, model.Port(management, role=model.MANAGEMENT, dhcp=True))
        ports += traffic
        routes = tuple(dataclasses.replace(r, interface=management)
                       if old and r.interface == old.name else r
                       for r in (current.routes if current else ()))
        config = dataclasses.replace(current or model.NetworkConfig(),
                                     interfaces=tuple(ports), routes=routes)
        self.save_and_apply(config, path, names)

    def parse_traffic(self, answer, nics, management, held, kept):
        if answer.lower() in NONE_WORDS:
            return []
        traffic, seen = [], set()
        for item in answer.split(","):
            item = item.strip()
            if not item:
                raise Refused(f"Traffic interfaces {answer!r}: an empty entry between commas")
            name, _, address = (part.strip() for part in item.partition("="))
            name = pick(name, nics, "Traffic interface")
            if name == management:
                raise Refused(f"Traffic interface {name}: it is the management interface; "
                              "one interface cannot do both")
            if name in seen:
                raise Refused(f"Traffic interface {name}: listed twice")
            if name in held:
                raise Refused(f"Traffic interface {name}: it belongs to a bond or a bridge "
                              "or carries VLANs (the dashboard's Network page changes those)")
            seen.add(name)
            port = kept.get(name) or model.Port(name)
            if address == "dhcp":
                raise Refused(f"Address for {name} 'dhcp': DHCP is only for the management "
                              "interface; give an address/prefix, or none")
            if address:
                reason = network.checks.address_problem(address)
                if reason:
                    raise Refused(f"Address for {name} {address!r}: {reason}")
                port = dataclasses.replace(port, addresses=(address,))
            traffic.append(dataclasses.replace(port, role=model.TRAFFIC, dhcp=False,
                                               autoconf=False))
        return traffic

    def set_management_address(self):
        config, path = self.config_or_refuse()
        mgmt = config.management
        if mgmt is None:
            raise Refused("No interface manages the box: option 1 assigns one")
        shown = "DHCP" if mgmt.dhcp else ", ".join(mgmt.addresses) or "no address"
        self.say(f"\nManagement interface {mgmt.name}: {shown}")
        current = "dhcp" if mgmt.dhcp or not mgmt.addresses else mgmt.addresses[0]
        address = self.ask(f"Address: dhcp, or address/prefix such as 192.168.1.1/24 "
                           f"[{current}]: ") or current
        if address != "dhcp":
            reason = network.checks.address_problem(address)
            if reason:
                raise Refused(f"Address {address!r}: {reason}")
        gateway, dns = "", ()
        if address != "dhcp":
            same = not mgmt.dhcp
            old = next((r.gateway for r in config.routes if r.interface == mgmt.name
                        and r.destination == model.DEFAULT_ROUTE), "")
            gateway = self.ask_default("Default gateway (none for none)", old if same else "")
            if gateway:
                reason = network.checks.gateway_problem(gateway, address)
                if reason:
                    raise Refused(f"Gateway {gateway!r}: {reason}")
            servers = self.ask_default("DNS servers, comma-separated (none for none)",
                                       ", ".join(config.system.dns))
            dns = tuple(s.strip() for s in servers.split(",")) if servers else ()
            for server in dns:
                reason = network.checks.ip_problem(server)
                if reason:
                    raise Refused(f"DNS server {server!r}: {reason}")
        else:
            dns = config.system.dns
        dhcp = address == "dhcp"
        self.save_and_apply(network.with_management(
            config, mgmt.name, dhcp, () if dhcp else (address,), gateway, dns), path)

    def bridges(self):
        """The configured bridges, or () (no valid configuration: none to turn off)."""
        try:
            return current_config(self.runner)[0].bridges
        except network.NetworkError:
            return ()

    def bridge_mode_off(self):
        """The way out of a bridge that cuts the network (a loop its switches do not
        block, the wrong ports): every bridge goes; its members stay traffic links without
        addresses, so nothing crosses between them until the dashboard says otherwise."""
        config, path = self.config_or_refuse()
        if not config.bridges:
            raise Refused("'12' is not an option: no bridge is configured")
        for bridge in config.bridges:
            self.say(f"\nBridge {bridge.name}: {', '.join(bridge.members)}")
        self.say("Turned off, these stay traffic links without addresses: nothing crosses "
                 "between them (the policy's bridged zones then match nothing).")
        self.save_and_apply(dataclasses.replace(config, bridges=()), path)

    def ask_default(self, prompt, default):
        answer = self.ask(f"{prompt} [{default or 'none'}]: ")
        if answer.lower() in NONE_WORDS:
            return ""
        return answer or default

    def save_and_apply(self, config, path, present=None):
        problems = network.validate(config, present=present)
        if problems:
            raise Refused("That configuration is not valid:\n  " +
                          "\n  ".join(f"{path}: {problem}" for problem in problems))
        self.say("\nThe new configuration:")
        for line in network.summary(config):
            self.say(f"  {line}")
        self.say("(a dashboard session on an interface that changes is cut off; a change "
                 "the dashboard left pending is dropped)")
        if not self.confirm("Write and apply it now?"):
            self.say("Nothing changed.")
            return
        network.write(config, path)
        self.say(f"Written: {path}")
        result = self.runner.run("tusk-net", "apply", "--action", "console")
        output = (result.stdout + result.stderr).strip()
        if output:
            self.say(output)
        if result.returncode != 0:
            self.say(f"tusk-net apply failed (exit {result.returncode}): the file is written, "
                     "the interfaces are as before")
        else:
            self.say("Applied.")

    # -- 3 and 4: the dashboard ---------------------------------------------------------

    def reset_admin_password(self):
        if not self.password_given("Resetting the admin password"):
            return
        if not self.confirm(f"Reset the password of the web UI user {ADMIN!r}? (its "
                            "current password stops working)"):
            self.say("Nothing changed.")
            return
        self.say("Resetting (this takes a few seconds)...")
        result = self.manage("tusk_admin", ADMIN)
        found = re.search(r"one-time password: (\S+)", result.stdout)
        if result.returncode != 0 or not found:
            detail = (result.stderr.strip() or result.stdout.strip()).splitlines()[-5:]
            self.say(f"Resetting the password failed (exit {result.returncode}):")
            for line in detail:
                self.say(f"  {line}")
            return
        stale = self.runner.path(INITIAL_ADMIN)
        if os.path.exists(stale):
            os.unlink(stale)   # its password no longer works
        self.say(f"\nUser {ADMIN!r}, one-time password: {found.group(1)}")
        self.say("Log in with it on the dashboard; it then asks for a new password.")
        self.show_urls()

    def manage(self, *argv):
        env = dict(os.environ, TUSK_CONFIG=self.tusk_config(),
                   DJANGO_SETTINGS_MODULE="tusk.settings")
        return self.runner.run("manage", *argv, env=env, cwd=WEBUI)

    def tusk_config(self):
        return (not self.runner.root and os.environ.get("TUSK_CONFIG")) or \
            self.runner.path(TUSK_CONFIG)

    def unlock_admin(self):
        self.say(f"Unlocking the web UI user {ADMIN!r} (its failed logins are forgotten)...")
        result = self.manage("tusk_admin", "--unlock", ADMIN)
        if result.returncode != 0:
            detail = (result.stderr.strip() or result.stdout.strip()).splitlines()[-5:]
            self.say(f"Unlocking failed (exit {result.returncode}):")
            for line in detail:
                self.say(f"  {line}")
            return
        self.say(result.stdout.strip())

    # -- 10 and 8: the console password ---------------------------------------------------

    def password_path(self):
        return consolepw.path_beside(self.tusk_config())

    def password_given(self, what):
        """True when there is no console password or it was typed; after PASSWORD_TRIES
        wrong ones, or a damaged file (then nothing opens), False: back to the menu."""
        try:
            encoded = consolepw.stored(self.password_path())
        except ValueError as problem:
            self.say(f"{what} is closed: the console password file is damaged ({problem}); "
                     "clear it on the dashboard's System page.")
            return False
        if encoded is None:
            return True
        for _ in range(PASSWORD_TRIES):
            if consolepw.verify(self.ask_secret("Console password: "), encoded):
                return True
            self.say("Wrong password.")
        self.say(f"{what}: {PASSWORD_TRIES} wrong passwords, back to the menu.")
        return False

    def console_password(self):
        path = self.password_path()
        if not self.password_given("Changing the console password"):
            return
        self.say("The console password is asked before the shell, before changing it and "
                 "before resetting the admin password.")
        first = self.ask_secret("New console password (empty: none): ")
        if not first:
            if os.path.lexists(path) and self.confirm("Remove the console password?"):
                os.unlink(path)
                self.say("Removed: the shell opens without a password.")
            else:
                self.say("Nothing changed.")
            return
        if len(first) < consolepw.MIN_LENGTH:
            raise Refused(f"The console password must have at least {consolepw.MIN_LENGTH} "
                          "characters; nothing changed.")
        if self.ask_secret("The same again: ") != first:
            raise Refused("The two passwords differ; nothing changed.")
        try:
            write_atomically(path, consolepw.make(first) + "\n", 0o600)
        except OSError as error:
            raise Refused(f"Writing {path} failed ({error.strerror}); nothing changed.") \
                from None
        self.say(f"Set ({path}).")

    def show_dashboard_url(self):
        self.show_urls()
        initial = network.read_text(self.runner.path(INITIAL_ADMIN))
        if initial:
            user, _, password = initial.partition(" ")
            if password:
                self.say(f"First login: user {user!r}, one-time password: {password}")
            else:
                self.say(f"First login ({INITIAL_ADMIN}): {initial}")
            self.say("The dashboard asks for a new password at the first login.")

    def show_urls(self):
        try:
            interface, addresses = self.management_addresses()
        except (network.NetworkError, CommandError) as exc:
            raise Refused(f"The management address is unknown: {exc}") from None
        if not addresses:
            self.say(f"\n{interface} has no address yet (DHCP may still be asking); "
                     "option 2 sets a static one.")
            return
        self.say(f"\nDashboard ({interface}):")
        for address in addresses:
            self.say(f"  {dashboard_url(address)}")
        self.say("The certificate is self-signed: the browser asks you to accept it once.")

    # -- 5 to 8: the box ----------------------------------------------------------------

    def install(self):
        if not self.live():
            raise Refused("'5' is not an option: Tusk already runs from a disk (install to "
                          "disk is offered on the live system only)")
        self.run_program("tusk-install")

    def reboot(self):
        if self.confirm("Reboot now?"):
            self.run_program("systemctl", "reboot")
        else:
            self.say("Not rebooted.")

    def power_off(self):
        if self.confirm("Power off now?"):
            self.run_program("systemctl", "poweroff")
        else:
            self.say("Not powered off.")

    def system_slots(self):
        if self.live():
            raise Refused("'11' is not an option on the live system: it has no system slots "
                          "(install to disk first)")
        if self.run_program("tusk-boot", "slots") != 0:
            return
        if self.confirm("Boot the other slot once, now?"):
            if self.run_program("tusk-boot", "slots", "--once") == 0:
                self.run_program("systemctl", "reboot")
        else:
            self.say("Nothing changed.")

    def shell(self):
        if not self.password_given("The shell"):
            return
        self.say("A shell: type exit to return to the menu.")
        self.run_program("shell")

    def run_program(self, name, *args):
        """Runs name on this terminal -> its exit status (a failure is said)."""
        try:
            status = self.runner.interactive(name, *args)
        except CommandError as exc:
            raise Refused(str(exc)) from None
        if status < 0:
            self.say(f"{name} was stopped by {signal.Signals(-status).name}")
        elif status != 0:
            self.say(f"{name} exited with status {status}")
        return status


def pick(answer, nics, what):
    """An interface by name or list number."""
    names = [nic.name for nic in nics]
    if answer.isascii() and answer.isdigit() and 1 <= int(answer) <= len(names):  # not "²"
        return names[int(answer) - 1]
    if answer in names:
        return answer
    raise Refused(f"{what} {answer!r}: not one of the interfaces found ({', '.join(names)}) "
                  f"or their numbers 1-{len(names)}")


def dashboard_url(address):
    return f"https://[{address}]/" if ipaddress.ip_address(address).version == 6 \
        else f"https://{address}/"


def main(argv=None):
    parser = argparse.ArgumentParser(prog="tusk-console", description=__doc__.splitlines()[0])
    parser.add_argument("--root", default="", help="a tree to use in place of / (tests)")
    args = parser.parse_args(argv)
    try:
        runner = Runner(args.root)
    except CommandError as exc:
        print(f"tusk-console: {exc}", file=sys.stderr)
        return 2
    for stream in (sys.stdout, sys.stderr):
        stream.reconfigure(errors="replace")   # a serial console may not take UTF-8
    for sig in (signal.SIGTSTP, signal.SIGQUIT):   # Ctrl-Z, Ctrl-\: the menu stays
        signal.signal(sig, ignore)
    # Ctrl-C goes back to the menu (KeyboardInterrupt), even when whoever started the
    # console ignored SIGINT: Python keeps an inherited SIG_IGN, and the menu relies on it
    signal.signal(signal.SIGINT, signal.default_int_handler)
    return Console(runner).run()
