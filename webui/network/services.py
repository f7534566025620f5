"""The network configuration's operations as functions with typed arguments and results,
called by the Network pages and every other front end alike: apply the draft (pending
until confirmed; a one-time link when it moves the management address), confirm it over
the address it arrived at. Roll back now and the history are the commit-confirm kit's
(commitkit/services.py with network.domain.DOMAIN). Refusals are NetworkError (every
problem, with its path) or a ServiceError (tusklib/problems.py)."""
import hashlib
import secrets
from dataclasses import dataclass
from datetime import timedelta

from django.db import transaction
from django.utils import timezone

from accounts import audit
from commitkit import services as kit
from tusklib.problems import Refusal, ServiceError

from . import draft as drafts
from .core.applier import confirm_over
from .domain import DOMAIN
from .models import ConfirmToken, NetworkState

TOKEN_GRACE = timedelta(seconds=60)   # a link stays good this long past the deadline


def sha256(token):
    return hashlib.sha256(token.encode()).hexdigest()


@dataclass(frozen=True)
class Applied:
    """An apply queued: the job; when it moves the management address, the addresses it
    moves to (a confirm must arrive over one of them) and the one-time link's token, which
    only the applying operator gets."""

    queued: kit.Queued
    over: list[str]
    token: str | None


def _saved(actor, action, save):
    """save() -> the Draft, audited as action; its StaleDraft as ServiceError STALE."""
    try:
        draft = save()
    except drafts.StaleDraft:
        raise ServiceError(Refusal.STALE, "version", "the draft changed since it was read: "
                                                     f"it is at version {drafts.get().version}"
                           ) from None
    audit.record_for(actor, action, f"draft version {draft.version}")
    return draft


def replace_draft(actor, document, version):
    """The whole draft replaced by document if it is still at version. -> the Draft;
    NetworkError (every problem, against this box) or ServiceError STALE, nothing saved."""
    return _saved(actor, "network draft replaced",
                  lambda: drafts.save_document(document, version, actor.user))


def discard_draft(actor, version):
    """The draft at version thrown away: it becomes the configuration in effect again.
    -> the Draft; ServiceError STALE, nothing changed."""
    return _saved(actor, "network draft discarded", lambda: drafts.discard(version, actor.user))


def apply_draft(actor, version, timeout):
    """Queues network.apply of the draft at version. -> Applied; NetworkError with the
    draft's problems against this box; ServiceError STALE."""
    draft = drafts.get()
    config = drafts.check(draft.document)
    if version != draft.version:
        raise ServiceError(Refusal.STALE, "version", f"the draft is at version "
                                                     f"{draft.version}, not {version}")
    over = confirm_over(drafts.confirmed_config(), config)
    token, token_hash = None, ""
    with transaction.atomic():
        if over:
            token = secrets.token_urlsafe(32)
            token_hash = sha256(token)
            ConfirmToken.objects.create(
                token_sha256=token_hash, user=actor.user,
                expires=timezone.now() + timedelta(seconds=timeout) + TOKEN_GRACE)
        queued = kit.queue(DOMAIN, actor, "apply", f"draft version {draft.version}", args={
            "document": draft.document, "timeout": timeout, "token_hash": token_hash},
            moves_management=bool(over))
    return Applied(queued, over, token)


def confirm(actor, arrived_at):
    """Queues network.confirm of the pending change from the status page; arrived_at: the
    local address the request came in on (None: unknown - then a change that moves the
    management address cannot be confirmed here). -> kit.Queued; ServiceError CONFLICT."""
    state = NetworkState.current()
    if arrived_at is None and state is not None and state.confirm_over:
        raise ServiceError(Refusal.CONFLICT, "arrived_at", "this change moves the management "
                           "address: it is confirmed only by a request that arrives over "
                           "the new address")
    return kit.queue(DOMAIN, actor, "confirm", "", args={"arrived_at": arrived_at,
                                                        "token": None},
                     arrived_at=arrived_at)
