"""tusk policy check|print|apply|confirm|rollback|history|diff|status|recover

The exit status is the error code of the first problem (see core/errors.py), 0 on success.
"""
import argparse
import os
import select
import sys
import time

from tusklib.names import FAMILY, TABLE
from tusklib.problems import report

from .core import capabilities
from .core.applier import Applier, current_user
from .core.errors import Code, PolicyError
from .core.normalise import load_policy_file
from .core.render import render

DEFAULT_STATE_DIR = "/var/lib/tusk/policy"


def read_text(path):
    """A policy file's text (- : stdin); PolicyError IO when it cannot be read."""
    if path == "-":
        return sys.stdin.read()
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except OSError as exc:
        raise PolicyError(Code.IO, "", f"cannot read {path}: {exc.strerror}") from None


def _applier(args):
    return Applier(args.state_dir, args.netns)


def cmd_check(args):
    if args.no_kernel:
        load_policy_file(args.file)
        print(f"{args.file}: valid")
        return
    _applier(args).check(read_text(args.file))
    print(f"{args.file}: valid, and nft -c on {_applier(args).target} accepts the ruleset")


def cmd_print(args):
    sys.stdout.write(render(load_policy_file(args.file)))


def cmd_apply(args):
    applier = _applier(args)
    revision = applier.apply(read_text(args.file), user=args.user, timeout=args.timeout)
    timeout = revision.meta["confirm_timeout"]
    print(f"revision {revision.id} applied to {applier.target}; it rolls back by itself in "
          f"{timeout} s unless confirmed with: tusk policy confirm")
    if "auto_fastpath" in revision.meta:
        print(f"fast path of the auto classes: {revision.meta['auto_fastpath']}")
    if args.wait:
        _wait_for_decision(applier, revision.id)


def _wait_for_decision(applier, rev_id):
    """Stay until the revision is confirmed or rolled back. On a terminal, 'yes' confirms."""
    interactive = sys.stdin.isatty()
    while True:
        pending = applier.store.pending()
        if pending is None or pending["revision"] != rev_id:
            print(f"revision {rev_id}: {applier.store.get(rev_id).outcome}")
            return
        left = max(int(pending["deadline"] - time.time()), 0)
        if interactive:
            sys.stdout.write(f"\rconfirm revision {rev_id}? type yes ({left:4d} s left): ")
            sys.stdout.flush()
            ready, _, _ = select.select([sys.stdin], [], [], 1)
            if ready and sys.stdin.readline().strip().lower() == "yes":
                applier.confirm()
        else:
            time.sleep(0.5)


def cmd_confirm(args):
    revision = _applier(args).confirm(user=args.user)
    print(f"revision {revision.id} confirmed")


def cmd_rollback(args):
    applier = _applier(args)
    if args.revision is None:
        revision = applier.cancel(user=args.user)
        print(f"revision {revision.id} rolled back; revision "
              f"{revision.meta.get('base') or '(none: empty)'} is live again")
    else:
        revision = applier.rollback_to(args.revision, user=args.user, timeout=args.timeout)
        print(f"revision {revision.id} re-applies revision {args.revision}; confirm within "
              f"{revision.meta['confirm_timeout']} s with: tusk policy confirm")


def cmd_history(args):
    applier = _applier(args)
    confirmed = applier.store.confirmed_id()
    for revision in applier.history():
        meta = revision.meta
        live = " *" if revision.id == confirmed else ""
        print(f"{meta['id']:6d}  {meta['created']}  {meta['user']:<12} {meta['action']:<16} "
              f"{meta['outcome']}{live}")


def cmd_diff(args):
    applier = _applier(args)
    if args.revisions:
        ids = args.revisions
        old_id, new_id = (ids[0], ids[1]) if len(ids) == 2 else (ids[0] - 1, ids[0])
        old = applier.store.get(old_id).ruleset if old_id > 0 else ""
        new = applier.store.get(new_id).ruleset
        names = (f"revision {old_id}", f"revision {new_id}")
    elif args.file:
        old, name = applier.live_ruleset()
        new = render(load_policy_file(args.file))
        names = (name, args.file)
    else:
        raise PolicyError(Code.SCHEMA, "", "give a policy FILE or --revision N [--revision M]")
    sys.stdout.write(applier.diff(old, new, *names))


def cmd_status(args):
    applier = _applier(args)
    status = applier.status()
    pending = status["pending"]
    print(f"target: {applier.target}")
    print(f"confirmed revision: {status['confirmed'] or 'none'}")
    if pending:
        left = max(int(pending["deadline"] - time.time()), 0)
        print(f"pending revision: {pending['revision']} (rolls back in {left} s)")
    print(f"table {FAMILY} {TABLE} loaded: {'yes' if status['live'] else 'no'}")
    for name, present in capabilities.report(applier.target).items():
        print(f"kernel {name}: {'available' if present else 'missing'}")


def cmd_recover(args):
    print(_applier(args).recover())


def build_parser():
    parser = argparse.ArgumentParser(prog="tusk policy", description=__doc__.splitlines()[0])
    parser.add_argument("--netns", default=os.environ.get("TUSK_NETNS") or None,
                        help="lab mode: manage this network namespace instead of the system")
    parser.add_argument("--state-dir", default=os.environ.get("TUSK_STATE_DIR", DEFAULT_STATE_DIR),
                        help=f"revision history (default {DEFAULT_STATE_DIR})")
    parser.add_argument("--user", default=None, help="who to record (default: you)")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("check", help="validate FILE, check capabilities and nft -c")
    p.add_argument("file")
    p.add_argument("--no-kernel", action="store_true", help="validate only, ask no kernel")
    p.set_defaults(func=cmd_check)
    p = sub.add_parser("print", help="print the ruleset FILE renders to")
    p.add_argument("file")
    p.set_defaults(func=cmd_print)
    p = sub.add_parser("apply", help="apply FILE; it rolls back unless confirmed")
    p.add_argument("file")
    p.add_argument("--timeout", type=int, default=None, help="seconds until rollback")
    p.add_argument("--wait", action="store_true",
                   help="stay until confirmed or rolled back (on a terminal: type yes)")
    p.set_defaults(func=cmd_apply)
    p = sub.add_parser("confirm", help="keep the pending revision")
    p.set_defaults(func=cmd_confirm)
    p = sub.add_parser("rollback", help="roll back the pending revision now, or re-apply REVISION")
    p.add_argument("revision", type=int, nargs="?")
    p.add_argument("--timeout", type=int, default=None)
    p.set_defaults(func=cmd_rollback)
    p = sub.add_parser("history", help="list revisions (* marks the confirmed one)")
    p.set_defaults(func=cmd_history)
    p = sub.add_parser("diff", help="diff FILE against the live ruleset, or two revisions")
    p.add_argument("file", nargs="?")
    p.add_argument("--revision", dest="revisions", type=int, action="append")
    p.set_defaults(func=cmd_diff)
    p = sub.add_parser("status", help="confirmed and pending revisions")
    p.set_defaults(func=cmd_status)
    p = sub.add_parser("recover", help="at start-up: roll back overdue, re-arm pending")
    p.set_defaults(func=cmd_recover)
    return parser


def main(argv=None):
    args = build_parser().parse_args(argv)
    args.user = args.user or current_user()
    try:
        args.func(args)
    except PolicyError as error:
        return report(error)
    return 0
