"""The operations of a commit-confirm domain, as functions with typed arguments and
results, called by the generic views, and by every other front end alike (the API to
come): queue a decision (confirm, roll back now, roll back to a revision), read the
history and one revision against the one before. Refusals are ServiceErrors
(tusklib/problems.py) each front end turns into its own answer."""
import difflib
from dataclasses import dataclass
from datetime import datetime

from accounts import audit
from jobs import queue as jobs
from tusklib.problems import Refusal, ServiceError


@dataclass(frozen=True)
class Queued:
    """A job the operation queued: the agent runs it; its page follows it."""

    job: int
    kind: str


@dataclass(frozen=True)
class RevisionSummary:
    number: int
    created: datetime
    user: str
    action: str
    outcome: str


@dataclass(frozen=True)
class Comparison:
    """A revision, the one before it (None: the first) and the unified diff of the
    domain's text from that one to it."""

    revision: object
    previous: object | None
    diff: str


def diff(old, new, old_name, new_name):
    return "".join(difflib.unified_diff(old.splitlines(True), new.splitlines(True),
                                        old_name, new_name))


def queue(domain, actor, decision, target="", args=None, **detail):
    """Queues the domain's job `<name>.<decision>` for actor, audited. -> Queued"""
    job = jobs.enqueue(domain.kind(decision), args or {}, actor.user)
    audit.record_for(actor, f"{domain.name} {decision.replace('cancel', 'roll back')}",
                     target, job=job.pk, **detail)
    return Queued(job=job.pk, kind=job.kind)


def confirm(domain, actor):
    return queue(domain, actor, "confirm", "")


def cancel(domain, actor):
    return queue(domain, actor, "cancel", "pending")


def revision(domain, number):
    """The revision row, or ServiceError NOT_FOUND."""
    found = domain.revision_model.objects.filter(number=number).first()
    if found is None:
        raise ServiceError(Refusal.NOT_FOUND, "revision", f"no {domain.label} revision "
                                                          f"{number}")
    return found


def rollback(domain, actor, number):
    """Queues the return to revision number (pending until confirmed, as an apply)."""
    if not domain.rollback:
        raise ServiceError(Refusal.NOT_FOUND, "revision",
                           f"the {domain.label} has no roll back to a revision")
    found = revision(domain, number)
    return queue(domain, actor, "rollback", str(found), args={"revision": found.number})


def history(domain, limit=200):
    """The newest revisions first, without their texts."""
    rows = domain.revision_model.objects.only("number", "created", "user", "action",
                                              "outcome")[:limit]
    return [RevisionSummary(row.number, row.created, row.user, row.action, row.outcome)
            for row in rows]


def compare(domain, number):
    """Revision number against the one before it."""
    found = revision(domain, number)
    previous = domain.revision_model.objects.filter(number__lt=number) \
        .order_by("-number").first()
    text = domain.diff_field
    return Comparison(found, previous, diff(
        domain.show(getattr(previous, text)) if previous else "",
        domain.show(getattr(found, text)), str(previous) if previous else "nothing",
        str(found)))
