"""Addresses and ports as integer intervals: parsing one entry, merging many.

nft interval sets refuse overlapping elements, and merging here (not with nft's
auto-merge) keeps the rendered text a pure function of the policy.
"""
import ipaddress

from tusklib.names import PORT_MAX, PORT_MIN

from .errors import quoted
from .model import Interval

FAMILY_BITS = {"ipv4": 32, "ipv6": 128}


class OutOfRange(ValueError):
    """A well-formed number outside its limits (a RANGE error, not a SCHEMA one)."""


def parse_address(text):
    """One address-set entry -> (family, Interval, canonical text). Raises ValueError
    with a reason an operator can act on."""
    if not isinstance(text, str):
        raise ValueError(f"{quoted(text)} is not text; write addresses as strings")
    text = text.strip()
    if "%" in text:
        raise ValueError(f"{quoted(text)} has a scope (%...); a zone's interfaces already say "
                         "where")
    if "-" in text:
        first, _, last = text.partition("-")
        try:
            low = ipaddress.ip_address(first.strip())
            high = ipaddress.ip_address(last.strip())
        except ValueError:
            raise ValueError(f"{quoted(text)} is not a valid address range "
                             "(a.b.c.d-a.b.c.e)") from None
        if low.version != high.version:
            raise ValueError(f"{quoted(text)} mixes IPv4 and IPv6")
        if int(low) > int(high):
            raise ValueError(f"{quoted(text)} starts after it ends")
        family = f"ipv{low.version}"
        return family, Interval(int(low), int(high)), f"{low}-{high}"
    if "/" in text:
        try:
            net = ipaddress.ip_network(text, strict=True)
        except ValueError as exc:
            if "host bits set" in str(exc):
                loose = ipaddress.ip_network(text, strict=False)
                raise ValueError(f"{quoted(text)} has host bits set; the prefix is "
                                 f"{loose}") from None
            raise ValueError(f"{quoted(text)} is not a valid prefix") from None
        family = f"ipv{net.version}"
        return family, Interval(int(net.network_address), int(net.broadcast_address)), str(net)
    try:
        addr = ipaddress.ip_address(text)
    except ValueError:
        raise ValueError(f"{quoted(text)} is not a valid IPv4 or IPv6 address") from None
    return f"ipv{addr.version}", Interval(int(addr), int(addr)), str(addr)


def parse_port(value):
    """A port (int or "n") or a range ("a-b") -> Interval; raises ValueError."""
    if isinstance(value, bool):
        raise ValueError(f"{quoted(value)} is not a port")
    if isinstance(value, int):
        low = high = value
    elif isinstance(value, str) and value.strip():
        first, sep, last = value.strip().partition("-")
        try:
            low = int(first)
            high = int(last) if sep else low
        except ValueError:
            raise ValueError(f"{quoted(value)} is not a port or a port range (a-b)") from None
    else:
        raise ValueError(f"{quoted(value)} is not a port or a port range (a-b)")
    for port in (low, high):
        if port < PORT_MIN:
            raise OutOfRange(f"{port} is below {PORT_MIN}")
        if port > PORT_MAX:
            raise OutOfRange(f"{port} is above {PORT_MAX}")
    if low > high:
        raise ValueError(f"{quoted(value)} starts after it ends")
    return Interval(low, high)


def merge(intervals):
    """Sorted, non-overlapping, non-adjacent intervals covering the same integers."""
    merged = []
    for iv in sorted(intervals, key=lambda i: (i.low, i.high)):
        if merged and iv.low <= merged[-1].high + 1:
            if iv.high > merged[-1].high:
                merged[-1] = Interval(merged[-1].low, iv.high)
        else:
            merged.append(iv)
    return tuple(merged)


def address_text(family, iv):
    """nft element text for an address interval: host, prefix or range."""
    make = ipaddress.IPv4Address if family == "ipv4" else ipaddress.IPv6Address
    if iv.low == iv.high:
        return str(make(iv.low))
    size = iv.high - iv.low + 1
    if size & (size - 1) == 0 and iv.low % size == 0:
        return f"{make(iv.low)}/{FAMILY_BITS[family] - size.bit_length() + 1}"
    return f"{make(iv.low)}-{make(iv.high)}"


def port_text(iv):
    return str(iv.low) if iv.low == iv.high else f"{iv.low}-{iv.high}"


def literal(elements):
    """nft text of one element as itself, several as an anonymous set."""
    return elements[0] if len(elements) == 1 else f"{{ {', '.join(elements)} }}"
