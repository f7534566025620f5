"""What the network's agent tasks keep for the pages and the checks (tusklib/contracts.py):
network.facts - the machine's ports with their facts (the facts module's own Port), each
link's global addresses, and table main's routes, when the agent read them;
network.routing - what FRR reports of its BGP sessions, BFD peers and OSPF neighbours
(network/core/frr.py's status())."""
from dataclasses import dataclass

from .core.facts import Port, Route


@dataclass(frozen=True)
class Facts:
    ports: dict[str, Port]
    addresses: dict[str, list[str]]
    routes: list[Route]
    at: float


@dataclass(frozen=True)
class Session:
    address: str
    remote_as: int
    state: str                # BGP's: Idle, Connect, Active, OpenSent, ..., Established
    up_seconds: int
    received: int             # prefixes accepted from it
    sent: int


@dataclass(frozen=True)
class BfdPeer:
    peer: str
    status: str               # up, down, init, shutdown


@dataclass(frozen=True)
class OspfNeighbour:
    neighbour: str            # its router id
    version: int              # 2 or 3
    interface: str
    state: str                # Full, ...


@dataclass(frozen=True)
class RoutingStatus:
    running: bool
    sessions: list[Session]
    bfd: list[BfdPeer]
    ospf: list[OspfNeighbour]
    at: float
