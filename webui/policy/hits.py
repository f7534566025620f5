"""The hit counters on the policy's traffic classes list (views.py): packets, bytes
and last hit of each class's named counter (`class_<name>`) in the live ruleset, as the
agent last read them (counters.py). The list is the draft's, so a class may not be in
the live ruleset yet."""
import json

from django.db import connection
from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import mark_safe

from tusklib.rowvalues import number, utc_time
from tusklib.units import si

from .models import READING_PK, CounterReading


def _ago(seconds):
    if seconds < 90:
        return f"{max(0, round(seconds))} s ago"
    if seconds < 90 * 60:
        return f"{round(seconds / 60)} min ago"
    if seconds < 36 * 3600:
        return f"{round(seconds / 3600)} h ago"
    return f"{round(seconds / 86400)} days ago"


def _entries(names):
    """{class name: its entry} of the reading. jsonb_each picks them out in PostgreSQL: one
    key lookup (->) per class costs the whole value each time, and reading it all into
    Python 16 ms for 10 000 classes; this costs 4."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT entry.key, entry.value FROM {CounterReading._meta.db_table} reading, "
            "jsonb_each(CASE WHEN jsonb_typeof(reading.counters) = 'object' "
            "THEN reading.counters ELSE '{}' END) entry "
            "WHERE reading.id = %s AND entry.key = ANY(%s)",
            [READING_PK, [f"class_{name}" for name in names]])
        rows = cursor.fetchall()
    return {key.removeprefix("class_"): json.loads(value) if isinstance(value, str) else value
            for key, value in rows}


class ClassHits:
    """The counters of the classes named, from the reading: only their entries are read
    from the row (10 000 classes make it half a megabyte)."""

    def __init__(self, names):
        self.reading = (CounterReading.objects.filter(pk=READING_PK)
                        .values("read_at", "observed_since", "table_loaded").first())
        self.counters = _entries([name for name in names if isinstance(name, str)]) \
            if self.reading else {}
        self.now = timezone.now()

    def caption(self):
        """A line above the list: where the numbers come from and how old they are."""
        if self.reading is None:
            return "Hits: the agent has not read the ruleset's counters yet."
        age = _ago((self.now - self.reading["read_at"]).total_seconds())
        if not self.reading["table_loaded"]:
            return f"Hits: no Tusk ruleset is loaded (checked {age})."
        return (f"Hits: the packets each class's rule matched in the live ruleset, read {age}: "
                "a connection's first packet (the rest pass as established), every packet of "
                "a notrack class. Every apply starts them again from zero.")

    def entry(self, name):
        """(packets, bytes, last hit) of class name, or None when it has no counter read
        (or the row's entry is not numbers: the row is the web user's to write)."""
        value = self.counters.get(name)
        if not (isinstance(value, list) and len(value) == 3) or \
                number(value[0]) is None or number(value[1]) is None:
            return None
        return value

    def packets(self, name):
        """The packets class name's rule matched, or None when it has no counter read."""
        found = self.entry(name)
        return found[0] if found is not None else None

    def cell(self, name):
        """The <td> of class name."""
        reading = self.reading
        found = self.entry(name)
        if found is None:
            why = ("not read yet" if reading is None else
                   "no ruleset loaded" if not reading["table_loaded"] else "not applied")
            return format_html('<td class="hits muted">{}</td>', why)
        packets, octets, last_hit = found
        when = utc_time(last_hit)
        if when is not None:
            hit = format_html('<span title="{}" data-last-hit="{}">last hit {}</span>',
                              f"{when:%Y-%m-%d %H:%M:%S} UTC", when.isoformat(),
                              _ago((self.now - when).total_seconds()))
        elif packets:
            hit = format_html('<span class="muted">hit before {} UTC</span>',
                              f"{reading['observed_since']:%H:%M:%S}")
        else:
            hit = mark_safe('<span class="muted">no hits</span>')
        return format_html('<td class="hits" data-packets="{}" data-bytes="{}" title="{} packets, '
                           '{} bytes">{} pkt, {}<br>{}</td>', packets, octets, packets, octets,
                           si(packets), si(octets, "B"), hit)
