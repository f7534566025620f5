"""What the agent's log tasks keep for the Logs page (tusklib/contracts.py): logs.keep's
report on the log's files and logs.forwarder's on rsyslogd, checked by the agent when it
stores them and by the web process when it reads them back - a forged row reads as
nothing reported, never as a server error."""
from dataclasses import dataclass


@dataclass(frozen=True)
class Kept:
    """One run of the log's keeper (core/storage.py keep()) and the settings it used."""

    total: int                 # bytes of every file of the log
    rotated: bool
    deleted: list[str]         # rotated files removed to stay within the settings
    removed: list[str]         # entries that were no log file (a link, a directory)
    writers: list[int]         # pids of the ulogd processes writing the current file
    files: int
    file_mb: int
    refused: str               # why the settings were refused, "" when they were not


@dataclass(frozen=True)
class Forwarding:
    """rsyslogd, forwarding the log to the syslog targets."""

    running: bool
    pid: int | None
    targets: list[str]
    refused: str = ""          # at start: why the settings were refused
