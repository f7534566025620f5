"""tusk-tune detect|profiles|plan|apply|verify|rollback|boot

The exit status is the error code of the first problem (core/errors.py), 1 when
verify finds drift, 0 otherwise.
"""
import argparse
import json
import os
import sys

from box.paths import policy_paths
from network.core.errors import NetworkError
from network.core.normalise import DEFAULT_PATH, load
from policy.core.errors import PolicyError
from policy.core.normalise import load_policy_file, load_policy_text
from policy.core.revisions import Store
from tusklib.problems import report

from .core import profile as profiles
from .core.applier import Tuner
from .core.errors import Code, TuneError
from .core.host import SystemHost, TreeHost
from .core.report import describe_nic, machine_dict

DEFAULT_STATE_DIR = "/var/lib/tusk/tuning"
DEFAULT_POLICY_DIR = "/var/lib/tusk/policy"
IN_NETNS = "TUSK_TUNE_NETNS"


def live_policy_paths(args):
    """The paths (class, interfaces in, interfaces out) of --policy FILE, or of the
    live policy revision when there is one; [] otherwise."""
    if args.no_policy:
        return []
    try:
        if args.policy:
            return policy_paths(load_policy_file(args.policy))
        store = Store(args.policy_dir)
        pending = store.pending()
        rev_id = pending["revision"] if pending else store.confirmed_id()
        if rev_id is None:
            return []
        return policy_paths(load_policy_text(store.get(rev_id).policy_text))
    except PolicyError as error:
        raise TuneError(Code.IO, args.policy or args.policy_dir,
                        f"the policy cannot be read: {error}") from None
    except OSError:
        return []


def network_config(args):
    """The box's confirmed network configuration (--network, by default the appliance's
    file; under --root, the tree's) for the MTUs of its VLANs and bonds; None without a
    policy to check or without the file (a lab or a machine tusk-net does not manage)."""
    if args.no_policy:
        return None
    path = args.network or (os.path.join(args.root, DEFAULT_PATH.lstrip("/")) if args.root
                            else DEFAULT_PATH)
    if not os.path.exists(path):
        return None
    try:
        return load(path)
    except NetworkError as error:
        raise TuneError(Code.IO, path, "the network configuration cannot be read: "
                        f"{error.problems[0]}") from None


def tuner(args):
    host = TreeHost(args.root) if args.root else SystemHost()
    dirs = profiles.search_dirs(args.profile_dir) if args.profile_dir else None
    return Tuner(host, args.state_dir, dirs, live_policy_paths(args), network_config(args))


def out(args, data, text):
    if args.json:
        json.dump(data, sys.stdout, indent=1, default=str)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(text)


def cmd_profiles(args):
    found = profiles.catalogue(profiles.search_dirs(args.profile_dir) if args.profile_dir
                               else None)
    out(args, found, "".join(
        f"{name:14} {info.get('summary') or info.get('error')}\n"
        f"{'':14} {info['path']}" + (" (default)" if name == profiles.DEFAULT_PROFILE else "")
        + "\n" for name, info in found.items()))


def cmd_detect(args):
    machine = tuner(args).detect()
    lines = [f"{machine.host_name}: {machine.summary()}"]
    for nic in machine.nics:
        lines.append(f"  {describe_nic(nic)}")
        for irq in nic.irqs:
            lines.append(f"    irq {irq.number} {irq.name}: cpus "
                         f"{','.join(map(str, sorted(irq.affinity))) or '-'}")
    if machine.virtual:
        lines.append("  virtual: " + ", ".join(machine.virtual))
    out(args, machine_dict(machine), "\n".join(lines) + "\n")


def cmd_plan(args):
    plan = tuner(args).plan(args.profile)
    out(args, plan.as_dict(), plan.text())


def cmd_apply(args):
    result = tuner(args).apply(args.profile)
    text = result.plan.text()
    text += (f"applied profile {result.profile}: {len(result.written)} values set, "
             f"{len(result.skipped)} skipped; the values before are saved in "
             f"{os.path.join(args.state_dir, 'applied.json')} (tusk-tune rollback)\n")
    out(args, result.as_dict(), text)


def cmd_boot(args):
    result = tuner(args).boot()
    if result.plan is None:
        out(args, result.as_dict(), f"tusk-tune boot: {result.message}\n")
        return
    out(args, result.as_dict(), f"tusk-tune boot: profile {result.profile}, "
        f"{len(result.written)} values set, {len(result.skipped)} skipped, "
        f"{len(result.plan.warnings)} warnings\n"
        + "".join(f"  warning {w.line()}\n" for w in result.plan.warnings))


def cmd_verify(args):
    result = tuner(args).verify()
    text = f"profile {result.profile}: {result.checked} values checked, "
    if result.drift:
        text += f"{len(result.drift)} drifted:\n" + "".join(
            f"  {label}: set {expected}, now {found}\n" for label, expected, found in result.drift)
    else:
        text += "no drift\n"
    out(args, result.as_dict(), text)
    return 1 if result.drift else 0


def cmd_rollback(args):
    result = tuner(args).rollback()
    text = "".join(f"  {w.label}: {w.show(w.old)}\n" for w in reversed(result.written))
    text = f"restored {len(result.written)} values (profile {result.profile} undone):\n" + text
    text += "".join(f"  skipped {label}: {why}\n" for label, why in result.skipped)
    out(args, result.as_dict(), text)


def profile_argument(value):
    """The agent passes a job's profile here: a name, or tusk-tune stops at once."""
    try:
        return profiles.profile_name(value)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def parser():
    top = argparse.ArgumentParser(prog="tusk-tune", description=__doc__.splitlines()[0])
    top.add_argument("--root", help="a fake tree of /sys and /proc to read and write instead "
                     "of this system (tests)")
    top.add_argument("--netns", help="tune inside this network namespace (lab mode)")
    top.add_argument("--state-dir", default=DEFAULT_STATE_DIR)
    top.add_argument("--profile-dir", action="append", default=[],
                     help=f"also search this directory for profiles (before "
                     f"{profiles.OPERATOR_DIR} and the shipped ones)")
    top.add_argument("--policy", help="check MTUs along this policy file's paths instead of "
                     "the live policy's")
    top.add_argument("--policy-dir", default=DEFAULT_POLICY_DIR)
    top.add_argument("--no-policy", action="store_true", help="do not read any policy")
    top.add_argument("--network", help="the network configuration whose VLANs and bonds the "
                     "MTU check knows (default: /etc/tusk/network.toml, when it exists)")
    top.add_argument("--json", action="store_true")
    sub = top.add_subparsers(dest="command", required=True)
    sub.add_parser("profiles", help="list the profiles").set_defaults(func=cmd_profiles)
    sub.add_parser("detect", help="show the hardware found").set_defaults(func=cmd_detect)
    for name, func, helptext in (("plan", cmd_plan, "print every write: old -> new, why"),
                                 ("apply", cmd_apply, "save the old values, then write")):
        command = sub.add_parser(name, help=helptext)
        command.add_argument("profile", nargs="?", default=profiles.DEFAULT_PROFILE,
                             type=profile_argument, help="a profile's name (never a path: "
                             "--profile-dir adds a directory to search)")
        command.set_defaults(func=func)
    sub.add_parser("verify", help="report values that drifted from what apply set"
                   ).set_defaults(func=cmd_verify)
    sub.add_parser("rollback", help="restore the values from before the first apply"
                   ).set_defaults(func=cmd_rollback)
    sub.add_parser("boot", help="apply the last applied profile (the default on a new box)"
                   ).set_defaults(func=cmd_boot)
    return top


def enter_netns(name, argv):
    """Runs this command again inside the namespace, where /sys shows its interfaces."""
    if not os.path.exists(f"/run/netns/{name}"):
        raise TuneError(Code.TARGET, "--netns", f"no network namespace {name}")
    os.environ[IN_NETNS] = name
    os.execvp("ip", ["ip", "netns", "exec", name, sys.executable, sys.argv[0], *argv])


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    args = parser().parse_args(argv)
    try:
        if args.netns and os.environ.get(IN_NETNS) != args.netns:
            enter_netns(args.netns, argv)
        return args.func(args) or 0
    except TuneError as error:
        return report(error)
