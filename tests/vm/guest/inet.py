"""Checksums for packets the guest scenarios build or rewrite by hand (RFC 1071)."""
import socket
import struct


def checksum(data):
    """The Internet checksum of data."""
    if len(data) % 2:
        data += b"\0"
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while total >> 16:
        total = (total & 0xffff) + (total >> 16)
    return ~total & 0xffff


def tcp4_checksum(src, dst, tcp):
    """The checksum of an IPv4 TCP segment (bytes, with a zero checksum field) from
    src to dst (4-byte addresses)."""
    return checksum(src + dst + struct.pack("!BBH", 0, socket.IPPROTO_TCP, len(tcp)) + tcp)


def tcp6_checksum(src, dst, tcp):
    """The checksum of an IPv6 TCP segment from src to dst (16-byte addresses)."""
    return checksum(src + dst + struct.pack("!I3xB", len(tcp), socket.IPPROTO_TCP) + tcp)


def tcp_packet(family, src, dst, sport, dport, seq, ack, flags, options=b"", window=502,
               ipid=0):
    """An IPv4 (don't fragment, TTL 64, this IP ID) or IPv6 (hop limit 64) packet with
    a TCP segment without payload, checksums done: for a raw socket (IPPROTO_RAW).
    src and dst are addresses in text; options a multiple of 4 bytes."""
    assert len(options) % 4 == 0, options
    tcp = bytearray(struct.pack("!HHIIBBHHH", sport, dport, seq % 2**32, ack % 2**32,
                                (5 + len(options) // 4) << 4, flags, window, 0, 0) + options)
    s, d = socket.inet_pton(family, src), socket.inet_pton(family, dst)
    if family == socket.AF_INET:
        struct.pack_into("!H", tcp, 16, tcp4_checksum(s, d, bytes(tcp)))
        ip = bytearray(struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(tcp), ipid, 0x4000, 64,
                                   socket.IPPROTO_TCP, 0, s, d))
        struct.pack_into("!H", ip, 10, checksum(bytes(ip)))
        return bytes(ip) + bytes(tcp)
    struct.pack_into("!H", tcp, 16, tcp6_checksum(s, d, bytes(tcp)))
    return struct.pack("!IHBB16s16s", 6 << 28, len(tcp), socket.IPPROTO_TCP, 64, s, d) \
        + bytes(tcp)
