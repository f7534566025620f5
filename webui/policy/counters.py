"""Agent side: the named counters of table inet tusk and table bridge tusk_bridge (one per
traffic class, `class_<name>`, in the table of its zones, and the drops `invalid` and
`default_deny` of both, added together: policy/core/render.py), read with
`nft -j list counters` in the target (the system, or the lab's namespace), kept as one
CounterReading row with the time each counter was last seen to grow.

Growth is judged against this agent's previous reading, kept in memory. A starting agent
carries over the stored row's last hits for counters that have not changed, so a restart
does not forget them; that row is the web user's to write, so only well-formed numbers
are taken from it and they are only ever compared and stored again (a forged row can make
the page show a wrong "last hit" - as writing the row itself could - and nothing else)."""
import math
from datetime import UTC, datetime

from django.utils import timezone

from tusklib.target import Target, TargetError

from .models import READING_PK, CounterReading

# this agent's previous reading: (observed since, {name: (packets, bytes, last hit)})
_previous = None


class CounterError(Exception):
    """nft could not list the counters (other than: there is no table)."""


def listing(target):
    """{counter name: (packets, bytes)} of the live tables, added up by name; None when
    there is no table inet tusk (tusklib.target.Target.counters: a ruleset loaded before
    the bridges' table existed counts in table tusk alone)."""
    try:
        return target.counters()
    except TargetError as error:
        raise CounterError(str(error)) from None


def merge(previous, current, now):
    """The reading to store: {name: [packets, bytes, last hit]}. previous is the reading
    before ({name: (packets, bytes, last hit)}) or None when there is none, and then
    nothing is known of hits before now. A counter missing from previous was made since
    (an apply), from zero: any packet on it is a hit since then."""
    merged = {}
    for name, (packets, octets) in current.items():
        before = None if previous is None else previous.get(name, (0, 0, None))
        if before is None:
            last = None
        elif packets > before[0] or (packets < before[0] and packets > 0):
            last = now   # grew, or the table was replaced since and counted again
        else:
            last = before[2]
        merged[name] = [packets, octets, last]
    return merged


def _count(value):
    return type(value) is int and value >= 0


def _time(value, now):
    return type(value) in (int, float) and math.isfinite(value) and 0 < value <= now


def carried_over(row, now):
    """(observed since, {name: (packets, bytes, last hit)}) from a stored row, keeping
    only well-formed entries; (now, None) when there is no usable row."""
    if row is None or not isinstance(row.counters, dict):
        return now, None
    since = row.observed_since.timestamp()
    if not _time(since, now):
        return now, None
    entries = {}
    for name, value in row.counters.items():
        if isinstance(value, list) and len(value) == 3 and _count(value[0]) and \
                _count(value[1]) and (value[2] is None or _time(value[2], now)):
            entries[name] = tuple(value)
    return since, entries


def read(config):
    """One reading, stored; returns what the Jobs page keeps of it."""
    global _previous
    current = listing(Target(config.netns or None))
    now = round(timezone.now().timestamp(), 3)
    if _previous is None:
        _previous = carried_over(CounterReading.objects.filter(pk=READING_PK).first(), now)
    since, previous = _previous
    merged = merge(previous, current or {}, now)
    CounterReading.objects.update_or_create(pk=READING_PK, defaults={
        "read_at": datetime.fromtimestamp(now, UTC),
        "observed_since": datetime.fromtimestamp(since, UTC),
        "table_loaded": current is not None, "counters": merged})
    _previous = (since, {name: tuple(value) for name, value in merged.items()})
    return {"counters": len(merged), "table_loaded": current is not None}
