"""Where rulesets go: the running system, or a named network namespace (lab mode).

The only module that runs nft and ip. Everything else asks a Target. It raises
TargetError (code TARGET, 26: the policy engine's exit status for the same failure);
the policy engine turns it into its PolicyError where it meets one.
"""
import json
import os
import re
import shutil
import subprocess
from enum import IntEnum

from .names import BRIDGE_FAMILY, BRIDGE_TABLE, FAMILY, TABLE
from .problems import Problems


class Code(IntEnum):
    TARGET = 26          # the target (its tools, its namespace) cannot be used


class TargetError(Problems):
    codes = Code


class CommandResult:
    __slots__ = ("returncode", "stdout", "stderr")

    def __init__(self, returncode, stdout, stderr):
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr

    @property
    def ok(self):
        return self.returncode == 0


class Target:
    """A system whose nftables Tusk manages. netns=None is the host itself."""

    def __init__(self, netns=None):
        self.netns = netns
        for tool in ("nft", "ip"):
            if shutil.which(tool) is None:
                raise TargetError(Code.TARGET, "", f"'{tool}' is not installed (Debian package "
                                  f"{'nftables' if tool == 'nft' else 'iproute2'})")
        if netns is not None and not os.path.exists(f"/run/netns/{netns}"):
            raise TargetError(Code.TARGET, "", f"network namespace {netns!r} does not exist")

    def __str__(self):
        return f"namespace {self.netns}" if self.netns else "this system"

    def run(self, argv, stdin=None):
        if self.netns is not None:
            argv = ["ip", "netns", "exec", self.netns] + argv
        proc = subprocess.run(argv, input=stdin, capture_output=True, text=True, check=False)
        return CommandResult(proc.returncode, proc.stdout, proc.stderr)

    def read_files(self, paths):
        """{path: text (without its trailing newlines), or None when absent or unreadable}
        of files as the target sees them (its /proc/net, /proc/sys/net and /sys). The
        host's are read by this process itself: the agent's samples read them every few
        seconds, and on a small box - or the tests' emulated one, where a started process
        costs a tenth of a second - no process is the point. A namespace's come from one
        `sh` that `ip netns exec` gives the namespace's own views; the paths are its
        arguments, never its script's text."""
        return self._read(paths, "cat", _text)

    def read_links(self, paths):
        """{path: the last part of the symbolic link's target, or None} as read_files."""
        found = self._read(paths, "readlink", os.readlink)
        return {path: text.rsplit("/", 1)[-1] if text else None
                for path, text in found.items()}

    def _read(self, paths, command, read):
        """read_files and read_links: read(path) here, `command path` in a namespace."""
        if self.netns is not None:
            return _marked(self.run(["sh", "-c", _READ_SCRIPT, "sh", command, *paths]).stdout,
                           paths)
        found = {}
        for path in paths:
            try:
                found[path] = read(path).rstrip("\n")
            except OSError:
                found[path] = None
        return found

    def nft_check(self, ruleset):
        """nft -c: the kernel validates the whole transaction without committing it."""
        return self.run(["nft", "-c", "-f", "-"], stdin=ruleset)

    def nft_load(self, ruleset):
        """One atomic transaction: all of it takes effect, or none of it."""
        return self.run(["nft", "-f", "-"], stdin=ruleset)

    def tusk_table(self):
        """The live table inet tusk as nft lists it, or None when there is none."""
        result = self.run(["nft", "list", "table", FAMILY, TABLE])
        return result.stdout if result.ok else None

    def counters(self):
        """Named counters of the policy's tables -> {name: (packets, bytes)}: table inet
        tusk's, and table bridge tusk_bridge's added in (a class counts in one of them;
        invalid and default_deny in both); None when there is no table inet tusk (each of
        its rulesets has those two counters, so no counter of it listed is no table).
        One `nft` for both tables (the agent reads them every few seconds): every table's
        counters, the policy's kept. TargetError when nft fails."""
        result = self.run(["nft", "-j", "list", "counters"])
        if not result.ok:
            raise TargetError(Code.TARGET, "", f"nft list counters in {self}: "
                              f"{result.stderr.strip() or result.returncode}")
        found, tusk = {}, False
        for item in json.loads(result.stdout).get("nftables", []):
            counter = item.get("counter")
            place = counter and (counter.get("family"), counter.get("table"))
            if place in _POLICY_TABLES:
                tusk = tusk or place == (FAMILY, TABLE)
                packets, octets = found.get(counter["name"], (0, 0))
                found[counter["name"]] = (packets + int(counter["packets"]),
                                          octets + int(counter["bytes"]))
        return found if tusk else None

    def flowtable_devices(self, name, table=TABLE):
        """The devices of the live flowtable name of table inet <table> (tusk's own by
        default), or None when there is no such flowtable."""
        result = self.run(["nft", "-j", "list", "flowtable", FAMILY, table, name])
        if not result.ok:
            return None
        for item in json.loads(result.stdout).get("nftables", []):
            if "flowtable" in item:
                dev = item["flowtable"].get("dev", [])
                return [dev] if isinstance(dev, str) else list(dev)
        return None

    def interfaces(self):
        result = self.run(["ip", "-o", "link", "show"])
        if not result.ok:
            raise TargetError(Code.TARGET, "", f"cannot list interfaces of {self}: "
                              f"{result.stderr.strip()}")
        return {re.split(r"[@:]", line.split(": ", 2)[1])[0]
                for line in result.stdout.splitlines() if ": " in line}


_POLICY_TABLES = {(FAMILY, TABLE), (BRIDGE_FAMILY, BRIDGE_TABLE)}
# read_files and read_links in a namespace: $1 (cat or readlink) on each further argument;
# each that succeeds as a line of \036 (ASCII's record separator, in no /proc or /sys
# text) and its path, then what the command printed
_READ_SCRIPT = r"""
command=$1; shift
for p; do
    c=$("$command" -- "$p" 2>/dev/null) && printf '\036%s\n%s\n' "$p" "$c"
done
"""


def _text(path):
    with open(path, encoding="utf-8", errors="replace") as handle:
        return handle.read()


def _marked(text, paths):
    """_READ_SCRIPT's output -> {path: text or None} for each of paths (its trailing
    newlines gone, as command substitution drops them)."""
    found = dict.fromkeys(paths)
    for record in text.split("\036")[1:]:
        path, _, body = record.partition("\n")
        if path in found:
            found[path] = body[:-1] if body.endswith("\n") else body
    return found
