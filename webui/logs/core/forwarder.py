"""Remote syslog: rsyslog forwards every record of the firewall's log to the receivers
the operator named, as RFC 5424 messages over UDP or TCP (plain Python).

rsyslog's imfile follows the log directory's current file - through the agent's
rotation: it reads to the end of a file renamed away, then the new one - and keeps its
position in a state file, so a restart neither repeats nor skips records; on its first
start it begins at the end (freshStartTail), not with the whole log. omfwd sends each
record to each receiver with one template:

    <133>1 2026-05-04T10:11:12.345678+00:00 tusk tusk - firewall - {"oob.prefix": ...}

PRI 133 is facility local0, severity notice; APP-NAME tusk, no PROCID, MSGID firewall,
no structured data, and the message is ulogd's JSON record, unchanged. TCP uses
octet-counting framing (RFC 6587 3.4.1), which no byte of a message can break. Each
receiver has a queue of its own, so one that is away holds up neither the others nor the
log; its oldest messages are dropped beyond SYSLOG_QUEUE_MESSAGES.

The configuration is written by the agent from checked settings only (core/settings.py:
typed values - an address without a scope, a host name, a port, a transport), each
through rsyslog's one quoting point (tusklib/formats/rsyslog.py), checked with
`rsyslogd -N1`, and rsyslogd runs as the agent's child (-n), in the firewall's network
namespace in the lab, and dies with it. Its files - configuration, pid file, imfile's
state - are in the agent's root-only syslog directory, derived from the configuration."""
import os
import re
import signal
import subprocess

from tusklib import children, values
from tusklib.files import UnsafeDirectory, root_directory, write_atomically
from tusklib.formats import rsyslog

from .constants import (
    CURRENT,
    SYSLOG_APP_NAME,
    SYSLOG_FACILITY,
    SYSLOG_MESSAGE_MAX,
    SYSLOG_MSGID,
    SYSLOG_QUEUE_MESSAGES,
    SYSLOG_SEVERITY,
)

CONF = "rsyslog.conf"
PID = "rsyslogd.pid"
ERRORS = "rsyslogd.stderr"
STATE = re.compile(r"imfile-state:[0-9A-Za-z:]+")
RSYSLOGD = "rsyslogd"
START_SECONDS = 1     # rsyslogd that lives this long has taken its configuration
MISSING = "rsyslogd is not installed (Debian and Buildroot package rsyslog)"


class ForwarderError(Exception):
    """rsyslogd refused the configuration, or would not start."""


def render(settings, log_dir, work_dir):
    """rsyslog.conf for settings (core.settings.Settings, already checked: its receivers
    hold typed values). Every value goes through rsyslog's one quoting point
    (tusklib/formats/rsyslog.py), which refuses what a string constant cannot hold; the
    directories are the agent's own configuration's, typed as paths."""
    work, log = values.FilePath(work_dir), values.FilePath(log_dir)
    lines = [
        "# Written by tusk-agent from the Logs page's settings (logs/core/forwarder.py).",
        "global(" + rsyslog.parameters(workDirectory=work,
                                       maxMessageSize=_word(SYSLOG_MESSAGE_MAX)) + ")",
        'module(load="imfile")',
        'template(name="tusk_rfc5424" type="list") {',
        '  constant(value="<") property(name="pri") constant(value=">1 ")',
        '  property(name="timereported" dateFormat="rfc3339") constant(value=" ")',
        f'  property(name="hostname") constant(value=" {_word(SYSLOG_APP_NAME)} - '
        f'{_word(SYSLOG_MSGID)} - ")',
        '  property(name="msg")',
        "}",
        'ruleset(name="tusk_forward") {',
    ]
    for number, target in enumerate(settings.syslog):
        where = f"syslog[{number}]"
        if not isinstance(target.host, (values.IPAddress, values.HostName)) or \
                not isinstance(target.port, values.Integer) or \
                not isinstance(target.transport, values.Choice):
            raise TypeError(f"{where}: a receiver of typed values only")
        framing = {"TCP_Framing": _word("octet-counted")} if str(target.transport) == "tcp" \
            else {}
        lines.append("  action(" + rsyslog.parameters(
            where, type=_word("omfwd"), name=_word(f"tusk_syslog_{number}"),
            target=target.host, port=target.port, protocol=target.transport, **framing,
            template=_word("tusk_rfc5424"), queue__type=_word("LinkedList"),
            queue__size=SYSLOG_QUEUE_MESSAGES, action__resumeRetryCount=_word("-1"),
            action__resumeInterval=10) + ")")
    lines += [
        "}",
        "input(" + rsyslog.parameters(
            type=_word("imfile"), file=log.join(CURRENT), tag=_word(SYSLOG_APP_NAME),
            facility=_word(SYSLOG_FACILITY), severity=_word(SYSLOG_SEVERITY),
            freshStartTail=_word("on"), ruleset=_word("tusk_forward")) + ")",
    ]
    return "\n".join(lines) + "\n"


def _word(text):
    """A constant of this module's own, typed as one."""
    return values.Word(text)


def prepare(work_dir):
    """The syslog directory, root's only (0700): created if missing; ForwarderError if it
    is a link or someone else's."""
    try:
        root_directory(work_dir)
    except UnsafeDirectory as exc:
        raise ForwarderError(str(exc)) from None


def write(settings, log_dir, work_dir):
    """Writes the configuration once `rsyslogd -N1` has accepted it (a running rsyslogd
    read its own at its start); ForwarderError with rsyslogd's words, and nothing
    written, when it refuses it."""
    prepare(work_dir)
    conf = os.path.join(work_dir, CONF)
    candidate = conf + ".new"
    write_atomically(candidate, render(settings, log_dir, work_dir), 0o600, owner=(0, 0))
    try:
        checked = subprocess.run([RSYSLOGD, "-N1", "-f", candidate], capture_output=True,
                                 text=True)
    except FileNotFoundError:
        os.unlink(candidate)
        raise ForwarderError(MISSING) from None
    if checked.returncode != 0:
        os.unlink(candidate)
        words = [line for line in (checked.stdout + checked.stderr).splitlines()
                 if "error" in line.lower()] or [checked.stderr.strip()]
        raise ForwarderError("rsyslogd refused the configuration: " + "; ".join(words)[:500])
    os.replace(candidate, conf)
    return conf


def clear(work_dir):
    """Removes the configuration, what rsyslogd said and imfile's positions: no
    forwarding, and the next start begins at the log's end again."""
    for name in os.listdir(work_dir):
        if name in (CONF, ERRORS) or STATE.fullmatch(name):
            os.unlink(os.path.join(work_dir, name))


def stop_leftover(work_dir):
    """Ends an rsyslogd that a dead agent left running with this configuration (its pid
    file names it; it is only signalled if it is rsyslogd and was started with our
    configuration file)."""
    return children.stop_leftover(os.path.join(work_dir, PID), RSYSLOGD,
                                  os.path.join(work_dir, CONF), seconds=5)


def start(work_dir, netns=None):
    """rsyslogd on the written configuration, as a child that dies with the calling
    thread's process; ForwarderError if it exits within START_SECONDS."""
    conf, pidfile = os.path.join(work_dir, CONF), os.path.join(work_dir, PID)
    stop_leftover(work_dir)
    argv = [RSYSLOGD, "-n", "-f", conf, "-i", pidfile]
    if netns:
        argv = ["ip", "netns", "exec", netns, *argv]
    # what it says on stderr before it runs (after that, rsyslogd logs through syslog())
    errors = os.path.join(work_dir, ERRORS)
    with open(errors, "wb") as stderr:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=stderr, cwd="/", preexec_fn=children.end_with_parent(
                                    os.getpid(), signal.SIGTERM))
    try:
        proc.wait(START_SECONDS)
    except subprocess.TimeoutExpired:
        return proc
    with open(errors, "rb") as said:
        text = said.read(2000).decode(errors="replace").strip()
    raise ForwarderError(f"rsyslogd exited with status {proc.returncode}: {text}")


def stop(proc):
    children.stop(proc)
