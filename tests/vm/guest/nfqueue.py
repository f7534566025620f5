"""A userspace payload mangler on an nfqueue, as an application-layer gateway in user
space rewrites a connection: it lengthens a marker in the first segment of each
connection that carries it and hands the segment back together with its conntrack
entry (NFQA_CT), so that the kernel moves the connection's sequence numbers with
seqadj (nfqnl_recv_verdict() -> nf_ct_tcp_seqadj_set()). Raw nfnetlink: the Python
bindings of libnetfilter_queue cannot send NFQA_CT. IPv4, and IPv6 without extension
headers.
"""
import select
import socket
import struct
import threading

from inet import checksum, tcp4_checksum, tcp6_checksum
from pcaps import netns

NETLINK_NETFILTER = 12
NFNL_SUBSYS_QUEUE = 3
NFQNL_MSG_PACKET, NFQNL_MSG_VERDICT, NFQNL_MSG_CONFIG = 0, 1, 2
NFQA_CFG_CMD, NFQA_CFG_PARAMS = 1, 2
NFQNL_CFG_CMD_BIND = 1
NFQNL_COPY_PACKET = 2
NFQA_PACKET_HDR, NFQA_VERDICT_HDR, NFQA_PAYLOAD, NFQA_CT = 1, 2, 10, 11
NLA_F_NESTED, NLA_TYPE_MASK = 0x8000, 0x3fff
NLM_F_REQUEST, NLM_F_ACK = 1, 4
NLMSG_ERROR = 2
NF_ACCEPT = 1


def _attr(kind, data):
    length = 4 + len(data)
    return struct.pack("=HH", length, kind) + data + bytes(-length % 4)


def _attrs(data):
    found, offset = {}, 0
    while offset + 4 <= len(data):
        length, kind = struct.unpack_from("=HH", data, offset)
        if length < 4:
            break
        found[kind & NLA_TYPE_MASK] = data[offset + 4:offset + length]
        offset += (length + 3) & ~3
    return found


def rewrite(packet, marker, replacement):
    """The IPv4 or IPv6 TCP packet with the first marker in its payload replaced,
    lengths and checksums fixed; None if the payload has no marker."""
    version = packet[0] >> 4
    ihl = (packet[0] & 0x0f) * 4 if version == 4 else 40
    doff = (packet[ihl + 12] >> 4) * 4
    payload = packet[ihl + doff:]
    if marker not in payload:
        return None
    payload = payload.replace(marker, replacement, 1)
    ip = bytearray(packet[:ihl])
    tcp = bytearray(packet[ihl:ihl + doff]) + payload
    struct.pack_into("!H", tcp, 16, 0)
    if version == 4:
        struct.pack_into("!H", ip, 2, ihl + len(tcp))
        struct.pack_into("!H", ip, 10, 0)
        struct.pack_into("!H", ip, 10, checksum(bytes(ip)))
        summed = tcp4_checksum(bytes(ip[12:16]), bytes(ip[16:20]), bytes(tcp))
    else:
        struct.pack_into("!H", ip, 4, len(tcp))
        summed = tcp6_checksum(bytes(ip[8:24]), bytes(ip[24:40]), bytes(tcp))
    struct.pack_into("!H", tcp, 16, summed)
    return bytes(ip) + bytes(tcp)


class Mangler:
    """Binds nfqueue `queue` in namespace ns and serves it in a thread until close()."""

    def __init__(self, ns, queue, marker, replacement):
        self.queue, self.marker, self.replacement = queue, marker, replacement
        self.mangled = []           # (source address, source port) of rewritten segments
        self.seen = 0
        self.error = None
        self._seq = 0
        with netns(ns):
            self.sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_NETFILTER)
        self.sock.bind((0, 0))
        self._request(NFQNL_MSG_CONFIG,
                      _attr(NFQA_CFG_CMD, struct.pack("!BxH", NFQNL_CFG_CMD_BIND, 0)))
        self._request(NFQNL_MSG_CONFIG,
                      _attr(NFQA_CFG_PARAMS, struct.pack("!IB", 0xffff, NFQNL_COPY_PACKET)))
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _send(self, msg_type, payload, flags=NLM_F_REQUEST):
        self._seq += 1
        body = struct.pack("!BBH", socket.AF_UNSPEC, 0, self.queue) + payload
        header = struct.pack("=IHHII", 16 + len(body), (NFNL_SUBSYS_QUEUE << 8) | msg_type,
                             flags, self._seq, 0)
        self.sock.send(header + body)

    def _request(self, msg_type, payload):
        self._send(msg_type, payload, NLM_F_REQUEST | NLM_F_ACK)
        reply = self.sock.recv(65536)
        _, kind, _, _, _ = struct.unpack_from("=IHHII", reply)
        error = struct.unpack_from("=i", reply, 16)[0] if kind == NLMSG_ERROR else 0
        if error:
            raise OSError(-error, f"nfqueue configuration refused: {-error}")

    def _serve(self):
        try:
            while not self._stop.is_set():
                ready, _, _ = select.select([self.sock], [], [], 0.1)
                if ready:
                    self._handle(self.sock.recv(262144))
        except Exception as exc:        # reported by close()
            self.error = exc

    def _handle(self, data):
        offset = 0
        while offset + 16 <= len(data):
            length, kind = struct.unpack_from("=IH", data, offset)
            if kind & 0xff == NFQNL_MSG_PACKET and kind >> 8 == NFNL_SUBSYS_QUEUE:
                attrs = _attrs(data[offset + 20:offset + length])
                packet_id = struct.unpack("!I", attrs[NFQA_PACKET_HDR][:4])[0]
                self._verdict(packet_id, attrs[NFQA_PAYLOAD])
            offset += (length + 3) & ~3

    def _verdict(self, packet_id, packet):
        self.seen += 1
        if packet[0] >> 4 == 4:
            ihl = (packet[0] & 0x0f) * 4
            source = socket.inet_ntop(socket.AF_INET, packet[12:16])
        else:
            ihl, source = 40, socket.inet_ntop(socket.AF_INET6, packet[8:24])
        flow = (source, struct.unpack_from("!H", packet, ihl)[0])
        verdict = _attr(NFQA_VERDICT_HDR, struct.pack("!II", NF_ACCEPT, packet_id))
        rewritten = None if flow in self.mangled else rewrite(packet, self.marker,
                                                               self.replacement)
        if rewritten is not None:
            self.mangled.append(flow)
            # NFQA_CT (empty): apply the length change to the connection's seqadj
            verdict += _attr(NFQA_PAYLOAD, rewritten) + _attr(NFQA_CT | NLA_F_NESTED, b"")
        self._send(NFQNL_MSG_VERDICT, verdict)

    def close(self):
        self._stop.set()
        self._thread.join(5)
        self.sock.close()
        if self.error is not None:
            raise AssertionError(f"the nfqueue mangler failed: {self.error!r}")
