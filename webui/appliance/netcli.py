"""tusk-net: the box's interfaces, from /etc/tusk/network.toml to systemd-networkd.

    tusk-net [--root DIR] show          the configuration and the Ethernet interfaces found
    tusk-net [--root DIR] check [FILE]  checks FILE (default: /etc/tusk/network.toml)
    tusk-net [--root DIR] apply         writes /run/systemd/network/10-tusk-*.network (a new
                                        box first gets network.toml: the first Ethernet
                                        interface on DHCP), removes stale ones, and has a
                                        running systemd-networkd reload and reconfigure
    tusk-net [--root DIR] mgmt-address  the management interface's addresses, one a line

--root DIR prefixes every path (a test tree in place of /); the programs run come from
the table in appliance/commands.py (TUSK_COMMANDS). Exit status: 0 ok, 1 a failed step (why
on stderr), 2 usage, 40-44 an invalid or unreadable configuration (the code of its first
problem, network.Code; every problem on stderr as `error[CODE]: file: [section] key: why`).
"""
import argparse
import os
import sys

from appliance import network
from appliance.commands import CommandError, Runner
from tusklib.files import write_atomically
from tusklib.problems import report

NETWORKD = "systemd-networkd.service"


def say(message):
    print(message, flush=True)


def complain(message):
    print(f"tusk-net: {message}", file=sys.stderr, flush=True)


def current_config(runner, create=False):
    """(configuration, its path, whether it is the new-box default). create: write the
    default when there is no file."""
    path = runner.path(network.DEFAULT_PATH)
    if os.path.lexists(path):
        return network.load(path), path, False
    config = network.default_config(network.detect_interfaces(runner.path(network.SYSFS_NET)))
    if create:
        network.write(config, path)
    return config, path, True


def interface_addresses(runner, interface):
    """The interface's addresses now (`ip -j addr show dev X`), IPv4 first, no link-local."""
    result = runner.run("ip", "-j", "addr", "show", "dev", interface)
    if result.returncode != 0:
        raise CommandError(f"ip -j addr show dev {interface} failed (exit {result.returncode}): "
                           f"{result.stderr.strip() or result.stdout.strip()}")
    try:
        return network.addresses_from_ip_json(result.stdout)
    except (ValueError, AttributeError, TypeError) as exc:
        raise CommandError(f"ip -j addr show dev {interface}: unexpected output ({exc})") \
            from None


def cmd_show(runner, args):
    config, path, new = current_config(runner)
    say(f"{path}: missing; `tusk-net apply` creates it as:" if new else f"{path}:")
    for line in network.summary(config):
        say(f"  {line}")
    say("Ethernet interfaces:")
    for line in network.nic_lines(network.detect_interfaces(runner.path(network.SYSFS_NET))):
        say(line)
    return 0


def cmd_check(runner, args):
    path = args.file or runner.path(network.DEFAULT_PATH)
    config = network.load(path)
    say(f"{path}: valid ({len(config.traffic)} traffic interface"
        f"{'' if len(config.traffic) == 1 else 's'})")
    return 0


def cmd_apply(runner, args):
    config, path, new = current_config(runner, create=True)
    if new:
        say(f"created {path}: {config.management.interface} manages the box, on DHCP "
            "(the first Ethernet interface)")
    sysfs = runner.path(network.SYSFS_NET)
    present = set(os.listdir(sysfs)) if os.path.isdir(sysfs) else set()
    for index, name in enumerate(config.interfaces):
        if name not in present:
            where = "[management]" if index == 0 else f"[[traffic]] #{index}"
            complain(f"warning: {path}: {where} interface: {name!r}: this machine has no "
                     "such interface now; its file is written for when it appears")
    files = network.render(config, path)
    directory = runner.path(network.RUN_DIR)
    os.makedirs(directory, exist_ok=True)
    stale = []
    for name in sorted(os.listdir(directory)):
        if network.is_tusk_file(name) and name not in files:
            os.unlink(os.path.join(directory, name))
            stale.append(name[len(network.FILE_PREFIX):-len(network.FILE_SUFFIX)])
            say(f"removed {os.path.join(directory, name)}")
    for name, text in files.items():
        write_atomically(os.path.join(directory, name), text, 0o644)
        say(f"wrote {os.path.join(directory, name)}")
    return reload_networkd(runner, [n for n in config.interfaces + stale if n in present])


def reload_networkd(runner, interfaces):
    try:
        running = runner.run("systemctl", "is-active", "--quiet", NETWORKD).returncode == 0
    except CommandError as exc:
        say(f"systemd-networkd not asked: {exc}")
        return 0
    if not running:
        say("systemd-networkd is not running: it reads these files when it starts")
        return 0
    steps = [("reload",)] + ([("reconfigure", *interfaces)] if interfaces else [])
    for step in steps:
        result = runner.run("networkctl", *step)
        if result.returncode != 0:
            complain(f"networkctl {' '.join(step)} failed (exit {result.returncode}): "
                     f"{result.stderr.strip() or result.stdout.strip()}")
            return 1
    say(f"systemd-networkd reloaded; reconfigured: {' '.join(interfaces) or 'nothing'}")
    return 0


def cmd_mgmt_address(runner, args):
    config, _, _ = current_config(runner)
    for address in interface_addresses(runner, config.management.interface):
        say(address)
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(prog="tusk-net", description=__doc__.splitlines()[0])
    parser.add_argument("--root", default="", help="a tree to use in place of / (tests)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    sub.add_parser("show", help="the configuration and the Ethernet interfaces found") \
        .set_defaults(func=cmd_show)
    check = sub.add_parser("check", help="check a network.toml")
    check.add_argument("file", nargs="?", help=f"default: {network.DEFAULT_PATH}")
    check.set_defaults(func=cmd_check)
    sub.add_parser("apply", help="write systemd-networkd's files and reload it") \
        .set_defaults(func=cmd_apply)
    sub.add_parser("mgmt-address", help="the management interface's addresses now") \
        .set_defaults(func=cmd_mgmt_address)
    args = parser.parse_args(argv)
    try:
        runner = Runner(args.root)
    except CommandError as exc:
        complain(str(exc))
        return 2
    try:
        return args.func(runner, args)
    except network.NetworkError as error:
        return report(error)
    except (CommandError, OSError) as exc:
        complain(str(exc))
        return 1
