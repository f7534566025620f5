"""net-snmp's pass_persist protocol (snmpd.conf(5); agent/mibgroup/ucd-snmp/pass_persist.c
and pass_common.c of net-snmp 5.9), the responder's side, for tusk-snmp-pass: snmpd
starts the program once and talks to it over its stdin and stdout, a line at a time.

    snmpd                         responder
    PING                          PONG              (before every request)
    get / <oid>                   <oid> / <type> / <value>, or NONE
    getnext / <oid>               the next OID's three lines, or NONE
    set / <oid> / <type value>    not-writable      (TUSK-MIB is read-only)

The answers are read with fgets into 4 KiB buffers and the value line is taken as it is,
so a line break in a value would be a line of the protocol of its own: every value here
is a number or printable ASCII without one (mib.text), and what is not is never
written. A string is sent as "string" when it is printable and non-empty; else as
"octet", in hex: 5.9's "string" reads the byte before its buffer when the value is
empty. snmpd sends the OID of a request with a leading dot; anything but a dotted number
of at most 128 arcs of 32 bits is answered NONE. A set's value line ends with a line
break and an empty line in 5.9.3 and with nothing at all in later versions (it runs into
the next PING), so the responder answers a set at its OID and then skips to the next
PING; an empty line elsewhere, or the end of stdin, ends it.

Plain Python (no Django): it runs under snmpd, as snmpd's unprivileged user."""
import io
import json
import os
import re
import stat
import sys

from . import mib

LINE_MAX = 8192              # snmpd's lines are at most 4 KiB (SNMP_MAXBUF)
OID_ARCS_MAX = 128           # net-snmp's MAX_OID_LEN
_ARC_MAX = (1 << 32) - 1
_OID = re.compile(r"\.?([0-9]{1,10}(?:\.[0-9]{1,10})*)\Z")
_PRINTABLE = re.compile(r"[ -~]+\Z")
# mib's type names -> pass_persist's (pass_common.c: netsnmp_internal_pass_parse)
TYPES = {mib.COUNTER64: "counter64", mib.GAUGE32: "gauge", mib.UNSIGNED32: "unsigned",
         mib.INTEGER: "integer"}
_RANGES = {mib.COUNTER64: (0, (1 << 64) - 1), mib.GAUGE32: (0, _ARC_MAX),
           mib.UNSIGNED32: (0, _ARC_MAX), mib.INTEGER: (-(1 << 31), (1 << 31) - 1)}


def parse_oid(text):
    """'.1.3.6' -> (1, 3, 6); None unless it is a dotted number net-snmp could send."""
    found = _OID.match(text)
    if found is None:
        return None
    arcs = tuple(int(arc) for arc in found.group(1).split("."))
    if len(arcs) > OID_ARCS_MAX or max(arcs) > _ARC_MAX:
        return None
    return arcs


def answer(row):
    """A row's three lines as one string, or None when its value is not what its type
    allows (a row mib.table made always is)."""
    oid, kind, value = row
    name = "." + ".".join(str(arc) for arc in oid)
    if kind == mib.OCTET_STRING:
        if type(value) is not str:
            return None
        if _PRINTABLE.match(value):
            return f"{name}\nstring\n{value}\n"
        return f"{name}\noctet\n{value.encode('utf-8').hex(' ')}\n"
    low, high = _RANGES.get(kind, (1, 0))
    if type(value) is not int or not low <= value <= high:
        return None
    return f"{name}\n{TYPES[kind]}\n{value}\n"


def respond(command, oid_text, rows):
    """The answer to a get or getnext of oid_text in rows."""
    oid = parse_oid(oid_text)
    if oid is None:
        return "NONE\n"
    row = mib.get(rows, oid) if command == "get" else mib.next_after(rows, oid)
    if row is not None and row[0][:len(mib.ROOT)] != mib.ROOT:
        row = None               # never an OID outside the subtree snmpd gave this program
    return (answer(row) if row is not None else None) or "NONE\n"


def serve(stdin, stdout, load):
    """Answer snmpd until an empty line or the end of stdin. load(): the current table
    (a list of mib rows), called once per get and getnext."""
    def line():
        return stdin.readline(LINE_MAX)

    after_set = False
    while True:
        text = line()
        if not text:
            return
        command = text.rstrip("\r\n")
        if after_set:            # the set's value, and in later versions the PING after it
            if not command.endswith("PING"):
                continue
            after_set, command = False, "PING"
        if not command:
            return
        if command == "PING":
            reply = "PONG\n"
        elif command in ("get", "getnext"):
            oid_text = line()
            if not oid_text:
                return
            reply = respond(command, oid_text.rstrip("\r\n"), load())
        elif command == "set":
            if not line():
                return
            reply, after_set = "not-writable\n", True
        else:
            continue             # nothing snmpd sends: no answer it would wait for
        stdout.write(reply)
        stdout.flush()


class SnapshotFile:
    """load() for serve(): the table of the snapshot at path, read again only when the
    file's identity, size or time changed (snmpd asks once per object: a walk of a large
    policy's classes must not parse the file each time). The directory is the agent's;
    the file is opened without following a link, and one that is not a regular file of at
    most mib.SNAPSHOT_MAX bytes is unreadable."""

    def __init__(self, path, limit=mib.SNAPSHOT_MAX):
        self.path, self.limit = path, limit
        self.seen, self.rows = None, None

    def __call__(self):
        try:
            found = os.lstat(self.path)
            seen = (found.st_dev, found.st_ino, found.st_mode, found.st_size,
                    found.st_mtime_ns)
        except FileNotFoundError:
            seen = mib.MISSING
        except OSError:
            seen = mib.UNREADABLE
        if seen != self.seen:
            self.seen, self.rows = self._read(seen)
        mib.update_age(self.rows)
        return self.rows

    def _read(self, seen):
        """(what was seen of the file, its table)."""
        if seen in (mib.MISSING, mib.UNREADABLE):
            return seen, mib.table(None, state=seen)
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK
                         | os.O_CLOEXEC)
        except FileNotFoundError:
            return seen, mib.table(None, state=mib.MISSING)
        except OSError:          # a link (ELOOP), no permission
            return seen, mib.table(None, state=mib.UNREADABLE)
        try:
            found = os.fstat(fd)
            seen = (found.st_dev, found.st_ino, found.st_mode, found.st_size,
                    found.st_mtime_ns)
            if not stat.S_ISREG(found.st_mode) or found.st_size > self.limit:
                return seen, mib.table(None, state=mib.UNREADABLE)
            data = _read_at_most(fd, self.limit + 1)
        except OSError:
            return seen, mib.table(None, state=mib.UNREADABLE)
        finally:
            os.close(fd)
        if len(data) > self.limit:
            return seen, mib.table(None, state=mib.UNREADABLE)
        try:
            snapshot = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError):
            snapshot = None      # too deep for the parser, a number of 5 000 digits
        return seen, mib.table(snapshot)


def _read_at_most(fd, size):
    chunks, left = [], size
    while left > 0:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def main(argv):
    """tusk-snmp-pass SNAPSHOT_PATH; 2, and not a word, on a wrong command line: snmpd
    makes this program's stderr its stdout, so the program has sent it to /dev/null."""
    if len(argv) != 1 or not argv[0]:
        return 2
    stdin = io.TextIOWrapper(sys.stdin.buffer, encoding="ascii", errors="replace",
                             newline="\n")
    stdout = io.TextIOWrapper(sys.stdout.buffer, encoding="ascii", newline="\n")
    try:
        serve(stdin, stdout, SnapshotFile(argv[0]))
    except BrokenPipeError:      # snmpd closed the pipe: it kills this process next
        pass
    return 0
