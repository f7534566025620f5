"""Helpers of the tuning tier: tusk-tune as an operator runs it on a fake tree, and a
tree's contents to compare before and after. Not in a test module: test modules of
different tiers share names."""
import os
import subprocess
import sys
from pathlib import Path

from tuskcli import ROOT

TUNE = Path(ROOT) / "webui" / "bin" / "tusk-tune"


def tune(root, *args, state_dir=None):
    state = ["--state-dir", str(state_dir or Path(root) / "state")]
    return subprocess.run([sys.executable, str(TUNE), "--root", str(root), *state, *args],
                          capture_output=True, text=True)



def snapshot(root):
    """Every file of a tree (not the state directory) -> its bytes."""
    files = {}
    for directory, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if d != "state"]
        for name in names:
            path = os.path.join(directory, name)
            if not os.path.islink(path):
                with open(path, "rb") as handle:
                    files[os.path.relpath(path, root)] = handle.read()
    return files
