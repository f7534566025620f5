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
import signal
import socket
import sys
import time

from tusklib.files import write_atomically

from . import export, ipfix
from .conntrack import Conntrack, Stats
from .ctnetlink import (
    HEADER,
    IPS_HW_OFFLOAD,
    IPS_OFFLOAD,
    NETLINK_NETFILTER,
    NFNL_SUBSYS_CTNETLINK,
    NLMSG_HDRLEN,
    decode,
)

NFNLGRP_CONNTRACK_DESTROY = 3
IPCTNL_MSG_CT_DELETE = 2
DESTROY = NFNL_SUBSYS_CTNETLINK << 8 | IPCTNL_MSG_CT_DELETE
EVENT_BUFFER = 16 << 20          # bytes the kernel may queue for us before ENOBUFS
LOOKUP_BATCH = 256               # entries asked for in one send
FLUSH_SECONDS = 0.5              # records wait at most this long for a full message
STATUS_SECONDS = 5
TEMPLATE_REFRESH = 30.0          # seconds between a domain's templates (over UDP)
DOMAIN_SHIFT = 16                # the ct mark's upper half
OFFLOADED = IPS_OFFLOAD | IPS_HW_OFFLOAD
LOOPBACK = (ipaddress.ip_network("127.0.0.0/8"), ipaddress.ip_network("::1/128"))


def _loopback(address):
    ip = ipaddress.ip_address(address)
    return any(ip in net for net in LOOPBACK if net.version == ip.version)


class Accounts:
    """What each connection (by conntrack id) last had in a record: [orig bytes, orig
    packets, reply bytes, reply packets, when (ms), on the fast path]."""

    def __init__(self):
        self.last = {}
        self.missing = set()   # ids a scan did not find: forgotten if the next misses them too

    def record(self, entry, reason, now_ms):
        """The (domain, Record) of entry's counters since its last record, or None when
        nothing moved (or it is the box's own, over loopback)."""
        last = self.last.get(entry.id)
        offloaded = bool(entry.status & OFFLOADED) or bool(last and last[5])
        counted = entry.bytes or (0, 0)
        now = [counted[0], entry.packets[0], counted[1], entry.packets[1], now_ms, offloaded]
        if reason == ipfix.END_OF_FLOW:
            self.last.pop(entry.id, None)
        else:
            self.last[entry.id] = now
        before = last or [0, 0, 0, 0, 0, False]
        deltas = [now[i] - before[i] for i in range(4)]
        if not any(deltas) or _loopback(entry.orig.src) or _loopback(entry.orig.dst):
            return None
        if last and last[4]:
            start = last[4]
        elif entry.start_ns:
            start = entry.start_ns // 1_000_000
        else:
            start = now_ms
        o, r = entry.orig, entry.reply
        record = ipfix.Record(
            start_ms=start, end_ms=now_ms, src=o.src, dst=o.dst, sport=o.sport,
            dport=o.dport, proto=o.proto, reason=reason, octets=deltas[0],
            packets=deltas[1], reply_octets=deltas[2], reply_packets=deltas[3],
            nat_src=r.dst, nat_dst=r.src, nat_sport=r.dport, nat_dport=r.sport)
        return _domain(entry.mark, offloaded), record

    def baseline(self, entry):
        """A connection's counters taken as already reported (at the process's start)."""
        counted = entry.bytes or (0, 0)
        self.last[entry.id] = [counted[0], entry.packets[0], counted[1], entry.packets[1],
                               0, bool(entry.status & OFFLOADED)]


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
                    except OSError as exc:      # unreachable, refused, a full buffer
                        self.errors[name] += 1
                        self.last_error = f"{name}: {exc.strerror or exc}"
        self.pending, self.oldest = {}, None


class Exporter:
    def __init__(self, settings, status_path):
        self.settings, self.status_path = settings, status_path
        self.accounts = Accounts()
        self.sender = Sender(settings, boot=time.time() - time.monotonic())
        self.lost = self.sweeps = 0
        self.sweep_seconds = 0.0
        self.started = time.time()
        self.stopping = False
        self.events = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_NETFILTER)
        try:
            self.events.setsockopt(socket.SOL_SOCKET, 33, EVENT_BUFFER)   # SO_RCVBUFFORCE
        except PermissionError:
            self.events.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, EVENT_BUFFER)
        self.events.bind((0, 1 << (NFNLGRP_CONNTRACK_DESTROY - 1)))
        self.table = Conntrack()
        self.buf = bytearray(1 << 20)

    def baseline(self):
        for entry in self.table.entries():
            self.accounts.baseline(entry)

    def sweep(self):
        """A record for each connection whose counters moved since its last one."""
        began = time.monotonic()
        stats, changed, alive = Stats(), [], set()
        last = self.accounts.last
        for brief in self.table.scan(1, stats):
            if brief is None:
                continue
            alive.add(brief.id)
            known = last.get(brief.id)
            if known is None or known[0] != brief.orig_bytes or known[2] != brief.reply_bytes:
                changed.append(brief)
            elif brief.status & OFFLOADED:
                known[5] = True
        gone = set(last) - alive
        for ident in gone & self.accounts.missing:
            del last[ident]
        self.accounts.missing = gone - self.accounts.missing
        now_ms = int(time.time() * 1000)
        for first in range(0, len(changed), LOOKUP_BATCH):
            found = self.table.lookup(changed[first:first + LOOKUP_BATCH])
            for entry in found.values():
                made = self.accounts.record(entry, ipfix.END_ACTIVE, now_ms)
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
                made = self.accounts.record(decode(self.buf, position, position + length),
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
                "sweeps": self.sweeps, "sweep_seconds": round(self.sweep_seconds, 3)}

    def write_status(self):
        write_atomically(self.status_path, json.dumps(self.status()) + "\n", 0o600)

    def run(self):
        import select
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
                self.sweep()
                next_sweep = time.monotonic() + self.settings.active_timeout
        while self.receive():
            pass
        self.sweep()
        self.write_status()


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
