"""The kernel's conntrack table over ctnetlink (NETLINK_NETFILTER, subsystem CTNETLINK),
read and written with the standard library only: one socket, requests packed with
struct, replies walked in place.

Why not a library: measured on 100 000 entries (docs/FLOWS.md), pyroute2 takes 21 s of
CPU to dump them (it builds an object per attribute), conntrack(8) 0.8 s plus the
parsing of its text and it prints no sequence adjustment (CTA_SEQ_ADJ_*), while the
kernel itself spends 0.35 s serialising the dump. Walking the replies here costs about
as much as conntrack's own parsing, decodes everything Live flows shows, and the same
few constants serve the dump, the lookup of one entry and its deletion.

The kernel's constants are those of <linux/netfilter/nfnetlink_conntrack.h>,
<linux/netfilter/nf_conntrack_common.h> and <linux/netlink.h>.
"""
import errno
import ipaddress
import os
import socket
import struct
from contextlib import contextmanager
from dataclasses import dataclass

NETLINK_NETFILTER = 12
NFNL_SUBSYS_CTNETLINK = 1
# message types of the subsystem
MSG_NEW, MSG_GET, MSG_DELETE, MSG_GET_STATS = 0, 1, 2, 5
# netlink
NLMSG_ERROR, NLMSG_DONE = 2, 3
NLM_F_REQUEST, NLM_F_ACK, NLM_F_DUMP = 0x1, 0x4, 0x300
NLM_F_EXCL, NLM_F_CREATE = 0x200, 0x400
NLA_F_NESTED = 0x8000
NLA_TYPE_MASK = 0x3FFF

# enum ctattr_type
CTA_TUPLE_ORIG, CTA_TUPLE_REPLY, CTA_STATUS, CTA_PROTOINFO, CTA_HELP = 1, 2, 3, 4, 5
CTA_TIMEOUT, CTA_MARK, CTA_COUNTERS_ORIG, CTA_COUNTERS_REPLY = 7, 8, 9, 10
CTA_ID, CTA_SEQ_ADJ_ORIG, CTA_SEQ_ADJ_REPLY, CTA_ZONE, CTA_TIMESTAMP = 12, 15, 16, 18, 20
# tuples
CTA_TUPLE_IP, CTA_TUPLE_PROTO = 1, 2
CTA_IP_V4_SRC, CTA_IP_V4_DST, CTA_IP_V6_SRC, CTA_IP_V6_DST = 1, 2, 3, 4
CTA_PROTO_NUM, CTA_PROTO_SRC_PORT, CTA_PROTO_DST_PORT = 1, 2, 3
# nested in counters, timestamps, sequence adjustment, protocol state, helper, stats
CTA_COUNTERS_PACKETS, CTA_COUNTERS_BYTES = 1, 2
CTA_TIMESTAMP_START = 1
CTA_SEQADJ_CORRECTION_POS, CTA_SEQADJ_OFFSET_BEFORE, CTA_SEQADJ_OFFSET_AFTER = 1, 2, 3
CTA_PROTOINFO_TCP, CTA_PROTOINFO_TCP_STATE = 1, 1
CTA_HELP_NAME = 1
CTA_STATS_GLOBAL_ENTRIES, CTA_STATS_GLOBAL_MAX_ENTRIES = 1, 2

# enum ip_conntrack_status
IPS_SEEN_REPLY, IPS_ASSURED, IPS_CONFIRMED = 1 << 1, 1 << 2, 1 << 3
IPS_SRC_NAT, IPS_DST_NAT, IPS_SEQ_ADJUST = 1 << 4, 1 << 5, 1 << 6
IPS_OFFLOAD, IPS_HW_OFFLOAD = 1 << 14, 1 << 15

TCP_STATES = ("NONE", "SYN_SENT", "SYN_RECV", "ESTABLISHED", "FIN_WAIT", "CLOSE_WAIT",
              "LAST_ACK", "TIME_WAIT", "CLOSE", "SYN_SENT2")
FAMILIES = {socket.AF_INET: 4, socket.AF_INET6: 6}
# protocols whose conntrack tuple carries two ports (CTA_PROTO_SRC_PORT, _DST_PORT)
PORT_PROTOCOLS = {6: "tcp", 17: "udp", 33: "dccp", 132: "sctp", 136: "udplite"}
PROTOCOL_NAMES = {1: "icmp", 47: "gre", 58: "icmpv6", **PORT_PROTOCOLS}

BUFFER = 1 << 20   # bytes of one recv: the kernel fills it with as many entries as fit
TIMEOUT = 30       # seconds the kernel may take to answer one recv

_HEADER = struct.Struct("=IHHII")      # nlmsghdr
_NFGEN = struct.Struct("=BBH")         # nfgenmsg
_ATTR = struct.Struct("=HH")           # nlattr
_BE16, _BE32, _BE64 = struct.Struct("!H"), struct.Struct("!I"), struct.Struct("!Q")
_SIGNED32 = struct.Struct("!i")
NLMSG_HDRLEN, NFGEN_LEN = 16, 4


class NetlinkError(OSError):
    """The kernel refused a request: errno and what was asked."""


@contextmanager
def in_netns(name):
    """This thread in network namespace `name` for the block (None: where it is). A
    netlink socket stays in the namespace it was created in, so the socket is made here
    and used anywhere."""
    if not name:
        yield
        return
    own = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    try:
        target = os.open(os.path.join("/run/netns", name), os.O_RDONLY | os.O_NOFOLLOW)
        try:
            os.setns(target, os.CLONE_NEWNET)
            try:
                yield
            finally:
                os.setns(own, os.CLONE_NEWNET)
        finally:
            os.close(target)
    finally:
        os.close(own)


def sysctl(netns, name, value=None):
    """The value of sysctl name in network namespace netns (None: this one), written
    first when value is given. /proc/sys/net is the namespace of the thread that opens
    it."""
    path = os.path.join("/proc/sys", *name.split("."))
    with in_netns(netns):
        if value is not None:
            with open(path, "w", encoding="ascii") as handle:
                handle.write(value)
        with open(path, encoding="ascii") as handle:
            return handle.read().strip()


# -- packing requests -------------------------------------------------------------------

def attr(kind, payload):
    """One netlink attribute, padded to 4 bytes."""
    length = 4 + len(payload)
    return _ATTR.pack(length, kind) + payload + b"\0" * (-length % 4)


def nested(kind, *attrs):
    return attr(kind | NLA_F_NESTED, b"".join(attrs))


def be32(kind, value):
    return attr(kind, _BE32.pack(value & 0xFFFFFFFF))


def tuple_attr(kind, src, dst, proto, sport=0, dport=0):
    """CTA_TUPLE_ORIG or _REPLY: addresses (ipaddress objects or text), the protocol
    number and, for PORT_PROTOCOLS, the ports."""
    src, dst = ipaddress.ip_address(src), ipaddress.ip_address(dst)
    v4 = src.version == 4
    ip = nested(CTA_TUPLE_IP, attr(CTA_IP_V4_SRC if v4 else CTA_IP_V6_SRC, src.packed),
                attr(CTA_IP_V4_DST if v4 else CTA_IP_V6_DST, dst.packed))
    parts = [attr(CTA_PROTO_NUM, bytes([proto]))]
    if proto in PORT_PROTOCOLS:
        parts += [attr(CTA_PROTO_SRC_PORT, _BE16.pack(sport)),
                  attr(CTA_PROTO_DST_PORT, _BE16.pack(dport))]
    return nested(kind, ip, nested(CTA_TUPLE_PROTO, *parts))


def zone_attr(zone):
    return attr(CTA_ZONE, _BE16.pack(zone)) if zone else b""


def message(kind, flags, family, seq, *attrs):
    body = _NFGEN.pack(family, 0, 0) + b"".join(attrs)
    return _HEADER.pack(NLMSG_HDRLEN + len(body), (NFNL_SUBSYS_CTNETLINK << 8) | kind,
                        flags, seq, 0) + body


def new_entry(seq, orig, reply=None, timeout=3600, mark=0, seqadj=None, zone=0):
    """A CT_NEW message (with an acknowledgement) creating a confirmed, assured entry
    of the Tuple orig - established, for TCP - whose reply is orig reversed unless
    given; seqadj: {"orig"|"reply": (position, before, after)}. The tests and the
    benchmark fill tables with it (Conntrack.create)."""
    reply = reply or Tuple(orig.dst, orig.src, orig.proto, orig.dport, orig.sport)
    parts = [tuple_attr(CTA_TUPLE_ORIG, orig.src, orig.dst, orig.proto, orig.sport, orig.dport),
             tuple_attr(CTA_TUPLE_REPLY, reply.src, reply.dst, reply.proto, reply.sport,
                        reply.dport),
             be32(CTA_STATUS, IPS_ASSURED | IPS_CONFIRMED), be32(CTA_TIMEOUT, timeout),
             be32(CTA_MARK, mark), zone_attr(zone)]
    if orig.proto == 6:
        parts.append(nested(CTA_PROTOINFO, nested(CTA_PROTOINFO_TCP, attr(
            CTA_PROTOINFO_TCP_STATE, bytes([TCP_STATES.index("ESTABLISHED")])))))
    for direction, kind in (("orig", CTA_SEQ_ADJ_ORIG), ("reply", CTA_SEQ_ADJ_REPLY)):
        if seqadj and direction in seqadj:
            position, before, after = seqadj[direction]
            parts.append(nested(kind, be32(CTA_SEQADJ_CORRECTION_POS, position),
                                be32(CTA_SEQADJ_OFFSET_BEFORE, before),
                                be32(CTA_SEQADJ_OFFSET_AFTER, after)))
    family = socket.AF_INET if ipaddress.ip_address(orig.src).version == 4 else socket.AF_INET6
    return message(MSG_NEW, NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL, family,
                   seq, *parts)


# -- walking replies --------------------------------------------------------------------

def attrs(buf, start, end):
    """{type: (payload start, payload end)} of the attributes in buf[start:end]."""
    found = {}
    unpack = _ATTR.unpack_from
    while start + 4 <= end:
        length, kind = unpack(buf, start)
        if length < 4:
            break
        found[kind & NLA_TYPE_MASK] = (start + 4, start + length)
        start += (length + 3) & ~3
    return found


def _counters(buf, span):
    """(packets, bytes) of a CTA_COUNTERS_* attribute."""
    inner = attrs(buf, *span)
    packets, size = inner.get(CTA_COUNTERS_PACKETS), inner.get(CTA_COUNTERS_BYTES)
    return (_BE64.unpack_from(buf, packets[0])[0] if packets else 0,
            _BE64.unpack_from(buf, size[0])[0] if size else 0)


def _bytes_at(buf, position):
    """The byte count of the CTA_COUNTERS_* attribute at position."""
    return _counters(buf, (position + 4, position + _ATTR.unpack_from(buf, position)[0]))[1]


@dataclass(frozen=True)
class Tuple:
    src: str
    dst: str
    proto: int
    sport: int = 0
    dport: int = 0

    def as_dict(self):
        return {"src": self.src, "dst": self.dst, "sport": self.sport, "dport": self.dport}


def _tuple(buf, span):
    parts = attrs(buf, *span)
    ip, proto = attrs(buf, *parts[CTA_TUPLE_IP]), attrs(buf, *parts[CTA_TUPLE_PROTO])
    v4 = CTA_IP_V4_SRC in ip
    src = ip[CTA_IP_V4_SRC if v4 else CTA_IP_V6_SRC]
    dst = ip[CTA_IP_V4_DST if v4 else CTA_IP_V6_DST]
    number = buf[proto[CTA_PROTO_NUM][0]]
    ports = (0, 0)
    if CTA_PROTO_SRC_PORT in proto:
        ports = (_BE16.unpack_from(buf, proto[CTA_PROTO_SRC_PORT][0])[0],
                 _BE16.unpack_from(buf, proto[CTA_PROTO_DST_PORT][0])[0])
    return Tuple(str(ipaddress.ip_address(bytes(buf[src[0]:src[1]]))),
                 str(ipaddress.ip_address(bytes(buf[dst[0]:dst[1]]))), number, *ports)


def _seqadj(buf, span):
    inner = attrs(buf, *span)
    value = {}
    for key, kind in (("position", CTA_SEQADJ_CORRECTION_POS),
                      ("before", CTA_SEQADJ_OFFSET_BEFORE), ("after", CTA_SEQADJ_OFFSET_AFTER)):
        if kind in inner:
            value[key] = (_SIGNED32 if key != "position" else _BE32).unpack_from(
                buf, inner[kind][0])[0]
    return value


@dataclass(frozen=True)
class Entry:
    """One conntrack entry, decoded whole."""

    id: int
    family: int            # 4 or 6
    orig: Tuple
    reply: Tuple
    zone: int
    status: int
    mark: int
    timeout: int           # seconds left
    packets: tuple         # (original direction, reply direction)
    bytes: tuple           # None without accounting
    start_ns: int          # CLOCK_REALTIME of its creation; 0 without timestamps
    tcp_state: str
    helper: str
    seqadj_orig: dict      # {} or {position, before, after}
    seqadj_reply: dict

    @property
    def proto(self):
        return self.orig.proto

    @property
    def nat(self):
        """The reply tuple is not the original one reversed: an address or port was
        translated."""
        o, r = self.orig, self.reply
        return (o.src, o.dst, o.sport, o.dport) != (r.dst, r.src, r.dport, r.sport)


def decode(buf, start, end):
    """The Entry of the ctnetlink message in buf[start:end] (its netlink header
    included)."""
    family = buf[start + NLMSG_HDRLEN]
    found = attrs(buf, start + NLMSG_HDRLEN + NFGEN_LEN, end)

    def be(kind, fmt=_BE32, default=0):
        span = found.get(kind)
        return fmt.unpack_from(buf, span[0])[0] if span else default

    tcp_state = ""
    if CTA_PROTOINFO in found:
        tcp = attrs(buf, *found[CTA_PROTOINFO]).get(CTA_PROTOINFO_TCP)
        if tcp:
            state = attrs(buf, *tcp).get(CTA_PROTOINFO_TCP_STATE)
            if state:
                number = buf[state[0]]
                tcp_state = TCP_STATES[number] if number < len(TCP_STATES) else str(number)
    helper = ""
    if CTA_HELP in found:
        name = attrs(buf, *found[CTA_HELP]).get(CTA_HELP_NAME)
        if name:
            helper = bytes(buf[name[0]:name[1]]).split(b"\0")[0].decode("ascii", "replace")
    start_ns = 0
    if CTA_TIMESTAMP in found:
        stamp = attrs(buf, *found[CTA_TIMESTAMP]).get(CTA_TIMESTAMP_START)
        start_ns = _BE64.unpack_from(buf, stamp[0])[0] if stamp else 0
    counted = CTA_COUNTERS_ORIG in found
    orig = _counters(buf, found[CTA_COUNTERS_ORIG]) if counted else (0, 0)
    reply = _counters(buf, found[CTA_COUNTERS_REPLY]) if counted else (0, 0)
    return Entry(
        id=be(CTA_ID), family=FAMILIES.get(family, family),
        orig=_tuple(buf, found[CTA_TUPLE_ORIG]), reply=_tuple(buf, found[CTA_TUPLE_REPLY]),
        zone=be(CTA_ZONE, _BE16), status=be(CTA_STATUS), mark=be(CTA_MARK),
        timeout=be(CTA_TIMEOUT), packets=(orig[0], reply[0]),
        bytes=(orig[1], reply[1]) if counted else None, start_ns=start_ns,
        tcp_state=tcp_state, helper=helper,
        seqadj_orig=_seqadj(buf, found[CTA_SEQ_ADJ_ORIG]) if CTA_SEQ_ADJ_ORIG in found else {},
        seqadj_reply=_seqadj(buf, found[CTA_SEQ_ADJ_REPLY])
        if CTA_SEQ_ADJ_REPLY in found else {})


@dataclass(frozen=True)
class Brief:
    """What a scan of the whole table reads of an entry: enough to rank it and to ask
    for it again (key: its CTA_TUPLE_ORIG and CTA_ZONE attributes as the kernel sent
    them, which a lookup sends back unchanged)."""

    id: int
    family: int          # AF_INET or AF_INET6, as a request needs it
    key: bytes
    orig_bytes: int      # a scan skips entries without accounting
    reply_bytes: int
    start_ns: int        # 0 without timestamps
    status: int
    mark: int


_SCANNED = {CTA_COUNTERS_ORIG: 0, CTA_COUNTERS_REPLY: 1, CTA_ID: 2, CTA_STATUS: 3,
            CTA_MARK: 4, CTA_ZONE: 5, CTA_TIMESTAMP: 6}
# CTA_COUNTERS_ORIG and _REPLY as the kernel puts them, one after the other, each with
# PACKETS then BYTES (be64): the bytes are at +20 and +48 from the first header
_COUNTERS_HEAD = _ATTR.pack(28, CTA_COUNTERS_ORIG | NLA_F_NESTED) + _ATTR.pack(12, 1)
_REPLY_HEAD = _ATTR.pack(28, CTA_COUNTERS_REPLY | NLA_F_NESTED) + _ATTR.pack(12, 1)


class Stats:
    """What a scan counts of the whole table."""

    def __init__(self):
        self.entries = self.uncounted = self.offloaded = self.nat = self.seqadj = 0

    def as_dict(self):
        return dict(vars(self))


def _walk(buf, start, end):
    """Positions of the attributes a Brief needs (_SCANNED's order; 0: absent)."""
    unpack, wanted = _ATTR.unpack_from, _SCANNED.get
    spans = [0, 0, 0, 0, 0, 0, 0]
    position = start + NLMSG_HDRLEN + NFGEN_LEN
    while position + 4 <= end:
        length, kind = unpack(buf, position)
        if length < 4:
            break
        slot = wanted(kind & NLA_TYPE_MASK)
        if slot is not None:
            spans[slot] = position
        position += (length + 3) & ~3
    return spans


def _brief(buf, start, end, spans, orig, reply):
    be32 = _BE32.unpack_from
    first = start + NLMSG_HDRLEN + NFGEN_LEN
    key = bytes(buf[first:first + ((_ATTR.unpack_from(buf, first)[0] + 3) & ~3)])
    if spans[5]:
        key += bytes(buf[spans[5]:spans[5] + 8])
    start_ns = 0
    if spans[6]:
        length = _ATTR.unpack_from(buf, spans[6])[0]
        stamp = attrs(buf, spans[6] + 4, spans[6] + length).get(CTA_TIMESTAMP_START)
        start_ns = _BE64.unpack_from(buf, stamp[0])[0] if stamp else 0
    return Brief(be32(buf, spans[2] + 4)[0] if spans[2] else 0, buf[start + NLMSG_HDRLEN], key,
                 orig, reply, start_ns, be32(buf, spans[3] + 4)[0] if spans[3] else 0,
                 be32(buf, spans[4] + 4)[0] if spans[4] else 0)


# -- the socket -------------------------------------------------------------------------

class Conntrack:
    """A ctnetlink socket in network namespace netns (None: this one)."""

    def __init__(self, netns=None):
        self.netns = netns
        with in_netns(netns):
            self.sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_NETFILTER)
        self.sock.bind((0, 0))
        self.sock.settimeout(TIMEOUT)
        self.buf = bytearray(BUFFER)
        self.seq = 0

    def close(self):
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def next_seq(self):
        self.seq = (self.seq + 1) & 0xFFFFFFFF
        return self.seq

    def _messages(self):
        """Yields (buf, start, end, type, seq) of each message as the kernel sends them;
        one recv's worth at a time, the buffer reused (copy what must outlive it)."""
        unpack = _HEADER.unpack_from
        while True:
            size = self.sock.recv_into(self.buf)
            position = 0
            while position + NLMSG_HDRLEN <= size:
                length, kind, _, seq, _ = unpack(self.buf, position)
                if length < NLMSG_HDRLEN:
                    return
                yield self.buf, position, position + length, kind, seq
                position += (length + 3) & ~3

    def _error(self, buf, start):
        return -struct.unpack_from("=i", buf, start + NLMSG_HDRLEN)[0]

    def _dump(self):
        seq = self.next_seq()
        self.sock.send(message(MSG_GET, NLM_F_REQUEST | NLM_F_DUMP, socket.AF_UNSPEC, seq))
        return seq

    def scan(self, min_bytes, stats):
        """A dump of every entry of every family, as a generator: the Brief of each entry
        that moved at least min_bytes in both directions together, and None after each
        recv's worth (a point where the caller may stop for a while and go on later:
        the kernel resumes the dump where it was); stats counts every entry.

        The hot loop of a scan. An entry below min_bytes costs the two tuples' lengths,
        its status and a search for its counters from there on: what follows the tuples
        is the kernel's own data (zone, status, counters), never an address or port
        someone sent, so nothing a peer chooses can pass for the counters. Anything
        unusual (no counters, another layout) goes through the whole walk."""
        seq = self._dump()
        buf, recv = self.buf, self.sock.recv_into
        header, unpack = _HEADER.unpack_from, _ATTR.unpack_from
        be32, be64 = _BE32.unpack_from, _BE64.unpack_from
        translated, offload = IPS_SRC_NAT | IPS_DST_NAT, IPS_OFFLOAD | IPS_HW_OFFLOAD
        head, reply_head = _COUNTERS_HEAD, _REPLY_HEAD
        while True:
            size, start = recv(buf), 0
            while start + NLMSG_HDRLEN <= size:
                length, kind, _, got, _ = header(buf, start)
                end = start + length
                if length < NLMSG_HDRLEN or got != seq:
                    start += (length + 3) & ~3 if length >= NLMSG_HDRLEN else size
                    continue
                if kind == NLMSG_DONE:
                    return
                if kind == NLMSG_ERROR:
                    code = self._error(buf, start)
                    raise NetlinkError(code, f"conntrack dump: {os.strerror(code)}")
                stats.entries += 1
                position = start + NLMSG_HDRLEN + NFGEN_LEN
                position += (unpack(buf, position)[0] + 3) & ~3        # CTA_TUPLE_ORIG
                position += (unpack(buf, position)[0] + 3) & ~3        # CTA_TUPLE_REPLY
                size_, kind = unpack(buf, position)
                if kind == CTA_ZONE:
                    position += (size_ + 3) & ~3
                    size_, kind = unpack(buf, position)
                status = be32(buf, position + 4)[0] if kind == CTA_STATUS else 0
                if status & offload:
                    stats.offloaded += 1
                if status & translated:
                    stats.nat += 1
                if status & IPS_SEQ_ADJUST:
                    stats.seqadj += 1
                found = buf.find(head, position, end)
                if found != -1 and buf[found + 28:found + 36] == reply_head \
                        and buf[found + 18] == CTA_COUNTERS_BYTES \
                        and buf[found + 46] == CTA_COUNTERS_BYTES:
                    orig, reply = be64(buf, found + 20)[0], be64(buf, found + 48)[0]
                    if orig + reply >= min_bytes:
                        yield _brief(buf, start, end, _walk(buf, start, end), orig, reply)
                else:
                    spans = _walk(buf, start, end)
                    if spans[0]:
                        orig, reply = _bytes_at(buf, spans[0]), _bytes_at(buf, spans[1])
                        if orig + reply >= min_bytes:
                            yield _brief(buf, start, end, spans, orig, reply)
                    else:
                        stats.uncounted += 1
                start += (length + 3) & ~3
            yield None

    def entries(self):
        """Every entry, decoded whole (tests, and small tables only)."""
        seq = self._dump()
        found = []
        for buf, start, end, kind, got in self._messages():
            if got != seq:
                continue
            if kind == NLMSG_DONE:
                return found
            if kind == NLMSG_ERROR:
                code = self._error(buf, start)
                raise NetlinkError(code, f"conntrack dump: {os.strerror(code)}")
            found.append(decode(buf, start, end))

    def lookup(self, briefs):
        """{id: Entry} of the entries still there under the same id, asked for by key
        all at once (one send, the kernel answers each with the entry or ENOENT)."""
        if not briefs:
            return {}
        wanted = {}
        batch = []
        for item in briefs:
            seq = self.next_seq()
            wanted[seq] = item.id
            batch.append(message(MSG_GET, NLM_F_REQUEST, item.family, seq, item.key))
        self.sock.send(b"".join(batch))
        found, answered = {}, 0
        for buf, start, end, kind, seq in self._messages():
            if seq not in wanted:
                continue
            answered += 1
            if kind != NLMSG_ERROR:
                entry = decode(buf, start, end)
                if entry.id == wanted[seq]:
                    found[entry.id] = entry
            if answered == len(wanted):
                return found

    def get(self, family, orig, zone=0):
        """The Entry of the connection whose original tuple is orig (a Tuple), or None."""
        seq = self.next_seq()
        self.sock.send(message(MSG_GET, NLM_F_REQUEST, _af(family), seq,
                               tuple_attr(CTA_TUPLE_ORIG, orig.src, orig.dst, orig.proto,
                                          orig.sport, orig.dport), zone_attr(zone)))
        for buf, start, end, kind, got in self._messages():
            if got != seq:
                continue
            if kind == NLMSG_ERROR:
                code = self._error(buf, start)
                if code == errno.ENOENT:
                    return None
                raise NetlinkError(code, f"conntrack lookup: {os.strerror(code)}")
            return decode(buf, start, end)

    def delete(self, family, orig, ident, zone=0):
        """Deletes the connection whose original tuple is orig if its id is still ident
        (the kernel compares). True if it did, False if there was none."""
        return self._ack(message(MSG_DELETE, NLM_F_REQUEST | NLM_F_ACK, _af(family),
                                 self.next_seq(),
                                 tuple_attr(CTA_TUPLE_ORIG, orig.src, orig.dst, orig.proto,
                                            orig.sport, orig.dport),
                                 be32(CTA_ID, ident), zone_attr(zone)), "delete")

    def create(self, data):
        """Sends CT_NEW messages (new_entry(), several at once, numbered by next_seq())
        and waits for their acknowledgements; raises the first refusal. For tests and
        benchmarks."""
        self.sock.send(data)
        pending = {struct.unpack_from("=I", data, position + 8)[0]
                   for position in _offsets(data)}
        for buf, start, _, kind, seq in self._messages():
            if kind == NLMSG_ERROR and seq in pending:
                pending.discard(seq)
                code = self._error(buf, start)
                if code:
                    raise NetlinkError(code, f"conntrack create: {os.strerror(code)}")
                if not pending:
                    return

    def _ack(self, request, what):
        seq = struct.unpack_from("=I", request, 8)[0]
        self.sock.send(request)
        for buf, start, _, kind, got in self._messages():
            if got == seq and kind == NLMSG_ERROR:
                code = self._error(buf, start)
                if code == 0:
                    return True
                if code == errno.ENOENT:
                    return False
                raise NetlinkError(code, f"conntrack {what}: {os.strerror(code)}")

    def count(self):
        """(entries, the table's maximum) of this namespace."""
        seq = self.next_seq()
        self.sock.send(message(MSG_GET_STATS, NLM_F_REQUEST, socket.AF_UNSPEC, seq))
        for buf, start, end, kind, got in self._messages():
            if got != seq:
                continue
            if kind == NLMSG_ERROR:
                code = self._error(buf, start)
                raise NetlinkError(code, f"conntrack statistics: {os.strerror(code)}")
            found = attrs(buf, start + NLMSG_HDRLEN + NFGEN_LEN, end)
            return tuple(_BE32.unpack_from(buf, found[kind][0])[0] if kind in found else None
                         for kind in (CTA_STATS_GLOBAL_ENTRIES, CTA_STATS_GLOBAL_MAX_ENTRIES))


def _af(family):
    return socket.AF_INET if family == 4 else socket.AF_INET6


def _offsets(data):
    position = 0
    while position + NLMSG_HDRLEN <= len(data):
        yield position
        position += (struct.unpack_from("=I", data, position)[0] + 3) & ~3
