"""The box's configuration as one value: what each domain has - confirmed, pending,
draft - read where it is kept. The web process reads the database (the drafts, and the
agent's mirrors of the stores); the agent reads the stores on disk (root's, never the
mirrors, which the web user can write). A rule that links two domains (verify.py) gets
both from here, so no domain's app reads another's tables or files itself.

Each domain's app registers its readers, one per place it is read from, in its
AppConfig.ready() (Django runs it in the web process and the agent alike):

    @snapshot.reader("network", snapshot.WEB)
    def mirrored():            # -> ((CONFIRMED, NetworkConfig), (PENDING, ...)), ...
        ...

    snapshot.read(snapshot.AGENT, "network", config=agent_config).network

A reader returns a tuple of (which, value) - which one of CONFIRMED, PENDING, DRAFT - and
leaves out what there is not; it raises SnapshotError when a part cannot be read. Parts:
network (network.core.model.NetworkConfig values), policy (policy documents as
parsed YAML: a revision of an older release still names its zones) and ha (this box's
half of the pair: ha.core.config.HaConfig values, none when it is alone).
"""
from dataclasses import dataclass

WEB, AGENT = "web", "agent"
CONFIRMED, PENDING, DRAFT = "confirmed", "pending", "draft"
PARTS = ("network", "policy", "ha")

_readers = {}


class SnapshotError(Exception):
    """A part of the box's configuration cannot be read; the message says which and why."""


@dataclass(frozen=True)
class Snapshot:
    network: tuple = ()
    policy: tuple = ()
    ha: tuple = ()

    def values(self, part):
        """The values of part, in the order read (confirmed, pending, draft)."""
        return [value for _, value in getattr(self, part)]


def reader(part, source):
    """Registers the decorated function as the reader of part in source (WEB or AGENT)."""
    if part not in PARTS or source not in (WEB, AGENT):
        raise ValueError(f"no part {part!r} read in {source!r}")

    def register(function):
        _readers[(part, source)] = function
        return function
    return register


def read(source, *parts, **context):
    """A Snapshot with parts read in source; context goes to every reader (the agent's:
    config=its configuration). A part nobody registered a reader for is a programming
    error: LookupError."""
    found = {}
    for part in parts:
        function = _readers.get((part, source))
        if function is None:
            raise LookupError(f"no reader of {part} in {source} is registered")
        found[part] = tuple(function(**context))
    return Snapshot(**found)
