"""Agent side: the one job factory for a commit-confirm domain's decisions. decisions()
registers `<name>.confirm` and `<name>.cancel` (roll back now) and returns the decide()
they share, for a domain whose confirm takes arguments (network's, which must arrive
over the new management address) to build its own on."""
from jobs.registry import JobFailed, handler, known_args, problems_result


def revision_result(key, revision, store, **extra):
    """What a job that made or decided a revision returns: {key: its id, "outcome",
    "deadline": the pending change's, or None}."""
    pending = store.pending()
    return {key: revision.id, "outcome": revision.outcome,
            "deadline": pending["deadline"] if pending else None, **extra}


def decisions(domain, applier_for, error_class, after, result, confirm=True):
    """applier_for(config) -> the domain's applier (a tusklib.commit.CommitConfirm);
    error_class: its errors, turned into a failed job with their problems; after(run,
    applier): what follows every job whatever its outcome (the mirror, fresh status);
    result(revision, applier) -> the job's result."""

    def decide(run, decision, known=()):
        known_args(run, known)
        applier = applier_for(run.config)
        try:
            revision = decision(applier)
        except error_class as error:
            after(run, applier)
            raise JobFailed(str(error), result=problems_result(error)) from None
        after(run, applier)
        return result(revision, applier)

    if confirm:
        @handler(domain.kind("confirm"), f"Confirm {domain.label}")
        def confirm_job(run):
            return decide(run, lambda applier: applier.confirm(user=run.user))

    @handler(domain.kind("cancel"), f"Roll back pending {domain.label}")
    def cancel_job(run):
        return decide(run, lambda applier: applier.cancel(user=run.user))

    return decide
