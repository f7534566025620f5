"""Agent side: the snapshot of Tusk's own counters that tusk-snmp-pass serves as TUSK-MIB
(snmp/core/mib.py, passpersist.py), written by the agent at every statistics sample
into a file snmpd's user may read and nothing else may write.

The numbers are the ones /metrics shows (metrics/collector.py), from the same rows: the
dashboard's latest statistics Sample (conntrack, the loss path, seqadj), the policy's
CounterReading (each class's named counter, the default deny's and invalid's drops) and
TargetState, and the last result of the agent's ha.status task. The agent writes these
rows, but the web user may write them too (docs/SECURITY.md), so a value is taken only
when it is a finite, non-negative number below 2**64, a class only by a name the policy's
rule allows (tusklib.names.NAME_PATTERN), a loss counter only of a known stage and of an
interface name the kernel could have: a forged row may change a number or leave a row
out, never the file's shape. tusk-snmp-pass checks the file again as it reads it.

The snapshot (JSON, one object; a key is absent when its source is):

    {"version": 1,                     # mib.VERSION
     "time": 1764547200.123,           # when the agent wrote it (Unix time)
     "ha_role": "none",                # none | master | backup | fault | cluster
     "ruleset_loaded": true,           # table inet tusk is loaded
     "conntrack_entries": 1234,        # nf_conntrack_count
     "conntrack_limit": 262144,        # nf_conntrack_max
     "drops": {"default_deny": [packets, bytes], "invalid": [packets, bytes]},
     "seqadj": {"sack_blocks_translated": 0, ...},     # mib.SEQADJ; Tusk's kernel only
     "classes": [["bulk", packets, bytes], ...],      # by name, at most MAX_CLASSES
     "loss": [["nic.rx_missed", "nic.rx_missed@eth0", packets], ...]}
                                       # the Loss page's order, at most mib.LOSS_MAX

A number that failed its check is null (its object is left out)."""
import re
import time

from dashboard import loss
from dashboard.models import Sample
from ha.agent_jobs import STATUS as HA_STATUS
from ha.contracts import HaStatus
from jobs.models import PeriodicState
from policy.models import READING_PK, CounterReading, TargetState
from tusklib.files import write_atomically
from tusklib.names import IFNAME_PATTERN, MAX_CLASSES, NAME_PATTERN
from tusklib.rowvalues import number

from .core import mib

MODE = 0o640                 # root's, read by snmpd's user through the group
_CLASS_NAME = re.compile(NAME_PATTERN)
_IFNAME = re.compile(IFNAME_PATTERN)
_VRRP = {"MASTER": "master", "BACKUP": "backup"}


def count(value):
    """value, a finite number of 0 .. 2**64-1, as an int (a float cut to its whole part);
    else None."""
    value = number(value)
    return int(value) if value is not None and 0 <= value < 1 << 64 else None


def _ha_role():
    found = PeriodicState.read(HA_STATUS, HaStatus)
    if found is None:
        return None
    if found.cluster:
        return "cluster"
    if found.peer_address is None:
        return "none"
    return _VRRP.get(found.role, "fault")      # FAULT, STOP, or keepalived not running


def _statistics(snapshot):
    sample = Sample.objects.order_by("-taken").first()
    if sample is None:
        return
    snapshot["conntrack_entries"] = count(sample.conntrack_count)
    snapshot["conntrack_limit"] = count(sample.conntrack_max)
    if isinstance(sample.seqadj, dict):
        snapshot["seqadj"] = {name: count(sample.seqadj.get(name)) for name in mib.SEQADJ
                              if name in sample.seqadj}
    counted = sample.loss if isinstance(sample.loss, dict) else {}
    order = {stage.key: index for index, stage in enumerate(loss.STAGES)}
    entries = []
    for key, value in counted.items():
        where = loss.split(key)
        if where is None or (where[1] and not _IFNAME.match(where[1])) \
                or loss.whole(value) is None:
            continue
        stage, interface = where
        entries.append((order[stage.key], interface,
                        [stage.key, f"{stage.key}@{interface}" if interface else stage.key,
                         value]))
    entries.sort(key=lambda entry: entry[:2])
    snapshot["loss"] = [entry for _, _, entry in entries[:mib.LOSS_MAX]]


def _ruleset(snapshot):
    state = TargetState.objects.filter(pk=1).first()
    if state is not None and state.synced_at is not None:
        snapshot["ruleset_loaded"] = bool(state.table_loaded)
    reading = CounterReading.objects.filter(pk=READING_PK).first()
    counters = reading.counters if reading is not None else None
    if not isinstance(counters, dict):
        return
    drops, classes = {}, []
    for name, value in counters.items():
        if not (isinstance(value, list) and len(value) == 3):
            continue
        packets, octets = count(value[0]), count(value[1])
        if name in mib.DROPS:
            drops[name] = [packets, octets]
        elif name.startswith("class_") and _CLASS_NAME.match(name.removeprefix("class_")):
            classes.append([name.removeprefix("class_"), packets, octets])
    snapshot["drops"] = drops
    snapshot["classes"] = sorted(classes, key=lambda entry: entry[0])[:MAX_CLASSES]


def collect(config, now=None):
    """The snapshot, as the module's docstring describes it. config: the agent's
    configuration, as every periodic task is given it; the numbers are all in the rows
    the agent's own tasks keep, so none of it is read here."""
    snapshot = {"version": mib.VERSION,
                "time": round(time.time() if now is None else now, 3)}
    role = _ha_role()
    if role is not None:
        snapshot["ha_role"] = role
    _statistics(snapshot)
    _ruleset(snapshot)
    return snapshot


def write(path, snapshot, gid):
    """The snapshot at path, replaced whole (a reader sees the old file or the new one):
    root's, readable by group gid (snmpd's user's), 0640."""
    write_atomically(path, mib.snapshot_text(snapshot), mode=MODE, owner=(0, gid))
