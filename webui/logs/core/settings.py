"""The Logs page's settings - the storage bound and the remote syslog receivers - and
their one check, which the form runs in the web process and the agent runs again on the
row before it uses anything of it (plain Python).

    {"files": 10, "file_mb": 10,
     "syslog": [{"host": "192.0.2.10", "port": 514, "transport": "udp"}, ...]}

Every problem names its field (`syslog[1].port: 70000 is above 65535`). A host is an IP
address without a scope or an RFC 1123 host name (tusklib/values.py); the checked
Settings hold those typed values, and the forwarder writes only their canonical text,
through rsyslog's one quoting point (tusklib/formats/rsyslog.py)."""
from dataclasses import dataclass
from enum import IntEnum

from tusklib import values
from tusklib.problems import Problem, Problems

from .choices import TRANSPORTS
from .constants import (
    FILE_MB_DEFAULT,
    FILE_MB_MAX,
    FILE_MB_MIN,
    FILES_DEFAULT,
    FILES_MAX,
    FILES_MIN,
    HOST_MAX,
    MB,
    PORT_MAX,
    PORT_MIN,
    SYSLOG_PORT_DEFAULT,
    SYSLOG_TARGETS_MAX,
)

KEYS = ("files", "file_mb", "syslog")
TARGET_KEYS = ("host", "port", "transport")


class Code(IntEnum):
    TYPE = 2
    RANGE = 3
    VALUE = 4
    KEY = 5


class SettingsError(Problems):
    codes = Code


@dataclass(frozen=True)
class Target:
    """A remote syslog receiver: host an IPAddress or a HostName, port an Integer,
    transport a Choice (tusklib/values.py)."""

    host: values.Value
    port: values.Integer
    transport: values.Choice

    def __str__(self):
        host = f"[{self.host}]" if isinstance(self.host, values.IPAddress) and \
            self.host.version == 6 else self.host
        return f"{self.transport}://{host}:{self.port}"

    def as_dict(self):
        return {"host": str(self.host), "port": int(self.port),
                "transport": str(self.transport)}


@dataclass(frozen=True)
class Settings:
    files: int = FILES_DEFAULT
    file_mb: int = FILE_MB_DEFAULT
    syslog: tuple = ()

    @property
    def file_bytes(self):
        return self.file_mb * MB

    @property
    def bound_mb(self):
        return self.files * self.file_mb

    def as_dict(self):
        return {"files": self.files, "file_mb": self.file_mb,
                "syslog": [target.as_dict() for target in self.syslog]}


def checked_host(host):
    """The receiver's host as a typed value (an IP address without a scope, not multicast
    or unspecified, or a host name); values.Refused saying why not."""
    if isinstance(host, str) and len(host) > HOST_MAX:
        raise values.Refused(f"longer than {HOST_MAX} characters")
    found = values.host(host, absolute=True)
    if isinstance(found, values.IPAddress) and (found.ip.is_multicast or
                                                found.ip.is_unspecified):
        raise values.Refused(f"{found} is not the address of one host")
    return found


def host_problem(host):
    """Why host is not an IP address or a DNS name, or None."""
    try:
        checked_host(host)
    except values.Refused as refused:
        return str(refused)
    return None


def _integer(value, path, low, high, problems):
    if isinstance(value, bool) or not isinstance(value, int):
        problems.append(Problem(Code.TYPE, path, f"expected a whole number, got "
                                                 f"{type(value).__name__}"))
        return None
    if not low <= value <= high:
        problems.append(Problem(Code.RANGE, path, f"{value} is outside {low}-{high}"))
        return None
    return value


def _target(item, path, problems):
    if not isinstance(item, dict):
        problems.append(Problem(Code.TYPE, path, f"expected a table of {', '.join(TARGET_KEYS)}"))
        return None
    before = len(problems)
    for key in item:
        if key not in TARGET_KEYS:
            problems.append(Problem(Code.KEY, f"{path}.{key}" if isinstance(key, str) else path,
                                    f"unknown key (known: {', '.join(TARGET_KEYS)})"))
    host = None
    try:
        host = checked_host(item.get("host"))
    except values.Refused as refused:
        problems.append(Problem(Code.VALUE, f"{path}.host", str(refused)))
    port = _integer(item.get("port", SYSLOG_PORT_DEFAULT), f"{path}.port", PORT_MIN, PORT_MAX,
                    problems)
    transport = item.get("transport", "udp")
    if transport not in TRANSPORTS:
        problems.append(Problem(Code.VALUE, f"{path}.transport",
                                f"{str(transport)[:60]!r} is not one of {', '.join(TRANSPORTS)}"))
    if len(problems) > before:
        return None
    return Target(host, values.Integer(port, PORT_MIN, PORT_MAX),
                  values.Choice(transport, TRANSPORTS))


def check(document):
    """The Settings of a document (as above), or SettingsError naming every problem."""
    if not isinstance(document, dict):
        raise SettingsError(Code.TYPE, "", f"expected a table of {', '.join(KEYS)}")
    problems = [Problem(Code.KEY, key if isinstance(key, str) else "",
                        f"unknown key (known: {', '.join(KEYS)})")
                for key in document if key not in KEYS]
    files = _integer(document.get("files", FILES_DEFAULT), "files", FILES_MIN, FILES_MAX,
                     problems)
    file_mb = _integer(document.get("file_mb", FILE_MB_DEFAULT), "file_mb", FILE_MB_MIN,
                       FILE_MB_MAX, problems)
    syslog = document.get("syslog", [])
    targets = []
    if not isinstance(syslog, list):
        problems.append(Problem(Code.TYPE, "syslog", "expected a list of receivers"))
    elif len(syslog) > SYSLOG_TARGETS_MAX:
        problems.append(Problem(Code.RANGE, "syslog", f"{len(syslog)} receivers: at most "
                                                      f"{SYSLOG_TARGETS_MAX}"))
    else:
        for index, item in enumerate(syslog):
            targets.append(_target(item, f"syslog[{index}]", problems))
        seen = set()
        for index, target in enumerate(targets):
            if target and (target.host, target.port, target.transport) in seen:
                problems.append(Problem(Code.VALUE, f"syslog[{index}]",
                                        f"{target} is named twice"))
            elif target:
                seen.add((target.host, target.port, target.transport))
    if problems:
        raise SettingsError(problems)
    return Settings(files, file_mb, tuple(targets))
