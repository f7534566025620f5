"""The agent's network jobs: apply (pending until confirmed), confirm, cancel (roll back
now); its periodic network.facts (the ports, addresses and routes the pages show) and
network.sync (the revision store mirrored into the database, as policy.sync does).

Every argument is checked here again, as attacker-controlled input (docs/SECURITY.md):
the document goes through the same normalise.from_document the forms use, against this
machine's ports and the zones of the root-owned policy store - never the database's."""
import dataclasses
import ipaddress
import json
import re
import time

from box import snapshot, verify
from box.appliers import NetworkApplier
from commitkit.jobs import decisions, revision_result
from jobs.models import PeriodicState
from jobs.registry import JobFailed, handler, known_args, periodic, problems_result
from tusklib import contracts
from tusklib.commit import ZONES_CHECKED
from tusklib.target import Target

from . import sync
from .contracts import Facts, RoutingStatus
from .core import facts, frr
from .core.applier import confirm_timeout
from .core.errors import NetworkError
from .core.normalise import TEXT_MAX, from_document, to_toml
from .domain import DOMAIN
from .draft import FACTS, ROUTING, merge_zones, zones_of

TOKEN = re.compile(r"[A-Za-z0-9_-]{20,100}")
TOKEN_HASH = re.compile(r"[0-9a-f]{64}")
CONFIRM_ARGS = ("arrived_at", "token")


def applier_for(config):
    return NetworkApplier(config.network_state_dir, netns=config.netns or None)


def live_facts(config):
    """The ports with their facts, the global addresses of every link and table main's
    routes, as the pages show them."""
    target = Target(config.netns or None)
    live = facts.snapshot(target)
    addresses = {}
    for address in live.addresses:
        if address.scope == "global":
            addresses.setdefault(address.interface, []).append(address.address)
    return {"ports": {name: dataclasses.asdict(port)
                      for name, port in facts.ports(target, live.links).items()},
            "addresses": addresses, "routes": [dataclasses.asdict(r) for r in live.routes],
            "at": time.time()}


@periodic(FACTS, lambda config: max(5.0, config.sample_interval * 5), contract=Facts)
def facts_task(agent):
    return live_facts(agent.config)


@periodic(ROUTING, lambda config: max(5.0, config.sample_interval * 5),
          contract=RoutingStatus)
def routing_task(agent):
    """What FRR reports; on a box whose configuration (confirmed or pending) has no
    routing, running False without asking FRR (this runs on every box, every few
    seconds)."""
    applier = applier_for(agent.config)
    idle = {"running": False, "sessions": [], "bfd": [], "ospf": [], "at": time.time()}
    try:
        configs = [applier.confirmed(), applier.pending_config()]
    except NetworkError:
        configs = []
    if not any(c is not None and c.routing.enabled for c in configs):
        return idle
    runner = getattr(applier.backend, "frr", None)
    found = frr.status(runner.run) if runner is not None else idle
    return {**found, "at": time.time()}


@periodic("network.sync", lambda config: config.sample_interval, contract=contracts.NOTHING)
def sync_store(agent):
    sync.sync(applier_for(agent.config), periodic=True)


def _after(run, applier):
    """After a job, whatever its outcome: the store mirrored, the facts fresh."""
    sync.sync(applier)
    PeriodicState.objects.filter(name=FACTS).update(
        result=contracts.stored(Facts, live_facts(run.config)))


def policies(config):
    """The documents of the confirmed and the pending policy in the policy's own store
    (root's, on disk)."""
    try:
        return snapshot.read(snapshot.AGENT, "policy", config=config).values("policy")
    except snapshot.SnapshotError as error:
        raise JobFailed(f"{error}: its zones cannot be checked") from None


def policy_zones(config, documents=None):
    """{zone: [interfaces]} of those policies: an interface either of them uses may not
    go away."""
    return merge_zones(*(zones_of(document) for document in
                         (policies(config) if documents is None else documents)))


def pairs(config):
    """This box's HA pair, confirmed and pending, from HA's own files (root's): a link it
    uses may not go away."""
    try:
        return snapshot.read(snapshot.AGENT, "ha", config=config).ha
    except snapshot.SnapshotError as error:
        raise JobFailed(f"{error}: the links it uses cannot be checked") from None


def _result(revision, applier):
    pending = applier.store.pending()
    return revision_result("network_revision", revision, applier.store,
                           confirm_over=pending.get("confirm_over", []) if pending else [])


@handler("network.apply", "Apply network configuration")
def apply(run):
    args = known_args(run, ("document", "timeout", "token_hash"))
    document = args.get("document")
    if not isinstance(document, dict):
        raise JobFailed("document: must be a table with network.toml's structure")
    size = len(json.dumps(document))
    if size > TEXT_MAX:
        raise JobFailed(f"document: {size >> 10} KiB; at most {TEXT_MAX >> 10} KiB")
    token_hash = args.get("token_hash", "")
    if not isinstance(token_hash, str) or token_hash and not TOKEN_HASH.fullmatch(token_hash):
        raise JobFailed("token_hash: must be empty or a SHA-256 in hex")
    applier = applier_for(run.config)
    try:
        timeout = confirm_timeout(args.get("timeout"))
        with ZONES_CHECKED:
            documents = policies(run.config)
            zones = policy_zones(run.config, documents)
            run.progress(10, "checking the configuration against this machine and the policy")
            config = from_document(document, present=applier.present(), zones=zones)
            pair = pairs(run.config)
            problems = verify.pair_link_problems(config, pair) + \
                verify.pair_routing_problems(config, pair) + \
                verify.bridged_zone_problems(config, documents)
            if problems:
                raise NetworkError(problems)
            run.progress(30, f"applying with {applier.backend.describe()}")
            revision = applier.apply(to_toml(config), user=run.user, timeout=timeout,
                                     zones=zones, token_hash=token_hash)
    except NetworkError as error:
        _after(run, applier)
        raise JobFailed(str(error), result=problems_result(error)) from None
    run.progress(90, f"revision {revision.id} in effect; recording it")
    _after(run, applier)
    return _result(revision, applier)


# network.cancel (roll back now); network.confirm below is built on the same decide()
_decide = decisions(DOMAIN, applier_for, NetworkError, _after, _result, confirm=False)


@handler("network.confirm", "Confirm network configuration")
def confirm(run):
    """arrived_at: the local address the web request came in on (nginx's), None when
    unknown - then a change that moves the management address is not confirmed here.
    token: the one-time link's, None from the status page's button."""
    args = known_args(run, CONFIRM_ARGS)
    arrived_at, token = args.get("arrived_at"), args.get("token")
    if arrived_at is not None:
        try:
            arrived_at = str(ipaddress.ip_address(arrived_at if isinstance(arrived_at, str)
                                                  else "-"))
        except ValueError:
            raise JobFailed("arrived_at: must be an IP address") from None
    if token is not None and not (isinstance(token, str) and TOKEN.fullmatch(token)):
        raise JobFailed("token: must be the one-time link's token")

    def decide(applier):
        pending = applier.store.pending()
        if arrived_at is None and pending and pending.get("confirm_over"):
            raise JobFailed("this change moves the management address: a confirm from the "
                            "web UI must say which address it arrived over (nginx passes "
                            "it); use the new address, or confirm on the console")
        return applier.confirm(user=run.user, arrived_at=arrived_at, token=token)
    return _decide(run, decide, known=CONFIRM_ARGS)
