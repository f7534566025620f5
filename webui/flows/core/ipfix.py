"""Flow records on the wire: IPFIX (RFC 7011) and NetFlow version 9 (RFC 3954) messages
of one fixed pair of templates - a connection of IPv4 and one of IPv6 - packed with
struct (plain Python).

Why written here and not taken from a package (docs/MONITORING.md, "Flow export", with
what make bench-flowexport measured): ulogd2's NFCT input with its IPFIX output (Debian's
2.0.8) sends a record only when a connection ends, both directions summed into one
32-bit count (an elephant wraps at 4 GiB), with zero start and end times, IPv4 only, no
NAT and no NetFlow v9, and holds records until a 512-byte message is full (a lone
elephant's record was not sent at all); softflowd, pmacct and fprobe read packets
(libpcap), not conntrack: they pay for every packet of an elephant, see a NATed
connection as two unrelated flows, and know nothing of a class or the fast path. What a
record needs is in conntrack already (the exporter, exporter.py); what is left is the
wire format, and that is a header, a template and fixed-size records.

A record is one connection of conntrack, both directions in one record:

    flowStartMilliseconds (152) u64   flowEndMilliseconds (153) u64
    sourceIPv4Address (8)             destinationIPv4Address (12)      (IPv6: 27, 28)
    sourceTransportPort (7) u16       destinationTransportPort (11) u16
    protocolIdentifier (4) u8         flowEndReason (136) u8
    octetDeltaCount (1) u64           packetDeltaCount (2) u64         initiator -> responder
    postOctetDeltaCount (23) u64      postPacketDeltaCount (24) u64    responder -> initiator
    postNATSourceIPv4Address (225)    postNATDestinationIPv4Address (226)   (IPv6: 281, 282)
    postNAPTSourceTransportPort (227) postNAPTDestinationTransportPort (228)

The responder's direction rides in IE 23 and 24 because nfdump, SiLK's and pmacct's
readers take those as a record's "out" bytes and packets (NetFlow v9's OUT_BYTES and
OUT_PKTS); the counts are deltas since the connection's previous record. The
observation domain (IPFIX) or source id (v9) of a message is the upper half of its
connections' ct mark (tusklib/names.py): bit 0 the fast path, bits 1-15 the class's
ordinal in the policy - a collector tells classes apart by domain.
"""
import ipaddress
import struct
from dataclasses import dataclass

IPFIX_VERSION, V9_VERSION = 10, 9
IPFIX_TEMPLATE_SET, V9_TEMPLATE_SET = 2, 0
TEMPLATE_V4, TEMPLATE_V6 = 256, 257
MESSAGE_MAX = 1400          # bytes of one message: one UDP datagram below a 1500-byte MTU

# flowEndReason (IANA "flowEndReason Value")
END_IDLE, END_ACTIVE, END_OF_FLOW, END_FORCED = 1, 2, 3, 4

# (information element, length) of each template, in record order
_HEAD = ((152, 8), (153, 8))
_TAIL = ((7, 2), (11, 2), (4, 1), (136, 1), (1, 8), (2, 8), (23, 8), (24, 8))
_NAT_PORTS = ((227, 2), (228, 2))
FIELDS = {
    TEMPLATE_V4: _HEAD + ((8, 4), (12, 4)) + _TAIL + ((225, 4), (226, 4)) + _NAT_PORTS,
    TEMPLATE_V6: _HEAD + ((27, 16), (28, 16)) + _TAIL + ((281, 16), (282, 16)) + _NAT_PORTS,
}
_RECORD = {
    TEMPLATE_V4: struct.Struct("!QQ4s4sHHBBQQQQ4s4sHH"),
    TEMPLATE_V6: struct.Struct("!QQ16s16sHHBBQQQQ16s16sHH"),
}
RECORD_SIZE = {template: layout.size for template, layout in _RECORD.items()}
_IPFIX_HEADER = struct.Struct("!HHIII")     # version, length, export time, sequence, domain
_V9_HEADER = struct.Struct("!HHIIII")       # version, count, uptime, secs, sequence, source
_SET = struct.Struct("!HH")


@dataclass(frozen=True)
class Record:
    """One connection's record (addresses as text or raw bytes): addresses as the
    connection's initiator sent them (src, dst, ports) and as they left the box (nat_*:
    the reply tuple reversed), the deltas of both directions since its previous
    record."""

    start_ms: int
    end_ms: int
    src: str
    dst: str
    sport: int
    dport: int
    proto: int
    reason: int
    octets: int
    packets: int
    reply_octets: int
    reply_packets: int
    nat_src: str
    nat_dst: str
    nat_sport: int
    nat_dport: int

    @property
    def template(self):
        return TEMPLATE_V6 if len(_raw(self.src)) == 16 else TEMPLATE_V4

    def pack(self):
        return _RECORD[self.template].pack(
            self.start_ms, self.end_ms, _raw(self.src), _raw(self.dst), self.sport,
            self.dport, self.proto, self.reason, _u64(self.octets), _u64(self.packets),
            _u64(self.reply_octets), _u64(self.reply_packets), _raw(self.nat_src),
            _raw(self.nat_dst), self.nat_sport, self.nat_dport)


def _raw(address):
    """An address as the record carries it: raw bytes as given (4 or 16, the exporter's),
    or text made so."""
    return address if isinstance(address, bytes) else ipaddress.ip_address(address).packed


def _u64(value):
    return min(max(value, 0), (1 << 64) - 1)


def template_set(version):
    """The template set (IPFIX) or template FlowSet (v9) of both templates."""
    body = b""
    for template, fields in FIELDS.items():
        body += struct.pack("!HH", template, len(fields))
        body += b"".join(struct.pack("!HH", element, length) for element, length in fields)
    kind = IPFIX_TEMPLATE_SET if version == IPFIX_VERSION else V9_TEMPLATE_SET
    return _SET.pack(kind, _SET.size + len(body)) + body


def data_sets(records, version):
    """[(template, set bytes, count)]: records grouped by template, each group one set
    (v9: padded to four bytes)."""
    found = []
    for template in FIELDS:
        packed = [r.pack() for r in records if r.template == template]
        if not packed:
            continue
        body = b"".join(packed)
        padding = b"\0" * (-len(body) % 4) if version == V9_VERSION else b""
        found.append((template, _SET.pack(template, _SET.size + len(body) + len(padding))
                      + body + padding, len(packed)))
    return found


class Exporter:
    """The messages of one exporting process to one collector (a transport session):
    its sequence numbers, and when each observation domain last had the templates.
    version: 10 (IPFIX) or 9; refresh: seconds after which the templates go again (over
    UDP a collector that started later learns them then)."""

    def __init__(self, version, refresh=30.0, boot=0.0):
        if version not in (IPFIX_VERSION, V9_VERSION):
            raise ValueError(f"version {version}: 9 or 10")
        self.version, self.refresh, self.boot = version, refresh, boot
        self.sequence = {}       # domain -> IPFIX: records sent; v9: messages sent
        self.templates_at = {}   # domain -> when its templates last went

    def messages(self, domain, records, now):
        """The messages (bytes) that carry records (a list) for observation domain `domain` at
        time now (seconds since the epoch), each within MESSAGE_MAX, templates first
        when they are due."""
        out = []
        due = now - self.templates_at.get(domain, -1e18) >= self.refresh
        templates = template_set(self.version) if due else b""
        if due:
            self.templates_at[domain] = now
        header = _IPFIX_HEADER.size if self.version == IPFIX_VERSION else _V9_HEADER.size
        first, count = 0, len(records)
        while first < count or templates:
            room = MESSAGE_MAX - header - len(templates) - 2 * _SET.size - 4
            last, size = first, 0
            while last < count and size + RECORD_SIZE[records[last].template] <= room:
                size += RECORD_SIZE[records[last].template]
                last += 1
            out.append(self._message(domain, templates,
                                     data_sets(records[first:last], self.version), now))
            first, templates = last, b""
        return out

    def _message(self, domain, templates, sets, now):
        body = templates + b"".join(data for _, data, _ in sets)
        count = sum(n for _, _, n in sets)
        sequence = self.sequence.get(domain, 0)
        if self.version == IPFIX_VERSION:
            self.sequence[domain] = (sequence + count) & 0xFFFFFFFF
            return _IPFIX_HEADER.pack(IPFIX_VERSION, _IPFIX_HEADER.size + len(body),
                                      int(now), sequence, domain) + body
        self.sequence[domain] = (sequence + 1) & 0xFFFFFFFF
        records = count + (len(FIELDS) if templates else 0)
        uptime = int((now - self.boot) * 1000) & 0xFFFFFFFF
        return _V9_HEADER.pack(V9_VERSION, records, uptime, int(now), sequence,
                               domain) + body
