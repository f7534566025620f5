"""The conntrack table of one network namespace over a ctnetlink socket: a dump read
in parts (scan), entries asked for by tuple (lookup, get), deleted under their id, made
(tests and benchmarks), counted. The messages are ctnetlink.py's."""
import errno
import os
import socket
import struct
from dataclasses import dataclass

from .ctnetlink import (
    ATTR,
    BE32,
    BE64,
    BUFFER,
    CTA_COUNTERS_BYTES,
    CTA_COUNTERS_ORIG,
    CTA_COUNTERS_REPLY,
    CTA_ID,
    CTA_MARK,
    CTA_STATS_GLOBAL_ENTRIES,
    CTA_STATS_GLOBAL_MAX_ENTRIES,
    CTA_STATUS,
    CTA_TIMESTAMP,
    CTA_TIMESTAMP_START,
    CTA_TUPLE_ORIG,
    CTA_ZONE,
    HEADER,
    IPS_DST_NAT,
    IPS_HW_OFFLOAD,
    IPS_OFFLOAD,
    IPS_SEQ_ADJUST,
    IPS_SRC_NAT,
    MSG_DELETE,
    MSG_GET,
    MSG_GET_STATS,
    NETLINK_NETFILTER,
    NFGEN_LEN,
    NLA_F_NESTED,
    NLA_TYPE_MASK,
    NLM_F_ACK,
    NLM_F_DUMP,
    NLM_F_REQUEST,
    NLMSG_DONE,
    NLMSG_ERROR,
    NLMSG_HDRLEN,
    TIMEOUT,
    NetlinkError,
    attrs,
    bytes_at,
    decode,
    in_netns,
    message,
    tuple_attr,
    u32_attr,
    zone_attr,
)


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
_COUNTERS_HEAD = ATTR.pack(28, CTA_COUNTERS_ORIG | NLA_F_NESTED) + ATTR.pack(12, 1)
_REPLY_HEAD = ATTR.pack(28, CTA_COUNTERS_REPLY | NLA_F_NESTED) + ATTR.pack(12, 1)


class Stats:
    """What a scan counts of the whole table."""

    def __init__(self):
        self.entries = self.uncounted = self.offloaded = self.nat = self.seqadj = 0

    def as_dict(self):
        return dict(vars(self))


def _walk(buf, start, end):
    """Positions of the attributes a Brief needs (_SCANNED's order; 0: absent)."""
    unpack, wanted = ATTR.unpack_from, _SCANNED.get
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
    be32 = BE32.unpack_from
    first = start + NLMSG_HDRLEN + NFGEN_LEN
    key = bytes(buf[first:first + ((ATTR.unpack_from(buf, first)[0] + 3) & ~3)])
    if spans[5]:
        key += bytes(buf[spans[5]:spans[5] + 8])
    start_ns = 0
    if spans[6]:
        length = ATTR.unpack_from(buf, spans[6])[0]
        stamp = attrs(buf, spans[6] + 4, spans[6] + length).get(CTA_TIMESTAMP_START)
        start_ns = BE64.unpack_from(buf, stamp[0])[0] if stamp else 0
    return Brief(be32(buf, spans[2] + 4)[0] if spans[2] else 0, buf[start + NLMSG_HDRLEN], key,
                 orig, reply, start_ns, be32(buf, spans[3] + 4)[0] if spans[3] else 0,
                 be32(buf, spans[4] + 4)[0] if spans[4] else 0)


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
        unpack = HEADER.unpack_from
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
        header, unpack = HEADER.unpack_from, ATTR.unpack_from
        be32, be64 = BE32.unpack_from, BE64.unpack_from
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
                        orig, reply = bytes_at(buf, spans[0]), bytes_at(buf, spans[1])
                        if orig + reply >= min_bytes:
                            yield _brief(buf, start, end, spans, orig, reply)
                    else:
                        stats.uncounted += 1
                start += (length + 3) & ~3
            yield None

    def entries(self, read=decode):
        """Every entry, decoded whole (tests, and small tables only); read: as lookup's."""
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
            found.append(read(buf, start, end))

    def lookup(self, briefs, read=decode):
        """{id: Entry} of the entries still there under the same id, asked for by key
        all at once (one send, the kernel answers each with the entry or ENOENT). read:
        how an answer is read (anything with an id: flow export's reads less)."""
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
                entry = read(buf, start, end)
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
                                 u32_attr(CTA_ID, ident), zone_attr(zone)), "delete")

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
            return tuple(BE32.unpack_from(buf, found[kind][0])[0] if kind in found else None
                         for kind in (CTA_STATS_GLOBAL_ENTRIES, CTA_STATS_GLOBAL_MAX_ENTRIES))


def _af(family):
    return socket.AF_INET if family == 4 else socket.AF_INET6


def _offsets(data):
    position = 0
    while position + NLMSG_HDRLEN <= len(data):
        yield position
        position += (struct.unpack_from("=I", data, position)[0] + 3) & ~3
