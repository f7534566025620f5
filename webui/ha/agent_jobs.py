"""The agent's HA jobs (docs/HA.md): apply this box's half of the pair (pending until
confirmed), confirm, cancel (roll back now), fail over (the master hands the addresses
to the backup); its periodic ha.status (the role keepalived's notify recorded, the
daemons, conntrackd's statistics, the pending change) for the HA page and the health
panel; at start, a pending change's watchdog re-armed.

Every argument is checked here again, as attacker-controlled input (docs/SECURITY.md):
the document goes through the same from_document the form uses, then against this
machine's interfaces. Paths come from the agent's configuration, never from a row."""
import json
import threading
import time
from functools import partial

from box import snapshot as snapshot_of
from box import verify
from box.appliers import HaApplier
from commitkit.jobs import decisions, revision_result
from jobs.models import PeriodicState
from jobs.registry import JobFailed, handler, known_args, on_start, periodic, problems_result
from tusklib import contracts

from . import configsync, sync
from .contracts import HaStatus
from .core import peer as peers
from .core.config import TEXT_MAX, HaError, from_document, to_toml
from .domain import DOMAIN

STATUS = "ha.status"
PEER_TIMEOUT = 2       # seconds the status waits for the peer's answer
_listener = {"server": None, "where": None, "error": None}
_listener_lock = threading.Lock()


def applier_for(config):
    return HaApplier(config.ha_state_dir, netns=config.netns or None)


_sync = configsync.Sync()
_sync_lock = threading.Lock()     # the periodic status and a job's may both get here


def network_of(config):
    """The network part of the agent's snapshot (root's files, never the mirror)."""
    try:
        return snapshot_of.read(snapshot_of.AGENT, "network", config=config).network
    except snapshot_of.SnapshotError as error:
        raise JobFailed(f"{error}: the pair's links cannot be checked against it") from None


def local_status(config, applier):
    """What this box tells its peer about itself."""
    return {"role": applier.role(), "running": applier.daemons.running(), "at": time.time(),
            "policy": configsync.policy_state(config),
            "tuning": configsync.tuning_state(config)}


def pair_of(applier):
    """This box's pair (the pending half, else the confirmed one), or None when there is
    none, it is disabled or its file cannot be read."""
    try:
        ha = applier.pending_or_confirmed()
    except HaError:
        return None
    return ha if ha is not None and ha.enabled else None


def answer(config, applier, method, path, request):
    """The peer channel's answers (ha/core/peer.py): (HTTP status, JSON-able)."""
    if (method, path) == ("GET", "/v1/status"):
        return 200, local_status(config, applier)
    if method != "POST" or path not in (configsync.POLICY_PATH, configsync.TUNING_PATH):
        return 404, {"error": f"{method} {path}: no such request"}
    ha = pair_of(applier)
    if ha is None or ha.cluster:
        return 409, {"error": "this box is not part of a pair"}
    if path == configsync.POLICY_PATH:
        return configsync.take_policy(config, applier.role(), ha.peer_address, request)
    return configsync.take_tuning(config, applier.role(), request)


def serve_peer(config, applier, ha):
    """The peer channel's listener on ha's sync address (ha None or disabled: none); a
    change of address or namespace moves it. The key in force (the pending revision's,
    else the confirmed one) is read at every request."""
    netns = applier.netns
    where = (ha.sync_ip, netns) if ha is not None and ha.enabled else None
    with _listener_lock:
        if _listener["where"] == where and (_listener["server"] or where is None):
            return _listener["error"]
        if _listener["server"] is not None:
            _listener["server"].stop()
        _listener.update(server=None, where=where, error=None)
        if where is None:
            return None
        try:
            _listener["server"] = peers.PeerServer(
                ha.sync_ip, partial(answer, config, applier), applier.key, netns=netns)
        except OSError as error:      # the sync address is not up yet: the next tick
            _listener["error"] = (f"cannot listen on {ha.sync_ip} TCP {peers.PEER_PORT}: "
                                  f"{error.strerror}")
        return _listener["error"]


def peer_status(applier, ha):
    """The peer's own report, asked over the sync link: {"role", "running", "at"}, or
    {"error": why}."""
    try:
        status, found = peers.ask(ha.peer_address, applier.key(), "GET", "/v1/status",
                                  netns=applier.netns, timeout=PEER_TIMEOUT)
    except peers.PeerError as error:
        return {"error": str(error)}
    if status != 200 or not isinstance(found, dict):
        return {"error": f"the peer answered HTTP {status}: {found}"}
    return {"role": found.get("role") if isinstance(found.get("role"), str) else None,
            "running": found.get("running") if isinstance(found.get("running"), dict) else {},
            "policy": found.get("policy") if isinstance(found.get("policy"), dict) else {},
            "tuning": found.get("tuning") if isinstance(found.get("tuning"), str) else None,
            "at": time.time()}


def config_sync(config, role, peer, ha, key):
    """The master sends the backup the step that brings its policy closer, then its
    tuning profile; the backup compares. -> ({"state", "detail"} of the policy, of the
    tuning profile) for the page and the health panel, or (None, None)."""
    if not peer or peer.get("error"):
        return None, None
    if role == "MASTER" and peer.get("role") == "BACKUP":
        if not _sync_lock.acquire(blocking=False):
            busy = {"state": "syncing", "detail": "a step to the backup is under way"}
            return busy, busy
        try:
            return (_sync.step(config, ha, key, peer.get("policy")),
                    _sync.tuning_step(config, ha, key, peer.get("tuning")))
        finally:
            _sync_lock.release()
    if role == "BACKUP":
        ours = configsync.tuning_state(config)
        same = ours == peer.get("tuning") or peer.get("tuning") is None
        return _backup_policy(config, peer), {
            "state": "in sync" if same else "syncing",
            "detail": "this box takes its tuning profile from the master"
                      + ("" if same else ", which has not sent the last change yet")}
    return None, None


def _backup_policy(config, peer):
    """A backup's comparison of its policy with the master's report."""
    ours = configsync.policy_state(config)
    theirs = peer.get("policy") or {}
    same = (ours["confirmed"], ours["pending"]) == (theirs.get("confirmed"),
                                                    theirs.get("pending"))
    return {"state": "in sync" if same else "syncing",
            "detail": "this box takes its policy from the master"
                      + ("" if same else ", which has not sent the last change yet")}


def snapshot(config):
    """What the HA page and the health panel show of this box and its peer."""
    applier = applier_for(config)
    # the configuration's state (revisions, pending) is HaState's (sync.py)
    found = {"role": applier.role(), "running": applier.daemons.running()}
    found["stats"] = applier.stats()
    key = applier.key()
    found["has_key"] = key is not None
    ha = pair_of(applier)
    found["cluster"] = ha is not None and ha.cluster
    if found["cluster"]:        # no peer: every box multicasts to all the others
        ha = None
    found["listener_error"] = serve_peer(config, applier, ha)
    found["peer"] = peer_status(applier, ha) if ha is not None else None
    found["peer_address"] = ha.peer_address if ha is not None else None
    found["config_sync"], found["tuning_sync"] = config_sync(
        config, found["role"], found["peer"], ha, key)
    found["at"] = time.time()
    return found


@periodic(STATUS, lambda config: max(1.0, config.sample_interval), contract=HaStatus)
def status_task(agent):
    return snapshot(agent.config)


@periodic("ha.sync", lambda config: config.sample_interval, contract=contracts.NOTHING)
def sync_store(agent):
    sync.sync(applier_for(agent.config), periodic=True)


@on_start("ha.recover", contract=str)
def recover(agent):
    """A pending change whose watchdog died with the agent's machine: rolled back when
    overdue, watched again when not."""
    return applier_for(agent.config).recover()


def _after(run, applier=None):
    """After a job, whatever its outcome: the store mirrored, the status fresh."""
    sync.sync(applier or applier_for(run.config))
    PeriodicState.objects.update_or_create(name=STATUS, defaults={
        "result": contracts.stored(HaStatus, snapshot(run.config))})


def _result(revision, applier):
    return revision_result("ha_revision", revision, applier.store)


@handler("ha.apply", "Apply HA pair configuration")
def apply(run):
    args = known_args(run, ("document", "timeout", "key"))
    document = args.get("document")
    if not isinstance(document, dict):
        raise JobFailed("document: must be a table with ha.toml's structure")
    size = len(json.dumps(document))
    if size > TEXT_MAX:
        raise JobFailed(f"document: {size >> 10} KiB; at most {TEXT_MAX >> 10} KiB")
    applier = applier_for(run.config)
    key = args.get("key")
    try:
        run.progress(10, "checking the pair's configuration against this box and its network")
        config = from_document(document)
        networks = network_of(run.config)
        problems = verify.ha_problems(config, networks) + \
            verify.ha_routing_problems(config, networks)
        if problems:
            raise HaError(problems)
        text = to_toml(config)
        if key is not None:
            reason = peers.key_problem(key)
            if reason:
                raise JobFailed(f"key: {reason}")
        elif applier.key() is None and not config.cluster:
            raise JobFailed("key: this box has no pair key yet: give the one both boxes "
                            "share")
        run.progress(30, f"starting {applier.daemons.describe()}")
        # the key is part of the revision: Roll back and the deadline give the old one back
        revision = applier.apply(text, user=run.user, timeout=args.get("timeout"), key=key)
    except HaError as error:
        _after(run, applier)
        raise JobFailed(str(error), result=problems_result(error)) from None
    _after(run, applier)
    return _result(revision, applier)


# ha.confirm and ha.cancel (roll back now): the commit-confirm kit's
decisions(DOMAIN, applier_for, HaError, _after, _result)


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
