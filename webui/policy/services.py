"""The policy's operations as functions with typed arguments and results, called by the
pages (views.py) and every other front end alike (the API to come): replace the draft
whole, apply it, load a revision into it, import and export it; the decisions on a
pending revision and the history are the commit-confirm kit's (commitkit/services.py,
with policy.domain.DOMAIN). Refusals are the policy's own PolicyError (every problem, with
its path) or a ServiceError (tusklib/problems.py: stale, not found, conflict)."""
from dataclasses import dataclass

from accounts import audit
from box import snapshot, verify
from commitkit import services as kit
from tusklib.problems import Refusal, ServiceError

from . import draft as drafts
from .core.errors import PolicyError
from .core.normalise import load_policy
from .domain import DOMAIN


@dataclass(frozen=True)
class Exported:
    filename: str
    text: str


def stale(version, current):
    return ServiceError(Refusal.STALE, "version", f"the draft is at version {current}, not "
                                                  f"{version}: it changed since it was read")


def apply_problems(document):
    """What stops document from being applied now: the box's network may have changed
    since the draft was saved (a port made management). -> [Problem]"""
    return verify.network_problems(load_policy(document),
                                   snapshot.read(snapshot.WEB, "network").network)


def check(document):
    """document checked as an apply would check it - the policy engine, then against the
    box's network - without saving anything. PolicyError with every problem."""
    load_policy(document)
    problems = apply_problems(document)
    if problems:
        raise PolicyError(problems)


def apply_draft(actor, version, timeout):
    """Queues the apply of the draft at version, pending until confirmed within timeout
    seconds. -> kit.Queued; PolicyError with the problems against the network;
    ServiceError STALE when the draft is no longer at version."""
    draft = drafts.get()
    problems = apply_problems(draft.document)
    if problems:
        raise PolicyError(problems)
    if version != draft.version:
        raise stale(version, draft.version)
    return kit.queue(DOMAIN, actor, "apply", f"draft version {draft.version}", args={
        "policy_text": drafts.to_yaml(draft.document), "timeout": timeout,
        "draft_version": draft.version})


def replace_draft(actor, document, version):
    """The whole draft replaced by document if it is still at version (None: any).
    -> the Draft; PolicyError (every problem) or ServiceError STALE, nothing saved."""
    try:
        draft = drafts.save_document(document, version, actor.user)
    except drafts.StaleDraft:
        raise stale(version, drafts.get_meta().version) from None
    audit.record_for(actor, "policy draft replaced", f"draft version {draft.version}")
    return draft


def import_policy(actor, text):
    """A policy file's text replaces the draft. -> the Draft; PolicyError."""
    draft = drafts.import_text(text, actor.user)
    audit.record_for(actor, "policy import", f"draft version {draft.version}")
    return draft


def draft_from_revision(actor, number):
    """Revision number's policy becomes the draft. -> the Draft; ServiceError NOT_FOUND;
    PolicyError when this release no longer takes it."""
    revision = kit.revision(DOMAIN, number)
    draft = drafts.import_text(revision.policy_text, actor.user)
    audit.record_for(actor, "policy draft from revision", str(revision))
    return draft


def export():
    draft = drafts.get()
    return Exported(f"tusk-policy-v{draft.version}.yaml", drafts.to_yaml(draft.document))
