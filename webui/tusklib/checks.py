"""The checks of one value: each returns the reason it is wrong, or None. The model's
validator, the web forms and the console menu all say the same thing about the same value.
The form of each value is its type's (tusklib/values.py: what networkd's renderer writes
takes the same types); what is added here is what the network configuration refuses on
top (loopback, multicast, a /0).
"""
import ipaddress

from tusklib import values

ZONEINFO = values.ZONEINFO
HOSTNAME_MAX = values.HOSTNAME_MAX


def interface_problem(name):
    reason = values.InterfaceName.problem(name)
    if reason:
        return reason
    if name == "lo":
        return "the loopback interface cannot be configured"
    return None


def cidr(value):
    """(ip_interface, None) or (None, reason) for an address with its prefix length."""
    if not isinstance(value, str):
        return None, "must be a string such as 192.0.2.1/24"
    try:
        return values.IPInterface(value).interface, None
    except values.Refused as refused:
        reason = str(refused)
    if "has no prefix length" in reason:
        reason = (f"{values.shown(value)} has no prefix length; write it with one, e.g. "
                  f"{value[:60]}/{'64' if ':' in value else '24'}")
    return None, reason


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
    """A plain address (a gateway, a DNS server): no prefix length, no scope."""
    try:
        ip = values.IPAddress(value, what=what).ip
    except values.Refused as refused:
        return str(refused)
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
        return (f"{values.shown(value)} is neither \"default\" nor a prefix such as "
                "10.20.0.0/16")
    try:
        net = values.IPNetwork(value).network
    except values.Refused as refused:
        return str(refused)
    if net.prefixlen == 0:
        return f"{value!r} is every address: write \"default\""
    if net.network_address.is_multicast or net.network_address.is_loopback:
        return f"{value!r} is a multicast or loopback network; it cannot be routed"
    return None


def hostname_problem(name):
    return values.HostName.problem(name)


def server_problem(value):
    """An NTP server: an IP address or a host name."""
    if not isinstance(value, str) or not value:
        return "must be a host name or an IP address"
    try:
        found = values.host(value)
    except values.Refused as refused:
        return str(refused)
    kind = unusable(found.ip) if isinstance(found, values.IPAddress) else None
    return f"{value} is {kind}" if kind else None


def timezone_problem(name, zoneinfo=ZONEINFO):
    """A time zone of the tz database (e.g. Europe/Zurich, UTC), as a file under zoneinfo."""
    return values.TimeZone.problem(name, zoneinfo)
