"""The cached builds the test tiers share (the guest's root filesystem, the kernels, the
ISO): each a tool that prints the path of its result last."""
import os
import shlex
import subprocess
from pathlib import Path


def cached_build(argv, what):
    """Runs a cached build that prints one path last -> that path (each build takes its
    own lock: one at a time, and a caller waits for a build already under way and takes
    its result). Raises RuntimeError with the end of its output if it fails."""
    # Called from inside `make test`: a parent make's jobserver must not leak into it.
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    result = subprocess.run(argv, capture_output=True, text=True, env=env)
    lines = result.stdout.strip().splitlines()
    path = lines[-1] if lines else ""
    if result.returncode != 0 or not os.path.exists(path):
        tail = "\n".join((result.stdout + result.stderr).splitlines()[-30:])
        raise RuntimeError(f"could not build {what}: {shlex.join(argv)} exited "
                           f"{result.returncode}:\n{tail}")
    return Path(path)
