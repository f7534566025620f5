"""The agent's policy jobs: apply, confirm, cancel (roll back now), roll back to a
revision. Each runs the policy engine's applier on the configured target and then
mirrors the revision store into the database - as the periodic policy.sync does, for
what changes without a job (a watchdog's rollback, the CLI, a table changed by hand);
the periodic policy.fastpath_devices adds interfaces made after the policy was loaded to
the fast path; the periodic policy.counters reads the ruleset's named counters (the
classes' hits, the drops /metrics exports: counters.py).
Apply and roll back first check the policy's zones against the box's network
configuration (the network jobs check the other way round).
At start, the target kernel's capabilities, for the pages (selectors.seqrand_available)."""
from box import snapshot
from commitkit.jobs import decisions, revision_result
from jobs.registry import JobFailed, handler, on_start, periodic, problems_result
from tusklib import contracts
from tusklib.commit import ZONES_CHECKED
from tusklib.target import Target

from . import counters, sync
from . import draft as drafts
from .contracts import Capabilities, CounterRun, FastpathDevices
from .core import capabilities as kernel
from .core.applier import Applier
from .core.constants import POLICY_MAX_BYTES
from .core.errors import PolicyError
from .core.normalise import load_policy_text
from .domain import DOMAIN

CAPABILITIES = "policy.capabilities"
COUNTERS = "policy.counters"


@on_start(CAPABILITIES, contract=Capabilities)
def capabilities(agent):
    """What the target's kernel offers (seqrand helpers, flowtables): name -> bool."""
    return kernel.report(Target(agent.config.netns or None))


@periodic("policy.sync", lambda config: config.sample_interval, contract=contracts.NOTHING)
def sync_store(agent):
    sync.sync(agent.config, periodic=True)


@periodic(COUNTERS, lambda config: config.sample_interval, contract=CounterRun)
def read_counters(agent):
    """The ruleset's named counters (counters.py), read every sample_interval like the
    dashboard's statistics: the classes' hits, and the drops /metrics exports."""
    return counters.read(agent.config)


@periodic("policy.fastpath_devices", lambda config: max(config.sample_interval, 5),
          contract=FastpathDevices)
def fastpath_devices(agent):
    """The fast path's interfaces that appeared after the policy was loaded (at boot,
    networkd makes VLANs and bonds after the firewall loaded it) join its flowtable."""
    added, missing = Applier(agent.config.state_dir, agent.config.netns or None) \
        .attach_fastpath_devices()
    return {"added": added, "missing": missing}


def applier_for(config):
    return Applier(config.state_dir, config.netns or None)


def _revision_result(revision, applier):
    return revision_result("revision", revision, applier.store)


def check_network(config, policy_text):
    """PolicyError when a zone of policy_text names an interface that is not a traffic
    link of the box's network configuration (box/verify.py), as the network's own store
    has it (the agent's snapshot). Text that is no
    valid policy is left to the applier, which names its problems."""
    if not isinstance(policy_text, str) or len(policy_text) > POLICY_MAX_BYTES:
        return
    try:
        policy = load_policy_text(policy_text)
    except PolicyError:
        return
    try:
        networks = snapshot.read(snapshot.AGENT, "network", config=config).network
    except snapshot.SnapshotError as error:
        raise JobFailed(f"{error}, so the zones cannot be checked against it") from None
    drafts.check_network(policy, networks)


@handler("policy.apply", "Apply policy")
def apply(run):
    applier = applier_for(run.config)
    run.progress(10, "checking the zones against the network, the ruleset with nft -c")
    try:
        with ZONES_CHECKED:
            check_network(run.config, run.args["policy_text"])
            revision = applier.apply(run.args["policy_text"], user=run.user,
                                     timeout=run.args.get("timeout"))
    except PolicyError as error:
        sync.sync(run.config)
        raise JobFailed(str(error), result=problems_result(error)) from None
    run.progress(90, f"revision {revision.id} loaded; recording it")
    sync.sync(run.config, record_listing_for=revision.id)
    return _revision_result(revision, applier)


# policy.confirm and policy.cancel (roll back now): the commit-confirm kit's
decisions(DOMAIN, applier_for, PolicyError, lambda run, applier: sync.sync(run.config),
          _revision_result)


@handler("policy.rollback", "Roll back to a revision")
def rollback(run):
    applier = applier_for(run.config)
    number = int(run.args["revision"])
    try:
        with ZONES_CHECKED:
            check_network(run.config, applier.store.get(number).policy_text)
            revision = applier.rollback_to(number, user=run.user,
                                           timeout=run.args.get("timeout"))
    except PolicyError as error:
        sync.sync(run.config)
        raise JobFailed(str(error), result=problems_result(error)) from None
    sync.sync(run.config, record_listing_for=revision.id)
    return _revision_result(revision, applier)
