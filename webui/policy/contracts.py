"""What the policy's agent tasks keep (tusklib/contracts.py): for the pages, and for the
Jobs page's record of each task."""
from dataclasses import dataclass

# policy.capabilities: what the target's kernel offers, name -> present
# (core/capabilities.report: "ipv4-tcp-seqrand helper", "flowtable", ...)
Capabilities = dict[str, bool]


@dataclass(frozen=True)
class CounterRun:
    """policy.counters: how many named counters the reading holds (the reading itself is
    the CounterReading row), whether table tusk was loaded."""

    counters: int
    table_loaded: bool


@dataclass(frozen=True)
class FastpathDevices:
    """policy.fastpath_devices: interfaces added to the fast path's flowtable now, and
    the ones the policy names that the machine still lacks."""

    added: list[str]
    missing: list[str]
