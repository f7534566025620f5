"""The queue of scenarios that several boots share (run.py --queue; conftest.py's guest
fixture): a host directory, shared read-write over 9p, with one empty file per
scenario, NNN-<name>, taken in NNN's order. A boot takes one by renaming it to
NNN-<name>.taken: a rename on the host, which only one of the boots can win. Standard
library only: the host and the guest both import it."""
import os
from pathlib import Path

TAKEN = ".taken"


def fill(directory, scenarios):
    """A new queue in directory (emptied first) holding scenarios, in their order."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    for entry in os.listdir(directory):
        os.unlink(directory / entry)
    for number, scenario in enumerate(scenarios):
        (directory / f"{number:03d}-{scenario}").touch()


def left(directory):
    """The scenarios no boot has taken yet, in order."""
    return [entry.split("-", 1)[1] for entry in sorted(os.listdir(directory))
            if not entry.endswith(TAKEN)]


def take(directory):
    """Yields each scenario this process takes, until none is left."""
    directory = Path(directory)
    while True:
        for entry in sorted(os.listdir(directory)):
            if entry.endswith(TAKEN):
                continue
            try:
                os.rename(directory / entry, directory / (entry + TAKEN))
            except FileNotFoundError:      # another boot took it first
                continue
            yield entry.split("-", 1)[1]
            break
        else:
            return
