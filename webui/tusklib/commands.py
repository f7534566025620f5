"""Every program tusk-net and tusk-console run, in one table, and the paths they use.

    TUSK_COMMANDS='{"systemctl": ["/tmp/record", "systemctl"], "ip": ["/tmp/fake-ip"]}'

replaces entries of the table (a JSON object: a name below -> the argv to run instead;
the arguments follow it). Both programs read it, and tusk-console's children inherit it.

--root DIR (a test tree in place of /) prefixes every path, and then nothing that would
touch this host runs unless TUSK_COMMANDS names it: every entry but Tusk's own tusk-net
(which gets --root DIR too) raises CommandError instead.
"""
import json
import os
import signal
import subprocess
import sys

ENV = "TUSK_COMMANDS"
BIN = os.path.dirname(os.path.dirname(os.path.realpath(__file__))) + "/bin"
WEBUI = os.path.dirname(BIN)
HOST_ROOT = "/"


def frr_reload():
    """FRR's frr-reload.py: Debian's under /usr/lib/frr, Buildroot's in /usr/sbin."""
    for path in ("/usr/lib/frr/frr-reload.py", "/usr/sbin/frr-reload.py"):
        if os.path.exists(path):
            return path
    return "frr-reload.py"


def defaults():
    return {
        "tusk-net": [sys.executable, f"{BIN}/tusk-net"],
        "tusk-install": [sys.executable, f"{BIN}/tusk-install"],
        "tusk-boot": [sys.executable, f"{BIN}/tusk-boot"],
        "manage": [sys.executable, f"{WEBUI}/manage.py"],
        "systemctl": ["systemctl"],
        "networkctl": ["networkctl"],
        "ip": ["ip"],
        "nft": ["nft"],
        "vtysh": ["vtysh"],
        "frr-reload": [frr_reload()],
        "shell": ["/bin/sh", "-l"],
    }


OWN = {"tusk-net"}   # run from this tree even under --root


class CommandError(Exception):
    pass


def rooted(root, path):
    """An absolute path inside root ('' or '/': the real one)."""
    if not root or root == HOST_ROOT:
        return path
    return os.path.join(root, path.lstrip("/"))


def parse_table(text):
    """The TUSK_COMMANDS overrides: {} when unset."""
    if not text:
        return {}
    try:
        table = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CommandError(f"{ENV}: not valid JSON: {exc}") from None
    if not isinstance(table, dict):
        raise CommandError(f"{ENV}: must be a JSON object of command name -> argv list")
    known = defaults()
    for name, argv in table.items():
        if name not in known:
            raise CommandError(f"{ENV}: {name!r}: unknown command (known: "
                               f"{', '.join(sorted(known))})")
        if not (isinstance(argv, list) and argv and all(isinstance(a, str) and a
                                                        for a in argv)):
            raise CommandError(f"{ENV}: {name!r}: must be a non-empty list of strings")
    return table


class Runner:
    """Runs the table's programs; root ('' = this host) as --root gave it."""

    def __init__(self, root="", table=None):
        self.root = "" if root in ("", HOST_ROOT) else root
        self.overrides = parse_table(os.environ.get(ENV)) if table is None else dict(table)

    def path(self, path):
        return rooted(self.root, path)

    def argv(self, name, *args):
        if name in self.overrides:
            prefix = list(self.overrides[name])
        elif self.root and name not in OWN:
            raise CommandError(f"not running {name}: under --root {self.root} only what "
                               f"{ENV} names runs")
        else:
            prefix = defaults()[name]
        if name == "tusk-net" and self.root:
            prefix += ["--root", self.root]
        return prefix + [str(a) for a in args]

    def run(self, name, *args, env=None, cwd=None):
        """Output captured (text); CommandError when the program is missing."""
        argv = self.argv(name, *args)
        try:
            return subprocess.run(argv, capture_output=True, text=True, env=env, cwd=cwd,
                                  stdin=subprocess.DEVNULL)
        except OSError as exc:
            raise CommandError(f"cannot run {name} ({argv[0]}): {exc.strerror}") from None

    def interactive(self, name, *args, env=None, cwd=None):
        """On this terminal; Ctrl-C and Ctrl-\\ go to the program, not to us. Exit status."""
        argv = self.argv(name, *args)
        keep = {sig: signal.signal(sig, ignore) for sig in (signal.SIGINT, signal.SIGQUIT)}
        try:
            return subprocess.run(argv, env=env, cwd=cwd).returncode
        except OSError as exc:
            raise CommandError(f"cannot run {name} ({argv[0]}): {exc.strerror}") from None
        finally:
            for sig, handler in keep.items():
                signal.signal(sig, handler)


def ignore(signum, frame):
    """A handler, not SIG_IGN: exec resets it, so the child still gets the signal."""
