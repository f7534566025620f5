"""What the agent runs, declared by each app in its `agent_jobs` module; the registry
imports those modules on first use.

@handler(kind, ...): a job kind. Its handler runs in the agent (as root) and receives a
Run: run.args, run.user, run.config (the device configuration), run.progress(percent,
message). It returns the job's result (JSON-serialisable) or raises JobFailed with a
message for the operator.

@periodic(name, interval): work the agent does on its own every interval seconds (a
number, or a function of the configuration); @on_start(name): once when the agent
starts, before it takes jobs. Either function receives the agent (agent.config,
agent.id) and may return a JSON-serialisable result, which is kept for the pages
(jobs.models.PeriodicState.last_result). With contract=Type (a dataclass of
tusklib/contracts.py) the result is checked against it before it is kept - a result that
breaks it is the task's failure - and the pages read it with PeriodicState.read(Type).
jobs/periodic.py runs them, each on its own.
"""
from dataclasses import dataclass

from django.utils.module_loading import autodiscover_modules

from tusklib import contracts

_HANDLERS = {}
_TASKS = {}
_discovered = False


class JobFailed(Exception):
    """A handler's clean failure: the message is shown to the operator as is."""

    def __init__(self, message, result=None):
        super().__init__(message)
        self.result = result


def known_args(run, known):
    """The job's arguments, a table with no key outside known - or JobFailed naming the
    first unknown one (the row may have been written by anyone who holds the database)."""
    args = run.args
    if not isinstance(args, dict):
        raise JobFailed("the job's arguments must be a table")
    unknown = sorted(str(key)[:40] for key in args if key not in known)
    if unknown:
        raise JobFailed(f"{unknown[0]}: unknown argument (known: {', '.join(known) or 'none'})")
    return args


def problems_result(error):
    """A tusklib.problems.Problems as a failed job's result, for the pages to put each
    problem next to its field."""
    return {"problems": [{"code": p.code.name, "path": p.path, "message": p.message}
                         for p in error.problems]}


@dataclass(frozen=True)
class Handler:
    kind: str
    function: object
    retry_safe: bool  # may run again after an agent crash without harm
    title: str
    long_running: bool = False  # runs on the agent's own pool for such jobs (captures)
    abandoned: object = None  # abandoned(job, config): a starting agent failed this job,
                              # which a dead agent was running; settle what it left


def handler(kind, title, retry_safe=False, long_running=False, abandoned=None):
    def register(function):
        if kind in _HANDLERS and _HANDLERS[kind].function is not function:
            raise RuntimeError(f"job kind {kind} registered twice")
        _HANDLERS[kind] = Handler(kind, function, retry_safe, title, long_running, abandoned)
        return function
    return register


@dataclass(frozen=True)
class Task:
    name: str
    function: object
    interval: object  # seconds, or interval(config) -> seconds; None: once, at agent start
    contract: object = None  # the dataclass its result must be (tusklib/contracts.py)

    def result(self, value):
        """value as the row keeps it: checked against the contract (ContractError when it
        breaks it) and stored as its table, the contract's fields alone."""
        if self.contract is None:
            return value
        return contracts.stored(self.contract, value)

    def seconds(self, config):
        return self.interval(config) if callable(self.interval) else self.interval


def _register_task(name, interval, contract=None):
    def register(function):
        if name in _TASKS and _TASKS[name].function is not function:
            raise RuntimeError(f"agent task {name} registered twice")
        _TASKS[name] = Task(name, function, interval, contract)
        return function
    return register


def periodic(name, interval, contract=None):
    if interval is None:
        raise ValueError(f"agent task {name}: a periodic task needs an interval")
    return _register_task(name, interval, contract)


def on_start(name, contract=None):
    return _register_task(name, None, contract)


def _discover():
    global _discovered
    if not _discovered:
        autodiscover_modules("agent_jobs")
        _discovered = True


def get(kind):
    _discover()
    return _HANDLERS.get(kind)


def known_kinds():
    _discover()
    return set(_HANDLERS)


def long_running_kinds():
    _discover()
    return {kind for kind, found in _HANDLERS.items() if found.long_running}


def is_retry_safe(kind):
    found = get(kind)
    return bool(found and found.retry_safe)


def periodic_tasks():
    _discover()
    return [task for task in _TASKS.values() if task.interval is not None]


def start_hooks():
    _discover()
    return [task for task in _TASKS.values() if task.interval is None]
