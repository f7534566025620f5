"""The tusk CLI as an operator runs it, for the tests that drive it.

Not in conftest.py: every tier has its own conftest, and a test module that imported
helpers `from conftest` would get whichever tier's conftest pytest loaded last.
"""
import os
import subprocess
import sys

from lab.paths import ROOT

TUSK = os.path.join(ROOT, "webui", "bin", "tusk")


def run_tusk(*args, netns=None, state_dir=None, check=False, **kwargs):
    """The CLI as an operator runs it, in its own process."""
    argv = [sys.executable, TUSK, "policy"]
    if netns:
        argv += ["--netns", netns]
    if state_dir:
        argv += ["--state-dir", str(state_dir)]
    result = subprocess.run(argv + [str(a) for a in args], capture_output=True, text=True,
                            **kwargs)
    if check and result.returncode != 0:
        raise AssertionError(f"tusk {' '.join(map(str, args))} failed ({result.returncode}):\n"
                             f"{result.stdout}{result.stderr}")
    return result
