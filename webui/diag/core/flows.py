"""One TCP connection as seen at one capture point (an interface of a file).

A Flow has two Halves, one per sender. Sequence numbers are unwrapped into
unbounded integers near the highest value seen, so 32-bit wrap-around never
confuses "before" and "after". Everything a Half keeps is bounded: holes,
retransmissions awaiting a D-SACK, RTT samples and the chart series are thinned
when they grow, so memory does not depend on the length of the capture.

What is counted, per sender, from the packets at this point:
- new data: above the highest sequence number seen (a jump leaves a hole);
- a segment filling a hole soon after the hole appeared (under half the round
  trip): reordered; later: a retransmission of data lost before this point;
- a segment overlapping data already seen: a retransmission. Spurious when the
  receiver had already acknowledged it, or later reports it in a D-SACK block
  (RFC 2883); needed otherwise;
- RTT samples: one timed segment at a time (Karn: never a retransmitted one),
  from the segment at this point to the ACK that covers it at this point;
- SACK blocks from the receiver: D-SACK (RFC 2883), or outside the sender's
  sequence space - below the cumulative ACK or above anything sent - which is what
  a middlebox that shifts sequence numbers without rewriting SACK produces;
- the receiver's advertised window (scaled when both SYNs offered scaling) and
  how often data in flight filled it.
"""
import heapq

from dpkt.tcp import parse_opts

FIN, SYN, RST, ACK = 0x01, 0x02, 0x04, 0x10
MASK = 0xFFFFFFFF
HALF = 0x80000000
TS_ONLY = b"\x01\x01\x08\x0a"  # NOP NOP TS: the options of most data segments

MAX_HOLES = 64
MAX_PENDING = 128       # retransmissions that a D-SACK may still prove spurious
MAX_RTT = 2048          # RTT samples kept (thinned to every other beyond)
MAX_BUCKETS = 512       # throughput buckets (width doubles beyond)
MAX_POINTS = 600        # sequence chart points (interval doubles beyond)
MAX_MARKS = 300         # retransmission marks on the chart
MAX_SAMPLES = 16        # raw SACK blocks kept for the FWSM check
DEFAULT_REORDER = 0.003  # s: reordering vs loss when no round trip is known


def unwrap(value, near):
    """The integer congruent to the 32-bit value that lies nearest to `near`."""
    return near + ((value - near + HALF) & MASK) - HALF


def options(raw):
    """Handshake options of a SYN: mss, wscale, sack_permitted, timestamps."""
    found = {"mss": None, "wscale": None, "sack_permitted": False, "timestamps": False}
    for item in parse_opts(raw):
        if item is None:
            break
        kind, data = item
        if kind == 2 and len(data) == 2:
            found["mss"] = int.from_bytes(data, "big")
        elif kind == 3 and len(data) == 1:
            found["wscale"] = data[0]
        elif kind == 4:
            found["sack_permitted"] = True
        elif kind == 8:
            found["timestamps"] = True
    return found


def sack_blocks(raw):
    """The (left, right) edges of the SACK option, or () when there is none."""
    if not raw or (len(raw) == 12 and raw[:4] == TS_ONLY):
        return ()
    for item in parse_opts(raw):
        if item is None:
            return ()
        if item[0] == 5:
            data = item[1]
            return tuple((int.from_bytes(data[i:i + 4], "big"),
                          int.from_bytes(data[i + 4:i + 8], "big"))
                         for i in range(0, len(data) - 7, 8))
    return ()


class Series:
    """Bytes per time bucket; the bucket width doubles instead of growing the list."""
    __slots__ = ("width", "buckets")

    def __init__(self, width=0.01):
        self.width, self.buckets = width, []

    def add(self, t, amount):
        index = max(0, int(t / self.width))   # a damaged file's time may run backwards
        buckets = self.buckets
        while index >= MAX_BUCKETS:
            merged = [buckets[i] + (buckets[i + 1] if i + 1 < len(buckets) else 0)
                      for i in range(0, len(buckets), 2)]
            self.buckets = buckets = merged
            self.width *= 2
            index = max(0, int(t / self.width))
        if index >= len(buckets):
            buckets.extend([0] * (index + 1 - len(buckets)))
        buckets[index] += amount

    def rates(self):
        """[[bucket start s, bits per second]] of full buckets (the last may be partial)."""
        return [[round(i * self.width, 6), round(b * 8 / self.width, 1)]
                for i, b in enumerate(self.buckets)]


class Thinned:
    """Points (t, value) no closer than `interval`; the interval doubles when full."""
    __slots__ = ("interval", "points", "limit")

    def __init__(self, limit, interval=0.0005):
        self.interval, self.points, self.limit = interval, [], limit

    def add(self, t, value):
        points = self.points
        if points and t - points[-1][0] < self.interval:
            return
        points.append((t, value))
        if len(points) > self.limit:
            self.points = points[::2]
            self.interval = self.interval * 2 or (points[-1][0] - points[0][0]) / self.limit


class Half:
    """One direction: the sender's sequence space and what its receiver said of it."""
    __slots__ = ("base", "snd_max", "acked", "syn", "syn_time", "opts", "packets",
                 "data_packets", "bytes", "new_bytes", "holes", "needed", "spurious",
                 "reordered", "pending", "timed", "rtt", "rtt_count", "rtt_min", "rtt_max",
                 "rwnd", "rwnd_min", "rwnd_max", "full", "sack_blocks", "sack_outside",
                 "dsack", "sack_samples", "series", "seq", "marks", "first_data", "last_data",
                 "fin", "rst", "keepalives", "mss_seen", "zero_window")

    def __init__(self):
        self.base = self.snd_max = self.acked = None
        self.syn = None           # ISN from the SYN, when seen
        self.syn_time = None
        self.opts = None          # handshake options, when the SYN was seen
        self.packets = self.data_packets = self.bytes = self.new_bytes = 0
        self.holes = []           # [start, end, time the hole appeared]
        self.needed = self.spurious = self.reordered = self.keepalives = 0
        self.pending = []         # [start, end] of retransmissions counted as needed
        self.timed = None         # (end, time) of the segment being timed
        self.rtt, self.rtt_count, self.rtt_min, self.rtt_max = [], 0, None, None
        self.rwnd = None          # latest window the receiver advertised (bytes)
        self.rwnd_min = self.rwnd_max = None
        self.full = 0             # data segments sent with the receiver's window full
        self.zero_window = 0      # zero windows the receiver advertised during the transfer
        self.sack_blocks = self.sack_outside = self.dsack = 0
        self.sack_samples = []    # (left, right, ack, snd_max) of blocks outside
        self.series = Series()
        self.seq = Thinned(MAX_POINTS)
        self.marks = Thinned(MAX_MARKS, interval=0.0)
        self.first_data = self.last_data = None
        self.fin = self.rst = False
        self.mss_seen = 0         # largest payload seen

    def start(self, seq):
        self.base = self.snd_max = self.acked = seq

    def rtt_sample(self, value):
        self.rtt_count += 1
        if self.rtt_min is None or value < self.rtt_min:
            self.rtt_min = value
        if self.rtt_max is None or value > self.rtt_max:
            self.rtt_max = value
        self.rtt.append(value)
        if len(self.rtt) > MAX_RTT:
            self.rtt = self.rtt[::2]

    def rtt_median(self):
        if not self.rtt:
            return None
        ordered = sorted(self.rtt)
        return ordered[len(ordered) // 2]


class Flow:
    """A connection at one capture point. ends[0] and ends[1] are (address, port) of
    the two sides; halves[d] is the data sent by ends[d]."""
    __slots__ = ("point", "ends", "halves", "client", "start", "last", "packets",
                 "handshake", "order")

    def __init__(self, point, ends, start, order):
        self.point, self.ends, self.start, self.last = point, ends, start, start
        self.halves = (Half(), Half())
        self.client = None
        self.packets = 0
        self.handshake = {}   # "syn", "synack", "ack": times at this point
        self.order = order    # creation order: keeps results stable

    @property
    def bytes(self):
        return self.halves[0].new_bytes + self.halves[1].new_bytes

    def reorder_threshold(self):
        full = self.handshake_rtt()
        if full:
            return full / 2
        known = [h.rtt_min for h in self.halves if h.rtt_min]
        return min(known) / 2 if known else DEFAULT_REORDER

    def handshake_rtt(self):
        times = self.handshake
        if "syn" in times and "synack" in times and "ack" in times:
            return times["ack"] - times["syn"]
        return None

    def packet(self, ts, d, seq, ack, flags, window, raw_opts, length):
        self.packets += 1
        self.last = ts
        s, r = self.halves[d], self.halves[1 - d]
        s.packets += 1
        if flags & SYN:
            self._syn(ts, d, s, seq, flags, raw_opts)
            if not flags & ACK:
                return
        elif s.base is None:
            s.start(seq)
        if flags & ACK and r.base is not None:
            self._ack(ts, s, r, ack, window, raw_opts, flags)
        if flags & SYN:
            return
        if flags & RST:
            s.rst = True
            return
        if length <= 0 and not flags & FIN:
            return
        self._data(ts, s, unwrap(seq, s.snd_max), length, flags & FIN)

    def _syn(self, ts, d, s, seq, flags, raw_opts):
        times = self.handshake
        if flags & ACK:
            if self.client is None:
                self.client = 1 - d
            times.setdefault("synack", ts)
        else:
            self.client = d
            times.setdefault("syn", ts)
        if s.syn is None:
            s.syn, s.syn_time = seq, ts
            s.opts = options(raw_opts)
            s.start((seq + 1) & MASK)
            s.acked = s.base

    def _ack(self, ts, s, r, ack, window, raw_opts, flags):
        """s acknowledges r's data: cumulative ACK, RTT, window, SACK."""
        if "synack" in self.handshake and "ack" not in self.handshake and \
                self.client is not None and s is self.halves[self.client]:
            self.handshake["ack"] = ts
        acked = unwrap(ack, r.acked)
        if acked > r.acked:
            r.acked = acked
        timed = r.timed
        if timed is not None and acked >= timed[0]:
            r.rtt_sample(ts - timed[1])
            r.timed = None
        if not flags & SYN:
            if s.opts is not None and r.opts is not None and \
                    s.opts["wscale"] is not None and r.opts["wscale"] is not None:
                window <<= min(s.opts["wscale"], 14)
            r.rwnd = window
            if r.first_data is not None:
                if not window:
                    r.zero_window += 1
                if r.rwnd_min is None or window < r.rwnd_min:
                    r.rwnd_min = window
                if r.rwnd_max is None or window > r.rwnd_max:
                    r.rwnd_max = window
        if raw_opts and not (len(raw_opts) == 12 and raw_opts[:4] == TS_ONLY):
            blocks = sack_blocks(raw_opts)
            if blocks:
                self._sack(r, acked, blocks, ack)

    def _sack(self, r, acked, blocks, raw_ack):
        for i, (left, right) in enumerate(blocks):
            r.sack_blocks += 1
            lo = unwrap(left, acked)
            hi = unwrap(right, lo)
            if i == 0 and lo < hi and (hi <= acked or (len(blocks) > 1 and _inside(
                    lo, hi, blocks[1], acked))):
                r.dsack += 1
                self._spurious(r, lo, hi)
                continue
            if not (acked < lo < hi <= r.snd_max):
                r.sack_outside += 1
                if len(r.sack_samples) < MAX_SAMPLES:
                    r.sack_samples.append((left, right, raw_ack, r.snd_max & MASK))

    @staticmethod
    def _spurious(r, lo, hi):
        for item in r.pending:
            if item[0] < hi and lo < item[1]:
                r.pending.remove(item)
                r.needed -= 1
                r.spurious += 1
                return

    def _data(self, ts, s, start, length, fin):  # noqa: C901 - TCP's sequence cases
        end = start + length
        if s.first_data is None and length:
            s.first_data = ts
        s.last_data = ts
        if length:
            s.data_packets += 1
            s.bytes += length
            if length > s.mss_seen:
                s.mss_seen = length
        rel = start - s.base
        t = ts - self.start
        if start >= s.snd_max:                                    # new data
            if start > s.snd_max:
                holes = s.holes
                holes.append([s.snd_max, start, ts])
                if len(holes) > MAX_HOLES:
                    del holes[0]
            sent = end - s.snd_max    # a hole was sent too, just not (yet) seen here
            s.new_bytes += sent
            s.snd_max = end + (1 if fin else 0)
            if length:
                s.series.add(t, sent)
                s.seq.add(t, rel + length)
                if s.timed is None:
                    s.timed = (end, ts)
                if s.rwnd is not None and end - s.acked > s.rwnd - 2 * max(s.mss_seen, 536):
                    s.full += 1
            return
        if length <= 1 and start == s.snd_max - 1:                 # keep-alive probe
            s.keepalives += 1
            return
        if end > s.snd_max:                                        # overlaps the edge
            s.new_bytes += end - s.snd_max
            s.series.add(t, end - s.snd_max)
            s.snd_max = end + (1 if fin else 0)
        for hole in s.holes:                                       # fills a hole?
            if hole[0] <= start and end <= hole[1]:
                if ts - hole[2] < self.reorder_threshold():
                    s.reordered += 1
                else:
                    s.needed += 1    # lost before this point, sent again
                    s.marks.add(t, rel)
                if hole[0] == start and hole[1] == end:
                    s.holes.remove(hole)
                elif hole[0] == start:
                    hole[0] = end
                elif hole[1] == end:
                    hole[1] = start
                else:
                    s.holes.append([end, hole[1], hole[2]])
                    hole[1] = start
                return
        if s.timed is not None and start < s.timed[0]:            # Karn
            s.timed = None
        s.marks.add(t, rel)
        if end <= s.acked:
            s.spurious += 1
        else:
            s.needed += 1
            pending = s.pending
            pending.append([start, end])
            if len(pending) > MAX_PENDING:
                del pending[0]


def _inside(lo, hi, second, acked):
    left = unwrap(second[0], acked)
    right = unwrap(second[1], left)
    return left <= lo and hi <= right


class Table:
    """The flows of one capture, looked up by (point, src, sport, dst, dport).
    At most `limit` flows are tracked at once; closed and idle ones are retired to
    a bounded list of the biggest; the rest are only counted."""

    IDLE = 120.0

    def __init__(self, limit=20000, keep=1000):
        self.flows = {}
        self.limit, self.keep = limit, keep
        self.tracked = 0
        self.retired = []     # heap of (bytes, order, flow)
        self.total = 0
        self.untracked = 0
        self.untracked_keys = set()
        self._order = 0

    def lookup(self, point, src, sport, dst, dport, ts, flags, seq):
        found = self.flows.get((point, src, sport, dst, dport))
        if found is not None:
            flow, d = found
            if flags & SYN and not flags & ACK and flow.halves[d].syn not in (None, seq):
                # a SYN with another ISN: the addresses and ports are used again
                self._retire(flow)
                return self._new(point, src, sport, dst, dport, ts)
            return found
        return self._new(point, src, sport, dst, dport, ts)

    def _new(self, point, src, sport, dst, dport, ts):
        if self.tracked >= self.limit:
            self._sweep(ts)
            if self.tracked >= self.limit:
                key = (point, src, sport, dst, dport)
                if key not in self.untracked_keys and len(self.untracked_keys) < 100000:
                    self.untracked_keys.add(key)
                    self.untracked_keys.add((point, dst, dport, src, sport))
                    self.untracked += 1
                return None
        self._order += 1
        self.total += 1
        self.tracked += 1
        flow = Flow(point, ((src, sport), (dst, dport)), ts, self._order)
        self.flows[(point, src, sport, dst, dport)] = (flow, 0)
        self.flows[(point, dst, dport, src, sport)] = (flow, 1)
        return flow, 0

    def _retire(self, flow):
        (a, ap), (b, bp) = flow.ends
        if self.flows.get((flow.point, a, ap, b, bp), (None,))[0] is flow:
            del self.flows[(flow.point, a, ap, b, bp)]
            del self.flows[(flow.point, b, bp, a, ap)]
            self.tracked -= 1
        item = (flow.bytes, -flow.order, flow)
        if len(self.retired) < self.keep:
            heapq.heappush(self.retired, item)
        elif item[:2] > self.retired[0][:2]:
            heapq.heapreplace(self.retired, item)

    def _sweep(self, now):
        for flow, d in list(self.flows.values()):
            if d == 0 and (now - flow.last > self.IDLE or any(h.rst for h in flow.halves) or
                           all(h.fin for h in flow.halves)):
                self._retire(flow)

    def finish(self):
        """Every flow, biggest first (at most `keep` of them)."""
        for flow, d in list(self.flows.values()):
            if d == 0:
                self._retire(flow)
        return [item[2] for item in sorted(self.retired, key=lambda i: (-i[0], -i[1]))]
