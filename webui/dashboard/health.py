"""The health panel's checks, registered by each app as its agent tasks are: a function
that returns a list of checks ({"name", "ok", "detail"}; ok None: not known yet), run in
the order the apps register them (INSTALLED_APPS' order; the dashboard's own first). An
app registers in its AppConfig.ready(); the dashboard imports no app for its panel."""

from jobs.models import PeriodicState

AGENT_STALE = 15     # seconds without a report: the agent counts as not reporting
STALE_RUNS = 3       # ... or this many of the task's own intervals, when longer


def stale_after(task, floor=AGENT_STALE * 2):
    """Seconds after which the last report of the agent's periodic task counts as stale:
    STALE_RUNS of the interval the agent runs it at (its row's, which follows [agent]
    sample_interval), never less than floor. A box that samples every 10 s runs
    network.routing every 50 s; a fixed limit called it unread between two reports."""
    interval = PeriodicState.objects.filter(name=task).values_list("interval", flat=True).first()
    return max(floor, STALE_RUNS * (interval or 0))

_CHECKS = []


def check(name, ok, detail):
    return {"name": name, "ok": ok, "detail": detail}


def register(function):
    """Adds function (-> [check]) to the panel, once."""
    if function not in _CHECKS:
        _CHECKS.append(function)
    return function


def run():
    """Every registered check, in order: polling this creates nothing."""
    return [found for function in _CHECKS for found in function()]
