"""What the agent's snmp.status task keeps for the SNMP page and the API (tusklib/
contracts.py): checked by the agent when it stores it, by the web process when it reads
it back."""
from dataclasses import dataclass


@dataclass(frozen=True)
class SnmpStatus:
    """snmpd as the agent last saw it (at, Unix time): running or not, and the counters
    it writes for tusk-snmp-pass - when, and what went wrong the last time (""). The
    configuration's state (revisions, pending) is the SnmpState row's (models.py)."""

    running: bool
    counters_at: float | None
    counters_error: str
    daemon: str                 # how snmpd runs here: systemd, or a namespace's process
    at: float
