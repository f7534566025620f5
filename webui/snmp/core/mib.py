"""TUSK-MIB (webui/snmp/TUSK-MIB.txt) in Python: the counters snapshot the agent writes
(snmp/counters.py, whose docstring gives its schema) -> the module's rows, which
tusk-snmp-pass serves to snmpd (passpersist.py).

The snapshot is read by another process than the one that wrote it, and a row of the
agent's database is behind most of its numbers, so nothing in it is trusted here: every
value is taken only as the type its object has in the MIB - a Counter64 a whole number of
0 .. 2**64-1 (else the row is left out: a counter has no maximum to stop at), a Gauge32
or Unsigned32 a whole number latched at 2**32-1 (RFC 2578's rule for a gauge), an
enumeration one of its names, text printable ASCII within the column's SIZE (other
characters become "?"). A malformed snapshot yields fewer rows, never an exception.

A row is (OID as a tuple of ints, type name, value); a table is a list of rows sorted by
OID, which is the order of Python's tuples."""
import bisect
import json
import math
import re
import time

from tusklib.names import MAX_CLASSES, NAME_MAX

# NET-SNMP-MIB::netSnmpPlaypen.58: Tusk has no Private Enterprise Number of its own
ROOT = (1, 3, 6, 1, 4, 1, 8072, 9999, 9999, 58)
VERSION = 1                       # of the snapshot's schema
SNAPSHOT_MAX = 4 << 20            # bytes: MAX_CLASSES classes and LOSS_MAX counters at their
#                                   longest fit (tests/unit/test_snmp_mib.py)
LOSS_MAX = 8192                   # loss counters: the 7 stages of an interface, 1 100 and more
COUNTER64, GAUGE32, UNSIGNED32 = "Counter64", "Gauge32", "Unsigned32"
INTEGER, OCTET_STRING = "INTEGER", "OCTET STRING"
_MAX64, _MAX32 = (1 << 64) - 1, (1 << 32) - 1
_UNPRINTABLE = re.compile(r"[^ -~]")

# tuskSnapshotState
OK, MISSING, UNREADABLE, MALFORMED = 1, 2, 3, 4
# tuskHaRole, by the snapshot's name
HA_ROLES = {"none": 1, "master": 2, "backup": 3, "fault": 4, "cluster": 5}
TRUTH = {True: 1, False: 2}       # SNMPv2-TC's TruthValue

_SCALARS = ROOT + (1, 1)
SNAPSHOT_TIME = _SCALARS + (1, 0)
SNAPSHOT_AGE = _SCALARS + (2, 0)
SNAPSHOT_STATE = _SCALARS + (3, 0)
_HA_ROLE = _SCALARS + (4, 0)
_RULESET_LOADED = _SCALARS + (5, 0)
_CONNTRACK = {"conntrack_entries": _SCALARS + (6, 0), "conntrack_limit": _SCALARS + (7, 0)}
# the ruleset's drops: {snapshot name: (packets' OID, bytes' OID)}
DROPS = {"default_deny": (_SCALARS + (8, 0), _SCALARS + (9, 0)),
         "invalid": (_SCALARS + (10, 0), _SCALARS + (11, 0))}
# the lines of /proc/net/nf_conntrack_seqadj (Tusk's kernel), tuskSeqadj.1 onwards
SEQADJ = ("sack_blocks_translated", "tcp_options_malformed", "icmp_quotes_translated",
          "icmp_quotes_dropped", "flowtable_packets_translated",
          "seqrand_initiator_randomised", "seqrand_responder_randomised",
          "seqrand_skipped_midstream", "seqrand_skipped_synproxy", "seqrand_skipped_signed",
          "seqrand_dropped_nomem")
_SEQADJ = ROOT + (1, 2)
_CLASS_ENTRY = ROOT + (1, 3, 1)   # columns 2 name, 3 packets, 4 bytes
_LOSS_ENTRY = ROOT + (1, 4, 1)    # columns 2 stage, 3 counter, 4 packets
LOSS_TEXT_MAX = 64                # tuskLossStage's and tuskLossCounter's SIZE


def counter64(value):
    return value if type(value) is int and 0 <= value <= _MAX64 else None


def gauge32(value):
    return min(value, _MAX32) if type(value) is int and value >= 0 else None


def seconds(value):
    """A Unix time or a number of seconds as an Unsigned32 (whole seconds, latched)."""
    try:
        if type(value) in (int, float) and math.isfinite(value) and value >= 0:
            return min(int(value), _MAX32)
    except OverflowError:       # an int too large for a float: math.isfinite raises
        return _MAX32
    return None


def text(value, limit):
    """value as printable ASCII of 1 .. limit characters (a byte each), other characters
    replaced by "?"; None unless it is a non-empty str."""
    if type(value) is not str or not value:
        return None
    return _UNPRINTABLE.sub("?", value[:limit])


def _scalars(snapshot, rows):
    rows.append((SNAPSHOT_STATE, INTEGER, OK))
    at = seconds(snapshot.get("time"))
    if at is not None:
        rows.append((SNAPSHOT_TIME, UNSIGNED32, at))
        rows.append((SNAPSHOT_AGE, UNSIGNED32, 0))      # update_age() sets it per request
    role = snapshot.get("ha_role")
    if type(role) is str and role in HA_ROLES:
        rows.append((_HA_ROLE, INTEGER, HA_ROLES[role]))
    loaded = snapshot.get("ruleset_loaded")
    if type(loaded) is bool:
        rows.append((_RULESET_LOADED, INTEGER, TRUTH[loaded]))
    for key, oid in _CONNTRACK.items():
        value = gauge32(snapshot.get(key))
        if value is not None:
            rows.append((oid, GAUGE32, value))
    drops = snapshot.get("drops")
    for key, oids in DROPS.items():
        pair = drops.get(key) if isinstance(drops, dict) else None
        if isinstance(pair, list) and len(pair) == 2:
            for oid, value in zip(oids, pair):
                if counter64(value) is not None:
                    rows.append((oid, COUNTER64, value))


def _seqadj(snapshot, rows):
    counters = snapshot.get("seqadj")
    if not isinstance(counters, dict):
        return
    for arc, name in enumerate(SEQADJ, 1):
        value = counter64(counters.get(name))
        if value is not None:
            rows.append((_SEQADJ + (arc, 0), COUNTER64, value))


def _entries(found, limit, texts, counters, entry, rows):
    """A table of the snapshot: a list of [text..., counter...] entries, indexed by their
    place in the list (1-based); texts: the SIZE of each text column, counters: how many
    Counter64 columns follow. An entry whose text is bad is left out whole, a bad counter
    alone."""
    if not isinstance(found, list):
        return
    for index, item in enumerate(found[:limit], 1):
        if not isinstance(item, list) or len(item) != len(texts) + counters:
            continue
        words = [text(value, size) for value, size in zip(item, texts)]
        if None in words:
            continue
        for column, word in enumerate(words, 2):
            rows.append((entry + (column, index), OCTET_STRING, word))
        for column, value in enumerate(item[len(texts):], 2 + len(texts)):
            if counter64(value) is not None:
                rows.append((entry + (column, index), COUNTER64, value))


def table(snapshot, state=OK, now=None):
    """The rows of a snapshot (a dict as json.load read it), sorted by OID; state: why
    there is no snapshot (MISSING, UNREADABLE), and then the state's row alone. now: the
    time tuskSnapshotAge is reckoned from (time.time() when None)."""
    if state != OK:
        return [(SNAPSHOT_STATE, INTEGER, state)]
    if not isinstance(snapshot, dict) or type(snapshot.get("version")) is not int \
            or snapshot["version"] != VERSION:
        return [(SNAPSHOT_STATE, INTEGER, MALFORMED)]
    rows = []
    _scalars(snapshot, rows)
    _seqadj(snapshot, rows)
    _entries(snapshot.get("classes"), MAX_CLASSES, (NAME_MAX,), 2, _CLASS_ENTRY, rows)
    _entries(snapshot.get("loss"), LOSS_MAX, (LOSS_TEXT_MAX,) * 2, 1, _LOSS_ENTRY, rows)
    rows.sort(key=_oid)
    update_age(rows, now)
    return rows


def snapshot_text(snapshot):
    """The snapshot file's text: one line of compact JSON (a policy's classes make most of
    it), never longer than SNAPSHOT_MAX for a snapshot within the limits above."""
    return json.dumps(snapshot, separators=(",", ":"), sort_keys=True, allow_nan=False) + "\n"


def update_age(rows, now=None):
    """tuskSnapshotAge set, in place, to the seconds from tuskSnapshotTime to now (none
    while the clock stands before it): the one value that changes between two reads of the
    same snapshot, so a responder keeps its table and calls this at every request."""
    at, age = get(rows, SNAPSHOT_TIME), bisect.bisect_left(rows, SNAPSHOT_AGE, key=_oid)
    if at is not None and age < len(rows) and rows[age][0] == SNAPSHOT_AGE:
        elapsed = (time.time() if now is None else now) - at[2]
        rows[age] = (SNAPSHOT_AGE, UNSIGNED32, seconds(max(0, elapsed)) or 0)


def _oid(row):
    return row[0]


def get(rows, oid):
    """The row of exactly oid, or None."""
    at = bisect.bisect_left(rows, oid, key=_oid)
    return rows[at] if at < len(rows) and rows[at][0] == oid else None


def next_after(rows, oid):
    """The first row whose OID comes after oid (the next of a GetNext), or None."""
    at = bisect.bisect_right(rows, oid, key=_oid)
    return rows[at] if at < len(rows) else None
