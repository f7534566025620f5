"""tools/lib/lock.sh's take_lock: a niced background build that a test comes to wait
for (tools/check-kernel-debug, started niced by tools/warm-caches) goes on at the
waiter's priority, with every process under it; the waiter then takes the lock."""
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

LIB = Path(__file__).resolve().parents[2] / "tools" / "lib" / "lock.sh"


def niceness(pid):
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat[stat.rindex(")") + 2:].split()[16])


def wait_for(condition, what, seconds=10):
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def take(lock, pidfile, then):
    return f". {LIB}; exec 9>{lock}; take_lock 9 {pidfile}; {then}"


@pytest.mark.skipif(os.geteuid() != 0, reason="raising a priority needs root")
def test_the_waiter_raises_the_niced_holder_and_its_children_then_takes_the_lock(tmp_path):
    lock, pidfile = tmp_path / "build.lock", tmp_path / "build.pid"
    holder = subprocess.Popen(["nice", "-n", "10", "bash", "-c",
                               take(lock, pidfile, "sleep 60 & wait")],
                              start_new_session=True)
    waiter = None
    try:
        wait_for(lambda: pidfile.exists() and pidfile.read_text().strip() == str(holder.pid),
                 "the holder never took the lock")
        children = []
        wait_for(lambda: children.extend(subprocess.run(
            ["pgrep", "-P", str(holder.pid)], capture_output=True, text=True).stdout.split())
            or children, "the holder's child never started")
        assert niceness(holder.pid) == 10 and niceness(children[0]) == 10
        waiter = subprocess.Popen(["bash", "-c", take(lock, pidfile, "echo taken")],
                                  stdout=subprocess.PIPE, text=True)
        wait_for(lambda: niceness(holder.pid) == 0 and niceness(children[0]) == 0,
                 "the holder and its child were not raised to the waiter's niceness")
        assert waiter.poll() is None, "the waiter did not wait for the lock"
        os.killpg(holder.pid, signal.SIGTERM)
        holder.wait(10)
        assert waiter.communicate(timeout=10)[0] == "taken\n"
        assert pidfile.read_text().strip() == str(waiter.pid)
    finally:
        for process in (holder, waiter):
            if process is not None and process.poll() is None:
                process.kill()
        try:
            os.killpg(holder.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def test_a_free_lock_is_taken_at_once_and_names_its_holder(tmp_path):
    lock, pidfile = tmp_path / "build.lock", tmp_path / "build.pid"
    pidfile.write_text("not a pid\n")
    done = subprocess.run(["bash", "-c", take(lock, pidfile, "echo $$")], capture_output=True,
                          text=True, timeout=10, check=True)
    assert pidfile.read_text() == done.stdout
