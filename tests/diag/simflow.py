"""A TCP connection through a firewall, simulated packet by packet, written as the
two captures the firewall's interfaces would take: `outside` (client side) and
`inside` (server side). For the analyser's tests: every property the report should
find - a window limit, a loss, reordering, a sequence offset with or without
rewritten SACK blocks, a clamped MSS, a stripped option - is set here, so the test
knows the truth it checks the report against.

    client --(rtt/2 - 0.1 ms)-- [outside | fw | inside] --(0.1 ms)-- server

The sender is a simple Reno-less TCP: it keeps min(receiver window, cwnd) in
flight, paced at `bandwidth`, retransmits on the third duplicate ACK or after an
RTO of 3 RTT. The receiver ACKs every segment, with SACK blocks (and D-SACK for a
duplicate) when SACK was negotiated. Packets are built and written with dpkt.
"""
import heapq
import socket
import struct

import dpkt

MASK = 0xFFFFFFFF
CLIENT, SERVER = ("10.0.0.1", 40000), ("10.0.1.1", 5201)
FW_DELAY = 0.00001     # outside -> inside
SERVER_DELAY = 0.0001  # inside <-> server


def tcp_options(opts, syn=True):
    out = b""
    if opts.get("mss") is not None:
        out += struct.pack("!BBH", 2, 4, opts["mss"])
    if opts.get("sack"):
        out += b"\x04\x02"
    if opts.get("ts"):
        out += b"\x08\x0a" + struct.pack("!II", 1, 0)
    if opts.get("wscale") is not None:
        out += b"\x01\x03\x03" + bytes([opts["wscale"]])
    while len(out) % 4:
        out += b"\x01"
    return out


def _each_option(options, change):
    """Calls change(out, at, kind, length) for every option but NOP/EOL; returns the
    options, changed in place as the middlebox would (the length never changes)."""
    out, i = bytearray(options), 0
    while i < len(out):
        kind = out[i]
        if kind in (0, 1):
            i += 1
            continue
        length = max(2, out[i + 1]) if i + 1 < len(out) else 2
        change(out, i, kind, length)
        i += length
    return bytes(out)


def strip(options, kinds):
    """`reset tcp option`: the stripped options become NOPs, the length stays."""
    def nop(out, i, kind, length):
        if kind in kinds:
            out[i:i + length] = b"\x01" * length
    return _each_option(options, nop)


def clamp_mss(options, mss):
    def lower(out, i, kind, length):
        if kind == 2 and struct.unpack("!H", out[i + 2:i + 4])[0] > mss:
            out[i + 2:i + 4] = struct.pack("!H", mss)
    return _each_option(options, lower)


def frame(src, dst, seq, ack, flags, win, options=b"", payload=0, ipv6=False):
    tcp = dpkt.tcp.TCP(sport=src[1], dport=dst[1], seq=seq & MASK, ack=ack & MASK, flags=flags,
                       win=win, opts=options)
    tcp.off = (20 + len(options)) // 4
    tcp.data = b"\0" * payload
    if ipv6:
        ip = dpkt.ip6.IP6(src=socket.inet_pton(socket.AF_INET6, src[0]),
                          dst=socket.inet_pton(socket.AF_INET6, dst[0]), nxt=6, hlim=64, data=tcp)
        ip.plen = len(bytes(tcp))
        kind = dpkt.ethernet.ETH_TYPE_IP6
    else:
        ip = dpkt.ip.IP(src=socket.inet_aton(src[0]), dst=socket.inet_aton(dst[0]), p=6, ttl=64,
                        data=tcp)
        ip.len = 20 + len(bytes(tcp))
        kind = dpkt.ethernet.ETH_TYPE_IP
    return bytes(dpkt.ethernet.Ethernet(src=b"\x02\0\0\0\0\1", dst=b"\x02\0\0\0\0\2",
                                        type=kind, data=ip))


class Sim:
    """Run with .run(); then .packets is [(time, "outside"|"inside", frame)]."""

    def __init__(self, *, segments=500, rtt=0.02, bandwidth=100e6, mss=1460, rwnd=1 << 20,
                 cwnd=1 << 30, client=None, server=None, loss=(), reorder=(), resend=(),
                 seq_offset=0, translate_sack=True, clamp=None, strip_kinds=(),
                 client_isn=1000, server_isn=5_000_000, start=1_700_000_000.0, snaplen=None):
        self.segments, self.rtt, self.bandwidth, self.mss = segments, rtt, bandwidth, mss
        self.rwnd, self.cwnd = rwnd, cwnd
        self.client_opts = {"mss": mss, "wscale": 7, "sack": True, "ts": False,
                            **(client or {})}
        self.server_opts = {"mss": 1460, "wscale": 7, "sack": True, "ts": False,
                            **(server or {})}
        self.loss, self.reorder, self.resend = set(loss), set(reorder), set(resend)
        self.offset, self.translate = seq_offset, translate_sack
        self.clamp, self.strip_kinds = clamp, set(strip_kinds)
        self.c_isn, self.s_isn, self.start = client_isn, server_isn, start
        self.snaplen = snaplen
        self.packets = []
        self.events = []
        self.n = 0
        self.wire = rtt / 2 - SERVER_DELAY

    # -- plumbing ----------------------------------------------------------------------

    def at(self, when, what, *args):
        self.n += 1
        heapq.heappush(self.events, (when, self.n, what, args))

    def capture(self, when, where, data):
        self.packets.append((when, where, data[:self.snaplen] if self.snaplen else data))

    def run(self):
        self.at(self.start, self.client_syn)
        while self.events:
            when, _, what, args = heapq.heappop(self.events)
            what(when, *args)
        self.packets.sort(key=lambda p: p[0])
        return self

    # -- client -> server --------------------------------------------------------------

    def client_syn(self, now):
        opts = tcp_options(self.client_opts)
        self.c2s(now, self.c_isn, 0, dpkt.tcp.TH_SYN, 65535, opts, 0, syn=True)

    def c2s(self, now, seq, ack, flags, win, opts, payload, syn=False, index=None, first=True):
        """A client packet: seen outside, changed by the firewall, seen inside, and
        (unless lost) delivered to the server."""
        arrive = now + self.wire
        if index is not None and index in self.reorder and first:
            arrive += 0.0005   # overtaken by the next segment before the firewall
        self.capture(arrive, "outside", frame(CLIENT, SERVER, seq, ack, flags, win, opts, payload))
        if syn:
            if self.clamp:
                opts = clamp_mss(opts, self.clamp)
            opts = strip(opts, self.strip_kinds)
        seq = seq + self.offset
        self.capture(arrive + FW_DELAY, "inside",
                     frame(CLIENT, SERVER, seq, ack, flags, win, opts, payload))
        if index is not None and index in self.loss and first:
            return
        self.at(arrive + FW_DELAY + SERVER_DELAY, self.server_receive, seq, flags, opts, payload)

    # -- server ------------------------------------------------------------------------

    def server_receive(self, now, seq, flags, opts, payload):
        if flags & dpkt.tcp.TH_SYN:
            offered = _parse(opts)
            mine = dict(self.server_opts)
            if offered.get("wscale") is None:
                mine["wscale"] = None
            mine["sack"] = mine["sack"] and offered.get("sack", False)
            mine["ts"] = mine["ts"] and offered.get("ts", False)
            self.scaling = offered.get("wscale") is not None and mine["wscale"] is not None
            self.sack = mine["sack"]
            self.client_wscale = offered.get("wscale") if self.scaling else 0
            self.server_wscale = mine["wscale"] if self.scaling else 0
            self.peer_mss = min(offered.get("mss") or 536, self.server_opts["mss"])
            self.rcv_isn = seq
            self.rcv_nxt = 1
            self.ooo = []          # [start, end) relative, received above rcv_nxt
            self.s2c(now, self.s_isn, seq + 1, dpkt.tcp.TH_SYN | dpkt.tcp.TH_ACK, 65535,
                     tcp_options(mine))
            return
        rel = (seq - self.rcv_isn) & MASK
        end = rel + payload
        blocks = []
        if payload:
            if end <= self.rcv_nxt or any(s <= rel and end <= e for s, e in self.ooo):
                blocks.append((rel, end))                      # D-SACK: a duplicate
            elif rel > self.rcv_nxt:
                self.ooo.append([rel, end])
                self.ooo.sort()
            else:
                self.rcv_nxt = max(self.rcv_nxt, end)
            merged = []
            for s, e in self.ooo:
                if e <= self.rcv_nxt:
                    continue
                if s <= self.rcv_nxt:
                    self.rcv_nxt = e
                    continue
                if merged and s <= merged[-1][1]:
                    merged[-1][1] = max(merged[-1][1], e)
                else:
                    merged.append([s, e])
            self.ooo = merged
            if not blocks and rel > self.rcv_nxt - payload:
                pass
        window = self.rwnd >> self.server_wscale if self.scaling else min(self.rwnd, 65535)
        options = b""
        if self.sack:
            sack = blocks + [tuple(b) for b in reversed(self.ooo)][:3 - len(blocks)]
            if sack:
                options = b"\x01\x01\x05" + bytes([2 + 8 * len(sack)]) + b"".join(
                    struct.pack("!II", (self.rcv_isn + s) & MASK, (self.rcv_isn + e) & MASK)
                    for s, e in sack)
        self.s2c(now, self.s_isn + 1, self.rcv_isn + self.rcv_nxt, dpkt.tcp.TH_ACK,
                 min(window, 65535), options)

    def s2c(self, now, seq, ack, flags, win, opts):
        arrive = now + SERVER_DELAY
        self.capture(arrive, "inside", frame(SERVER, CLIENT, seq, ack, flags, win, opts))
        ack = ack - self.offset
        if not flags & dpkt.tcp.TH_SYN:
            if self.translate and opts:
                opts = _shift_sack(opts, -self.offset)
        elif self.clamp:
            opts = clamp_mss(opts, self.clamp)
        self.capture(arrive + FW_DELAY, "outside",
                     frame(SERVER, CLIENT, seq, ack, flags, win, opts))
        self.at(arrive + FW_DELAY + self.wire, self.client_receive, ack, flags, win, opts)

    # -- client ------------------------------------------------------------------------

    def client_receive(self, now, ack, flags, win, opts):
        if flags & dpkt.tcp.TH_SYN:
            peer = _parse(opts)
            self.scaled = peer.get("wscale") is not None and self.client_opts["wscale"] is not None
            self.peer_wscale = peer["wscale"] if self.scaled else 0
            self.send_mss = min(self.mss, peer.get("mss") or 536)
            self.una = self.nxt = 1
            self.total = self.segments * self.send_mss
            self.dupacks = 0
            self.retransmitted = set()
            self.last_send = now
            self.peer_window = win << self.peer_wscale
            self.progress_at = now
            self.c2s(now, self.c_isn + 1, self.s_isn + 1, dpkt.tcp.TH_ACK, 65535, b"", 0)
            self.send(now)
            self.at(now + 3 * self.rtt, self.rto, self.una)
            return
        rel = (ack - self.c_isn) & MASK
        self.peer_window = win << self.peer_wscale
        if rel > self.una:
            self.una = rel
            self.dupacks = 0
            self.progress_at = now
        elif rel == self.una and self.nxt > self.una:
            self.dupacks += 1
            if self.dupacks == 3 and self.una not in self.retransmitted:
                self.retransmit(now, self.una)
        self.send(now)

    def segment(self, when, rel, first=True):
        length = min(self.send_mss, self.total + 1 - rel)
        index = (rel - 1) // self.send_mss
        self.c2s(when, self.c_isn + rel, self.s_isn + 1, dpkt.tcp.TH_ACK | dpkt.tcp.TH_PUSH,
                 65535, b"", length, index=index, first=first)
        return length

    def send(self, now):
        window = min(self.peer_window, self.cwnd)
        while self.nxt <= self.total and self.nxt - self.una + self.send_mss <= window:
            when = max(now, self.last_send + self.send_mss * 8 / self.bandwidth)
            self.last_send = when
            index = (self.nxt - 1) // self.send_mss
            self.nxt += self.segment(when, self.nxt)
            if index in self.resend:       # sent again once acknowledged: spurious
                self.at(when + 2 * self.rtt, self.segment, self.nxt - self.send_mss, False)

    def retransmit(self, now, rel):
        self.retransmitted.add(rel)
        when = max(now, self.last_send + self.send_mss * 8 / self.bandwidth)
        self.last_send = when
        self.segment(when, rel, first=False)

    def rto(self, now, una):
        if self.una > self.total:
            return
        if self.una == una and now - self.progress_at >= 3 * self.rtt:
            self.retransmit(now, self.una)
            self.progress_at = now
        self.at(now + 3 * self.rtt, self.rto, self.una)


def _parse(options):
    found = {}
    for item in dpkt.tcp.parse_opts(options):
        if item is None:
            break
        kind, data = item
        if kind == 2:
            found["mss"] = struct.unpack("!H", data)[0]
        elif kind == 3:
            found["wscale"] = data[0]
        elif kind == 4:
            found["sack"] = True
        elif kind == 8:
            found["ts"] = True
    return found


def _shift_sack(options, delta):
    def shift(out, i, kind, length):
        if kind == 5:
            for j in range(i + 2, i + length - 3, 4):
                value = struct.unpack("!I", out[j:j + 4])[0]
                out[j:j + 4] = struct.pack("!I", (value + delta) & MASK)
    return _each_option(options, shift)


# -- writing ---------------------------------------------------------------------------

def write_pcapng(path, packets, interfaces=("outside", "inside")):
    """One pcapng with an interface block per name; packets: (time, name, frame)."""
    idbs = []
    for name in interfaces:
        idb = dpkt.pcapng.InterfaceDescriptionBlockLE(snaplen=65535, linktype=1)
        idb.opts = [dpkt.pcapng.PcapngOptionLE(code=dpkt.pcapng.PCAPNG_OPT_IF_NAME,
                                               data=name.encode()),
                    dpkt.pcapng.PcapngOptionLE(code=dpkt.pcapng.PCAPNG_OPT_IF_TSRESOL,
                                               data=b"\x09"),
                    dpkt.pcapng.PcapngOptionLE(code=dpkt.pcapng.PCAPNG_OPT_ENDOFOPT)]
        idbs.append(idb)
    index = {name: i for i, name in enumerate(interfaces)}
    with open(path, "wb") as out:
        writer = dpkt.pcapng.Writer(out, idb=idbs)
        for when, name, data in packets:
            ns = round(when * 1e9)
            writer.writepkt(dpkt.pcapng.EnhancedPacketBlockLE(
                iface_id=index[name], ts_high=ns >> 32, ts_low=ns & MASK, caplen=len(data),
                pkt_len=len(data), pkt_data=data))
    return path


def write_pcap(path, packets, nano=False):
    with open(path, "wb") as out:
        writer = dpkt.pcap.Writer(out, snaplen=65535, nano=nano)
        for when, _, data in packets:
            writer.writepkt(data, ts=when)
    return path


def bulk_pcap(path, segments, gap=0.001, rtt=0.0005, mss=1448, snaplen=96):
    """A long clean transfer written fast (frames patched from two templates, cut to
    `snaplen` as a capture would): for size and memory tests, not for behaviour."""
    data = bytearray(frame(CLIENT, SERVER, 0, 0, dpkt.tcp.TH_ACK, 65535, b"", mss)[:snaplen])
    ack = bytearray(frame(SERVER, CLIENT, 0, 0, dpkt.tcp.TH_ACK, 65535))
    start = 1_700_000_000.0
    with open(path, "wb") as out:
        writer = dpkt.pcap.Writer(out, snaplen=65535)
        syn = frame(CLIENT, SERVER, 999, 0, dpkt.tcp.TH_SYN, 65535, tcp_options(
            {"mss": mss, "wscale": 7, "sack": True}))
        synack = frame(SERVER, CLIENT, 4999, 1000, dpkt.tcp.TH_SYN | dpkt.tcp.TH_ACK, 65535,
                       tcp_options({"mss": mss, "wscale": 7, "sack": True}))
        writer.writepkt(syn, ts=start)
        writer.writepkt(synack, ts=start + rtt)
        for i in range(segments):
            when = start + rtt * 2 + i * gap
            struct.pack_into("!II", data, 38, (1000 + i * mss) & MASK, 5000)
            writer.writepkt(bytes(data), ts=when)
            struct.pack_into("!II", ack, 38, 5000, (1000 + (i + 1) * mss) & MASK)
            writer.writepkt(bytes(ack), ts=when + rtt)
    return path
