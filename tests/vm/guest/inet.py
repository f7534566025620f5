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
