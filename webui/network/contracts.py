"""What the network's agent task network.facts keeps for the pages and the checks
(tusklib/contracts.py): the machine's ports with their facts (the facts module's own
Port), each link's global addresses, and table main's routes, when the agent read them."""
from dataclasses import dataclass

from .core.facts import Port, Route


@dataclass(frozen=True)
class Facts:
    ports: dict[str, Port]
    addresses: dict[str, list[str]]
    routes: list[Route]
    at: float
