"""The tests' kit: waiting for a condition instead of sleeping. Where things are: lab.paths;
namespaces, veth pairs and routes: lab.namespaces (Topology, Lab).

Not in conftest.py: see tuskcli.py."""
import time

INTERVAL = 0.1


def wait_until(predicate, seconds, what):
    """predicate()'s first true value, asked every INTERVAL s for up to `seconds`; else an
    AssertionError naming `what` (a string, or a function giving it then: the state at
    the end tells more than the state at the start) and the last value seen. An exception
    in predicate ends the wait at once (e.g. the process waited on has died)."""
    deadline = time.monotonic() + seconds
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            what = what() if callable(what) else what
            raise AssertionError(f"{what}: not within {seconds} s (last: {value!r})")
        time.sleep(INTERVAL)
