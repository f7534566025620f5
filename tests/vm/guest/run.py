#!/usr/bin/env python3
"""Runs VM test scenarios in the guest, in order: python3 run.py SCENARIO...

A scenario is scenarios/<name, - as _>.py with TIME_LIMIT (seconds) and run(ctx)
(ctx: scenario.Context). Each runs in its own forked process and session, so one
that hangs is killed with everything it started once it outlives its limit, and one
that fails never stops the next. After each, every network namespace is removed and
its folder lands in /out/<name>/ with result.json (status passed, failed or timeout;
seconds; the end of its log) and scenario.log (its output and traceback).

/out/guest.json says what the scenarios ran on: kernel, CPUs, tool versions, the
uptime at which the runner started and the guest's measured speed (speed.py): every
scenario's TIME_LIMIT, and every wait_until in it, is multiplied by time_scale.
Exit status: 0 if every scenario passed.
"""
import importlib
import json
import os
import platform
import select
import shutil
import signal
import stat
import subprocess
import sys
import time
import traceback
from pathlib import Path

# Before the slow imports below: how long the guest took to get here.
with open("/proc/uptime") as _uptime:
    UPTIME_AT_START = float(_uptime.read().split()[0])

GUEST = Path(__file__).resolve().parent
TESTS = GUEST.parents[1]
sys.path[:0] = [str(TESTS.parent), str(TESTS), str(TESTS / "netns"),
                 str(TESTS.parent / "webui")]

import speed  # noqa: E402  (needs the paths above)
from scenario import Context  # noqa: E402

OUT = Path("/out")
GUEST_INIT = "tusk-vm-init"
WORK = Path("/tmp/tusk-vm")
LOG_TAIL_LINES = 40


def module_name(scenario):
    return "scenarios." + scenario.replace("-", "_")


def run_scenario(scenario):
    """Runs one scenario; returns its result record."""
    work = WORK / scenario
    work.mkdir(parents=True)
    start = time.monotonic()
    try:
        module = importlib.import_module(module_name(scenario))
    except ImportError as error:
        return finish(scenario, work, {"status": "failed", "seconds": 0.0,
                                       "error": f"cannot load the scenario: {error}"})
    # the limit follows the guest's measured speed (speed.py): slow, not hung, is no failure
    limit = module.TIME_LIMIT * SCALE
    pid = os.fork()
    if pid == 0:
        _child(scenario, work, module)
    pidfd = os.pidfd_open(pid)
    finished, _, _ = select.select([pidfd], [], [], limit)
    if not finished:
        _kill_group(pid)
    _, wait_status = os.waitpid(pid, 0)
    os.close(pidfd)
    seconds = time.monotonic() - start
    _kill_group(pid)
    remove_namespaces()
    code = os.waitstatus_to_exitcode(wait_status)
    if not finished:
        status, error = "timeout", f"killed after its time limit of {limit} s"
    elif code == 0:
        status, error = "passed", ""
    else:
        status, error = "failed", f"exit status {code}"
    return finish(scenario, work, {"status": status, "seconds": round(seconds, 2),
                                   "time_limit": limit, "error": error})


def _child(scenario, work, module):
    """In the forked process: its own session (so the runner can kill everything it
    started), output into scenario.log, exit status 0 only if run() returned."""
    code = 1
    try:
        os.setsid()
        log = os.open(work / "scenario.log", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(log, 1)
        os.dup2(log, 2)
        ctx = Context(scenario, work)
        try:
            module.run(ctx)
            code = 0
        finally:
            ctx.close()
    except BaseException:
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _kill_group(pgid):
    """The scenario's session: all it started (a capture left after a failure)."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def remove_namespaces():
    """Every network namespace and what runs in it: the next scenario starts clean."""
    names = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    for name in (line.split()[0] for line in names.splitlines() if line.strip()):
        pids = subprocess.run(["ip", "netns", "pids", name], capture_output=True,
                              text=True).stdout.split()
        for pid in pids:
            try:
                os.kill(int(pid), signal.SIGKILL)
            except ProcessLookupError:
                pass
        subprocess.run(["ip", "netns", "delete", name], capture_output=True)


def finish(scenario, work, record):
    log = work / "scenario.log"
    lines = log.read_text(errors="replace").splitlines() if log.exists() else []
    record = {"scenario": scenario, **record, "log_tail": lines[-LOG_TAIL_LINES:]}
    (work / "result.json").write_text(json.dumps(record, indent=1) + "\n")
    shutil.copytree(work, OUT / scenario, dirs_exist_ok=True, ignore=special_files)
    return record


def special_files(directory, names):
    """What a scenario leaves that is no artifact: FIFOs (keepalived's notify FIFO),
    sockets and devices, which copytree cannot copy."""
    def special(name):
        mode = os.lstat(os.path.join(directory, name)).st_mode
        return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode) or stat.S_ISLNK(mode))
    return [name for name in names if special(name)]


def describe_guest():
    def version(*argv):
        result = subprocess.run(argv, capture_output=True, text=True)
        return (result.stdout or result.stderr).strip().splitlines()[0]
    return {"uptime_at_runner_start": UPTIME_AT_START, "cpus": os.cpu_count(),
            "calibration_seconds": CALIBRATION, "time_scale": SCALE,
            "kernel_release": platform.release(), "kernel_version": platform.version(),
            "nft": version("nft", "--version"), "python": platform.python_version(),
            "iperf3": version("iperf3", "--version"), "tcpdump": version("tcpdump", "--version"),
            "conntrack": version("conntrack", "--version")}


CALIBRATION = SCALE = None


def main(scenarios):
    global CALIBRATION, SCALE
    with open("/proc/1/cmdline", "rb") as handle:
        if GUEST_INIT.encode() not in handle.read():
            sys.exit(f"{sys.argv[0]} runs only in the test VM (PID 1 {GUEST_INIT}): "
                     "it removes every network namespace between scenarios")
    CALIBRATION = round(speed.calibrate(), 3)
    SCALE = speed.scale(CALIBRATION)
    os.environ[speed.VARIABLE] = str(SCALE)     # the scenarios' waits (tests/kit.py)
    print(f"guest speed: the calibration took {CALIBRATION} s (reference "
          f"{speed.REFERENCE_SECONDS} s): deadlines x{SCALE}", flush=True)
    (OUT / "guest.json").write_text(json.dumps(describe_guest(), indent=1) + "\n")
    failed = 0
    for scenario in scenarios:
        record = run_scenario(scenario)
        print(f"scenario {scenario}: {record['status']} in {record['seconds']:.1f} s"
              + (f" ({record['error']})" if record["error"] else ""), flush=True)
        failed += record["status"] != "passed"
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
