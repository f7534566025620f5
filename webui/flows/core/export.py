"""Flow export's settings - the collectors, the protocol, the active timeout - and their
one check, which the page, the API, the agent (on the row, before it uses anything of
it) and the exporter (on its own configuration file) all run (plain Python).

    {"protocol": "ipfix", "active_timeout": 60,
     "collectors": [{"address": "192.0.2.20", "port": 4739}, ...]}

No collector: no export. Every problem names its field (`collectors[1].port: 70000 is
outside 1-65535`). A collector's address is an IP address (typed: tusklib/values.py, no
scope, not multicast, unspecified or loopback); the exporter's file is the checked
settings written back as JSON (render), and the exporter reads it with this check
(parse), so what it runs on is what was checked."""
import json
import os
from dataclasses import dataclass, field
from enum import IntEnum

from tusklib import children, values
from tusklib.files import UnsafeDirectory, root_directory
from tusklib.problems import Problem, Problems

PROTOCOLS = ("ipfix", "netflow9")
VERSION = {"ipfix": 10, "netflow9": 9}
DEFAULT_PORT = {"ipfix": 4739, "netflow9": 2055}   # IANA's IPFIX port; v9's usual one
COLLECTORS_MAX = 4
ACTIVE_TIMEOUT = (5, 3600, 60)      # seconds: lowest, highest, default
PORT_MIN, PORT_MAX = 1, 65535
CONF, STATUS, PID, ERRORS = "export.json", "status.json", "tusk-flowexport.pid", "stderr"
KEYS = ("protocol", "active_timeout", "collectors")
COLLECTOR_KEYS = ("address", "port")


class Code(IntEnum):
    TYPE = 2
    RANGE = 3
    VALUE = 4
    KEY = 5


class ExportError(Problems):
    """Settings refused: every problem with its field."""

    codes = Code


@dataclass(frozen=True)
class Collector:
    address: values.IPAddress
    port: values.Integer

    def __str__(self):
        host = f"[{self.address}]" if self.address.version == 6 else str(self.address)
        return f"{host}:{self.port}"

    def as_dict(self):
        return {"address": str(self.address), "port": int(self.port)}


@dataclass(frozen=True)
class Settings:
    protocol: str = "ipfix"
    active_timeout: int = ACTIVE_TIMEOUT[2]
    collectors: tuple = field(default_factory=tuple)

    @property
    def enabled(self):
        return bool(self.collectors)

    @property
    def version(self):
        return VERSION[self.protocol]

    def as_dict(self):
        return {"protocol": self.protocol, "active_timeout": self.active_timeout,
                "collectors": [c.as_dict() for c in self.collectors]}


def checked_address(value):
    """A collector's address as a typed value; values.Refused saying why not."""
    address = values.IPAddress(value)
    ip = address.ip
    if ip.is_multicast or ip.is_unspecified or ip.is_loopback:
        raise values.Refused(f"{address} is not the address of a collector "
                             f"(multicast, unspecified or loopback)")
    return address


def _integer(value, path, low, high, problems):
    try:
        return values.Integer(value, low, high)
    except values.Refused as refused:
        problems.append(Problem(Code.RANGE, path, str(refused)))
        return None


def _collector(item, path, protocol, problems):
    if not isinstance(item, dict):
        problems.append(Problem(Code.TYPE, path, "expected a table of address and port"))
        return None
    before = len(problems)
    for key in item:
        if key not in COLLECTOR_KEYS:
            problems.append(Problem(Code.KEY, f"{path}.{key}" if isinstance(key, str) else path,
                                    f"unknown key (known: {', '.join(COLLECTOR_KEYS)})"))
    address = None
    try:
        address = checked_address(item.get("address"))
    except values.Refused as refused:
        problems.append(Problem(Code.VALUE, f"{path}.address", str(refused)))
    port = _integer(item.get("port", DEFAULT_PORT.get(protocol, DEFAULT_PORT["ipfix"])),
                    f"{path}.port", PORT_MIN, PORT_MAX, problems)
    return None if len(problems) > before else Collector(address, port)


def check(document):
    """The Settings of a document (as above), or ExportError naming every problem."""
    if not isinstance(document, dict):
        raise ExportError([Problem(Code.TYPE, "", f"expected a table of {', '.join(KEYS)}")])
    problems = [Problem(Code.KEY, key if isinstance(key, str) else "",
                        f"unknown key (known: {', '.join(KEYS)})")
                for key in document if key not in KEYS]
    protocol = document.get("protocol", "ipfix")
    if protocol not in PROTOCOLS:
        problems.append(Problem(Code.VALUE, "protocol", f"{values.shown(protocol)} is not one of "
                                            f"{', '.join(PROTOCOLS)}"))
    low, high, default = ACTIVE_TIMEOUT
    timeout = _integer(document.get("active_timeout", default), "active_timeout", low, high,
                       problems)
    collectors = document.get("collectors", [])
    found = []
    if not isinstance(collectors, list):
        problems.append(Problem(Code.TYPE, "collectors", "expected a list of collectors"))
    elif len(collectors) > COLLECTORS_MAX:
        problems.append(Problem(Code.RANGE, "collectors", f"{len(collectors)} collectors: at most "
                                              f"{COLLECTORS_MAX}"))
    else:
        seen = set()
        for index, item in enumerate(collectors):
            collector = _collector(item, f"collectors[{index}]", protocol, problems)
            if collector is None:
                continue
            key = (collector.address.ip, int(collector.port))
            if key in seen:
                problems.append(Problem(Code.VALUE, f"collectors[{index}]",
                                        f"{collector} is named twice"))
            seen.add(key)
            found.append(collector)
    if problems:
        raise ExportError(problems)
    return Settings(protocol, int(timeout), tuple(found))


def render(settings):
    """The exporter's configuration file: the checked settings as JSON, from their typed
    values only."""
    if not isinstance(settings, Settings) or not all(
            isinstance(c.address, values.IPAddress) and isinstance(c.port, values.Integer)
            for c in settings.collectors):
        raise TypeError("flow export settings of typed values only")
    return json.dumps(settings.as_dict(), indent=1, sort_keys=True) + "\n"


def parse(text):
    """The Settings of an exporter's configuration file (render's), checked as the forms
    check them; ExportError if refused (or not JSON)."""
    try:
        document = json.loads(text)
    except ValueError as exc:
        raise ExportError([Problem(Code.TYPE, "", f"not JSON: {exc}")]) from None
    return check(document)


# -- the exporter's directory (the agent's) -----------------------------------------------

def directory(config):
    """Where the exporter's files are, derived from the configuration alone: beside the
    policy's state directory (/var/lib/tusk/flowexport on the appliance)."""
    return os.path.join(os.path.dirname(os.path.abspath(config.state_dir)), "flowexport")


def prepare(path):
    """The directory, root's only (0700): made if missing; ExportError if it is a link
    or someone else's."""
    try:
        root_directory(path)
    except UnsafeDirectory as exc:
        raise ExportError(Code.VALUE, "", str(exc)) from None


def clear(path):
    """No export: the file, the status and what the exporter said removed."""
    for name in (CONF, STATUS, PID, ERRORS):
        try:
            os.unlink(os.path.join(path, name))
        except FileNotFoundError:
            pass


def stop_leftover(path, program):
    """Ends an exporter a dead agent left running (its pid file names it; it is only
    signalled if it runs `program` on this directory's file)."""
    return children.stop_leftover(os.path.join(path, PID), program,
                                  os.path.join(path, CONF))
