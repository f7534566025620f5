"""The SNMP agent's operations as functions with typed arguments and results, called by
the SNMP page and the API alike: the configuration in force (without its secrets), the
check, apply (pending until confirmed). Confirm, roll back now and the history are the
commit-confirm kit's (commitkit/services.py with snmp.domain.DOMAIN). The document is
checked by the form before and by the agent again (agent_jobs.py)."""
from commitkit import services as kit
from jobs.models import PeriodicState

from .agent_jobs import STATUS
from .contracts import SnmpStatus
from .core.config import OFF, SnmpError, from_document, parse, to_document
from .domain import DOMAIN
from .models import SnmpState


def current(state=None):
    """The configuration as the agent last mirrored it - the pending one, else the
    confirmed one, else OFF - without secrets (a passphrase None: set, kept)."""
    state = state if state is not None else SnmpState.current()
    for text in ((state.pending_text if state.pending else ""), state.confirmed_text) \
            if state else ():
        if text:
            try:
                return parse(text)
            except SnmpError:
                continue
    return OFF


def current_document(state=None):
    return to_document(current(state), secrets=False)


def status():
    """The agent's last snmp.status (SnmpStatus), or None before its first."""
    return PeriodicState.read(STATUS, SnmpStatus)


def check(document):
    """document checked whole, as the agent will (a secret left out is kept: the agent
    refuses it if there is none to keep for that user). -> the config; SnmpError."""
    return from_document(document)


def apply(actor, document, timeout):
    """Queues snmp.apply of document (snmp.toml's structure). -> kit.Queued"""
    snmp = document.get("snmp") if isinstance(document, dict) else None
    target = "on" if isinstance(snmp, dict) and snmp.get("enabled") else "off"
    return kit.queue(DOMAIN, actor, "apply", target,
                     args={"document": document, "timeout": timeout})
