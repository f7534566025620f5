"""The tests' kit: waiting for a condition instead of sleeping. Where things are: lab.paths;
namespaces, veth pairs and routes: lab.namespaces (Topology, Lab).

Not in conftest.py: see tuskcli.py."""
import os
import time

INTERVAL = 0.1


def time_scale():
    """TUSK_TIME_SCALE: how much slower than on a quiet host the test VM's guest runs
    (tests/vm/guest/speed.py, set by its runner), 1 outside it or when it is no number
    from 1 to 4."""
    try:
        value = float(os.environ.get("TUSK_TIME_SCALE", "1"))
    except ValueError:
        return 1.0
    return value if 1.0 <= value <= 4.0 else 1.0


def wait_until(predicate, seconds, what):
    """predicate()'s first true value, asked every INTERVAL s for up to `seconds`; else an
    AssertionError naming `what` (a string, or a function giving it then: the state at
    the end tells more than the state at the start) and the last value seen. An exception
    in predicate ends the wait at once (e.g. the process waited on has died). In the test
    VM, seconds is multiplied by the guest's measured slowness (TUSK_TIME_SCALE: tests/
    vm/guest/speed.py; 1 elsewhere)."""
    seconds = seconds * time_scale()
    deadline = time.monotonic() + seconds
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            what = what() if callable(what) else what
            raise AssertionError(f"{what}: not within {seconds} s (last: {value!r})")
        time.sleep(INTERVAL)
