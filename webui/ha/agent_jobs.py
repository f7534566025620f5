"""The agent's HA jobs (docs/HA.md): apply this box's half of the pair (pending until
confirmed), confirm, cancel (roll back now), fail over (the master hands the addresses
to the backup); its periodic ha.status (the role keepalived's notify recorded, the
daemons, conntrackd's statistics, the pending change) for the HA page and the health
panel; at start, a pending change's watchdog re-armed.

Every argument is checked here again, as attacker-controlled input (docs/SECURITY.md):
the document goes through the same from_document the form uses, then against this
machine's interfaces. Paths come from the agent's configuration, never from a row."""
import json
import time

from jobs.models import PeriodicState
from jobs.registry import JobFailed, handler, known_args, problems_result, on_start, periodic

from .core.applier import HaApplier
from .core.config import TEXT_MAX, HaError, from_document, to_toml

STATUS = "ha.status"


def applier_for(config):
    return HaApplier(config.ha_state_dir, netns=config.netns or None)


def snapshot(config):
    """What the HA page and the health panel show of this box."""
    applier = applier_for(config)
    found = applier.status()
    found["stats"] = applier.stats()
    found["at"] = time.time()
    return found


@periodic(STATUS, lambda config: max(1.0, config.sample_interval))
def status_task(agent):
    return snapshot(agent.config)


@on_start("ha.recover")
def recover(agent):
    """A pending change whose watchdog died with the agent's machine: rolled back when
    overdue, watched again when not."""
    return applier_for(agent.config).recover()


def _after(run):
    PeriodicState.objects.update_or_create(name=STATUS, defaults={
        "result": snapshot(run.config)})


def _result(revision, applier):
    pending = applier.store.pending()
    return {"ha_revision": revision.id, "outcome": revision.outcome,
            "deadline": pending["deadline"] if pending else None}


@handler("ha.apply", "Apply HA pair configuration")
def apply(run):
    args = known_args(run, ("document", "timeout"))
    document = args.get("document")
    if not isinstance(document, dict):
        raise JobFailed("document: must be a table with ha.toml's structure")
    size = len(json.dumps(document))
    if size > TEXT_MAX:
        raise JobFailed(f"document: {size >> 10} KiB; at most {TEXT_MAX >> 10} KiB")
    applier = applier_for(run.config)
    try:
        run.progress(10, "checking the pair's configuration against this box")
        text = to_toml(from_document(document))
        run.progress(30, f"starting {applier.daemons.describe()}")
        revision = applier.apply(text, user=run.user, timeout=args.get("timeout"))
    except HaError as error:
        _after(run)
        raise JobFailed(str(error), result=problems_result(error)) from None
    _after(run)
    return _result(revision, applier)


def _decide(run, decision):
    known_args(run, ())
    applier = applier_for(run.config)
    try:
        revision = decision(applier)
    except HaError as error:
        _after(run)
        raise JobFailed(str(error), result=problems_result(error)) from None
    _after(run)
    return _result(revision, applier)


@handler("ha.confirm", "Confirm HA pair configuration")
def confirm(run):
    return _decide(run, lambda applier: applier.confirm(user=run.user))


@handler("ha.cancel", "Roll back pending HA pair configuration")
def cancel(run):
    return _decide(run, lambda applier: applier.cancel(user=run.user))


@handler("ha.failover", "Fail over to the peer")
def failover(run):
    known_args(run, ())
    applier = applier_for(run.config)
    run.progress(20, "restarting keepalived: the peer takes the addresses")
    try:
        role = applier.fail_over()
    except HaError as error:
        _after(run)
        raise JobFailed(str(error), result=problems_result(error)) from None
    _after(run)
    if role != "BACKUP":
        raise JobFailed(f"keepalived restarted, but this box reports {role or 'no role'} "
                        "instead of BACKUP", result={"role": role})
    return {"role": role}
