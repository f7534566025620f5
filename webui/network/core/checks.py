"""The checks of one value: each returns the reason it is wrong, or None. The model's
validator, the web forms and the console menu all say the same thing about the same value.
"""
import ipaddress
import os
import re

from policy.core.constants import IFNAME_MAX, IFNAME_PATTERN

ZONEINFO = "/usr/share/zoneinfo"
HOSTNAME_MAX = 253
LABEL = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$")
TIMEZONE = re.compile(r"^[A-Za-z0-9_+-]+(/[A-Za-z0-9_+-]+)*$")


def interface_problem(name):
    if not name:
        return "must not be empty"
    if len(name) > IFNAME_MAX:
        return f"{name!r} is {len(name)} characters long; Linux allows at most {IFNAME_MAX}"
    if name in (".", ".."):
        return f"{name!r} is not allowed as an interface name by Linux"
    for char, what in (("/", "'/'"), (":", "':'")):
        if char in name:
            return f"{name!r} contains {what}, which Linux does not allow in an interface name"
    if any(c.isspace() for c in name):
        return f"{name!r} contains white space, which Linux does not allow in an interface name"
    if name == "lo":
        return "the loopback interface cannot be configured"
    if not re.match(IFNAME_PATTERN, name):
        return (f"{name!r} has characters other than letters, digits and _ . @ + - "
                "(the interface names policy zones accept)")
    return None


def cidr(value):
    """(ip_interface, None) or (None, reason) for an address with its prefix length."""
    if not isinstance(value, str):
        return None, "must be a string such as 192.0.2.1/24"
    if "%" in value:
        return None, f"{value!r} has a zone (%...); give the address without it"
    address, slash, prefix = value.partition("/")
    if not slash:
        return None, (f"{value!r} has no prefix length; write it with one, e.g. "
                      f"{value}/{'64' if ':' in value else '24'}")
    if not prefix.isdigit():
        return None, f"{value!r}: the prefix length {prefix!r} must be a number (e.g. /24)"
    try:
        iface = ipaddress.ip_interface(value)
    except ValueError:
        return None, f"{value!r} is not an IPv4 or IPv6 address with a prefix length"
    return iface, None


def unusable(ip):
    """What kind of address ip is, when no interface or server can have it; else None."""
    for test, what in (("is_unspecified", "the unspecified address"),
                       ("is_loopback", "a loopback address"),
                       ("is_multicast", "a multicast address")):
        if getattr(ip, test):
            return what
    if ip.version == 4 and ip == ipaddress.IPv4Address("255.255.255.255"):
        return "the broadcast address"
    return None


def address_problem(value):
    """An interface's own static address with its prefix: "192.0.2.1/24"."""
    iface, reason = cidr(value)
    if reason:
        return reason
    what = unusable(iface.ip)
    if what:
        return f"{value!r} is {what}, not one an interface can have"
    net = iface.network
    if net.prefixlen == 0:
        return f"{value!r}: a /0 prefix is not a subnet"
    small = 31 if iface.version == 4 else 127
    if net.prefixlen < small:
        example = f"{net.network_address + 1}/{net.prefixlen}"
        if iface.ip == net.network_address:
            kind = "network address" if iface.version == 4 else "subnet-router anycast address"
            return f"{value!r} is the {kind} of {net}; give the interface's own address, " \
                   f"e.g. {example}"
        if iface.version == 4 and iface.ip == net.broadcast_address:
            return f"{value!r} is the broadcast address of {net}; give the interface's own " \
                   f"address, e.g. {example}"
    return None


def ip_problem(value, what="an IP address"):
    """A plain address (a gateway, a DNS server): no prefix length."""
    if not isinstance(value, str):
        return f"must be {what} written as a string"
    try:
        ip = ipaddress.ip_address(value)
    except ValueError:
        return f"{value!r} is not {what}" + (" (write it without a prefix length)"
                                             if "/" in value else "")
    kind = unusable(ip)
    return f"{value} is {kind}" if kind else None


def gateway_problem(gateway, address):
    """A gateway on the subnet of a valid static address/prefix (the console's question)."""
    reason = ip_problem(gateway)
    if reason:
        return reason
    ip, iface = ipaddress.ip_address(gateway), ipaddress.ip_interface(address)
    if ip.version != iface.version:
        return f"{gateway} is IPv{ip.version} but the address {address} is IPv{iface.version}"
    if ip == iface.ip:
        return f"{gateway} is the interface's own address"
    if ip.version == 6 and ip.is_link_local:
        return None
    if ip not in iface.network:
        return f"{gateway} is outside the subnet {iface.network} of the address {address}"
    return None


def destination_problem(value):
    """A route's destination: "default" or a network prefix."""
    if value == "default":
        return None
    if not isinstance(value, str) or "/" not in value:
        return (f"{value!r} is neither \"default\" nor a prefix such as 10.20.0.0/16")
    try:
        net = ipaddress.ip_network(value)
    except ValueError:
        try:
            host = ipaddress.ip_interface(value)
        except ValueError:
            return f"{value!r} is not a network prefix such as 10.20.0.0/16"
        return (f"{value!r} has host bits set: the network is {host.network} "
                f"(write that)")
    if net.prefixlen == 0:
        return f"{value!r} is every address: write \"default\""
    if net.network_address.is_multicast or net.network_address.is_loopback:
        return f"{value!r} is a multicast or loopback network; it cannot be routed"
    return None


def hostname_problem(name):
    if not isinstance(name, str) or not name:
        return "must not be empty (e.g. tusk or fw1.example.net)"
    if len(name) > HOSTNAME_MAX:
        return f"is {len(name)} characters long; at most {HOSTNAME_MAX}"
    for label in name.split("."):
        if not LABEL.match(label):
            return (f"{label!r} in {name!r}: each dot-separated part has 1 to 63 letters, "
                    "digits and hyphens, and neither starts nor ends with a hyphen")
    return None


def server_problem(value):
    """An NTP server: an IP address or a host name."""
    if not isinstance(value, str) or not value:
        return "must be a host name or an IP address"
    try:
        ip = ipaddress.ip_address(value)
    except ValueError:
        reason = hostname_problem(value)
        return f"{value!r} is neither an IP address nor a host name: {reason}" \
            if reason else None
    kind = unusable(ip)
    return f"{value} is {kind}" if kind else None


def timezone_problem(name, zoneinfo=ZONEINFO):
    """A time zone of the tz database (e.g. Europe/Zurich, UTC), as a file under zoneinfo."""
    if not isinstance(name, str) or not TIMEZONE.match(name) or ".." in name.split("/"):
        return f"{name!r} is not a time zone name such as Europe/Zurich or UTC"
    path = os.path.join(zoneinfo, name)
    if not os.path.isfile(path):
        return f"{name!r} is not in the time zone database ({zoneinfo}); e.g. Europe/Zurich"
    return None
