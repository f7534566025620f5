"""The agent's policy jobs: apply, confirm, cancel (roll back now), roll back to a
revision. Each runs the policy engine's applier on the configured target and then
mirrors the revision store into the database - as the periodic policy.sync does, for
what changes without a job (a watchdog's rollback, the CLI, a table changed by hand).
At start, the target kernel's capabilities, for the pages (views.seqrand_available)."""
from jobs.registry import JobFailed, handler, on_start, periodic

from . import sync
from .core import capabilities as kernel
from .core.applier import Applier
from .core.errors import PolicyError
from .core.target import Target

CAPABILITIES = "policy.capabilities"


@on_start(CAPABILITIES)
def capabilities(agent):
    """What the target's kernel offers (seqrand helpers, flowtables): name -> bool."""
    return kernel.report(Target(agent.config.netns or None))


@periodic("policy.sync", lambda config: config.sample_interval)
def sync_store(agent):
    sync.sync(agent.config, periodic=True)


def _applier(run):
    return Applier(run.config.state_dir, run.config.netns or None)


def _problems(error):
    return {"problems": [{"code": p.code.name, "path": p.path, "message": p.message}
                         for p in error.problems]}


def _revision_result(revision, applier):
    pending = applier.store.pending()
    return {"revision": revision.id, "outcome": revision.outcome,
            "deadline": pending["deadline"] if pending else None}


@handler("policy.apply", "Apply policy")
def apply(run):
    applier = _applier(run)
    run.progress(10, "checking the ruleset with nft -c")
    try:
        revision = applier.apply(run.args["policy_text"], user=run.user,
                                 timeout=run.args.get("timeout"))
    except PolicyError as error:
        sync.sync(run.config)
        raise JobFailed(str(error), result=_problems(error)) from None
    run.progress(90, f"revision {revision.id} loaded; recording it")
    sync.sync(run.config, record_listing_for=revision.id)
    return _revision_result(revision, applier)


def _decide(run, decision):
    applier = _applier(run)
    try:
        revision = decision(applier)
    except PolicyError as error:
        sync.sync(run.config)
        raise JobFailed(str(error), result=_problems(error)) from None
    sync.sync(run.config)
    return _revision_result(revision, applier)


@handler("policy.confirm", "Confirm policy")
def confirm(run):
    return _decide(run, lambda applier: applier.confirm(user=run.user))


@handler("policy.cancel", "Roll back pending policy")
def cancel(run):
    return _decide(run, lambda applier: applier.cancel(user=run.user))


@handler("policy.rollback", "Roll back to a revision")
def rollback(run):
    applier = _applier(run)
    try:
        revision = applier.rollback_to(int(run.args["revision"]), user=run.user,
                                       timeout=run.args.get("timeout"))
    except PolicyError as error:
        sync.sync(run.config)
        raise JobFailed(str(error), result=_problems(error)) from None
    sync.sync(run.config, record_listing_for=revision.id)
    return _revision_result(revision, applier)
