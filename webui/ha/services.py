"""The HA pair's operations as functions with typed arguments and results, called by
the HA page and every other front end alike: apply this box's half (pending until
confirmed), fail over. Confirm, roll back now and the history are the commit-confirm
kit's (commitkit/services.py with ha.domain.DOMAIN). The document is checked by the
form before and by the agent again (agent_jobs.py)."""
from box import snapshot, verify
from commitkit import services as kit
from jobs.models import PeriodicState
from tusklib.problems import Problem, Refusal, ServiceError

from .agent_jobs import STATUS
from .contracts import HaStatus
from .core.config import CLUSTER, Code, HaError, from_document, parse, to_document
from .core.peer import key_problem
from .domain import DOMAIN
from .models import HaState


def _document(text):
    """ha.toml's text as its document, or None (none, or not readable)."""
    if not isinstance(text, str) or not text:
        return None
    try:
        return to_document(parse(text))
    except HaError:
        return None


def current_document(state=None):
    """This box's half as the agent last reported it - the pending one, else the
    confirmed one - as ha.toml's structure (the key is never in it), or None."""
    state = state if state is not None else HaState.current()
    return state and (_document(state.pending_text) or _document(state.confirmed_text))


def status():
    """The agent's last ha.status report (HaStatus: role, daemons, peer, has_key), or
    None before its first."""
    return PeriodicState.read(STATUS, HaStatus)


def _cluster(document):
    """Whether document asks for a cluster's box: no peer channel, so no pair key."""
    ha = document.get("ha") if isinstance(document, dict) else None
    return isinstance(ha, dict) and ha.get("mode") == CLUSTER


def check(document, key=None, has_key=True):
    """document (ha.toml's structure) checked whole - by ha/core/config.py, and its
    links against the box's network configuration (box/verify.py) - with the pair key
    to install (None: keep this box's; a pair's box must have one then). -> the config; HaError
    with every problem. The HA form and the API both check with this."""
    problems = []
    if key is not None and key_problem(key):
        problems.append(Problem(Code.VALUE, "key", key_problem(key)))
    elif key is None and not has_key and not _cluster(document):
        problems.append(Problem(Code.VALUE, "key", "this box has no pair key yet: give the "
                                                   "one both boxes share"))
    try:
        config = from_document(document)
    except HaError as error:
        raise HaError(problems + error.problems) from None
    networks = snapshot.read(snapshot.WEB, "network").network
    problems += verify.ha_problems(config, networks) + verify.ha_routing_problems(config, networks)
    if problems:
        raise HaError(problems)
    return config


def apply(actor, document, timeout, key=None):
    """Queues ha.apply of document (ha.toml's structure) with the pair key (None: the
    one in force). -> kit.Queued"""
    args = {"document": document, "timeout": timeout}
    if key:
        args["key"] = key
    target = CLUSTER if _cluster(document) else document["ha"]["role"]
    return kit.queue(DOMAIN, actor, "apply", target, args=args)


def fail_over(actor, role):
    """Queues the hand-over of the addresses to the peer; only a master has them (role:
    this box's as the agent last reported it - the agent asks keepalived again).
    -> kit.Queued; ServiceError CONFLICT."""
    if role != "MASTER":
        raise ServiceError(Refusal.CONFLICT, "role", "only the master hands the addresses "
                                                     "over: this box is not the master now")
    return kit.queue(DOMAIN, actor, "failover", "")
