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
        invalid and default_deny in both)."""
        found = {}
        for family, table in ((FAMILY, TABLE), (BRIDGE_FAMILY, BRIDGE_TABLE)):
            result = self.run(["nft", "-j", "list", "counters", "table", family, table])
            if not result.ok:
                continue
            for item in json.loads(result.stdout).get("nftables", []):
                counter = item.get("counter")
                if counter:
                    packets, octets = found.get(counter["name"], (0, 0))
                    found[counter["name"]] = (packets + counter["packets"],
                                              octets + counter["bytes"])
        return found

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
