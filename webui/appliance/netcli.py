"""tusk-net: the box's network, from /etc/tusk/network.toml into effect, with commit-confirm.

    tusk-net show              the configuration and the Ethernet interfaces found
    tusk-net check [FILE]      checks FILE (default: the confirmed network.toml)
    tusk-net apply             the confirmed network.toml into effect now (boot, and the
                               console menu after it wrote the file); a new box first gets
                               one: the first Ethernet interface on DHCP. A change still
                               pending is dropped.
    tusk-net try FILE [--timeout S]
                               FILE into effect, pending: the confirmed configuration comes
                               back by itself unless `tusk-net confirm` within S seconds
                               (default 120), also if this process is killed
    tusk-net confirm | cancel | status | recover
    tusk-net mgmt-address      the management interface's addresses, one a line

Options: --netns NS applies inside a network namespace with iproute2 (the lab; the
confirmed file is then STATE_DIR/network.toml), --state-dir DIR the revision store
(default /var/lib/tusk/network), --root DIR prefixes every path (a test tree in place of
/; the programs run come from the table in tusklib/commands.py, TUSK_COMMANDS).
Exit status: 0 ok, 1 a failed step (why on stderr), 2 usage, 40-50 an invalid
configuration or a refused step (network.core.errors.Code of the first problem; every
problem on stderr as `error[CODE]: file: field: why`).
"""
import argparse
import os
import sys
import time

from appliance import network
from box.appliers import NetworkApplier
from network.core.applier import CONFIG_NAME
from tusklib.commands import CommandError, Runner
from tusklib.problems import report

STATE_DIR = "/var/lib/tusk/network"


def say(message):
    print(message, flush=True)


def complain(message):
    print(f"tusk-net: {message}", file=sys.stderr, flush=True)


def current_config(runner, create=False, path=None):
    """(configuration, its path, whether it is the new-box default). create: write the
    default when there is no file."""
    path = path or runner.path(network.DEFAULT_PATH)
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


def applier(runner, args):
    return NetworkApplier(runner.path(args.state_dir), args.netns, runner=runner)


def config_path(runner, args):
    """The confirmed network.toml: the appliance's, or the namespace's in its state dir."""
    return os.path.join(runner.path(args.state_dir), CONFIG_NAME) if args.netns else \
        runner.path(network.DEFAULT_PATH)


def cmd_show(runner, args):
    config, path, new = current_config(runner, path=config_path(runner, args))
    say(f"{path}: missing; `tusk-net apply` creates it as:" if new else f"{path}:")
    for line in network.summary(config):
        say(f"  {line}")
    if not args.netns:
        say("Ethernet interfaces:")
        for line in network.nic_lines(network.detect_interfaces(
                runner.path(network.SYSFS_NET))):
            say(line)
    return 0


def cmd_check(runner, args):
    path = args.file or config_path(runner, args)
    config = network.load(path)
    say(f"{path}: valid ({len(config.links)} interface{'' if len(config.links) == 1 else 's'}"
        f", {len(config.routes)} route{'' if len(config.routes) == 1 else 's'})")
    return 0


def cmd_apply(runner, args):
    target = applier(runner, args)
    if args.netns:
        config, path = network.load(target.config_path), target.config_path
    else:
        config, path, new = current_config(runner, create=True)
        if new:
            say(f"created {path}: the first Ethernet interface manages the box, on DHCP")
    present = target.present()
    for index, port in enumerate(config.interfaces):
        if port.name not in present:
            complain(f"warning: {path}: interfaces[{index}].name: {port.name!r}: this machine "
                     "has no such Ethernet port now; its file is written for when it appears")
    for line in target.apply_confirmed(action=args.action):
        say(line)
    return 0


def cmd_try(runner, args):
    try:
        with open(args.file, encoding="utf-8") as handle:
            text = handle.read()
    except OSError as exc:
        complain(f"{args.file}: {exc.strerror}")
        return 1
    revision = applier(runner, args).apply(text, timeout=args.timeout, action="try")
    deadline = time.strftime("%H:%M:%S", time.localtime(revision.meta["deadline"]))
    say(f"revision {revision.id} applied; confirm by {deadline} (`tusk-net confirm`) or the "
        "confirmed configuration comes back by itself")
    return 0


def cmd_confirm(runner, args):
    revision = applier(runner, args).confirm()
    say(f"revision {revision.id} confirmed")
    return 0


def cmd_cancel(runner, args):
    revision = applier(runner, args).cancel()
    say(f"revision {revision.id}: {revision.outcome}")
    return 0


def cmd_status(runner, args):
    status = applier(runner, args).status()
    pending = status["pending"]
    say(f"confirmed revision: {status['confirmed'] or 'none'}")
    if pending:
        left = max(0, int(pending["deadline"] - time.time()))
        say(f"pending revision: {pending['revision']} ({left} s left to confirm)")
    return 0


def cmd_recover(runner, args):
    say(applier(runner, args).recover())
    return 0


def cmd_mgmt_address(runner, args):
    config, _, _ = current_config(runner, path=config_path(runner, args))
    if config.management is None:
        return 0
    for address in interface_addresses(runner, config.management.name):
        say(address)
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(prog="tusk-net", description=__doc__.splitlines()[0])
    parser.add_argument("--root", default="", help="a tree to use in place of / (tests)")
    parser.add_argument("--netns", default=None, help="apply in this network namespace")
    parser.add_argument("--state-dir", default=STATE_DIR, help="the revision store")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    sub.add_parser("show", help="the configuration and the Ethernet interfaces found") \
        .set_defaults(func=cmd_show)
    check = sub.add_parser("check", help="check a network.toml")
    check.add_argument("file", nargs="?", help=f"default: {network.DEFAULT_PATH}")
    check.set_defaults(func=cmd_check)
    apply = sub.add_parser("apply", help="the confirmed network.toml into effect now")
    apply.add_argument("--action", default="apply network.toml",
                       help="what the revision history calls it (boot, console)")
    apply.set_defaults(func=cmd_apply)
    trial = sub.add_parser("try", help="apply FILE pending confirmation")
    trial.add_argument("file")
    trial.add_argument("--timeout", type=int, default=None, help="seconds (default 120)")
    trial.set_defaults(func=cmd_try)
    for name, func, text in (("confirm", cmd_confirm, "confirm the pending change"),
                             ("cancel", cmd_cancel, "roll the pending change back now"),
                             ("status", cmd_status, "confirmed and pending revisions"),
                             ("recover", cmd_recover, "roll back what is overdue")):
        sub.add_parser(name, help=text).set_defaults(func=func)
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
