"""What the agent's flows.sample task keeps for the Flows page and /metrics (flows/core/
sampler.py's sample()): one contract (tusklib/contracts.py), checked by the agent when it
stores it and by the web process when it reads it back - a forged row reads as no
sample, never as a server error."""
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Endpoint:
    """One direction's tuple (ctnetlink.Tuple.as_dict)."""

    src: str
    dst: str
    sport: int
    dport: int


@dataclass(frozen=True)
class Flow:
    """One of the fastest flows, as the page shows it; rates in bit/s."""

    id: int
    family: int
    proto: int
    protocol: str
    orig: Endpoint
    reply: Endpoint
    nat: bool
    zone: int
    mark: int
    class_: int = field(metadata={"key": "class"})
    fastpath: bool
    offloaded: bool
    in_hardware: bool
    bps: list[int] | None                  # both directions; None before two readings
    history: list[int]
    estimate: int
    bytes: list[int] | None                # None without conntrack accounting
    packets: list[int] | None
    age: float | None                      # None without conntrack timestamps
    state: str | None
    helper: str | None
    seqadj: dict[str, Any] | None


@dataclass(frozen=True)
class Pass:
    """The scan over the whole table: how many passes, the last whole one's statistics
    and per-class elephants ({ordinal: [connections, bytes]}), entries read in this one."""

    number: int
    last: dict[str, Any] | None
    read: int | None


@dataclass(frozen=True)
class Cpu:
    sample: float            # CPU seconds this sample took
    share: float             # of one core, since the sampler began


@dataclass(frozen=True)
class FlowSample:
    at: float                # Unix time of the sample
    interval: float
    entries: int
    max: int | None
    min_bytes: int
    tracked: int
    flows: list[Flow]
    cpu: Cpu
    pass_: Pass = field(metadata={"key": "pass"})


@dataclass(frozen=True)
class SysctlChange:
    """flows.conntrack, for each sysctl it turns on (accounting, timestamps): its value
    before and now."""

    was: str
    now: str


@dataclass(frozen=True)
class Exporting:
    """flows.export's report on tusk-flowexport (flows/core/exporter.py's status, with
    the agent's word on the process)."""

    running: bool
    pid: int | None
    protocol: str
    active_timeout: int
    collectors: list[str]
    records: int                    # since the exporter started
    messages: int
    send_errors: dict[str, int]     # per collector
    last_error: str
    lost_events: int                # times the kernel dropped DESTROY events (ENOBUFS)
    tracked: int                    # connections it has sent a record of
    sweep_seconds: float            # its last scan of the table
    refused: str = ""               # why the settings row was refused, "" when it was not
