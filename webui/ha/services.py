"""The HA pair's operations as functions with typed arguments and results, called by
the HA page and every other front end alike: apply this box's half (pending until
confirmed), fail over. Confirm, roll back now and the history are the commit-confirm
kit's (commitkit/services.py with ha.domain.DOMAIN). The document is checked by the
form before and by the agent again (agent_jobs.py)."""
from commitkit import services as kit
from tusklib.problems import Refusal, ServiceError

from .domain import DOMAIN


def apply(actor, document, timeout, key=None):
    """Queues ha.apply of document (ha.toml's structure) with the pair key (None: the
    one in force). -> kit.Queued"""
    args = {"document": document, "timeout": timeout}
    if key:
        args["key"] = key
    return kit.queue(DOMAIN, actor, "apply", document["ha"]["role"], args=args)


def fail_over(actor, role):
    """Queues the hand-over of the addresses to the peer; only a master has them (role:
    this box's as the agent last reported it - the agent asks keepalived again).
    -> kit.Queued; ServiceError CONFLICT."""
    if role != "MASTER":
        raise ServiceError(Refusal.CONFLICT, "role", "only the master hands the addresses "
                                                     "over: this box is not the master now")
    return kit.queue(DOMAIN, actor, "failover", "")
