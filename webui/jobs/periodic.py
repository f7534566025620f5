"""Runs the agent's periodic tasks and start-up hooks (registry.periodic, on_start),
each on its own: a periodic task has a thread of its own (and so a database connection
of its own), catches its own errors and records every run in PeriodicState. One task
that fails or hangs never stops or delays another, nor job dispatch. A run that
overruns its interval is not stacked: the ticks it missed are skipped, and counted.

What a task writes is bookkeeping the next run writes again (its record, samples, the
mirrors of the stores on disk), so a task's connection does not wait for the WAL's
flush at each commit (synchronous_commit off: a crash loses at most the last fraction
of a second of it, never makes it inconsistent), and checks its connection once a run.
With the agent keeping its connections (agent.main), that took PostgreSQL's CPU on the
idle lab from at least 2.3 s a minute to 0.66 s (2 s sampling)."""
import logging
import threading
import time

from django.db import close_old_connections, connection
from django.db.backends.signals import connection_created
from django.db.models import F
from django.utils import timezone

from . import registry
from .models import PeriodicState

log = logging.getLogger("tusk.agent")

_thread = threading.local()   # .periodic: this thread runs periodic tasks


def _bookkeeping_connection(sender, connection, **kwargs):
    if getattr(_thread, "periodic", False):
        with connection.cursor() as cursor:
            cursor.execute("SET synchronous_commit TO off")


connection_created.connect(_bookkeeping_connection)


def run_once(task, agent, skipped=0):
    """One run of task, recorded; never raises."""
    close_old_connections()   # the task's first query checks the connection
    started, clock = timezone.now(), time.monotonic()
    try:
        result, error = task.result(task.function(agent)), ""
    except Exception as exc:  # the task's own failure, recorded for the Jobs page
        log.exception("agent task %s failed", task.name)
        result, error = None, f"{type(exc).__name__}: {exc}"
    done = {"agent": agent.id, "started_at": started, "error": error,
            "duration": time.monotonic() - clock, "runs": F("runs") + 1,
            "failures": F("failures") + (1 if error else 0), "skipped": F("skipped") + skipped}
    if not error:
        done["result"] = result
    if connection.errors_occurred:   # a connection the task broke is not used to record it
        close_old_connections()
    try:
        PeriodicState.objects.filter(name=task.name).update(**done)
    except Exception:  # the database is away: the next run records again
        log.exception("recording agent task %s failed", task.name)


def _loop(task, agent, seconds):
    _thread.periodic = True
    due, skipped = time.monotonic(), 0
    while not agent.stopping.is_set():
        run_once(task, agent, skipped)
        due += seconds
        now = time.monotonic()
        skipped = max(0, int((now - due) // seconds) + 1)
        due += skipped * seconds
        agent.stopping.wait(due - now)


def run_start_hooks(agent):
    """Resets the rows of the registered tasks (a task no longer registered loses its
    row), then runs the start-up hooks one after the other."""
    hooks, tasks = registry.start_hooks(), registry.periodic_tasks()
    PeriodicState.objects.exclude(name__in=[t.name for t in hooks + tasks]).delete()
    for task in hooks + tasks:
        PeriodicState.objects.update_or_create(name=task.name, defaults={
            "agent": agent.id, "interval": task.seconds(agent.config), "runs": 0,
            "failures": 0, "skipped": 0, "error": "", "started_at": None, "duration": None})
    for hook in hooks:
        run_once(hook, agent)


def start(agent):
    """A thread for each periodic task, which ends when agent.stopping is set (a daemon:
    a task that hangs does not hold the agent's exit)."""
    for task in registry.periodic_tasks():
        threading.Thread(target=_loop, args=(task, agent, task.seconds(agent.config)),
                         name=f"periodic {task.name}", daemon=True).start()
