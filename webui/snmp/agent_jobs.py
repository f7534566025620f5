"""The agent's SNMP jobs (docs/MONITORING.md, "SNMP"): apply the configuration (pending
until confirmed), confirm, cancel (roll back now); at start, a pending change's watchdog
re-armed and snmpd brought up on the confirmed configuration where boot does not do it
(the lab); every few seconds the counters tusk-snmp-pass answers with (counters.py) and
the status for the page.

Every argument is checked here again, as attacker-controlled input (docs/SECURITY.md):
the document goes through the same from_document the form uses, and its secrets left
out are taken only from root's own store, for a user of the same name. Paths come from
the agent's configuration, never from a row."""
import json
import os
import time

from box.appliers import SnmpApplier
from commitkit.jobs import decisions, revision_result
from jobs.models import PeriodicState
from jobs.registry import JobFailed, handler, known_args, on_start, periodic, problems_result
from tusklib import contracts

from . import counters, sync
from .contracts import SnmpStatus
from .core.applier import daemon_ids
from .core.config import SECRETS, TEXT_MAX, SnmpError, from_document, to_toml
from .domain import DOMAIN

STATUS = "snmp.status"
COUNTERS_SECONDS = 5
_counters = {"at": None, "error": ""}


def state_dir(config):
    """Beside the policy's state directory: /var/lib/tusk/snmp on the appliance."""
    return os.path.join(os.path.dirname(os.path.abspath(config.state_dir)), "snmp")


def applier_for(config):
    return SnmpApplier(state_dir(config), netns=config.netns or None)


def snapshot(config, applier=None):
    applier = applier or applier_for(config)
    return {"running": applier.running(), "counters_at": _counters["at"],
            "counters_error": _counters["error"], "daemon": applier.daemon.describe(),
            "at": time.time()}


@periodic(STATUS, lambda config: max(2.0, config.sample_interval), contract=SnmpStatus)
def status_task(agent):
    return snapshot(agent.config)


@periodic("snmp.sync", lambda config: config.sample_interval, contract=contracts.NOTHING)
def sync_store(agent):
    sync.sync(applier_for(agent.config), periodic=True)


@periodic("snmp.counters", COUNTERS_SECONDS, contract=contracts.NOTHING)
def write_counters(agent):
    """Tusk's counters for tusk-snmp-pass, while snmpd runs (group-readable by its
    user, nothing else of root's)."""
    applier = applier_for(agent.config)
    if not applier.running():
        return
    try:
        _, gid = daemon_ids()
        counters.write(applier.counters_path, counters.collect(agent.config), gid)
    except (SnmpError, OSError) as error:
        _counters["error"] = str(error)[:500]
        raise
    _counters.update(at=time.time(), error="")


@on_start("snmp.recover", contract=str)
def recover(agent):
    """A pending change whose watchdog died with the agent rolled back when overdue,
    watched again when not; in the lab, snmpd started on the confirmed configuration
    (on the appliance boot did that, and systemd keeps it running)."""
    applier = applier_for(agent.config)
    found = applier.recover()
    if applier.netns is not None and not applier.running() and applier.store.pending() is None:
        try:
            applier.start()
        except SnmpError as error:
            found += f"; snmpd not started: {error}"
    sync.sync(applier)
    return found


def _after(run, applier=None):
    """After a job, whatever its outcome: the store mirrored, the status fresh."""
    applier = applier or applier_for(run.config)
    sync.sync(applier)
    PeriodicState.objects.update_or_create(name=STATUS, defaults={
        "result": contracts.stored(SnmpStatus, snapshot(run.config, applier))})


def _result(revision, applier):
    return revision_result("snmp_revision", revision, applier.store)


def _without_secrets(document):
    """The document's users and community without their passphrases and name."""
    found = {}
    users = document.get("user")
    if isinstance(users, list):
        found["user"] = [{k: v for k, v in user.items() if k not in SECRETS}
                         if isinstance(user, dict) else None for user in users]
    community = document.get("community")
    if isinstance(community, dict):
        found["community"] = {k: v for k, v in community.items() if k != "name"}
    return found


@handler("snmp.apply", "Apply SNMP configuration")
def apply(run):
    args = known_args(run, ("document", "timeout"))
    document = args.get("document")
    if not isinstance(document, dict):
        raise JobFailed("document: must be a table with snmp.toml's structure")
    size = len(json.dumps(document))
    if size > TEXT_MAX:
        raise JobFailed(f"document: {size >> 10} KiB; at most {TEXT_MAX >> 10} KiB")
    # the passphrases leave the job's row at once: the database is no place for them
    # (the revision store, root's, keeps them)
    type(run.job).objects.filter(pk=run.job.pk).update(
        args={**args, "document": {**document, **_without_secrets(document)}})
    applier = applier_for(run.config)
    try:
        run.progress(10, "checking the SNMP configuration")
        # the form's check; the applier fills in the secrets left out from its store
        text = to_toml(from_document(document))
        run.progress(30, f"starting {applier.daemon.describe()}")
        revision = applier.apply(text, user=run.user, timeout=args.get("timeout"))
    except SnmpError as error:
        _after(run, applier)
        raise JobFailed(str(error), result=problems_result(error)) from None
    _after(run, applier)
    return _result(revision, applier)


# snmp.confirm and snmp.cancel (roll back now): the commit-confirm kit's
decisions(DOMAIN, applier_for, SnmpError, _after, _result)
