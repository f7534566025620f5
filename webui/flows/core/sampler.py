"""Live flows: which connections crossing the firewall move the most now, sampled from
conntrack's byte counters within a fixed share of one CPU at any table size.

Two readings, both over ctnetlink (ctnetlink.py):

- the **scan**, a dump of the whole table, which finds the flows worth following. The
  kernel alone spends about 3.7 us serialising one entry (0.37 s for 100 000), so no
  reader can dump a large table every interval within a few per cent of a CPU, and
  the kernel cannot filter a dump by byte count (only by mark, status, zone and
  tuple). So the scan is spread over samples: each sample reads as many entries as
  `share` of one CPU over the interval buys (the cost per entry is measured as it
  goes), and the dump waits in the kernel until the next sample goes on with it. A
  small table is read whole at every sample; 100 000 entries take a few samples. An
  entry that moved less than min_bytes in all is only counted; for the others the scan
  remembers their byte count until the next pass (at most REMEMBERED of them), and
  ranks them by what they moved since.
- the **refresh**: the TRACKED best flows are asked for by their tuple at every
  sample (a hash lookup in the kernel, not a walk), and their rate is the difference
  of their counters over the time between two samples.

Memory is bounded by REMEMBERED, TRACKED and one receive buffer, whatever the table.
Plain Python: the agent's periodic task, the benchmark and the tests run it.
"""
import time
from dataclasses import dataclass

from tusklib.names import CT_MARK_CLASS_MASK, CT_MARK_CLASS_SHIFT, CT_MARK_FASTPATH_BIT

from . import ctnetlink as nl
from .conntrack import Brief, Conntrack, Stats

MIN_BYTES = 1 << 20      # a flow that moved less in all is counted, not ranked: under 4
                         # Mbit/s over a 2-s interval even if all of it was that recent
TRACKED = 64             # flows read again at every sample
STORED = 50              # of which the page gets the fastest
SCAN_SHARE = 0.035       # of one CPU: what a sample may spend scanning (goal: under 5 %
                         # with the refresh and the rest)
FIRST_COST = 10e-6       # CPU seconds per scanned entry, until measured
REMEMBERED = 65536       # byte counts kept from one pass to the next (about 100 bytes each)
HISTORY = 60             # points of a tracked flow's rate over its life (see History)


class History:
    """A flow's rate (bit/s, both ways) over the whole time it was tracked, in at most
    HISTORY points: each point the mean of `span` samples; when full, neighbouring points
    are merged and the span doubles, so a flow of an hour costs what one of a minute
    does."""

    def __init__(self):
        self.points, self.span, self.pending = [], 1, []

    def add(self, bps):
        self.pending.append(bps)
        if len(self.pending) < self.span:
            return
        self.points.append(sum(self.pending) / len(self.pending))
        self.pending = []
        if len(self.points) > HISTORY:
            pairs = zip(self.points[0::2], self.points[1::2])
            merged = [(a + b) / 2 for a, b in pairs]
            if len(self.points) % 2:
                merged.append(self.points[-1])
            self.points, self.span = merged, self.span * 2

    def as_list(self):
        return [round(p) for p in self.points]


@dataclass
class Track:
    """A flow followed at every sample."""

    brief: Brief
    score: float                 # bytes/s over the scan's window when it was ranked
    last: tuple = None           # (orig bytes, reply bytes, clock) of the last reading
    rate: tuple = None           # (orig, reply) bytes/s between the last two readings
    entry: nl.Entry = None
    history: History = None      # the rate over the time tracked

    @property
    def strength(self):
        return sum(self.rate) if self.rate is not None else self.score


class Sampler:
    """Samples the conntrack table of network namespace netns (None: this one) every
    `interval` seconds: call sample() that often."""

    def __init__(self, netns, interval, share=SCAN_SHARE, min_bytes=MIN_BYTES,
                 clock=time.monotonic, cpu=time.thread_time, wall_ns=time.time_ns):
        self.interval, self.share, self.min_bytes = interval, share, min_bytes
        self.clock, self.cpu, self.wall_ns = clock, cpu, wall_ns
        self.scanner = Conntrack(netns)    # the dump in progress has its own socket
        self.reader = Conntrack(netns)
        self.tracked = {}                     # id -> Track
        self.floor = 0.0                      # the weakest tracked flow's strength, when full
        self.remembered = {}                  # id -> (bytes, clock, pass number)
        self.per_entry = FIRST_COST
        self.dump = self.stats = None         # the pass in progress
        self.passes = 0
        self.pass_started = self.next_pass = 0.0
        self.window = interval                # how long the last whole pass took
        self.last_pass = None
        self.classes = {}                     # class ordinal -> [connections, bytes], this pass
        self.spent, self.began = 0.0, clock()

    def close(self):
        self.scanner.close()
        self.reader.close()

    # -- the scan ---------------------------------------------------------------------

    def _scan(self, now):
        if self.dump is None:
            if now < self.next_pass:
                return
            self.passes += 1
            self.stats = Stats()
            self.classes = {}
            self.dump = self.scanner.scan(self.min_bytes, self.stats)
            self.pass_started = now
        limit = max(1, int(self.share * self.interval / self.per_entry))
        first, started = self.stats.entries, self.cpu()
        for brief in self.dump:
            if brief is None:
                if self.stats.entries - first >= limit:
                    break
            else:
                self._rank(brief, now)
        else:
            self._pass_done(now)
        done = self.stats.entries - first
        if done:
            self.per_entry = (self.per_entry + (self.cpu() - started) / done) / 2

    def _rank(self, brief, now):
        total = brief.orig_bytes + brief.reply_bytes
        # the pass's per-class totals of what it ranks: the connections that moved at
        # least min_bytes (1 MB: those fastpath auto has promoted), by the ct mark
        counted = self.classes.setdefault((brief.mark & CT_MARK_CLASS_MASK)
                                          >> CT_MARK_CLASS_SHIFT, [0, 0])
        counted[0] += 1
        counted[1] += total
        before = self.remembered.get(brief.id)
        if before is not None:
            moved, since = total - before[0], now - before[1]
        else:
            age = (self.wall_ns() - brief.start_ns) / 1e9 if brief.start_ns else None
            if age is not None and age < self.window:
                moved, since = total, age          # new since the last pass saw it
            else:                                  # it had less than min_bytes then
                moved, since = total - self.min_bytes, self.window
        if before is not None or len(self.remembered) < REMEMBERED:
            self.remembered[brief.id] = (total, now, self.passes)
        score = max(moved, 0) / max(since, 1e-3)
        track = self.tracked.get(brief.id)
        if track is not None:
            track.brief, track.score = brief, score
        elif len(self.tracked) < TRACKED:
            self.tracked[brief.id] = Track(brief, score)
            self._new_floor()
        elif score > self.floor:
            weakest = min(self.tracked, key=lambda ident: self.tracked[ident].strength)
            del self.tracked[weakest]
            self.tracked[brief.id] = Track(brief, score)
            self._new_floor()

    def _new_floor(self):
        self.floor = (min(t.strength for t in self.tracked.values())
                      if len(self.tracked) >= TRACKED else 0.0)

    def _pass_done(self, now):
        self.remembered = {ident: seen for ident, seen in self.remembered.items()
                           if seen[2] == self.passes}
        self.window = max(now - self.pass_started, self.interval)
        self.last_pass = {**self.stats.as_dict(), "seconds": round(now - self.pass_started, 3),
                          "samples": round((now - self.pass_started) / self.interval) + 1,
                          "classes": {str(ordinal): counted
                                      for ordinal, counted in sorted(self.classes.items())}}
        self.dump = None
        self.next_pass = self.pass_started + self.interval / 2

    # -- the refresh ------------------------------------------------------------------

    def _refresh(self, now):
        found = self.reader.lookup([track.brief for track in self.tracked.values()])
        for ident in list(self.tracked):
            entry, track = found.get(ident), self.tracked[ident]
            if entry is None or entry.bytes is None:
                del self.tracked[ident]
                continue
            orig, reply = entry.bytes
            if track.last is None:
                track.last = (orig, reply, now)
            elif now - track.last[2] >= self.interval / 2:
                elapsed = now - track.last[2]
                track.rate = (max(orig - track.last[0], 0) / elapsed,
                              max(reply - track.last[1], 0) / elapsed)
                if track.history is None:
                    track.history = History()
                track.history.add(8 * sum(track.rate))
                track.last = (orig, reply, now)
            track.entry = entry
        self._new_floor()

    # -- a sample ---------------------------------------------------------------------

    def sample(self):
        """One sample: a share of the scan, the tracked flows read again. Returns what
        the page shows: the table's size, the last whole pass, the STORED fastest flows
        (as_flow) and what this sample cost."""
        started, now = self.cpu(), self.clock()
        self._scan(now)
        self._refresh(now)
        entries, maximum = self.reader.count()
        best = sorted(self.tracked.values(), key=lambda t: t.strength, reverse=True)[:STORED]
        wall = self.wall_ns()
        spent = self.cpu() - started
        self.spent += spent
        return {
            "at": wall / 1e9, "interval": self.interval, "entries": entries, "max": maximum,
            "min_bytes": self.min_bytes, "tracked": len(self.tracked),
            "pass": {"number": self.passes, "last": self.last_pass,
                     "read": self.stats.entries if self.dump is not None else None},
            "flows": [as_flow(track, wall) for track in best],
            "cpu": {"sample": round(spent, 6),
                    "share": round(self.spent / max(self.clock() - self.began, self.interval), 6)},
        }


def as_flow(track, wall_ns):
    """What the page shows of a tracked flow (plain data, rates in bit/s)."""
    entry = track.entry
    return {
        "id": entry.id, "family": entry.family, "proto": entry.proto,
        "protocol": nl.PROTOCOL_NAMES.get(entry.proto, str(entry.proto)),
        "orig": entry.orig.as_dict(), "reply": entry.reply.as_dict(), "nat": entry.nat,
        "zone": entry.zone, "mark": entry.mark,
        "class": (entry.mark & CT_MARK_CLASS_MASK) >> CT_MARK_CLASS_SHIFT,
        "fastpath": bool(entry.mark & CT_MARK_FASTPATH_BIT),
        "offloaded": bool(entry.status & (nl.IPS_OFFLOAD | nl.IPS_HW_OFFLOAD)),
        "in_hardware": bool(entry.status & nl.IPS_HW_OFFLOAD),
        "bps": [round(8 * r) for r in track.rate] if track.rate is not None else None,
        "history": track.history.as_list() if track.history is not None else [],
        "estimate": round(8 * track.score),
        "bytes": list(entry.bytes), "packets": list(entry.packets),
        "age": round((wall_ns - entry.start_ns) / 1e9, 1) if entry.start_ns else None,
        "state": entry.tcp_state, "helper": entry.helper,
        "seqadj": ({"orig": entry.seqadj_orig, "reply": entry.seqadj_reply}
                   if entry.seqadj_orig or entry.seqadj_reply else None),
    }
