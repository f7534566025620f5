"""The messages of ctnetlink (NETLINK_NETFILTER, subsystem CTNETLINK) with the standard
library only: requests packed with struct, replies walked in place, an entry decoded
whole (conntrack.py has the socket and the scan).

Why not a library: measured on 100 000 entries (docs/FLOWS.md), pyroute2 takes 21 s of
CPU to dump them (it builds an object per attribute), conntrack(8) 0.8 s plus the
parsing of its text and it prints no sequence adjustment (CTA_SEQ_ADJ_*), while the
kernel itself spends 0.35 s serialising the dump. Walking the replies here costs about
as much as conntrack's own parsing, decodes everything Live flows shows, and the same
few constants serve the dump, the lookup of one entry and its deletion.

The kernel's constants are those of <linux/netfilter/nfnetlink_conntrack.h>,
<linux/netfilter/nf_conntrack_common.h> and <linux/netlink.h>.
"""
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

HEADER = struct.Struct("=IHHII")      # nlmsghdr
NFGEN = struct.Struct("=BBH")         # nfgenmsg
ATTR = struct.Struct("=HH")           # nlattr
BE16, BE32, BE64 = struct.Struct("!H"), struct.Struct("!I"), struct.Struct("!Q")
SIGNED32 = struct.Struct("!i")
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
    return ATTR.pack(length, kind) + payload + b"\0" * (-length % 4)


def nested(kind, *attrs):
    return attr(kind | NLA_F_NESTED, b"".join(attrs))


def u32_attr(kind, value):
    return attr(kind, BE32.pack(value & 0xFFFFFFFF))


def tuple_attr(kind, src, dst, proto, sport=0, dport=0):
    """CTA_TUPLE_ORIG or _REPLY: addresses (ipaddress objects or text), the protocol
    number and, for PORT_PROTOCOLS, the ports."""
    src, dst = ipaddress.ip_address(src), ipaddress.ip_address(dst)
    v4 = src.version == 4
    ip = nested(CTA_TUPLE_IP, attr(CTA_IP_V4_SRC if v4 else CTA_IP_V6_SRC, src.packed),
                attr(CTA_IP_V4_DST if v4 else CTA_IP_V6_DST, dst.packed))
    parts = [attr(CTA_PROTO_NUM, bytes([proto]))]
    if proto in PORT_PROTOCOLS:
        parts += [attr(CTA_PROTO_SRC_PORT, BE16.pack(sport)),
                  attr(CTA_PROTO_DST_PORT, BE16.pack(dport))]
    return nested(kind, ip, nested(CTA_TUPLE_PROTO, *parts))


def zone_attr(zone):
    return attr(CTA_ZONE, BE16.pack(zone)) if zone else b""


def message(kind, flags, family, seq, *attrs):
    body = NFGEN.pack(family, 0, 0) + b"".join(attrs)
    return HEADER.pack(NLMSG_HDRLEN + len(body), (NFNL_SUBSYS_CTNETLINK << 8) | kind,
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
             u32_attr(CTA_STATUS, IPS_ASSURED | IPS_CONFIRMED), u32_attr(CTA_TIMEOUT, timeout),
             u32_attr(CTA_MARK, mark), zone_attr(zone)]
    if orig.proto == 6:
        parts.append(nested(CTA_PROTOINFO, nested(CTA_PROTOINFO_TCP, attr(
            CTA_PROTOINFO_TCP_STATE, bytes([TCP_STATES.index("ESTABLISHED")])))))
    for direction, kind in (("orig", CTA_SEQ_ADJ_ORIG), ("reply", CTA_SEQ_ADJ_REPLY)):
        if seqadj and direction in seqadj:
            position, before, after = seqadj[direction]
            parts.append(nested(kind, u32_attr(CTA_SEQADJ_CORRECTION_POS, position),
                                u32_attr(CTA_SEQADJ_OFFSET_BEFORE, before),
                                u32_attr(CTA_SEQADJ_OFFSET_AFTER, after)))
    family = socket.AF_INET if ipaddress.ip_address(orig.src).version == 4 else socket.AF_INET6
    return message(MSG_NEW, NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL, family,
                   seq, *parts)


# -- walking replies --------------------------------------------------------------------

def attrs(buf, start, end):
    """{type: (payload start, payload end)} of the attributes in buf[start:end]."""
    found = {}
    unpack = ATTR.unpack_from
    while start + 4 <= end:
        length, kind = unpack(buf, start)
        if length < 4:
            break
        found[kind & NLA_TYPE_MASK] = (start + 4, start + length)
        start += (length + 3) & ~3
    return found


def counters(buf, span):
    """(packets, bytes) of a CTA_COUNTERS_* attribute."""
    inner = attrs(buf, *span)
    packets, size = inner.get(CTA_COUNTERS_PACKETS), inner.get(CTA_COUNTERS_BYTES)
    return (BE64.unpack_from(buf, packets[0])[0] if packets else 0,
            BE64.unpack_from(buf, size[0])[0] if size else 0)


def bytes_at(buf, position):
    """The byte count of the CTA_COUNTERS_* attribute at position."""
    return counters(buf, (position + 4, position + ATTR.unpack_from(buf, position)[0]))[1]


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
        ports = (BE16.unpack_from(buf, proto[CTA_PROTO_SRC_PORT][0])[0],
                 BE16.unpack_from(buf, proto[CTA_PROTO_DST_PORT][0])[0])
    return Tuple(str(ipaddress.ip_address(bytes(buf[src[0]:src[1]]))),
                 str(ipaddress.ip_address(bytes(buf[dst[0]:dst[1]]))), number, *ports)


def _seqadj(buf, span):
    inner = attrs(buf, *span)
    value = {}
    for key, kind in (("position", CTA_SEQADJ_CORRECTION_POS),
                      ("before", CTA_SEQADJ_OFFSET_BEFORE), ("after", CTA_SEQADJ_OFFSET_AFTER)):
        if kind in inner:
            value[key] = (SIGNED32 if key != "position" else BE32).unpack_from(
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

    def be(kind, fmt=BE32, default=0):
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
        start_ns = BE64.unpack_from(buf, stamp[0])[0] if stamp else 0
    counted = CTA_COUNTERS_ORIG in found
    orig = counters(buf, found[CTA_COUNTERS_ORIG]) if counted else (0, 0)
    reply = counters(buf, found[CTA_COUNTERS_REPLY]) if counted else (0, 0)
    return Entry(
        id=be(CTA_ID), family=FAMILIES.get(family, family),
        orig=_tuple(buf, found[CTA_TUPLE_ORIG]), reply=_tuple(buf, found[CTA_TUPLE_REPLY]),
        zone=be(CTA_ZONE, BE16), status=be(CTA_STATUS), mark=be(CTA_MARK),
        timeout=be(CTA_TIMEOUT), packets=(orig[0], reply[0]),
        bytes=(orig[1], reply[1]) if counted else None, start_ns=start_ns,
        tcp_state=tcp_state, helper=helper,
        seqadj_orig=_seqadj(buf, found[CTA_SEQ_ADJ_ORIG]) if CTA_SEQ_ADJ_ORIG in found else {},
        seqadj_reply=_seqadj(buf, found[CTA_SEQ_ADJ_REPLY])
        if CTA_SEQ_ADJ_REPLY in found else {})
