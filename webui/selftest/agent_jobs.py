"""The agent's self-test job (selftest.run), on the pool for long-running jobs.

Lab mode ([selftest] client_netns and server_netns): the responder runs in the server
namespace for the duration of the job only, and `python -m selftest.core measure` in
the client namespace measures the path through fw and, when direct_address is set, the
one around it. Hardware mode: `python -m selftest.core control` (in the agent's target
namespace, if it has one) asks the client host's responder to measure the paths to the
server host. Both children print progress and the summary as JSON lines, and die with
the agent (PR_SET_PDEATHSIG); the responder is stopped on every way out of the job.
"""
import contextlib
import os
import selectors
import subprocess
import sys
import time

from django.conf import settings
from django.utils import timezone

from jobs.registry import JobFailed, handler
from tusklib import children

from .core import responder as core_responder
from .core import table
from .core.responder import LIMITS
from .forms import checked_run
from .models import SelfTest

RESPONDER_START = 10   # seconds the responder may take to listen
SLACK = 90             # seconds beyond max_seconds before the run is ended
ACTIVE = (SelfTest.State.QUEUED, SelfTest.State.RUNNING)
# Lab mode: both ends on one CPU, with the veth hops' softirq work. Unpinned, where the
# scheduler puts a connection's two ends decides a ping's round trip (8 or 60 us on a
# 2-core box) for the whole run - far more than the firewall adds (see bench-middlebox).
LAB_PIN = ("taskset", "-c", "0")


def _finish(test, **fields):
    SelfTest.objects.filter(pk=test.pk).update(finished_at=timezone.now(), **fields)


def abandoned(job, config):
    """At agent start, for a self-test its dead predecessor was running (its children
    died with it)."""
    SelfTest.objects.filter(job=job, state__in=ACTIVE).update(
        state=SelfTest.State.FAILED, finished_at=timezone.now(),
        error="the agent stopped during this self-test")


@handler("selftest.run", "Self-test", long_running=True, abandoned=abandoned)
def run_selftest(run):
    test = SelfTest.objects.get(pk=run.args["selftest"])
    try:
        return _run(run, test)
    except JobFailed as exc:
        _finish(test, state=SelfTest.State.FAILED, error=str(exc))
        raise
    finally:   # a crash must not leave the row running for ever
        SelfTest.objects.filter(pk=test.pk, state__in=ACTIVE).update(
            state=SelfTest.State.FAILED, finished_at=timezone.now(),
            error="the self-test job crashed: see its job page")


def _address(host, port):
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _command(test, config):
    """The measuring child's argv, from the row checked again as the form checks it."""
    try:
        run, params = checked_run(test, config)
    except ValueError as exc:
        raise JobFailed(f"self-test {test.pk}: {exc}") from None
    argv = [sys.executable, "-m", "selftest.core"]
    if run["mode"] == SelfTest.Mode.LAB:
        argv = ["ip", "netns", "exec", config.selftest_client_netns, *LAB_PIN, *argv, "measure"]
    else:
        prefix = ["ip", "netns", "exec", config.netns] if config.netns else []
        argv = [*prefix, *argv, "control", "--client",
                _address(run["client_host"], run["port"])]
    argv += ["--path", f"through={_address(run['server_host'], run['port'])}"]
    if run["direct_address"]:
        argv += ["--path", f"direct={_address(run['direct_address'], run['port'])}"]
    for field in LIMITS:
        argv += [f"--{field.replace('_', '-')}", str(params[field])]
    return argv + ["--json-lines"], params


def _start_responder(config):
    """The responder in the lab's server namespace, listening once this returns."""
    proc = subprocess.Popen(
        ["ip", "netns", "exec", config.selftest_server_netns, *LAB_PIN, sys.executable,
         core_responder.__file__, "--port", str(config.selftest_port), "--quiet"],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=children.end_with_parent(os.getpid()))
    with selectors.DefaultSelector() as selector:
        selector.register(proc.stdout, selectors.EVENT_READ)
        if selector.select(RESPONDER_START) and proc.stdout.readline().startswith("listening"):
            return proc
    children.stop(proc)
    raise JobFailed(f"the responder did not start in {config.selftest_server_netns}: "
                    f"{proc.stderr.read().strip() or 'no answer'}")


def _measure(run, argv, params):
    """Runs the measuring child to its end: its summary, progress reported on the way."""
    deadline = time.monotonic() + params["max_seconds"] + SLACK
    result = None
    messages = children.json_lines(argv, cwd=settings.BASE_DIR,
                                   preexec_fn=children.end_with_parent(os.getpid()))
    try:
        with contextlib.closing(messages):   # stops the child when we give up on it
            for message in messages:
                if run.agent.stopping.is_set():
                    raise JobFailed("the agent stopped during this self-test")
                if time.monotonic() > deadline:
                    raise JobFailed(f"the measurement took longer than "
                                    f"{params['max_seconds']} + {SLACK} s")
                if message is None:
                    continue
                if "progress" in message:
                    run.progress(min(99, message["progress"]), message["message"])
                else:
                    result = message["result"]
    except children.ChildFailed as exc:
        raise JobFailed(exc.stderr.strip().removeprefix("error: ")
                        or f"the measurement {exc.reason}") from None
    if result is None:
        raise JobFailed("the measurement printed no summary")
    return result


def _run(run, test):
    config = run.config
    argv, params = _command(test, config)
    SelfTest.objects.filter(pk=test.pk).update(state=SelfTest.State.RUNNING,
                                               started_at=timezone.now())
    run.progress(0, "starting")
    responder = _start_responder(config) if test.mode == SelfTest.Mode.LAB else None
    try:
        result = _measure(run, argv, params)
    finally:
        if responder:
            children.stop(responder)
    _finish(test, state=SelfTest.State.DONE, result=result)
    failures = sum(row["failures"] for paths in result["metrics"].values()
                   for row in paths.values())
    return {"selftest": test.pk, "failures": failures, "ratios": result["ratios"],
            "table": table.format_table(result)}
