"""tusk-flowexport (webui/bin/tusk-flowexport): conntrack's connections as IPFIX or
NetFlow v9 records to up to four collectors (plain Python; docs/MONITORING.md).

    tusk-flowexport CONFIG STATUS

CONFIG is the file the agent wrote (export.render: the checked settings as JSON), read
back through the page's own check (export.parse). STATUS is where this process says what
it did, every few seconds and at its end (JSON: records and messages sent, events lost,
errors per collector), for the agent's report.

Where the records come from (all of it conntrack's own accounting, so a connection on
the fast path counts too: Tusk's flowtables carry the `counter` flag, which adds what
they forward to the connection's counters):

- its end: the kernel's DESTROY event (the ctnetlink group NFNLGRP_CONNTRACK_DESTROY),
  with the connection's final counters - one record, flowEndReason "end of flow";
- while it lasts: every active_timeout seconds a scan of the table (conntrack.py's, the
  Flows sampler's) finds the connections whose counters moved since their last record,
  asks for those whole, and sends each a record of what it carried meanwhile,
  flowEndReason "active timeout". An elephant shows up while it runs; an idle
  connection sends nothing.

Counts are deltas: the records of one connection add up to what it carried. At its
start the process takes the counters as they are (a baseline, no records), and on
SIGTERM it sends what moved since the last record - so a restart (new settings) neither
repeats bytes nor loses more than the moment between the two processes.

The observation domain (IPFIX) or source id (v9) is the upper half of the connection's ct
mark (tusklib/names.py): its class's ordinal in bits 1-15, and bit 0 set when the
connection was on the fast path - the policy set the mark's fast-path bit (fastpath:
always, or an auto class's elephant once promoted), or a scan saw it offloaded. The box's
own connections over loopback are not exported."""
import errno
import ipaddress
import json
import os
import select
import signal
import socket
import sys
import time
from typing import NamedTuple

from tusklib.files import write_atomically

from . import export, ipfix
from .conntrack import Conntrack, Stats
from .ctnetlink import (
    BE16,
    BE32,
    BE64,
    CTA_COUNTERS_ORIG,
    CTA_COUNTERS_REPLY,
    CTA_ID,
    CTA_IP_V4_DST,
    CTA_IP_V4_SRC,
    CTA_IP_V6_DST,
    CTA_IP_V6_SRC,
    CTA_MARK,
    CTA_PROTO_DST_PORT,
    CTA_PROTO_NUM,
    CTA_PROTO_SRC_PORT,
    CTA_STATUS,
    CTA_TIMESTAMP,
    CTA_TIMESTAMP_START,
    CTA_TUPLE_IP,
    CTA_TUPLE_ORIG,
    CTA_TUPLE_PROTO,
    CTA_TUPLE_REPLY,
    HEADER,
    IPS_HW_OFFLOAD,
    IPS_OFFLOAD,
    NETLINK_NETFILTER,
    NFGEN_LEN,
    NFNL_SUBSYS_CTNETLINK,
    NLMSG_HDRLEN,
    attrs,
    counters,
)

NFNLGRP_CONNTRACK_DESTROY = 3
IPCTNL_MSG_CT_DELETE = 2
DESTROY = NFNL_SUBSYS_CTNETLINK << 8 | IPCTNL_MSG_CT_DELETE
EVENT_BUFFER = 16 << 20          # bytes the kernel may queue for us before ENOBUFS
LOOKUP_BATCH = 64                # entries asked for in one send (the answers fit the buffer)
PACE_MESSAGES, PACE_SECONDS = 16, 0.004   # a burst's pace: at most 16 messages in 4 ms,
                                          # which a collector's default buffer takes
FLUSH_SECONDS = 0.5              # records wait at most this long for a full message
STATUS_SECONDS = 5
TEMPLATE_REFRESH = 30.0          # seconds between a domain's templates (over UDP)
DOMAIN_SHIFT = 16                # the ct mark's upper half
OFFLOADED = IPS_OFFLOAD | IPS_HW_OFFLOAD
IPV6_LOOPBACK = ipaddress.IPv6Address("::1").packed


class Seen(NamedTuple):
    """What a record needs of one conntrack entry, addresses as raw bytes (network
    order): read straight from a DESTROY event or a lookup's answer (seen_in)."""

    id: int
    status: int
    mark: int
    start_ns: int
    packets: tuple          # (original direction, reply direction)
    bytes: tuple
    orig: tuple             # (src, dst, protocol, sport, dport)
    reply: tuple


def _raw_tuple(buf, span):
    parts = attrs(buf, *span)
    ip, proto = attrs(buf, *parts[CTA_TUPLE_IP]), attrs(buf, *parts[CTA_TUPLE_PROTO])
    src = ip.get(CTA_IP_V4_SRC) or ip[CTA_IP_V6_SRC]
    dst = ip.get(CTA_IP_V4_DST) or ip[CTA_IP_V6_DST]
    sport, dport = proto.get(CTA_PROTO_SRC_PORT), proto.get(CTA_PROTO_DST_PORT)
    return (bytes(buf[src[0]:src[1]]), bytes(buf[dst[0]:dst[1]]), buf[proto[CTA_PROTO_NUM][0]],
            BE16.unpack_from(buf, sport[0])[0] if sport else 0,
            BE16.unpack_from(buf, dport[0])[0] if dport else 0)


def seen_in(buf, start, end):
    """The Seen of the ctnetlink message in buf[start:end] (a DESTROY event, a lookup's
    answer): the hot path of the exporter - no address objects, no whole decode (ctnetlink.decode's
    Entry would cost twice as much)."""
    found = attrs(buf, start + NLMSG_HDRLEN + NFGEN_LEN, end)

    def be32(kind):
        span = found.get(kind)
        return BE32.unpack_from(buf, span[0])[0] if span else 0

    orig = counters(buf, found[CTA_COUNTERS_ORIG]) if CTA_COUNTERS_ORIG in found else (0, 0)
    reply = counters(buf, found[CTA_COUNTERS_REPLY]) if CTA_COUNTERS_REPLY in found else (0, 0)
    start_ns = 0
    if CTA_TIMESTAMP in found:
        stamp = attrs(buf, *found[CTA_TIMESTAMP]).get(CTA_TIMESTAMP_START)
        start_ns = BE64.unpack_from(buf, stamp[0])[0] if stamp else 0
    return Seen(be32(CTA_ID), be32(CTA_STATUS), be32(CTA_MARK), start_ns,
                (orig[0], reply[0]), (orig[1], reply[1]),
                _raw_tuple(buf, found[CTA_TUPLE_ORIG]), _raw_tuple(buf, found[CTA_TUPLE_REPLY]))


def _loopback(raw):
    return raw[0] == 127 if len(raw) == 4 else raw == IPV6_LOOPBACK


class Accounts:
    """What each connection (by conntrack id) last had in a record: [orig bytes, orig
    packets, reply bytes, reply packets, when (ms), on the fast path]."""

    def __init__(self):
        self.last = {}
        self.missing = set()   # ids a scan did not find: forgotten if the next misses them too
        self.first_seen = {}   # id -> when a scan first saw it (ns), without timestamps

    def record(self, seen, reason, now_ms):
        """The (domain, Record) of a connection's counters (a Seen) since its last record,
        or None when nothing moved (or it is the box's own, over loopback)."""
        last = self.last.get(seen.id)
        offloaded = bool(seen.status & OFFLOADED) or bool(last and last[5])
        counted, packets = seen.bytes, seen.packets
        now = [counted[0], packets[0], counted[1], packets[1], now_ms, offloaded]
        if reason == ipfix.END_OF_FLOW:
            self.last.pop(seen.id, None)
            self.first_seen.pop(seen.id, None)
        else:
            self.last[seen.id] = now
        before = last or (0, 0, 0, 0, 0, False)
        deltas = (now[0] - before[0], now[1] - before[1], now[2] - before[2],
                  now[3] - before[3])
        o, r = seen.orig, seen.reply
        # nothing moved: no record - but for the end of a connection that had records
        # (its last one said "active timeout"): the collector learns it ended
        ended = reason == ipfix.END_OF_FLOW and last is not None and last[4]
        if (not any(deltas) and not ended) or _loopback(o[0]) or _loopback(o[1]):
            return None
        if last and last[4]:
            start = last[4]
        elif seen.start_ns:
            start = seen.start_ns // 1_000_000
        else:
            start = now_ms
        record = ipfix.Record(
            start_ms=start, end_ms=now_ms, src=o[0], dst=o[1], sport=o[3], dport=o[4],
            proto=o[2], reason=reason, octets=deltas[0], packets=deltas[1],
            reply_octets=deltas[2], reply_packets=deltas[3], nat_src=r[1], nat_dst=r[0],
            nat_sport=r[4], nat_dport=r[3])
        return _domain(seen.mark, offloaded), record

    def baseline(self, seen):
        """A connection's counters taken as already reported (at the process's start)."""
        self.last[seen.id] = [seen.bytes[0], seen.packets[0], seen.bytes[1], seen.packets[1],
                              0, bool(seen.status & OFFLOADED)]


def _big_buffer(sock):
    """EVENT_BUFFER bytes of receive buffer (root may pass the system's limit)."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, 33, EVENT_BUFFER)       # SO_RCVBUFFORCE
    except PermissionError:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, EVENT_BUFFER)


def _domain(mark, offloaded):
    domain = mark >> DOMAIN_SHIFT
    return domain | 1 if offloaded else domain


class Sender:
    """The records waiting for a message, per domain, and one ipfix.Exporter and socket
    per collector."""

    def __init__(self, settings, boot):
        self.collectors = []
        for collector in settings.collectors:
            family = socket.AF_INET6 if collector.address.version == 6 else socket.AF_INET
            sock = socket.socket(family, socket.SOCK_DGRAM)
            sock.setblocking(False)
            self.collectors.append((str(collector), sock, (str(collector.address),
                                                           int(collector.port)),
                                    ipfix.Exporter(settings.version, TEMPLATE_REFRESH, boot)))
        self.pending = {}
        self.oldest = None
        self.records = self.messages = 0
        self.errors = {name: 0 for name, *_ in self.collectors}
        self.last_error = ""

    def add(self, domain, record):
        self.pending.setdefault(domain, []).append(record)
        if self.oldest is None:
            self.oldest = time.monotonic()

    def due(self):
        return self.oldest is not None and (
            time.monotonic() - self.oldest >= FLUSH_SECONDS
            or sum(map(len, self.pending.values())) >= 64)

    def flush(self):
        now = time.time()
        for domain, records in self.pending.items():
            self.records += len(records)
            for name, sock, where, exporter in self.collectors:
                for message in exporter.messages(domain, records, now):
                    try:
                        sock.sendto(message, where)
                        self.messages += 1
                        if not self.messages % PACE_MESSAGES:
                            time.sleep(PACE_SECONDS)
                    except OSError as exc:      # unreachable, refused, a full buffer
                        self.errors[name] += 1
                        self.last_error = f"{name}: {exc.strerror or exc}"
        self.pending, self.oldest = {}, None


class Exporter:
    def __init__(self, settings, status_path):
        self.settings, self.status_path = settings, status_path
        self.accounts = Accounts()
        self.sender = Sender(settings, boot=time.time() - time.monotonic())
        self.lost = self.sweeps = self.sweep_errors = 0
        self.sweep_seconds = 0.0
        self.started = time.time()
        self.stopping = False
        self.events = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_NETFILTER)
        _big_buffer(self.events)
        self.events.bind((0, 1 << (NFNLGRP_CONNTRACK_DESTROY - 1)))
        self.table = Conntrack()
        _big_buffer(self.table.sock)
        self.buf = bytearray(1 << 20)

    def baseline(self):
        for seen in self.table.entries(read=seen_in):
            self.accounts.baseline(seen)

    def sweep(self, final=False):
        """A record for each connection whose counters moved since its last one - or,
        for one that had none yet, that is older than the active timeout: a connection
        shorter than that has one record, at its end (its DESTROY event). final: the
        process is ending - every connection that moved, young or not, flowEndReason
        "forced end" (the next exporter goes on from its counters)."""
        began = time.monotonic()
        stats, changed, alive = Stats(), [], set()
        last, first_seen = self.accounts.last, self.accounts.first_seen
        now_ns, young = time.time_ns(), self.settings.active_timeout * 1_000_000_000
        for brief in self.table.scan(1, stats):
            if brief is None:
                continue
            alive.add(brief.id)
            known = last.get(brief.id)
            if known is None:
                born = brief.start_ns or first_seen.setdefault(brief.id, now_ns)
                if final or now_ns - born >= young:
                    changed.append(brief)
            elif known[0] != brief.orig_bytes or known[2] != brief.reply_bytes:
                changed.append(brief)
            elif brief.status & OFFLOADED:
                known[5] = True
        gone = (set(last) | set(first_seen)) - alive
        for ident in gone & self.accounts.missing:
            last.pop(ident, None)
            first_seen.pop(ident, None)
        self.accounts.missing = gone - self.accounts.missing
        now_ms = int(time.time() * 1000)
        for first in range(0, len(changed), LOOKUP_BATCH):
            found = self.table.lookup(changed[first:first + LOOKUP_BATCH], read=seen_in)
            for seen in found.values():
                made = self.accounts.record(seen,
                                            ipfix.END_FORCED if final else ipfix.END_ACTIVE,
                                            now_ms)
                if made:
                    self.sender.add(*made)
        self.sender.flush()
        self.sweeps += 1
        self.sweep_seconds = time.monotonic() - began

    def receive(self):
        """The DESTROY events waiting on the socket, each one record."""
        try:
            size = self.events.recv_into(self.buf, 0, socket.MSG_DONTWAIT)
        except BlockingIOError:
            return False
        except OSError as exc:
            if exc.errno == errno.ENOBUFS:       # the kernel dropped events: say so
                self.lost += 1
                return True
            raise
        position, now_ms = 0, int(time.time() * 1000)
        while position + NLMSG_HDRLEN <= size:
            length, kind, _, _, _ = HEADER.unpack_from(self.buf, position)
            if length < NLMSG_HDRLEN:
                break
            if kind == DESTROY:
                made = self.accounts.record(seen_in(self.buf, position, position + length),
                                            ipfix.END_OF_FLOW, now_ms)
                if made:
                    self.sender.add(*made)
            position += (length + 3) & ~3
        return True

    def status(self):
        sender = self.sender
        return {"pid": os.getpid(), "started": self.started, "protocol": self.settings.protocol,
                "active_timeout": self.settings.active_timeout,
                "collectors": [name for name, *_ in sender.collectors],
                "records": sender.records, "messages": sender.messages,
                "send_errors": sender.errors, "last_error": sender.last_error,
                "lost_events": self.lost, "tracked": len(self.accounts.last),
                "sweeps": self.sweeps, "sweep_errors": self.sweep_errors,
                "sweep_seconds": round(self.sweep_seconds, 3)}

    def write_status(self):
        write_atomically(self.status_path, json.dumps(self.status()) + "\n", 0o600)

    def run(self):
        self.baseline()
        next_sweep = time.monotonic() + self.settings.active_timeout
        next_status = 0.0
        while not self.stopping:
            now = time.monotonic()
            if now >= next_status:
                self.write_status()
                next_status = now + STATUS_SECONDS
            wait = min(next_sweep, next_status) - now
            if self.sender.oldest is not None:
                wait = min(wait, FLUSH_SECONDS)
            try:
                ready, _, _ = select.select([self.events], [], [], max(wait, 0))
            except InterruptedError:
                continue
            if ready:
                while self.receive():
                    if self.sender.due():
                        self.sender.flush()
            if self.sender.due():
                self.sender.flush()
            if time.monotonic() >= next_sweep:
                self.safe_sweep()
                next_sweep = time.monotonic() + self.settings.active_timeout
        while self.receive():
            pass
        self.safe_sweep(final=True)
        self.write_status()

    def safe_sweep(self, final=False):
        """sweep(), a failure of the table's socket counted and said, not the end of the
        exporter: the next sweep sends what this one did not."""
        try:
            self.sweep(final)
        except OSError as exc:
            self.sweep_errors += 1
            self.sender.last_error = f"scan of the table: {exc.strerror or exc}"


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2:
        print("usage: tusk-flowexport CONFIG STATUS", file=sys.stderr)
        return 2
    try:
        with open(argv[0], encoding="utf-8") as handle:
            settings = export.parse(handle.read(64 * 1024))
    except OSError as exc:
        print(f"tusk-flowexport: {argv[0]}: {exc.strerror}", file=sys.stderr)
        return 1
    except export.ExportError as exc:
        print(f"tusk-flowexport: {argv[0]} refused:\n{exc}", file=sys.stderr)
        return 1
    if not settings.enabled:
        print("tusk-flowexport: no collector: nothing to do", file=sys.stderr)
        return 1
    exporter = Exporter(settings, argv[1])

    def stop(*_):
        exporter.stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    exporter.run()
    return 0
